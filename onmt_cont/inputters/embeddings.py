"""Streaming reader for pretrained word vectors in text form (plain or ``.gz``).

Two layouts are read, one vector per line, fields separated by spaces:

* GloVe: ``word v1 ... vd``;
* word2vec / fastText ``.vec``: the same, after a first line ``COUNT DIM``.

A first line of exactly two integers is taken as such a header whatever format the user
named. Without a header the dimension is the number of values on the first line.

The file is never held in memory: it is read in chunks of ``chunk_bytes`` and each block of
lines is parsed at once with numpy (see ``numparse.py``); only the vectors of the words the
caller asks for are kept, plus a running sum of the other vectors for an ``<unk>`` average.

Line rules (the same in every parsing path):

* the word is everything before the first space (it may be empty or a non-breaking space);
  trailing whitespace is ignored; values are separated by single spaces (the fast path)
  or any other whitespace (read more slowly);
* a line whose number of values is not ``dim`` (field count != dim + 1), or with a value
  that is not a number or not finite in float32, or whose values are all zero, or whose word is
  not valid UTF-8, is *malformed*: skipped,
  counted and its line number reported. If most lines have the wrong count, the dimension
  itself is wrong and reading stops with an error;
* a word seen before is a duplicate: the first vector wins, later ones are counted and
  ignored (also for the ``<unk>`` average).
"""

import time
from collections import Counter
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field

import numpy as np

from onmt_cont.inputters.numparse import Scratch, parse_values
from onmt_cont.inputters.vec_chunks import DEFAULT_CHUNK_BYTES, Rest, iter_chunks, iter_word_blocks, parse_header
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.progress import progress

MAX_EXAMPLES = 5
# Once this many lines are read, a file where most lines have the wrong count stops early.
EARLY_DIM_CHECK_LINES = 1000
# the widest vectors read: the table is allocated [vocabulary, dim] from the first line, so a header
# that says 99999999999 must not ask for terabytes (word vectors have a few hundred to a few thousand)
MAX_DIM = 1 << 16


@dataclass
class EmbeddingFile:
    """What :func:`read_embeddings` found.

    ``vectors[r]`` is the vector of the word that ``wanted`` maps to row ``r`` (zeros where
    ``found[r]`` is False). ``other_sum`` / ``other_count`` sum the vectors of all valid,
    first-seen words *not* in ``wanted`` (each normalised first when asked); ``sum_sq_norm``
    sums the squared norms of all valid first-seen vectors, for a typical vector length.
    """

    path: str
    dim: int
    header: tuple[int, int] | None  # (count, dim) of a word2vec/fastText header
    vectors: np.ndarray  # [n_rows, dim] float32
    found: np.ndarray  # [n_rows] bool
    other_sum: np.ndarray  # [dim] float64
    other_count: int
    sum_sq_norm: float
    n_vectors: int = 0  # valid, first-seen vectors
    n_lines: int = 0  # lines after the header
    n_malformed: int = 0
    malformed_examples: list[tuple[int, str]] = field(default_factory=list)  # [(line number, reason)]
    n_wrong_count: int = 0
    wrong_counts: Counter[int] = field(default_factory=Counter)  # value count -> lines
    n_duplicates: int = 0
    duplicate_examples: list[tuple[int, str]] = field(default_factory=list)  # [(line number, word)]
    seconds: float = 0.0

    @property
    def rms_norm(self) -> float:
        """Root-mean-square length of the file's vectors (0 if none)."""
        return float(np.sqrt(self.sum_sq_norm / self.n_vectors)) if self.n_vectors else 0.0


