#!/usr/bin/env python
"""Unigram F1 of test words by their frequency in the training targets (the vMF paper's Table 5).

    python lab/tools/rare_word_f1.py -train train.en -ref test.en -hyp test.pred.en [-bins calibration] [-json out.json]

Following Kumar & Tsvetkov (2019, section 5, Table 5; the compare-mt "word accuracy by frequency
bucket" analysis): every word type w is put in the bin of its count in the tokenized training
targets (1, 2, 3, 4, 5-9, 10-99, 100-999, 1000+; words never seen in training go to bin 0, which
the paper's table does not show). Per sentence, the matches of w are min(count in hypothesis,
count in reference) (clipped, as in BLEU's unigram precision). For each bin,
recall = matches / reference occurrences of the bin's words, precision = matches / hypothesis
occurrences of the bin's words, F1 = 2PR / (P + R), and the calibration ratio = hypothesis
occurrences / reference occurrences (above 1: the model over-produces the bin's words, as
continuous models tend to do with the rarest ones).
Inputs are tokenized, one sentence per line.

-substitutions BIN says what took the place of the reference's words of one bin: in each sentence
pair, the one-for-one replacements of difflib's alignment of the token sequences (a run of k
reference tokens replaced by k hypothesis tokens), counted by the bin of the word put in their
place, with the most frequent (reference word, hypothesis word) pairs. Where a model puts out too
few words of a bin, this shows whether their replacements are more frequent words (a frequency
prior too strong) or rarer ones (neighbours in the table).
"""

import argparse
import difflib
import json
import sys
from collections import Counter

from onmt_cont.translate.calibration import FREQ_BINS
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs

BINS = [
    ("0", 0, 0),
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4", 4, 4),
    ("5-9", 5, 9),
    ("10-99", 10, 99),
    ("100-999", 100, 999),
    ("1000+", 1000, float("inf")),
]
# -bins calibration: the bins of translate.py -freq_offsets (and of the results' hyp/ref ratios),
# plus words never seen in training
CALIBRATION_BINS = [("0", 0, 0), *FREQ_BINS]
BIN_SETS = {"paper": BINS, "calibration": CALIBRATION_BINS}


def bin_of(freq, bins=BINS):
    for name, lo, hi in bins:
        if lo <= freq <= hi:
            return name
    raise ValueError(freq)


def rare_word_f1(train_lines, ref_lines, hyp_lines, bins=BINS, ignore=()):
    """-> {bin: {"ref": n, "hyp": n, "match": n, "precision": p, "recall": r, "f1": f, "ratio": hyp/ref}}
    for every bin (ratio NaN where the reference has none of the bin's words).

    ``bins``: (name, lowest, highest training count) triples; ``ignore``: tokens that are no word of
    either text (lab/tools/open_vocab_eval.py leaves out <unk>)."""
    if len(ref_lines) != len(hyp_lines):
        raise ValueError(f"{len(ref_lines)} reference lines but {len(hyp_lines)} hypothesis lines")
    freq = Counter(w for line in train_lines for w in line.split())
    stats = {name: Counter() for name, _, _ in bins}
    for ref, hyp in zip(ref_lines, hyp_lines, strict=True):
        rc = Counter(w for w in ref.split() if w not in ignore)
        hc = Counter(w for w in hyp.split() if w not in ignore)
        for w, n in rc.items():
            s = stats[bin_of(freq[w], bins)]
            s["ref"] += n
            s["match"] += min(n, hc[w])
        for w, n in hc.items():
            stats[bin_of(freq[w], bins)]["hyp"] += n
    out = {}
    for name, s in stats.items():
        p = s["match"] / s["hyp"] if s["hyp"] else 0.0
        r = s["match"] / s["ref"] if s["ref"] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        ratio = s["hyp"] / s["ref"] if s["ref"] else float("nan")
        out[name] = {
            "ref": s["ref"],
            "hyp": s["hyp"],
            "match": s["match"],
            "precision": p,
            "recall": r,
            "f1": f,
            "ratio": ratio,
        }
    return out


