"""Reading parallel text and the shard files preprocess.py writes.

A shard (``PREFIX.train.N.pt``, ``PREFIX.valid.0.pt``; ``weights_only=True``) is plain data::

    {"format_version": 1,
     "src": IntTensor [total_src_tokens], "src_lengths": IntTensor [n],
     "tgt": IntTensor [total_tgt_tokens], "tgt_lengths": IntTensor [n],
     "tgt_text": [str, ...],   # validation shard only: each kept pair's target line (BLEU references)
     "vocab_fingerprint": str}  # of the vocabularies the ids index (vocab_fingerprint); older shards lack it

Sentences are stored concatenated (no padding) with their lengths; no ``<s>``/``</s>``
is stored: the batcher adds them.
"""

import glob
import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from onmt_cont.constants import FORMAT_VERSION
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.utils.atomic import atomic_torch_save, atomic_write_text
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import check_readable, check_regular_file, read_lines
from onmt_cont.utils.loading import load_checkpoint_data
from onmt_cont.utils.overwrite import Prefix

# one sentence pair of a shard: (src LongTensor [src_len], tgt LongTensor [tgt_len]), no <s>/</s>
Example = tuple[torch.Tensor, torch.Tensor]
# a shard as plain data (the module docstring's layout)
Shard = dict[str, Any]


def count_lines(path: str) -> int:
    """Number of lines of a text file (``.gz`` too, as :func:`read_lines` reads it), counted in
    binary chunks (fast, no decoding)."""
    check_readable(path)
    n, last = 0, b"\n"
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError) as exc:  # a directory, no permission, a broken or truncated .gz
        raise UserError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return n + (last != b"\n")


def check_parallel(src_path: str, tgt_path: str) -> int:
    """Refuse files of different line counts before anything is written; return the count. Both are
    read twice (counted, then read), so each must be a regular file: a pipe would be drained by the
    count, a device such as /dev/zero never ends."""
    for path in (src_path, tgt_path):
        if os.path.exists(path) and not os.path.isdir(path):
            check_regular_file(path, "a text file", "it is read twice, counted then read")
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise UserError(f"parallel files differ in length: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}")
    return n_src


def iter_parallel(src_path: str, tgt_path: str, lower: bool = False) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(line_number, src_tokens, tgt_tokens)`` for aligned lines, streaming."""
    for (lineno, src), (_, tgt) in zip(read_lines(src_path), read_lines(tgt_path), strict=True):
        if lower:
            src, tgt = src.lower(), tgt.lower()
        yield lineno, src.split(), tgt.split()


def vocab_fingerprint(src_vocab: Vocab, tgt_vocab: Vocab) -> str:
    """A short hash of both vocabularies' word lists: a shard records the one its ids index, so
    that train.py can refuse shards of another preprocess.py run (ids in range, other words)."""
    words = json.dumps([list(src_vocab.itos), list(tgt_vocab.itos)], ensure_ascii=False)
    return hashlib.sha256(words.encode("utf-8")).hexdigest()[:16]


def pack_shard(
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    tgt_text: Sequence[str] | None = None,
    fingerprint: str | None = None,
) -> Shard:
    """``examples``: list of ``(src_ids, tgt_ids)`` int lists -> the shard dict; ``tgt_text``: the
    target lines as text (tokens joined by spaces), kept in the validation shard so that
    train.py -valid_metric bleu scores against the real words, not against ``<unk>``;
    ``fingerprint``: :func:`vocab_fingerprint` of the vocabularies the ids come from."""

    def cat(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        flat = [i for s in seqs for i in s]
        return torch.tensor(flat, dtype=torch.int32), torch.tensor([len(s) for s in seqs], dtype=torch.int32)

    src, src_len = cat([e[0] for e in examples])
    tgt, tgt_len = cat([e[1] for e in examples])
    shard: Shard = {
        "format_version": FORMAT_VERSION,
        "src": src,
        "src_lengths": src_len,
        "tgt": tgt,
        "tgt_lengths": tgt_len,
    }
    if tgt_text is not None:
        if len(tgt_text) != len(examples):
            raise ValueError(f"{len(tgt_text)} target lines for {len(examples)} examples")
        shard["tgt_text"] = list(tgt_text)
    if fingerprint is not None:
        shard["vocab_fingerprint"] = fingerprint
    return shard


def save_shard(
    path: str,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    tgt_text: Sequence[str] | None = None,
    fingerprint: str | None = None,
) -> None:
    atomic_torch_save(pack_shard(examples, tgt_text, fingerprint), path)


def load_shard_text(path: str) -> list[str] | None:
    """The target lines stored in a validation shard, or None (shards of older preprocess runs)."""
    text = load_checkpoint_data(path).get("tgt_text")
    return list(text) if text is not None else None


def read_shard(path: str) -> Shard:
    """A shard's dict, as :func:`pack_shard` made it."""
    data = load_checkpoint_data(path, "a data shard written by preprocess.py")
    if not isinstance(data, dict) or "src_lengths" not in data:
        raise UserError(f"{path}: not a data shard written by preprocess.py")
    return data


