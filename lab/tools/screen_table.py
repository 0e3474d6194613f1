"""Screening runs side by side on validation: each run's best validation loss, best nearest-neighbour accuracy (a
continuous run's) and best greedy validation BLEU, with the update where each came; then the three at every
-every-th update that all runs validated.

    python lab/tools/screen_table.py -run "dropout 0.1" runs/tiny_en-de/continuous.s1/train.log \\
                                     -run "dropout 0.3" runs/screen_en-de/continuous.drop0.3.s1/train.log

Reads train.py's log lines "validation at step N: loss L; ... nn accuracy A%; greedy BLEU B" (a resumed run's later
line for a step wins). A contrastive loss's validation value is over the run's own negatives: between runs with
other -num_sampled or -negatives, compare nn accuracy and BLEU, not the loss. Validation only: a screen never reads
a test set.
"""

import argparse
import math
import re
import sys

VALID = re.compile(r"validation at step (\d+): loss ([-\d.]+);(.*?)greedy BLEU ([\d.]+)")
NN = re.compile(r"nn accuracy ([\d.]+)%")


def curve(path):
    """{step: (validation loss, nn accuracy in % or nan, greedy validation BLEU)} of a train.py log."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for m in VALID.finditer(text):
        nn = NN.search(m[3])
        out[int(m[1])] = (float(m[2]), float(nn[1]) if nn else math.nan, float(m[4]))
    return out


def _best(c, i, higher):
    known = [s for s in c if not math.isnan(c[s][i])]
    if not known:
        return "–"
    s = (max if higher else min)(known, key=lambda s: c[s][i])
    return f"{c[s][i]:.4f} ({s})" if i == 0 else f"{c[s][i]:.2f} ({s})"


def _cell(values):
    loss, nn, bleu = values
    return f"{loss:.4f} / {'–' if math.isnan(nn) else f'{nn:.2f}'} / {bleu:.2f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-run", nargs=2, action="append", required=True, metavar=("NAME", "LOG"))
    p.add_argument("-every", type=int, default=512, help="show the shared updates that are multiples of this")
    args = p.parse_args(argv)
    runs = [(name, curve(path)) for name, path in args.run]
    for name, c in runs:
        if not c:
            sys.exit(f"screen_table.py: {name}: no validation with greedy BLEU in its log")
    best = ("best loss (update)", "best nn accuracy (update)", "best greedy BLEU (update)")
    print("| run | validations | last update | " + " | ".join(best) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, c in runs:
        print(f"| {name} | {len(c)} | {max(c)} | {_best(c, 0, False)} | {_best(c, 1, True)} | {_best(c, 2, True)} |")
    shared = sorted(s for s in set.intersection(*(set(c) for _, c in runs)) if s % args.every == 0)
    if shared:
        print("\n| update | " + " | ".join(f"{name}: loss / nn accuracy / BLEU" for name, _ in runs) + " |")
        print("| ---: " * (len(runs) + 1) + "|")
        for s in shared:
            print(f"| {s} | " + " | ".join(_cell(c[s]) for _, c in runs) + " |")


if __name__ == "__main__":
    main()