def substitutions(train_lines, ref_lines, hyp_lines, bin_name, bins=CALIBRATION_BINS):
    """-> (Counter of the bins of the words that replace one-for-one the reference's words of bin
    ``bin_name``, Counter of the (reference word, hypothesis word) pairs)."""
    if bin_name not in {name for name, _, _ in bins}:
        raise ValueError(f"no bin {bin_name!r}; the bins are {', '.join(name for name, _, _ in bins)}")
    if len(ref_lines) != len(hyp_lines):
        raise ValueError(f"{len(ref_lines)} reference lines but {len(hyp_lines)} hypothesis lines")
    freq = Counter(w for line in train_lines for w in line.split())
    into, pairs = Counter(), Counter()
    for ref, hyp in zip(ref_lines, hyp_lines, strict=True):
        r, h = ref.split(), hyp.split()
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=r, b=h, autojunk=False).get_opcodes():
            if op != "replace" or i2 - i1 != j2 - j1:
                continue
            for a, b in zip(r[i1:i2], h[j1:j2], strict=True):
                if bin_of(freq[a], bins) == bin_name:
                    into[bin_of(freq[b], bins)] += 1
                    pairs[(a, b)] += 1
    return into, pairs


def read(path):
    return [line for _, line in read_lines(path)]


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-train", required=True, help="tokenized training targets (the frequencies)")
    p.add_argument("-ref", required=True, help="tokenized reference")
    p.add_argument("-hyp", required=True, help="tokenized hypothesis (the model's output)")
    p.add_argument(
        "-bins",
        choices=sorted(BIN_SETS),
        default="paper",
        help="paper: 1, 2, 3, 4, 5-9, ... (Table 5); calibration: 1, 2-4, 5-9, 10-99, ...",
    )
    p.add_argument("-json", help="also write the table as JSON here")
    p.add_argument(
        "-substitutions",
        metavar="BIN",
        help="also print what replaced the reference's words of this bin (of -bins), one for one",
    )
    p.add_argument("-top", type=int, default=15, help="-substitutions: the most frequent pairs to print")
    args = p.parse_args(argv)
    refuse_output_over_inputs({"-json": args.json}, {"-train": args.train, "-ref": args.ref, "-hyp": args.hyp})
    bins = BIN_SETS[args.bins]
    if args.substitutions is not None and args.substitutions not in {name for name, _, _ in bins}:
        p.error(
            f"-substitutions {args.substitutions}: no such bin in -bins {args.bins} "
            f"({', '.join(name for name, _, _ in bins)})"
        )
    train, ref, hyp = read(args.train), read(args.ref), read(args.hyp)
    if len(hyp) != len(ref):
        raise UserError(f"{args.hyp}: {len(hyp)} lines, but -ref {args.ref} has {len(ref)} (one line per sentence)")
    table = rare_word_f1(train, ref, hyp, bins)
    print("bin\tref\thyp\tmatch\tprecision\trecall\tf1\thyp/ref")
    for name, s in table.items():
        print(
            f"{name}\t{s['ref']}\t{s['hyp']}\t{s['match']}\t{s['precision']:.4f}\t{s['recall']:.4f}\t{s['f1']:.4f}"
            f"\t{s['ratio']:.2f}"
        )
    if args.json:
        atomic_write_text(args.json, json.dumps(table, indent=1))  # never a half-written file
    if args.substitutions is not None:
        into, pairs = substitutions(train, ref, hyp, args.substitutions, bins)
        total = sum(into.values())
        order = [name for name, _, _ in bins]
        print(f"\nreference words of bin {args.substitutions} replaced one for one: {total}")
        print("replaced by a word of bin\tcount\tshare")
        for name in order:
            if into[name]:
                print(f"{name}\t{into[name]}\t{into[name] / total:.2f}")
        print(
            "most frequent pairs (reference -> hypothesis, count): "
            + ", ".join(f"{a} -> {b} {n}" for (a, b), n in pairs.most_common(args.top))
        )


if __name__ == "__main__":
    sys.exit(main())
