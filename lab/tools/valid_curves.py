"""Validation-loss curves of several training runs side by side, grouped (e.g. float32 against -amp, two seeds
each), and whether the groups differ by more than their seeds do.

    python lab/tools/valid_curves.py -group fp32 runs/q/fp32.s1/train.log runs/q/fp32.s2/train.log \\
                                     -group amp runs/q/amp.s1/train.log runs/q/amp.s2/train.log

For every validated step all runs share it prints each run's loss, each group's mean, the difference of the
means and the seeds' spread (the largest difference between two runs of one group, over both groups). The last
line counts the steps where the groups' means differ by more than that spread: 0 is "within seed noise".
"""

import argparse
import re
import sys

VALID = re.compile(r"validation at step (\d+): loss ([-\d.]+)")


def curve(path):
    """{step: validation loss} of a train.py log (a resumed run's later line for a step wins)."""
    with open(path, encoding="utf-8") as f:
        return {int(m.group(1)): float(m.group(2)) for m in VALID.finditer(f.read())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-group",
        nargs="+",
        action="append",
        required=True,
        metavar=("NAME", "LOG"),
        help="a name and the train.py logs of its runs (two groups)",
    )
    args = p.parse_args(argv)
    if len(args.group) != 2 or any(len(g) < 3 for g in args.group):
        sys.exit("valid_curves.py: give two -group NAME LOG LOG [...] (two runs or more each)")
    groups = [(g[0], [curve(x) for x in g[1:]]) for g in args.group]
    steps = sorted(set.intersection(*(set(c) for _, cs in groups for c in cs)))
    if not steps:
        sys.exit("valid_curves.py: the logs share no validated step")
    names = [f"{name} {i + 1}" for name, cs in groups for i in range(len(cs))]
    means = f" | {groups[0][0]} mean | {groups[1][0]} mean"
    print("| step | " + " | ".join(names) + means + " | difference | seeds' spread |")
    print("| ---: " * (len(names) + 5) + "|")
    outside = 0
    for s in steps:
        values = [[c[s] for c in cs] for _, cs in groups]
        means = [sum(v) / len(v) for v in values]
        spread = max(max(v) - min(v) for v in values)
        diff = means[1] - means[0]
        outside += abs(diff) > spread
        row = " | ".join(f"{x:.4f}" for v in values for x in v)
        print(f"| {s} | {row} | {means[0]:.4f} | {means[1]:.4f} | {diff:+.4f} | {spread:.4f} |")
    print(f"\n{len(steps)} validations; the means differ by more than the seeds' spread at {outside} of them")


if __name__ == "__main__":
    main()
