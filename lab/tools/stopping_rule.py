#!/usr/bin/env python
"""Replay train.py's early stopping on the validation BLEU of finished runs' logs.

    python lab/tools/stopping_rule.py -patience 3 -windows 1 3 -runs runs/x/t_ce.s1/train.log \\
        runs/x/t_nce.s1/train.log,runs/x/t_nce.s1more/train.log

For each run (a train.log, or the logs of a run and its -train_from continuation joined by commas,
in order) and each window N: where `train.py -early_stopping P -early_stopping_window N` would
have stopped, on the same validation scores, and the best single score up to there (the score of
the PREFIX_best.pt it would have kept). Training is a function of the seed, so the scores up to
that point are the ones the run would have seen; a rule that stops later than the log ends says
so. It uses train.py's own rule (onmt_cont.models.checkpoint.track_validation).
"""

import argparse

from lab.tools.time_to_quality import curve, name_of
from onmt_cont.train.stopping import fresh_stopping, track_validation
from onmt_cont.utils.errors import UserError, cli_main


def replay(scores, patience, window):
    """-> (validations taken, best score, its 1-based position, stopped: bool) under the rule."""
    progress = fresh_stopping()
    best_at = 0
    for i, score in enumerate(scores, 1):
        if track_validation(progress, score, higher=True, window=window):
            best_at = i
        if patience > 0 and progress["bad_validations"] >= patience:
            return i, progress["best_score"], best_at, True
    return len(scores), progress["best_score"], best_at, False


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-runs", nargs="+", required=True, help="train.log of each run; a,b: a run and its continuation")
    p.add_argument("-patience", type=int, default=3, help="train.py -early_stopping")
    p.add_argument("-windows", type=int, nargs="+", default=[1, 3], help="train.py -early_stopping_window values")
    args = p.parse_args(argv)
    if args.patience < 1 or min(args.windows) < 1:
        raise UserError(f"-patience and -windows must be at least 1, got {args.patience} and {args.windows}")
    print(
        "| run | validations in the log | best in the log | "
        + " | ".join(f"window {w}: stops after, best (at)" for w in args.windows)
        + " |"
    )
    print("| --- | ---: | ---: |" + " --- |" * len(args.windows))
    for run in args.runs:
        paths = run.split(",")
        scores = [b for path in paths for _, b in curve(path)]
        cells = []
        for w in args.windows:
            taken, best, at, stopped = replay(scores, args.patience, w)
            where = f"{taken}" if stopped else f"runs past the log ({taken})"
            cells.append(f"{where}, {best:.2f} ({at})")
        top = max(scores)
        print(
            f"| {name_of(paths[0])} | {len(scores)} | {top:.2f} ({scores.index(top) + 1}) | " + " | ".join(cells) + " |"
        )


if __name__ == "__main__":
    main()
