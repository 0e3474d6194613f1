"""Vocabularies: plain token lists with counts, specials first.

On disk (``PREFIX.vocab.pt``, loadable with ``weights_only=True``)::

    {"format_version": 1,
     "src": {"tokens": [str, ...], "counts": [int, ...], "total_tokens": int, "sentences": int},
     "tgt": {...same...},
     "lower": bool}

``tokens`` starts with ``constants.SPECIALS`` (counts 0); ``total_tokens`` is the number
of running tokens on that side of the kept training pairs, so coverage can be computed;
``sentences`` the number of kept pairs (0 in files of older versions), which is how often
``</s>`` occurs in the training targets (:func:`unigram_log_prior`).
"""

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Self

import torch

from onmt_cont.constants import BOS, EOS, EOS_ID, FORMAT_VERSION, PAD, PAD_ID, SPECIALS, UNK_ID
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.loading import load_checkpoint_data

RESERVED = (PAD, BOS, EOS)  # the markers' spellings: never read from text as themselves


class Vocab:
    """Index <-> token mapping. Index 0 is padding, 1 ``<unk>``, 2 ``<s>``, 3 ``</s>``."""

    def __init__(
        self, tokens: Sequence[str], counts: Iterable[int] | None = None, total_tokens: int = 0, sentences: int = 0
    ) -> None:
        if list(tokens[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"vocabulary must start with {SPECIALS}")
        self.itos = list(tokens)
        self.counts = list(counts) if counts is not None else [0] * len(tokens)
        self.total_tokens = int(total_tokens)
        self.sentences = int(sentences)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dup = [t for t, c in Counter(self.itos).items() if c > 1][:5]
            raise ValueError(f"vocabulary has duplicate tokens: {dup}")
        # a word of the text spelled as padding, <s> or </s> is no marker: <unk> (issue 77.22)
        self._text_ids = {**self.stoi, **dict.fromkeys(RESERVED, UNK_ID)}

    def __len__(self) -> int:
        return len(self.itos)

    def index(self, token: str) -> int:
        """The id of a token of text; <unk> for one outside the vocabulary or spelled as a marker."""
        return self._text_ids.get(token, UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Tokens of text -> ids (:meth:`index`): a literal ``</s>`` in a corpus does not end the sentence."""
        ids = self._text_ids
        return [ids.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.itos,
            "counts": self.counts,
            "total_tokens": self.total_tokens,
            "sentences": self.sentences,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return cls(d["tokens"], d.get("counts"), d.get("total_tokens", 0), d.get("sentences", 0))


def unigram_log_prior(vocab: Vocab) -> torch.Tensor:
    """log p_train(w) of every word of a target vocabulary, float32 [V], add-one smoothed:
    p(w) = (c(w) + 1) / (T + S + V), where c(w) is the word's training count, c(<unk>) the T
    running tokens no vocabulary word covers, c(</s>) = S (one per training sentence) and
    padding and <s> (never produced) count 0. Used by -sampling_correction (the expected number
    of in-batch draws of a word) and translate.py -decode_prior. Raises ValueError when the
    vocabulary has no counts (a file of an older version)."""
    total = vocab.total_tokens + vocab.sentences + len(vocab)
    return (_log_smoothed_counts(vocab) - math.log(total)).float()


def word_log_frequency(vocab: Vocab) -> torch.Tensor:
    """log q(w) [V] float32: each word's share of the training words, </s> not counted (-expected_counts
    sentence): q(w) = c(w) / T, c(<unk>) the running tokens no vocabulary word covers; padding, <s> and
    </s> get log 0 = -inf. Raises ValueError as :func:`unigram_log_prior` does."""
    counts = _log_smoothed_counts(vocab).exp() - 1
    counts[EOS_ID] = 0.0
    return (torch.log(counts) - math.log(float(counts.sum()))).float()


def has_word_counts(vocab: Vocab) -> bool:
    """Does the vocabulary carry its words' training counts? A checkpoint saved without them (its
    "tgt_counts" missing) reads as all zeros: a prior over those would give every word the same
    count and <unk> all the running tokens, so every output word would be <unk>."""
    return any(c > 0 for c in vocab.counts[len(SPECIALS) :])


def _log_smoothed_counts(vocab: Vocab) -> torch.Tensor:
    """log(c(w) + 1) [V] float64, c as :func:`unigram_log_prior` counts; ValueError without counts."""
    if vocab.sentences <= 0 or vocab.total_tokens <= 0 or not has_word_counts(vocab):
        raise ValueError(
            "target vocabulary has no training counts (it was written without them, or before "
            "preprocess.py recorded the number of sentences): rerun preprocess.py"
        )
    counts = torch.tensor(vocab.counts, dtype=torch.float64)
    counts[: len(SPECIALS)] = 0
    counts[UNK_ID] = max(vocab.total_tokens - float(counts.sum()), 0.0)
    counts[EOS_ID] = vocab.sentences
    return torch.log(counts + 1)


def capped_log_prior(vocab: Vocab, cap: int) -> torch.Tensor:
    """:func:`unigram_log_prior` made flat at and above ``cap`` training occurrences: min(0, log
    p_train(w) − log p_cap), p_cap the smoothed probability of a word seen ``cap`` times. Words seen
    ``cap`` times or more all get 0; a rarer word gets log((c(w) + 1) / (cap + 1)) < 0. With
    translate.py -decode_prior β it penalises only the rare words, without the plain prior's push
    of every word towards the most frequent ones. Raises ValueError as unigram_log_prior does,
    and for ``cap`` < 2 (1 would change nothing: a word seen once is the rarest there is)."""
    if cap < 2:
        raise ValueError(f"the cap must be at least 2 training occurrences, got {cap}")
    return (_log_smoothed_counts(vocab) - math.log(cap + 1)).clamp_max(0).float()


def build_vocab(
    counter: Mapping[str, int], max_size: int, min_frequency: int = 1, allowed: Collection[str] | None = None
) -> Vocab:
    """The ``max_size`` most frequent tokens with count >= ``min_frequency`` (specials excluded
    from the count), optionally only those in ``allowed``. Ties break alphabetically so the
    result does not depend on corpus order."""
    candidates = [
        (tok, c)
        for tok, c in counter.items()
        if c >= min_frequency and tok not in SPECIALS and (allowed is None or tok in allowed)
    ]
    candidates.sort(key=lambda tc: (-tc[1], tc[0]))
    candidates = candidates[:max_size]
    tokens = list(SPECIALS) + [t for t, _ in candidates]
    counts = [0] * len(SPECIALS) + [c for _, c in candidates]
    return Vocab(tokens, counts, total_tokens=sum(counter.values()))


def vocab_to_text(vocab: Vocab) -> str:
    """One token per line in index order, a tab, then its count."""
    return "".join(f"{tok}\t{c}\n" for tok, c in zip(vocab.itos, vocab.counts, strict=True))


def read_vocab_text(path: str) -> Vocab:
    """Read a vocabulary text file (``token`` or ``token<TAB>count`` per line).

    Specials are added in front when missing, so a plain word list works too."""
    tokens: list[str] = []
    counts: list[int] = []
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) > 2 or not parts[0] or " " in parts[0]:
            raise UserError(f"{path}, line {lineno}: expected 'token' or 'token<TAB>count', got {line!r}")
        count = 0
        if len(parts) == 2:
            try:
                count = int(parts[1])
            except ValueError:
                raise UserError(f"{path}, line {lineno}: count {parts[1]!r} is not an integer") from None
        tokens.append(parts[0])
        counts.append(count)
    rest = [(t, c) for t, c in zip(tokens, counts, strict=True) if t not in SPECIALS]
    seen: set[str] = set()
    dedup: list[tuple[str, int]] = []
    for t, c in rest:
        if t in seen:
            raise UserError(f"{path}: token {t!r} appears twice")
        seen.add(t)
        dedup.append((t, c))
    return Vocab(list(SPECIALS) + [t for t, _ in dedup], [0] * len(SPECIALS) + [c for _, c in dedup])


def data_words(vocab: Vocab) -> list[str]:
    """The vocabulary's words other than bracketed tokens (<blank>, <unk>, <s>, </s> and the like)."""
    return [w for w in vocab.itos if not (w.startswith("<") and w.endswith(">"))]


