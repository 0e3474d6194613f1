#!/usr/bin/env python
"""Validation BLEU against wall-clock seconds from train.py logs: time to quality.

    python lab/tools/time_to_quality.py -ref runs/x/t_ce.s1/train.log -runs runs/x/t_nce_both.s1/train.log \\
        -plot lab/results/word_choice_fr-en/time_to_quality.png

For every log: the greedy validation BLEU of each validation (-valid_metric bleu) against the
seconds since the log's first line (its [HH:MM:SS] stamps; validation time included, as it is
part of training). A run continued into the same log (-train_from, -resume auto) counts its
training time only: the pause before the lines a starting train.py writes is left out. The target is the reference
run's best validation BLEU minus -margin (1 by default); the table gives the seconds each run
needed to reach it and the ratio to the reference's. Only runs trained one after the other on a
quiet machine, or side by side with one thread each, compare. A timed pair can stop once both have
passed the target: -best_from takes the reference's best from the log of its full run (same flags
and seed), after checking that the timed reference repeats that run's validation curve.

With several -ref logs (e.g. every seed of ce against every seed of the continuous row, trained in
different windows, whose seconds do not compare), or with -epoch_cost, the table counts validations
instead: for each pair, the validations (epochs, with one per epoch) the reference and the run need
to reach that reference's best − margin. Their ratio times -epoch_cost (seconds per epoch of the run
over the reference's, measured side by side) estimates the time ratio; the last line gives its
median and range over the pairs:

    python lab/tools/time_to_quality.py -ref runs/x/t_ce.s{1,2,3}/train.log -runs runs/x/t_nce.s{1,2}/train.log \\
        -epoch_cost 0.65
"""

import argparse
import os
import re
import statistics

from lab import log_path
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs

STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] (.*)$")
VALID = re.compile(r"validation at step \d+: .*greedy BLEU ([\d.]+)")
# the lines a starting train.py writes before any training (-resume auto's and -train_from's notes first,
# then "resumed from step", the model line, TensorBoard's): the gap before them is a pause, not training
PROCESS_START = (
    "-resume auto:",
    "warning: -train_from",
    "resumed from step",
    "model: -encoder_type",
    "-tensorboard: event files",
)


def curve(path):
    """-> [(seconds since the first line, validation BLEU)] of one train.log (or train.log.gz: a .../train.log
    that is not there is read from its .gz, as lab/results keeps the logs)."""
    path = log_path(path)
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    points, elapsed, last = [], 0, None
    for _, line in read_lines(path):  # not UTF-8: an error naming the line, not a traceback
        m = STAMP.match(line)
        if not m:
            continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
        if last is not None:
            while t < last:  # past midnight
                t += 86400
            if not m.group(4).startswith(PROCESS_START):  # a restarted run's pause is no training
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


def validations_to(points, target):
    """The number of validations up to and including the first at or above ``target``, or None."""
    return next((i for i, (_, b) in enumerate(points, 1) if b >= target), None)


def pairwise(refs, runs, margin, epoch_cost):
    """Every reference against every run in validations to the reference's best − margin (see the
    module docstring); prints a table and the median and range of the ratios."""
    cost = "" if epoch_cost is None else f" | x reference, time (x {epoch_cost:g})"
    print(f"| reference | target | its validations | run | run's validations | x reference, validations{cost} |")
    print("| --- | ---: | ---: | --- | ---: | ---: |" + (" ---: |" if cost else ""))
    ratios, missed = [], 0
    run_curves = [(name_of(r), curve(r)) for r in runs]  # each log read once, not once per reference
    for ref_path in refs:
        ref = curve(ref_path)
        target = max(b for _, b in ref) - margin
        n_ref = validations_to(ref, target)
        for run_name, points in run_curves:
            n = validations_to(points, target)
            if n is None:
                missed += 1
                shown, timed = "not reached | –", " | –" if cost else ""
            else:
                ratios.append(n / n_ref)
                shown = f"{n} | {n / n_ref:.2f}"
                timed = f" | {n / n_ref * epoch_cost:.2f}" if cost else ""
            print(f"| {name_of(ref_path)} | {target:.2f} | {n_ref} | {run_name} | {shown}{timed} |")
    if ratios:
        ratios.sort()
        median = statistics.median(ratios)
        scale = 1.0 if epoch_cost is None else epoch_cost
        what = "validations" if epoch_cost is None else f"time (validations x {epoch_cost:g})"
        print(
            f"x reference, {what}, over {len(ratios)} pairs: median {median * scale:.2f}, range "
            f"{ratios[0] * scale:.2f}-{ratios[-1] * scale:.2f}" + (f"; {missed} pairs not reached" if missed else "")
        )
    elif missed:
        print(f"no run reached any reference's target ({missed} pairs)")


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-ref",
        required=True,
        nargs="+",
        help="train.log of the reference run (the softmax model); "
        "several: compare every pair in validations (see above)",
    )
    p.add_argument("-runs", nargs="+", required=True, help="train.log of the runs to compare")
    p.add_argument("-margin", type=float, default=1.0, help="target = the reference's best BLEU minus this")
    p.add_argument(
        "-epoch_cost",
        type=float,
        help="seconds per validation of the runs over the reference's, "
        "measured side by side: compare in validations (as with several -ref) and scale the ratios "
        "into time ratios",
    )
    p.add_argument(
        "-best_from",
        help="train.log of the reference's full run (same flags and seed; one -ref, no "
        "-epoch_cost): the target is its best minus -margin, so the timed reference can stop once it "
        "passes the target; its validations must repeat this log's",
    )
    p.add_argument("-plot", help="write the curves as a PNG here (one -ref, no -epoch_cost)")
    p.add_argument("-title", default="validation BLEU against wall-clock time")
    args = p.parse_args(argv)
    refuse_output_over_inputs(
        {"-plot": args.plot}, {"-ref": args.ref, "-runs": args.runs, "-best_from": args.best_from}
    )
    if args.epoch_cost is not None and not (args.epoch_cost > 0 and args.epoch_cost < float("inf")):
        raise UserError(f"-epoch_cost must be a positive number, got {args.epoch_cost}")
    if len(args.ref) > 1 or args.epoch_cost is not None:
        if args.plot:
            raise UserError(
                "-plot draws one reference's curves in seconds: give one -ref and no -epoch_cost, or leave -plot out"
            )
        if args.best_from:
            raise UserError("-best_from sets one timed reference's target: give one -ref and no -epoch_cost")
        return pairwise(args.ref, args.runs, args.margin, args.epoch_cost)
    args.ref = args.ref[0]
    ref = curve(args.ref)
    best_of, best = args.ref, max(b for _, b in ref)
    if args.best_from:
        full = curve(args.best_from)
        for i, ((_, b), (_, f)) in enumerate(zip(ref, full, strict=False), 1):  # the full run may be longer
            if abs(b - f) > 0.005:
                raise UserError(
                    f"{args.ref}: validation {i} gives BLEU {b:.2f}, {args.best_from} {f:.2f}: the "
                    "timed reference does not repeat that run (same flags and seed?)"
                )
        if len(ref) > len(full):
            raise UserError(
                f"{args.ref} has {len(ref)} validations, {args.best_from} only {len(full)}: "
                "-best_from must be the longer, full run"
            )
        best_of, best = args.best_from, max(b for _, b in full)
    target = best - args.margin
    ref_t = time_to(ref, target)
    print(
        f"target: {name_of(best_of)}'s best validation BLEU {best:.2f} - {args.margin:g} = {target:.2f}"
        + (f" (its full run: {args.best_from})" if args.best_from else "")
    )
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
