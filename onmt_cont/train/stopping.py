"""Model selection and early stopping: the best validation score, its window mean and the count
of validations without improvement, kept in a run's progress (and so in its checkpoints)."""

import math


def is_better(score: float, best: float | None, higher: bool = False) -> bool:
    """Is ``score`` an improvement on ``best`` (None: nothing yet)? Lower is better unless ``higher``."""
    if best is None:
        return True
    return math.isfinite(score) and (score > best if higher else score < best)


def fresh_stopping() -> dict:
    """The counters :func:`track_validation` keeps in a run's progress, before any validation."""
    return {"best_score": None, "bad_validations": 0, "recent_scores": [], "best_window": None}


def track_validation(progress: dict, score: float, higher: bool, window: int = 1) -> bool:
    """Record one validation ``score`` in ``progress`` (a checkpoint's counters) and return whether
    it is a new best single score (train.py writes PREFIX_best.pt then). Early stopping counts, in
    progress["bad_validations"], validations in which neither the score nor the mean of the last
    ``window`` scores (fewer at the start) beat its best so far. A window of 1 is the plain rule;
    a longer one only adds reasons to go on (a plateau whose mean still rises), so it never stops
    a run sooner. (Counting the mean alone would: one deep dip lowers ``window`` means in a row.)
    train.py and lab/tools/stopping_rule.py (which replays logs) share this rule."""
    new_best = is_better(score, progress["best_score"], higher=higher)
    if new_best:
        progress["best_score"] = score
    progress["recent_scores"] = [*progress["recent_scores"], score][-window:]
    mean = sum(progress["recent_scores"]) / len(progress["recent_scores"])
    new_mean = is_better(mean, progress["best_window"], higher=higher)
    if new_mean:
        progress["best_window"] = mean
    progress["bad_validations"] = 0 if new_best or new_mean else progress["bad_validations"] + 1
    return new_best