def shard_examples(data: Mapping[str, Any]) -> list[Example]:
    """A shard's dict -> list of ``(src LongTensor [len], tgt LongTensor [len])``."""
    src = torch.split(data["src"].long(), data["src_lengths"].tolist())
    tgt = torch.split(data["tgt"].long(), data["tgt_lengths"].tolist())
    return list(zip(src, tgt, strict=True))


def load_shard(path: str) -> list[Example]:
    """Load a shard -> list of ``(src LongTensor [len], tgt LongTensor [len])``."""
    return shard_examples(read_shard(path))


def check_shard(path: str, data: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab, vocab_path: str) -> bool:
    """Refuse a shard (``data``: :func:`read_shard`'s) whose ids are not of ``src_vocab`` /
    ``tgt_vocab`` (read from ``vocab_path``): an id beyond a vocabulary, or a recorded
    :func:`vocab_fingerprint` of other vocabularies. Returns False for a shard of an older
    preprocess.py, which records none (its ids can only be checked against the sizes)."""
    fix = "rerun preprocess.py, whose -save_data writes the vocabulary and the shards together"
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        ids = data[side]
        bad = int(ids.max()) if ids.numel() and int(ids.max()) >= len(vocab) else None
        if ids.numel() and int(ids.min()) < 0:
            bad = int(ids.min())
        if bad is not None:
            name = "source" if side == "src" else "target"
            raise UserError(
                f"{path}: {name} word id {bad} is outside the {len(vocab)} words (ids 0 to "
                f"{len(vocab) - 1}) of the {name} vocabulary in {vocab_path}: the shard was made with "
                f"another vocabulary; {fix}"
            )
    found = data.get("vocab_fingerprint")
    if found is None:
        return False
    if found != vocab_fingerprint(src_vocab, tgt_vocab):
        raise UserError(
            f"{path} was made with other vocabularies than {vocab_path} (vocabulary fingerprint {found}, "
            f"not {vocab_fingerprint(src_vocab, tgt_vocab)}): its word ids would mean other words; {fix}"
        )
    return True


# The files of preprocess.py -save_data PREFIX (PREFIX + these), as utils.overwrite.Prefix patterns
DATA_FILES = r"\.(vocab\.(pt|src\.txt|tgt\.txt)|(train|valid)\.\d+\.pt|shards\.json)"


def data_files(prefix: str) -> Prefix:
    """preprocess.py's files of -save_data ``prefix``, for
    :func:`~onmt_cont.utils.overwrite.refuse_output_over_inputs`."""
    return Prefix(prefix, DATA_FILES)


def manifest_path(prefix: str) -> str:
    return prefix + ".shards.json"


def write_manifest(prefix: str, n_train: int) -> None:
    """preprocess.py's last file: the shards of this run, by name and size. train.py takes exactly
    these (:func:`shard_paths`), so a run killed half-way, or another run's leftovers, cannot mix
    shards of two runs even when their vocabularies match."""

    def entry(path: str) -> dict[str, Any]:
        return {"file": os.path.basename(path), "bytes": os.path.getsize(path)}

    data = {
        "format": 1,
        "train": [entry(f"{prefix}.train.{i}.pt") for i in range(n_train)],
        "valid": [entry(f"{prefix}.valid.0.pt")],
    }
    atomic_write_text(manifest_path(prefix), json.dumps(data, indent=1) + "\n")


def _manifest_shards(prefix: str, split: str) -> list[str] | None:
    """The split's shard paths as the manifest lists them (None without a manifest: data of an older
    preprocess.py), each checked to exist with the size it had when written."""
    path = manifest_path(prefix)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)[split]
        listed = [(os.path.join(os.path.dirname(prefix), e["file"]), int(e["bytes"])) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{path}: not the shard list preprocess.py writes ({exc}): run preprocess.py -save_data {prefix} again"
        ) from None
    for shard, size in listed:
        if not os.path.exists(shard) or os.path.getsize(shard) != size:
            found = "missing" if not os.path.exists(shard) else f"{os.path.getsize(shard):,} bytes, not {size:,}"
            raise UserError(
                f"{shard} is not the shard {path} lists ({found}): the shards of two preprocess.py runs "
                f"are mixed (one killed half-way?); run preprocess.py -save_data {prefix} again"
            )
    return [shard for shard, _ in listed]


def shard_paths(prefix: str, split: str) -> list[str]:
    """The shard files of a split: those PREFIX.shards.json lists (checked), or without it (data of an
    older preprocess.py) those found, in numeric order; a clear error when there are none."""
    listed = _manifest_shards(prefix, split)
    if listed:
        return listed
    pattern = re.compile(re.escape(os.path.basename(prefix)) + rf"\.{split}\.(\d+)\.pt$")
    found = []
    for path in glob.glob(glob.escape(prefix) + f".{split}.*.pt"):
        m = pattern.search(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    if not found:
        raise UserError(
            f"no {split} shards found: expected {prefix}.{split}.0.pt (run preprocess.py -save_data {prefix})"
        )
    return [p for _, p in sorted(found)]