def read_embedding_words(path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> set[str]:
    """The words of a vector file (header skipped), without parsing the numbers.

    A word counts if its line has something after it; a word on a malformed line is
    included (the full reader would skip that line). Words that are not valid UTF-8 are
    left out, like the full reader does."""
    found: set[str] = set()
    with progress(desc=f"reading {path}", unit="lines") as bar, closing(iter_chunks(path, chunk_bytes)) as chunks:
        for block, (words, rests) in enumerate(iter_word_blocks(chunks)):
            bar.update(len(words))
            header = parse_header(words[0] + b" " + bytes(rests[0])) if block == 0 else None
            if header is not None:
                bar.total = header[0] + 1
                words, rests = words[1:], rests[1:]
            for word, rest in zip(words, rests, strict=True):
                if rest:
                    try:
                        found.add(word.decode("utf-8"))
                    except UnicodeDecodeError:
                        pass
    return found


def read_embeddings(
    path: str,
    wanted: Mapping[str, int],
    n_rows: int | None = None,
    normalize_others: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> EmbeddingFile:
    """Stream the vector file at ``path``.

    wanted: word -> row in the returned ``vectors`` table ([n_rows, dim], n_rows defaults to
        1 + the largest row); every other valid word adds to ``other_sum``.
    normalize_others: add unit-length versions of the other vectors to ``other_sum``.

    Raises UserError (naming the file) for a missing/unreadable file, a file without any
    valid vector, or one where most lines disagree with the dimension.
    """
    if n_rows is None:
        n_rows = max(wanted.values(), default=-1) + 1
    reader = _Reader(path, wanted, n_rows, normalize_others)
    start = time.perf_counter()
    # the bar counts lines; a word2vec/fastText header gives their number (an ETA), GloVe files have none
    with progress(desc=f"reading {path}", unit="lines") as bar, closing(iter_chunks(path, chunk_bytes)) as chunks:
        for words, rests in iter_word_blocks(chunks):
            reader.feed(words, rests)
            header = reader._res().header
            if bar.total is None and header is not None:
                bar.total = header[0] + 1
            bar.update(len(words))
    result = reader.finish()
    result.seconds = time.perf_counter() - start
    return result


class _Reader:
    """Block-by-block state of :func:`read_embeddings`."""

    def __init__(self, path: str, wanted: Mapping[str, int], n_rows: int, normalize_others: bool) -> None:
        self.path = path
        # Looked up by the word's bytes: decoding is only needed to check it is UTF-8.
        self.wanted_bytes = {word.encode("utf-8", "surrogatepass"): row for word, row in wanted.items()}
        self.n_rows = n_rows
        self.normalize_others = normalize_others
        self.seen: set[bytes] = set()  # every first-seen word, for duplicates
        self.scratch = Scratch()
        self.block_malformed: list[tuple[int, str]] = []
        self.lineno = 0  # number of the last line fed
        self.result: EmbeddingFile | None = None  # once the dimension is known

    def _res(self) -> EmbeddingFile:
        """The result so far, which :meth:`_start` makes before any line is counted."""
        assert self.result is not None, "_start reads the first line first"
        return self.result

    # -- first line ---------------------------------------------------------------------

    def _start(self, word: bytes, rest: Rest) -> bool:
        """Read the header or take the dimension from the first line; return whether the
        first line is a vector line to parse."""
        first_line = word + b" " + bytes(rest)
        header = parse_header(first_line)
        if header is not None:
            dim, is_vector = header[1], False
            if dim < 1:
                raise UserError(f"{self.path}, line 1: header {first_line!r} gives dimension {dim}")
        else:
            dim, is_vector = len(bytes(rest).split()), True
            if dim < 1:
                raise UserError(
                    f"{self.path}, line 1: expected 'COUNT DIM' or 'word v1 ... vd', got {first_line[:80]!r}"
                )
        if dim > MAX_DIM:
            what = f"header {first_line[:80]!r} gives dimension" if header else "line 1 has"
            raise UserError(
                f"{self.path}, line 1: {what} {dim} values per word; more than {MAX_DIM:,} is not a word-vector file"
            )
        self.result = EmbeddingFile(
            path=self.path,
            dim=dim,
            header=header,
            vectors=np.zeros((self.n_rows, dim), np.float32),
            found=np.zeros(self.n_rows, bool),
            other_sum=np.zeros(dim, np.float64),
            other_count=0,
            sum_sq_norm=0.0,
        )
        return is_vector

    # -- blocks -------------------------------------------------------------------------

    def feed(self, words: list[bytes], rests: list[Rest]) -> None:
        """Take one block from :func:`iter_word_blocks`."""
        first_lineno = self.lineno + 1
        self.lineno += len(words)
        if self.result is None and not self._start(words[0], rests[0]):
            words, rests, first_lineno = words[1:], rests[1:], first_lineno + 1
            if not words:
                return
        res = self._res()
        res.n_lines += len(words)
        values, bad = parse_values(rests, res.dim, self.scratch)
        # an all-zero vector has no direction: a word with it could never be told from another by cosine
        # (and a zero target gives its NLLvMF term no gradient); it is malformed, as a NaN is
        already = {i for i, _, _ in bad}
        bad = list(bad) + [
            (int(i), "an all-zero vector (no direction)", None)
            for i in np.flatnonzero(~values.any(axis=1))
            if int(i) not in already
        ]
        self.block_malformed = []  # (line number, reason), reported in line order
        for i, reason, n_values in bad:
            if n_values is not None:
                res.n_wrong_count += 1
                res.wrong_counts[n_values] += 1
            self.block_malformed.append((first_lineno + i, reason))
        self._assign(words, values, {i for i, _, _ in bad}, first_lineno)
        res.n_malformed += len(self.block_malformed)
        room = MAX_EXAMPLES - len(res.malformed_examples)
        res.malformed_examples += sorted(self.block_malformed)[: max(room, 0)]
        if res.n_lines >= EARLY_DIM_CHECK_LINES:
            self._check_dimension()

    def _assign(self, words: list[bytes], values: np.ndarray, bad: set[int], first_lineno: int) -> None:
        """Store the wanted vectors of a block and add the others to the running sums."""
        res = self._res()
        use, keep_lines, keep_rows = self._select(words, bad, first_lineno)
        if keep_lines:
            res.vectors[keep_rows] = values[keep_lines]
            res.found[keep_rows] = True
        sq = np.einsum("ij,ij->i", values, values)
        weight = use.astype(np.float64)
        res.n_vectors += int(np.count_nonzero(use))
        res.sum_sq_norm += float(weight @ sq)
        weight[keep_lines] = 0.0
        res.other_count += int(np.count_nonzero(weight))
        if self.normalize_others:
            norms = np.sqrt(sq)
            np.divide(weight, norms, out=weight, where=norms > 0)
        res.other_sum += weight @ values

    def _select(self, words: list[bytes], bad: set[int], first_lineno: int) -> tuple[np.ndarray, list[int], list[int]]:
        """``(use, keep_lines, keep_rows)``: which lines count (valid, first seen, UTF-8) and
        which of them are wanted, at which rows. A block without bad lines, duplicates or
        bad UTF-8 (the usual case) is done with whole-block set and map operations."""
        if not bad:
            block = set(words)
            if len(block) == len(words) and self.seen.isdisjoint(block):
                try:
                    b"\n".join(words).decode("utf-8")  # valid iff every word is
                except UnicodeDecodeError:
                    pass
                else:
                    self.seen |= block
                    rows = list(map(self.wanted_bytes.get, words))
                    wanted = [i for i, row in enumerate(rows) if row is not None]
                    return np.ones(len(words), bool), wanted, [row for row in rows if row is not None]
        res, seen = self._res(), self.seen
        use = np.ones(len(words), bool)
        keep_lines: list[int] = []
        keep_rows: list[int] = []
        for i, word in enumerate(words):
            if i in bad:
                use[i] = False
            elif word in seen:
                use[i] = False
                res.n_duplicates += 1
                if len(res.duplicate_examples) < MAX_EXAMPLES:
                    res.duplicate_examples.append((first_lineno + i, word.decode("utf-8", "replace")))
            else:
                try:
                    word.decode("utf-8")
                except UnicodeDecodeError as exc:
                    use[i] = False
                    reason = f"word is not valid UTF-8 ({exc.reason} at byte {exc.start})"
                    self.block_malformed.append((first_lineno + i, reason))
                    continue
                seen.add(word)
                row = self.wanted_bytes.get(word)
                if row is not None:
                    keep_lines.append(i)
                    keep_rows.append(row)
        return use, keep_lines, keep_rows

    def _check_dimension(self) -> None:
        res = self._res()
        if res.n_wrong_count * 2 <= res.n_lines:
            return
        where = f"the header says {res.dim}" if res.header else f"line 1 has {res.dim}"
        count, lines = res.wrong_counts.most_common(1)[0]
        raise UserError(
            f"{self.path}: inconsistent dimension: {where} values per word, but {res.n_wrong_count} "
            f"of {res.n_lines} vector lines have another count ({lines} lines have {count} values)"
        )

    def finish(self) -> EmbeddingFile:
        res = self.result
        if res is None:
            raise UserError(f"{self.path}: empty file, expected word vectors")
        self._check_dimension()
        if res.n_vectors == 0:
            detail = f" ({res.n_malformed} malformed lines)" if res.n_malformed else ""
            raise UserError(f"{self.path}: no valid vector in the file{detail}")
        return res
