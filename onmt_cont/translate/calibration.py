"""Frequency-bin offsets: calibrated word choice, made for continuous models; softmax models take
them on their log-probabilities too.

Nearest-neighbour decoding has no frequency prior. translate.py -decode_prior β adds β · log
p_train(w), one slope over the whole frequency range; at the β validation BLEU picks, rare words
still come out far less often than in the reference while frequent ones are over-produced. The
scores carry no calibrated probability to fix this with: over the whole vocabulary their softmax
puts several times the reference's mass on the rare bins, and a bias refitted to that softmax
makes greedy search pick them even less (lab/log.md, "5c, continued (9)").

So the offsets are fitted on what decoding puts out. Each word gets the offset δ_k of its bin k
of training counts (1, 2-4, 5-9, 10-99, 100-999, 1000+; the bins of lab/tools/rare_word_f1.py
-bins calibration). Starting from 0, each round decodes a held-out set (validation) and moves
every bin by step · log((target_k · ref_k + 1) / (hyp_k + 1)), hyp_k and ref_k the bin's tokens
in the output and the reference; target_k is 1 (the reference's profile) or another system's
ratio on the same set (-match: e.g. softmax's). The δ are relative, so the most frequent bin is
held at 0. The round whose worst bin is nearest its target (in |log(ratio / target)|) is kept.

The fitted offsets are a small JSON file, read by translate.py -freq_offsets together with the
-decode_prior β they were fitted under. The file also records the model it was fitted on (its kind,
continuous or softmax, and a hash of its target vocabulary with the counts that define the bins),
and translate.py refuses it for another model; files written before that record are accepted
with a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeGuard, overload

import torch
from torch import Tensor, nn

from onmt_cont.inputters.vocab import Vocab, has_word_counts
from onmt_cont.translate.checks import MAX_DECODE_PRIOR, MAX_OFFSET
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError

# (name, lowest, highest training count) of each bin; words of count 0 (the specials) get no offset
FREQ_BINS = (
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-9", 5, 9),
    ("10-99", 10, 99),
    ("100-999", 100, 999),
    ("1000+", 1000, math.inf),
)
FORMAT = "onmt_cont freq_offsets 1"
MAX_FILE_BYTES = 1 << 20  # an offsets file is a few hundred bytes


def bin_index(count: float) -> int:
    """The index into FREQ_BINS of a training count, or -1 (count 0: not a training word)."""
    for k, (_, lo, hi) in enumerate(FREQ_BINS):
        if lo <= count <= hi:
            return k
    return -1


def word_bins(vocab: Vocab) -> Tensor:
    """[V] long: every target word's bin (-1 for words of count 0: padding, <s>, often <unk>)."""
    if vocab.sentences <= 0 or vocab.total_tokens <= 0 or not has_word_counts(vocab):
        raise ValueError(
            "target vocabulary has no training counts (it was written before preprocess.py recorded "
            "them): rerun preprocess.py"
        )
    return torch.tensor([bin_index(c) for c in vocab.counts], dtype=torch.long)


def offset_vector(vocab: Vocab, offsets: Sequence[float]) -> Tensor:
    """[V] float32: each word's bin offset (0 for words of count 0)."""
    if len(offsets) != len(FREQ_BINS):
        raise ValueError(
            f"expected {len(FREQ_BINS)} offsets (bins {', '.join(n for n, _, _ in FREQ_BINS)}), got {len(offsets)}"
        )
    bins = word_bins(vocab)
    table = torch.tensor(list(offsets) + [0.0], dtype=torch.float32)  # index -1: no offset
    return table[bins]


def bin_tokens(lines: Iterable[str], counts: Mapping[str, int]) -> list[int]:
    """Tokens of ``lines`` per bin [len(FREQ_BINS)]; ``counts``: word -> training count (words not
    in it, and words of count 0, belong to no bin)."""
    found = Counter(bin_index(counts.get(w, 0)) for line in lines for w in line.split())
    return [found[k] for k in range(len(FREQ_BINS))]


