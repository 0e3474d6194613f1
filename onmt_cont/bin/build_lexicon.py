"""Build the ``<unk>``-replacement lexicon from a tokenized parallel corpus.

Following the vMF paper (Kumar & Tsvetkov, 2019), which follows Denkowski & Neubig (2017):
word-align the training corpus with fast_align's model (``onmt_cont.align``), symmetrise,
and map every source word to the target word it is most often aligned to. The lexicon is
``source_word target_word`` per line, sorted by source word, UTF-8.

    python build_lexicon.py -src data/train.fr -tgt data/train.en -output lex.txt
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from dataclasses import fields

from onmt_cont.align import Alignment
from onmt_cont.align.fast_align import AlignConfig, align_corpus
from onmt_cont.align.options import DEFAULT_MAX_LENGTH, DEFAULT_SYM, LexiconConfig, add_lexicon_options
from onmt_cont.align.pharaoh import format_pharaoh, read_pharaoh
from onmt_cont.config import check_ranges
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.progress import summary, write

# Options that only make sense when we train the aligner ourselves.
_TRAINING_OPTIONS = (
    "iterations",
    "p0",
    "tension",
    "optimize_tension",
    "vb_alpha",
    "sym",
    "save_alignments",
    "max_length",
)


def extract_lexicon(
    src: list[list[str]], tgt: list[list[str]], alignments: list[Alignment], min_count: int = 1
) -> dict[str, str]:
    """Map each source word to its most frequently aligned target word.

    Ties go to the target word that sorts first, so the output does not depend on corpus
    order; a source word whose best pair is seen fewer than ``min_count`` times is left out.
    """
    pairs = Counter((s[i], t[j]) for s, t, links in zip(src, tgt, alignments, strict=True) for i, j in links)
    best: dict[str, tuple[int, str]] = {}
    for (sw, tw), count in pairs.items():
        if count >= min_count and (sw not in best or (-count, tw) < (-best[sw][0], best[sw][1])):
            best[sw] = (count, tw)
    return {sw: tw for sw, (_, tw) in best.items()}


def format_lexicon(lexicon: dict[str, str]) -> str:
    return "".join(f"{sw} {lexicon[sw]}\n" for sw in sorted(lexicon))


def read_corpus(path: str, lower: bool) -> list[list[str]]:
    """Whitespace-tokenized lines; empty lines are allowed and give empty sentences."""
    return [(line.lower() if lower else line).split() for _, line in read_lines(path)]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_lexicon_options(p)  # a flag per LexiconConfig field, group by group (align/options.py)
    return p


def _config(opt: argparse.Namespace) -> AlignConfig:
    """The aligner's options given, AlignConfig's defaults (fast_align's) for the others."""
    given = {f.name: getattr(opt, f.name) for f in fields(AlignConfig) if getattr(opt, f.name) is not None}
    return AlignConfig(**given)


def _check_writable(path: str, flag: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{flag} {path}: directory {directory} does not exist")
    if os.path.isdir(path):
        raise UserError(f"{flag} {path}: is a directory, expected a file name")


@cli_main
def main(argv: list[str] | None = None) -> None:
    opt = build_parser().parse_args(argv)
    refuse_output_over_inputs(
        {"-output": opt.output, "-save_alignments": opt.save_alignments},
        {"-src": opt.src, "-tgt": opt.tgt, "-alignments": opt.alignments},
    )
    if opt.alignments is not None:
        given = [f"-{name}" for name in _TRAINING_OPTIONS if getattr(opt, name) is not None]
        if given:
            raise UserError(f"{', '.join(given)} only apply when training the aligner, not with -alignments")
    # -iterations, -p0, -tension, -vb_alpha, -max_length, -min_count: the ranges and checks on the fields
    check_ranges(vars(opt), LexiconConfig)
    config = _config(opt)
    _check_writable(opt.output, "-output")
    if opt.save_alignments:
        _check_writable(opt.save_alignments, "-save_alignments")

    start = time.perf_counter()
    src, tgt = read_corpus(opt.src, opt.lower), read_corpus(opt.tgt, opt.lower)
    if len(src) != len(tgt):
        raise UserError(f"{opt.src} has {len(src)} lines but {opt.tgt} has {len(tgt)}; they must be line-parallel")
    n_src, n_tgt = sum(map(len, src)), sum(map(len, tgt))
    if not n_src or not n_tgt:  # an empty lexicon would make -replace_unk silently copy every word
        raise UserError(f"nothing to align: {opt.src if not n_src else opt.tgt} has no words ({len(src)} lines)")
    print(f"pairs: {len(src)}, tokens: {n_src} source, {n_tgt} target")

    if opt.alignments is not None:
        alignments = read_pharaoh(opt.alignments, [len(s) for s in src], [len(t) for t in tgt])
        print(f"read alignments from {opt.alignments}")
    else:
        sym = opt.sym or DEFAULT_SYM
        limit = DEFAULT_MAX_LENGTH if opt.max_length is None else opt.max_length
        too_long = {k for k, (s, t) in enumerate(zip(src, tgt, strict=True)) if limit and max(len(s), len(t)) > limit}
        if too_long:
            print(
                f"{len(too_long)} pair(s) with a side longer than -max_length {limit} tokens left unaligned "
                f"(first: line {min(too_long) + 1})"
            )
        short_src = [[] if k in too_long else s for k, s in enumerate(src)]
        short_tgt = [[] if k in too_long else t for k, t in enumerate(tgt)]
        alignments = align_corpus(short_src, short_tgt, sym, config, log=write)
        print(f"symmetrised with {sym}")
    print(f"links: {sum(map(len, alignments))}")

    lexicon = extract_lexicon(src, tgt, alignments, opt.min_count)
    if not lexicon:  # like an empty corpus: -replace_unk would silently copy every word
        raise UserError(
            f"the lexicon is empty: no source word is aligned -min_count {opt.min_count} time(s) "
            f"to one target word ({sum(map(len, alignments))} links in all)"
        )
    if opt.save_alignments:
        atomic_write_text(opt.save_alignments, format_pharaoh(alignments))
    atomic_write_text(opt.output, format_lexicon(lexicon))
    written = [f"{opt.output} (lexicon: {len(lexicon):,} entries)"]
    if opt.save_alignments:
        written.append(f"{opt.save_alignments} ({len(alignments):,} lines of alignments)")
    summary(
        f"{'aligned' if opt.alignments is None else 'read the alignments of'} {len(src):,} pairs",
        time.perf_counter() - start,
        written,
    )


if __name__ == "__main__":
    main()
