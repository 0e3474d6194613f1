"""build_lexicon.py's options: the corpus and alignment files, fast_align's model and the lexicon, as one typed
configuration (:class:`LexiconConfig`) from which the parser's flags are built, group by group (:data:`GROUPS`), and
their ranges checked (:mod:`onmt_cont.config`). The aligner's fields default to None, not to fast_align's values,
so that build_lexicon.py can tell which were given beside -alignments (they only apply when it trains the aligner);
their help states :class:`~onmt_cont.align.fast_align.AlignConfig`'s default, which fills those not given."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable
from dataclasses import dataclass

from onmt_cont.align.fast_align import AlignConfig
from onmt_cont.align.symmetrise import SYMMETRISERS
from onmt_cont.config import add_flags, option

DEFAULT_SYM = "grow-diag-final-and"
# fast_align's model holds a few numbers per (source word, target word) cell of a pair, ~50 bytes:
# one pair of two 3,000-token lines takes 0.45 GB more and 14-26 s (docs/reliability.md), one of
# two 100K-token lines would take ~500 GB.
DEFAULT_MAX_LENGTH = 1000
# bounds that keep every value finite and every run finite (fast_align's defaults: 5, 4.0, none)
MAX_ITERATIONS = 1000  # EM has long converged; 10^20 would never end
# exp(-tension) underflows past ~745: every word prior 0, links lost; inf or 1e308 overflow exp() and digamma():
# every link probability NaN, an empty lexicon
MAX_TENSION = 100.0
MAX_VB_ALPHA = 1e6


def _from_to(low: float, high: float) -> Callable[[float], str | None]:
    """A check that refuses a value outside [low, high] (NaN included): "must be from 1 to 1000"."""
    return lambda value: None if low <= value <= high else f"must be from {low:g} to {high:g}"


def _vb_alpha_problem(value: float) -> str | None:
    return None if 0.0 < value <= MAX_VB_ALPHA else f"must be above 0 and at most {MAX_VB_ALPHA:g}"


@dataclass
class LexiconConfig:
    """build_lexicon.py's flags, each field with its help, default and range."""

    # Files
    src: str | None = option(None, required=True, help="tokenized source side, one sentence per line")
    tgt: str | None = option(None, required=True, help="tokenized target side, line-parallel to -src")
    output: str | None = option(None, required=True, help="lexicon to write: 'source_word target_word' per line")
    alignments: str | None = option(
        None, help="use these Pharaoh alignments ('i-j', 0-based source-target) instead of training the aligner"
    )
    save_alignments: str | None = option(None, help="also write the symmetrised alignments here (Pharaoh format)")
    # The aligner; None: not given (AlignConfig's default, DEFAULT_SYM, DEFAULT_MAX_LENGTH)
    iterations: int | None = option(
        None,
        type=int,
        check=_from_to(1, MAX_ITERATIONS),
        help=f"EM iterations per direction (default {AlignConfig.iterations})",
    )
    p0: float | None = option(
        None,
        type=float,
        low=0.0,
        high=1.0,
        high_open=True,
        help=f"probability of aligning a word to NULL (default {AlignConfig.p0})",
    )
    tension: float | None = option(
        None,
        type=float,
        check=_from_to(0.0, MAX_TENSION),
        help=f"diagonal tension λ, initial value if optimised (default {AlignConfig.tension})",
    )
    optimize_tension: bool | None = option(
        None, action="store_true", help="re-estimate λ after each iteration, as fast_align -o"
    )
    vb_alpha: float | None = option(
        None,
        type=float,
        check=_vb_alpha_problem,
        help="train t(f|e) by variational Bayes with this Dirichlet "
        "concentration, as fast_align -v -a (default: plain EM)",
    )
    sym: str | None = option(
        None,
        choices=sorted(SYMMETRISERS),
        help=f"how to combine the two directions (default {DEFAULT_SYM})",
    )
    max_length: int | None = option(
        None,
        type=int,
        low=0,
        help=f"leave pairs with a side longer than this many tokens unaligned (no links): memory and time "
        f"grow with source x target length (default {DEFAULT_MAX_LENGTH}; 0: no limit)",
    )
    # The lexicon
    min_count: int = option(
        1, type=int, low=1, help="keep a source word only if its best pair is aligned at least this often"
    )
    lower: bool = option(False, help="lowercase both sides first")


# the parser's groups, their titles and flags in -h's order
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ("src", "tgt", "output", "alignments", "save_alignments")),
    (
        "aligner (fast_align's model; defaults are fast_align's)",
        ("iterations", "p0", "tension", "optimize_tension", "vb_alpha", "sym", "max_length"),
    ),
    ("lexicon", ("min_count", "lower")),
)


def add_lexicon_options(p: ArgumentParser) -> None:
    """Add build_lexicon.py's groups to its parser ``p``, a flag per :class:`LexiconConfig` field."""
    for title, names in GROUPS:
        add_flags(p.add_argument_group(title), LexiconConfig, names)