def ratios(hyp_tokens: Sequence[int], ref_tokens: Sequence[int]) -> list[float]:
    """hyp/ref per bin (NaN where the reference has none)."""
    return [h / r if r else math.nan for h, r in zip(hyp_tokens, ref_tokens, strict=True)]


def fit_offsets(
    decode: Callable[[list[float]], list[str]],
    ref_lines: Iterable[str],
    counts: Mapping[str, int],
    target: Sequence[float],
    rounds: int = 8,
    step: float = 0.5,
    min_tokens: int = 20,
    on_round: Callable[[int, list[float], list[str], list[float]], None] | None = None,
    score: Callable[[list[str]], float] | None = None,
) -> tuple[list[float], list[str], list[float]]:
    """Fit the bins' offsets so that ``decode``'s output has ``target`` x the reference's tokens in
    every bin.

    ``decode(offsets)``: the outputs (lines) for the held-out sources with these offsets;
    ``target``: [bins] wanted hyp/ref ratios; bins with fewer than ``min_tokens`` reference tokens
    keep offset 0 (too few to fit); ``on_round(i, offsets, outputs, ratios)`` is called after every
    decode. -> (offsets, outputs, ratios) of the round nearest the target, or with ``score(outputs)``
    (higher is better, e.g. BLEU) of the round that scores highest: the rounds then act as a
    shrinkage of the offsets towards 0 that the held-out set chooses."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if not step > 0:
        raise ValueError(f"step must be positive, got {step}")
    ref = bin_tokens(ref_lines, counts)
    fitted = [k for k, r in enumerate(ref) if r >= min_tokens and target[k] > 0]
    offsets = [0.0] * len(FREQ_BINS)
    best: tuple[float, list[float], list[str], list[float]] | None = None  # (loss, offsets, outputs, ratios)
    for i in range(rounds):
        outputs = decode(offsets)
        hyp = bin_tokens(outputs, counts)
        rat = ratios(hyp, ref)
        if on_round is not None:
            on_round(i, list(offsets), outputs, rat)
        # lower is better: the worst bin's log distance to its target, or minus the held-out score
        if score is None:
            loss = max((abs(math.log((hyp[k] + 1) / (target[k] * ref[k] + 1))) for k in fitted), default=0.0)
        else:
            loss = -score(outputs)
        if best is None or loss < best[0]:
            best = (loss, list(offsets), outputs, rat)
        for k in fitted:
            offsets[k] += step * math.log((target[k] * ref[k] + 1) / (hyp[k] + 1))
        anchor = offsets[len(FREQ_BINS) - 1]
        offsets = [max(-MAX_OFFSET, min(MAX_OFFSET, o - anchor)) for o in offsets]
    assert best is not None  # rounds >= 1
    return best[1], best[2], best[3]


def model_record(generator: nn.Module, vocab: Vocab, beam_size: int = 1) -> dict[str, Any]:
    """What an offsets file is fitted on: the model's kind (its generator: continuous or softmax),
    a SHA-256 of its target vocabulary's tokens and training counts (the counts define the bins),
    with the number of words to show in messages, and the search the decodes used (``beam_size``;
    1: greedy): offsets that calibrate one search's output do not calibrate another's."""
    digest = hashlib.sha256()
    for token, count in zip(vocab.itos, vocab.counts, strict=True):
        digest.update(f"{token}\t{count}\n".encode())
    return {
        "kind": "continuous" if getattr(generator, "continuous", False) else "softmax",
        "tgt_vocab_sha256": digest.hexdigest(),
        "tgt_words": len(vocab),
        "beam_size": beam_size,
    }


def save_offsets(
    path: str,
    offsets: Sequence[float],
    beta: float,
    target: Sequence[float],
    source: str,
    model: dict[str, Any] | None = None,
) -> None:
    """Write the fitted offsets (atomically) with the β they were fitted under and ``model``, the
    :func:`model_record` of the model they were fitted on."""
    data: dict[str, Any] = {
        "format": FORMAT,
        "bins": [[n, lo, None if hi == math.inf else hi] for n, lo, hi in FREQ_BINS],
        "offsets": [round(o, 6) for o in offsets],
        "decode_prior": beta,
        "target": [None if math.isnan(t) else t for t in target],
        "fitted_on": source,
    }
    if model is not None:
        data["model"] = model
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")


def _is_number(x: object, bound: float = MAX_OFFSET) -> TypeGuard[int | float]:
    """A JSON number (not true/false, which Python counts as ints) within ±``bound``: an integer
    of 400 digits or a float of 1e308 is no offset, and would overflow once added to a score."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    if isinstance(x, int):
        return abs(x) <= bound
    return math.isfinite(x) and abs(x) <= bound


