"""Training losses: one registry from the ``-loss`` name to a builder.

Each builder takes the options and the unit-length target table (``None`` for softmax
models without ReWE) and returns a function ``loss(output, target [N]) -> [N]`` of per-token
losses over the non-padding positions only (the trainer selects them); ``output`` is what the
generator's forward returned ([N, d], or a SampledLogits / ReWEOutput). The losses are pure
functions of their inputs, except that margin_random draws its negatives from the global RNG
(saved in checkpoints, so -train_from resumes exactly).
"""

from onmt_cont.losses import continuous, softmax

LOSSES = {
    "ce": softmax.build_ce,
    "l2": continuous.build_l2,
    "cosine": continuous.build_cosine,
    "maxmargin": continuous.build_maxmargin,
    "synmargin_proj": continuous.build_synmargin("proj"),
    "synmargin_diff": continuous.build_synmargin("diff"),
    "margin_random": continuous.build_margin_random,
    "nllvmf": continuous.build_nllvmf,
}

CONTINUOUS_LOSSES = frozenset(name for name in LOSSES if name != "ce")

# Which nearest-neighbour criterion a continuous model decodes with, per loss.
DECODE_CRITERION = {"nllvmf": "vmf", "l2": "l2"}


def build_loss(opt, table):
    return LOSSES[opt.loss](opt, table)


def decode_criterion(loss_name):
    return DECODE_CRITERION.get(loss_name, "cosine")
