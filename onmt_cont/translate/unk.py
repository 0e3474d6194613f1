"""``-replace_unk`` (Denkowski & Neubig 2017, the vMF paper's section 4.1): each ``<unk>`` in the
output becomes the translation of the source word it attends to most, looked up in a bilingual
lexicon, or that source word itself when the lexicon does not have it."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

from torch import Tensor

from onmt_cont.constants import UNK
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines

BPE_JOINER = "@@"


def remove_bpe(line: str) -> str:
    """Join subword-nmt pieces: 'the cat@@ s sat' -> 'the cats sat' (a final '@@' is dropped);
    translate.py -remove_bpe and train.py -valid_remove_bpe."""
    line = line.replace(BPE_JOINER + " ", "")
    return line[: -len(BPE_JOINER)] if line.endswith(BPE_JOINER) else line


def read_lexicon(path: str) -> dict[str, str]:
    """Plain text, one ``source_word target_word`` pair per line (whitespace-separated).
    Parsed, never executed. The first entry of a repeated source word wins."""
    lexicon: dict[str, str] = {}
    for lineno, line in read_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise UserError(f"{path}, line {lineno}: expected 'source_word target_word', got {line!r}")
        lexicon.setdefault(fields[0], fields[1])
    return lexicon


def is_punctuation(token: str) -> bool:
    return all(unicodedata.category(ch).startswith("P") for ch in token)


def source_word_at(src_tokens: Sequence[str], pos: int) -> str:
    """The whole word around position ``pos``, joining BPE pieces marked with a trailing ``@@``."""
    start = pos
    while start > 0 and src_tokens[start - 1].endswith(BPE_JOINER):
        start -= 1
    end = pos
    while end < len(src_tokens) - 1 and src_tokens[end].endswith(BPE_JOINER):
        end += 1
    pieces = src_tokens[start : end + 1]
    return "".join(p[: -len(BPE_JOINER)] if p.endswith(BPE_JOINER) else p for p in pieces)


def best_source_position(weights: Sequence[float], src_tokens: Sequence[str]) -> int | None:
    """Argmax of the attention over real source words. Weights beyond the sentence (padding,
    an ``</s>``) are ignored, and punctuation is passed over when any other word exists, since
    an ``<unk>`` is a word, not a comma (a literal ``<unk>`` in the source is passed over too:
    copying it would leave the ``<unk>`` in place)."""
    n = len(src_tokens)
    order = sorted(range(min(n, len(weights))), key=lambda i: -float(weights[i]))
    for i in order:
        if not is_punctuation(src_tokens[i]) and src_tokens[i] != UNK:
            return i
    return order[0] if order else None


def replace_unk(
    out_tokens: Sequence[str], attn: Tensor | None, src_tokens: Sequence[str], lexicon: Mapping[str, str] | None = None
) -> list[str]:
    """out_tokens: output words; attn: [len(out_tokens), >= len(src_tokens)] weights; returns
    the words with every ``<unk>`` replaced (no ``<unk>`` is left while the source is non-empty). ``attn`` may be
    None where the output has no ``<unk>``."""
    result = []
    for t, tok in enumerate(out_tokens):
        if tok == UNK and src_tokens:
            assert attn is not None, "replacing <unk> reads the attention"
            pos = best_source_position(attn[t].tolist(), src_tokens)
            assert pos is not None  # attention over a non-empty source has a largest weight
            word = source_word_at(src_tokens, pos)
            translation = (lexicon or {}).get(word)
            tok = translation if translation not in (None, UNK) else word  # a lexicon "x <unk>" is no help
        result.append(tok)
    return result