@overload
def load_offsets(path: str, with_model: Literal[False] = False) -> tuple[list[float], float]: ...


@overload
def load_offsets(path: str, with_model: Literal[True]) -> tuple[list[float], float, dict[str, Any] | None]: ...


def load_offsets(
    path: str, with_model: bool = False
) -> tuple[list[float], float] | tuple[list[float], float, dict[str, Any] | None]:
    """-> (offsets [bins], β) from a file written by :func:`save_offsets`, and with ``with_model``
    its :func:`model_record` as a third item (None in files written before it was recorded);
    UserError otherwise."""
    if not os.path.isfile(path):
        raise UserError(f"-freq_offsets {path}: no such file (tools/calibrate_offsets.py writes it)")
    what = "not a JSON file written by tools/calibrate_offsets.py"
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise UserError(
            f"-freq_offsets {path}: {what} ({os.path.getsize(path):,} bytes; such a file has a few hundred)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError; an integer of over 4300 digits
        raise UserError(f"-freq_offsets {path}: {what} ({exc})") from None
    except RecursionError:
        raise UserError(f"-freq_offsets {path}: {what} (its values are nested too deeply)") from None
    except OSError as exc:
        raise UserError(f"-freq_offsets {path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(
            f'-freq_offsets {path}: expected a file with "format": "{FORMAT}" (written by tools/calibrate_offsets.py)'
        )
    bins = [[n, lo, None if hi == math.inf else hi] for n, lo, hi in FREQ_BINS]
    if data.get("bins") != bins:
        raise UserError(f"-freq_offsets {path}: its bins are not this version's {bins}")
    offsets, beta = data.get("offsets"), data.get("decode_prior")
    if not isinstance(offsets, list) or len(offsets) != len(FREQ_BINS) or not all(map(_is_number, offsets)):
        raise UserError(
            f'-freq_offsets {path}: "offsets" must be {len(FREQ_BINS)} finite numbers within '
            f"±{MAX_OFFSET:g}, got {_short(offsets)}"
        )
    if not _is_number(beta, MAX_DECODE_PRIOR):
        raise UserError(
            f'-freq_offsets {path}: "decode_prior" must be a number within ±{MAX_DECODE_PRIOR:g}, got {_short(beta)}'
        )
    result = ([float(o) for o in offsets], float(beta))
    if not with_model:
        return result
    model = data.get("model")
    if model is not None and not (
        isinstance(model, dict)
        and model.get("kind") in ("continuous", "softmax")
        and isinstance(model.get("tgt_vocab_sha256"), str)
        and isinstance(model.get("tgt_words"), int)
        and _is_beam(model.get("beam_size", 1))
    ):
        raise UserError(
            f'-freq_offsets {path}: "model" must record the kind (continuous or softmax), '
            f"tgt_vocab_sha256, tgt_words and beam_size of the model and search it was fitted on, got "
            f"{_short(model)}"
        )
    return (*result, model)


def _is_beam(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 10_000


def _short(value: object, limit: int = 120) -> str:
    """repr of a value read from a file, cut short: a message must not print a megabyte of digits."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a number too large"
    return text if len(text) <= limit else text[:limit] + "..."
