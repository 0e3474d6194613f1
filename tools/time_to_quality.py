#!/usr/bin/env python
"""Validation BLEU against wall-clock seconds from train.py logs (issue 21's time to quality).

    python tools/time_to_quality.py -ref runs/x/t_ce.s1/train.log -runs runs/x/t_nce_both.s1/train.log \\
        -plot docs/results/word_choice_fr-en/time_to_quality.png

For every log: the greedy validation BLEU of each validation (-valid_metric bleu) against the
seconds since the log's first line (its [HH:MM:SS] stamps; validation time included, as it is
part of training). A run continued with -train_from into the same log counts its training time
only: the pause before a "resumed from step" line is left out. The target is the reference
run's best validation BLEU minus -margin (1 by default); the table gives the seconds each run
needed to reach it and the ratio to the reference's. Only runs trained one after the other on a
quiet machine, or side by side with one thread each, compare.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from anywhere

from onmt_cont.utils.errors import UserError, cli_main  # noqa: E402

STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] (.*)$")
VALID = re.compile(r"validation at step \d+: .*greedy BLEU ([\d.]+)")


def curve(path):
    """-> [(seconds since the first line, validation BLEU)] of one train.log."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    points, elapsed, last = [], 0, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = STAMP.match(line.rstrip("\n"))
            if not m:
                continue
            t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
            if last is not None:
                while t < last:  # past midnight
                    t += 86400
                if "resumed from step" not in m.group(4):  # train.py's first line after -train_from
                    elapsed += t - last
            last = t
            v = VALID.search(m.group(4))
            if v:
                points.append((elapsed, float(v.group(1))))
    if not points:
        raise UserError(f"{path}: no 'greedy BLEU' validation lines (train with -valid_metric bleu)")
    return points


def time_to(points, target):
    """Seconds of the first validation at or above ``target``, or None."""
    return next((t for t, b in points if b >= target), None)


def name_of(path):
    return os.path.basename(os.path.dirname(os.path.abspath(path))) or path


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-ref", required=True, help="train.log of the reference run (the softmax model)")
    p.add_argument("-runs", nargs="+", required=True, help="train.log of the runs to compare")
    p.add_argument("-margin", type=float, default=1.0, help="target = the reference's best BLEU minus this")
    p.add_argument("-plot", help="write the curves as a PNG here")
    p.add_argument("-title", default="validation BLEU against wall-clock time")
    args = p.parse_args(argv)
    ref = curve(args.ref)
    target = max(b for _, b in ref) - args.margin
    ref_t = time_to(ref, target)
    print(f"target: {name_of(args.ref)}'s best validation BLEU {target + args.margin:.2f} - {args.margin:g} = "
          f"{target:.2f}")
    print("| run | best val. BLEU | s to target | x reference |")
    print("| --- | ---: | ---: | ---: |")
    curves = [(name_of(args.ref), ref)] + [(name_of(r), curve(r)) for r in args.runs]
    for name, pts in curves:
        t = time_to(pts, target)
        ratio = f"{t / ref_t:.2f}" if t is not None and ref_t else "–"
        print(f"| {name} | {max(b for _, b in pts):.2f} | {t if t is not None else 'not reached'} | {ratio} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for name, pts in curves:
            ax.plot([t for t, _ in pts], [b for _, b in pts], marker="o", markersize=3, label=name)
        ax.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"target {target:.2f}")
        ax.set_xlabel("wall-clock seconds (validation included)")
        ax.set_ylabel("greedy validation BLEU (tokenized)")
        ax.set_title(args.title)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