def lowercase_only(*vocabs: Vocab) -> bool:
    """Whether no data word of these vocabularies has an upper-case letter: the text was lowercased."""
    return not any(ch.isupper() for v in vocabs for w in data_words(v) for ch in w)


def save_vocabs(prefix: str, src: Vocab, tgt: Vocab, lower: bool, text: Mapping[str, Any] | None = None) -> None:
    """Write ``PREFIX.vocab.pt`` and the two text files, each atomically. ``text``: the raw text the
    data was made from (onmt_cont.text.record.text_record), or None."""
    from onmt_cont.utils.atomic import atomic_torch_save

    data = {"format_version": FORMAT_VERSION, "src": src.to_dict(), "tgt": tgt.to_dict(), "lower": lower}
    if text is not None:
        data["text"] = text
    atomic_write_text(prefix + ".vocab.src.txt", vocab_to_text(src))
    atomic_write_text(prefix + ".vocab.tgt.txt", vocab_to_text(tgt))
    atomic_torch_save(data, prefix + ".vocab.pt")


def load_vocabs(path: str) -> tuple[Vocab, Vocab, dict[str, Any]]:
    """Load ``PREFIX.vocab.pt`` -> ``(src Vocab, tgt Vocab, data dict)``."""
    data = load_checkpoint_data(path, "a vocabulary file written by preprocess.py")
    if not isinstance(data, dict) or "src" not in data or "tgt" not in data:
        raise UserError(f"{path}: not a vocabulary file written by preprocess.py")
    return Vocab.from_dict(data["src"]), Vocab.from_dict(data["tgt"]), data
