"""Training losses: one registry from the ``-loss`` name to a builder.

Each builder takes the options and the unit-length target table (``None`` for softmax
models) and returns a pure function ``loss(output [N, d], target [N]) -> [N]`` of per-token
losses over the non-padding positions only (the trainer selects them).
"""

from onmt_cont.losses import continuous, softmax

LOSSES = {
    "ce": softmax.build_ce,
    "l2": continuous.build_l2,
    "cosine": continuous.build_cosine,
    "maxmargin": continuous.build_maxmargin,
    "nllvmf": continuous.build_nllvmf,
}

CONTINUOUS_LOSSES = frozenset(name for name in LOSSES if name != "ce")

# Which nearest-neighbour criterion a continuous model decodes with, per loss.
DECODE_CRITERION = {"nllvmf": "vmf", "l2": "l2"}


def build_loss(opt, table):
    return LOSSES[opt.loss](opt, table)


def decode_criterion(loss_name):
    return DECODE_CRITERION.get(loss_name, "cosine")
