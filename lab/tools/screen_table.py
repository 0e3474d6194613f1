"""Screening runs side by side on validation: each run's best validation loss and best greedy validation BLEU
(with the update where each came), then both at every -every-th update that all runs validated.

    python lab/tools/screen_table.py -run "dropout 0.1" runs/tiny_en-de/continuous.s1/train.log \\
                                     -run "dropout 0.3" runs/screen_en-de/continuous.drop0.3.s1/train.log

Reads train.py's log lines "validation at step N: loss L; ... greedy BLEU B" (a resumed run's later line for a
step wins). Validation only: a screen never reads a test set.
"""

import argparse
import re
import sys

VALID = re.compile(r"validation at step (\d+): loss ([-\d.]+);.*?greedy BLEU ([\d.]+)")


def curve(path):
    """{step: (validation loss, greedy validation BLEU)} of a train.py log."""
    with open(path, encoding="utf-8") as f:
        return {int(m[1]): (float(m[2]), float(m[3])) for m in VALID.finditer(f.read())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-run", nargs=2, action="append", required=True, metavar=("NAME", "LOG"))
    p.add_argument("-every", type=int, default=512, help="show the shared updates that are multiples of this")
    args = p.parse_args(argv)
    runs = [(name, curve(path)) for name, path in args.run]
    for name, c in runs:
        if not c:
            sys.exit(f"screen_table.py: {name}: no validation with greedy BLEU in its log")
    print("| run | validations | last update | best loss (update) | best greedy BLEU (update) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, c in runs:
        best_loss = min(c, key=lambda s: c[s][0])
        best_bleu = max(c, key=lambda s: c[s][1])
        print(
            f"| {name} | {len(c)} | {max(c)} | {c[best_loss][0]:.4f} ({best_loss}) | "
            f"{c[best_bleu][1]:.2f} ({best_bleu}) |"
        )
    shared = sorted(s for s in set.intersection(*(set(c) for _, c in runs)) if s % args.every == 0)
    if shared:
        print("\n| update | " + " | ".join(f"{name}: loss / BLEU" for name, _ in runs) + " |")
        print("| ---: " * (len(runs) + 1) + "|")
        for s in shared:
            print(f"| {s} | " + " | ".join(f"{c[s][0]:.4f} / {c[s][1]:.2f}" for _, c in runs) + " |")


if __name__ == "__main__":
    main()
