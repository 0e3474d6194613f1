"""The checks of the decoding options: their ranges (translate.py's flags, the Translator's and the
Python API's keywords), checked before any model is loaded (translate.py's other options: translate/options.py).

Each is a finite number in a range that decoding can use: NaN and infinities would make every
score NaN or ±inf (a beam search that never ends, outputs of <unk> or padding, or empty lines),
and a finite value can still overflow (β · log p of 1e308) or ask for a search no machine runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from onmt_cont.translate.search import MAX_OUTPUT_LENGTH
from onmt_cont.utils.errors import UserError

# -decode_prior β: beyond it the prior alone picks every word (its log p_train(w) terms span some
# 15 nats), and β · log p stays finite in float32
MAX_DECODE_PRIOR = 1000.0
MAX_ALPHA = 10.0  # -alpha of -length_penalty wu (GNMT uses 0.6 to 1)
MAX_BETA = 10.0  # -beta of -coverage_penalty (GNMT uses 0.2)
# -freq_offsets: no bin's offset goes further from 0 (in the scores' units; log-probabilities for
# softmax models): far past any useful calibration, and score + offset stays finite
MAX_OFFSET = 1e4
MAX_FAISS_INT = 2**31 - 1  # faiss's int parameters
LENGTH_PENALTIES = ("none", "avg", "wu")  # -length_penalty's choices
# The search translate.py, onmt_cont.load() and the server use unless told otherwise: beam 5 with 3-gram blocking,
# the best of greedy / beam 5 / blocking / both on the quickstart models' validation sets (continuous 33.09 /
# 34.19 / 33.17 / 34.30, softmax 27.29 / 28.47 / 27.36 / 28.49 sacreBLEU); greedy search loops on continuous models
DEFAULT_BEAM, DEFAULT_BLOCK = 5, 3


def check_number(
    flag: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    integer: bool = False,
    expected: str | None = None,
) -> None:
    """UserError unless ``value`` is a finite number (an int where ``integer``) in [low, high].
    ``expected``: the message's description of a good value (default: from the bounds)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and (isinstance(value, int) or not integer):
        if (isinstance(value, int) or math.isfinite(value)) and low <= value <= high:
            return
    if expected is None:
        bounds = []
        if low > -math.inf:
            bounds.append(f"at least {low:g}" if isinstance(low, float) else f"at least {low}")
        if high < math.inf:
            bounds.append(f"at most {high:g}" if isinstance(high, float) else f"at most {high}")
        expected = " ".join(["an integer" if integer else "a finite number", " and ".join(bounds)]).strip()
    raise UserError(f"-{flag} must be {expected}, got {value!r}")


def search_defaults(
    beam_size: int | None = None,
    block_ngram_repeat: int | None = None,
    sampling: bool = False,
    n_best: int | None = None,
) -> tuple[int, int]:
    """The beam size and n-gram blocking to use where the caller gave None: DEFAULT_BEAM (at least -n_best) and
    DEFAULT_BLOCK; under random sampling the beam is the number of draws of each sentence: one, or -n_best's."""
    if beam_size is None:
        asked = n_best if isinstance(n_best, int) and not isinstance(n_best, bool) else 1
        beam_size = max(1, asked) if sampling else max(DEFAULT_BEAM, asked)
    if block_ngram_repeat is None:
        block_ngram_repeat = DEFAULT_BLOCK
    return beam_size, block_ngram_repeat


def sampling_on(topk: int = 0, topp: float = 0.0) -> bool:
    """Whether -random_sampling_topk / -topp ask for sampling (Translator.set_sampling's rule)."""
    return topk == -1 or (isinstance(topk, int) and topk > 1) or (isinstance(topp, (int, float)) and 0.0 < topp < 1.0)


def check_decoding_options(
    beam_size: int = 1,
    max_length: int | None = None,
    max_length_ratio: float = 2.0,
    alpha: float = 0.0,
    decode_prior: float = 0.0,
    decode_prior_cap: int = 0,
    csls: int = 0,
    block_ngram_repeat: int = 0,
    freq_offsets: Sequence[float] | None = None,
    ann: dict[str, Any] | None = None,
    length_penalty: str = "avg",
) -> None:
    """Refuse decoding options no search can use (translate.py's names in the messages). The
    checks that need the model (-beam_size and -csls against its vocabulary) are the Translator's."""
    check_number("beam_size", beam_size, 1, integer=True)
    if length_penalty not in LENGTH_PENALTIES:
        raise UserError(f"-length_penalty must be one of {', '.join(LENGTH_PENALTIES)}, got {length_penalty!r}")
    if max_length is not None:
        check_number(
            "max_length",
            max_length,
            0,
            MAX_OUTPUT_LENGTH,
            integer=True,
            expected=f"an integer from 0 to {MAX_OUTPUT_LENGTH} (the longest output there is)",
        )
    check_number("max_length_ratio", max_length_ratio, 0)
    check_number("alpha", alpha, 0, MAX_ALPHA)
    check_number(
        "decode_prior",
        decode_prior,
        -MAX_DECODE_PRIOR,
        MAX_DECODE_PRIOR,
        expected=f"a finite number within ±{MAX_DECODE_PRIOR:g} (0: off; useful values are about 0.1 to 1)",
    )
    check_number("decode_prior_cap", decode_prior_cap, 0, integer=True)
    if decode_prior_cap and not decode_prior:
        raise UserError("-decode_prior_cap shapes the prior of -decode_prior BETA: give -decode_prior too")
    if decode_prior_cap and decode_prior_cap < 2:
        raise UserError(f"-decode_prior_cap must be at least 2 training occurrences (0: off), got {decode_prior_cap}")
    check_number("csls", csls, 0, integer=True, expected="at least 0 (0: off), a whole number")
    check_number(
        "block_ngram_repeat", block_ngram_repeat, 0, integer=True, expected="0 (off) or a positive n-gram size"
    )
    if freq_offsets is not None:
        for offset in freq_offsets:
            check_number(
                "freq_offsets", offset, -MAX_OFFSET, MAX_OFFSET, expected=f"finite numbers within ±{MAX_OFFSET:g}"
            )
    if ann is not None:
        for key, low in (("nlist", 1), ("nprobe", 1), ("hnsw_m", 2), ("ef_search", 1)):
            if ann.get(key) is not None:
                check_number(f"ann_{key}", ann[key], low, MAX_FAISS_INT, integer=True)
