#!/usr/bin/env python
"""Output length against the reference's, split by whether the source ends with . ! or ?

    python lab/tools/length_by_final_punct.py -src test.de -ref test.en -hyp ce.en cont.en [-over 2]

A continuous decoder can loop without </s> on sources that lack final punctuation, which are rare in
the training data but common in some test sets (Multi30k de->en's test_2017), and so write output
longer than the reference. This prints, per
hypothesis file and per group of sources (with / without the final mark): the sentences, the
hypothesis / reference token ratio, how many outputs are longer than -over times their
reference, and the group's BLEU on the tokens as given (sacreBLEU, -tokenize none: for comparing
the groups and rows, not the detokenized figure translate.py reports). Inputs are tokenized, one
sentence per line, the same number of lines.
"""

import argparse
import sys

import sacrebleu

from onmt_cont.inputters.batching import FINAL_PUNCT
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines

GROUPS = ("with", "without")


def length_table(src, ref, hyp, over=2.0):
    """src, ref, hyp: token lists of the same length -> {group: {sentences, ref, hyp, ratio, over}}
    (group "with": the source's last token is one of FINAL_PUNCT; an empty source is "without")."""
    if not len(src) == len(ref) == len(hyp):
        raise ValueError(f"{len(src)} source, {len(ref)} reference and {len(hyp)} hypothesis lines")
    table = {g: {"sentences": 0, "ref": 0, "hyp": 0, "over": 0} for g in GROUPS}
    texts = {g: ([], []) for g in GROUPS}
    for s, r, h in zip(src, ref, hyp, strict=True):
        group = "with" if s and s[-1] in FINAL_PUNCT else "without"
        row = table[group]
        row["sentences"] += 1
        row["ref"] += len(r)
        row["hyp"] += len(h)
        row["over"] += len(h) > over * len(r)
        texts[group][0].append(" ".join(h))
        texts[group][1].append(" ".join(r))
    for g, row in table.items():
        row["ratio"] = row["hyp"] / row["ref"] if row["ref"] else float("nan")
        hyps, refs = texts[g]
        row["bleu"] = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True).score if hyps else float("nan")
    return table


def read(path):
    return [line.split() for _, line in read_lines(path)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-src", required=True, help="tokenized source")
    p.add_argument("-ref", required=True, help="tokenized reference")
    p.add_argument("-hyp", required=True, nargs="+", help="tokenized hypotheses (one or more files)")
    p.add_argument("-over", type=float, default=2.0, help="count the outputs longer than this times the reference")
    args = p.parse_args(argv)
    if not args.over > 0:
        p.error(f"-over must be positive, got {args.over}")
    try:
        src, ref = read(args.src), read(args.ref)
        tables = []
        for path in args.hyp:  # every file checked before anything is printed
            try:
                tables.append((path, length_table(src, ref, read(path), args.over)))
            except ValueError as exc:
                raise UserError(f"{path}: {exc}: give files of the same sentences") from None
        print(f"hypothesis\tsource\tsentences\tref tokens\thyp tokens\thyp/ref\tlonger than {args.over:g}x ref\tBLEU")
        for path, table in tables:
            for g in GROUPS:
                row = table[g]
                print(
                    f"{path}\t{g} final {'/'.join(FINAL_PUNCT)}\t{row['sentences']}\t{row['ref']}\t{row['hyp']}\t"
                    f"{row['ratio']:.2f}\t{row['over']}\t{row['bleu']:.2f}"
                )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
