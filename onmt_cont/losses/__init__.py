"""Training losses: one registry from the ``-loss`` name to a builder.

Each builder takes the options and the unit-length target table (``None`` for softmax
models without ReWE) and returns a function ``loss(output, target [N]) -> [N]`` of per-token
losses over the non-padding positions only (the trainer selects them); ``output`` is what the
generator's forward returned ([N, d], or a SampledLogits / ReWEOutput). The losses are pure
functions of their inputs, except that margin_random and the ``random`` negatives of the
contrastive losses draw from the global RNG (saved in checkpoints, so -train_from resumes
exactly), and that the contrastive losses' ``gold_nn``/``ann`` negatives come from a faiss index
over the frozen table built once when the loss is built (onmt_cont.losses.negatives).
"""

from onmt_cont.losses import continuous, contrastive, softmax

LOSSES = {
    "ce": softmax.build_ce,
    "l2": continuous.build_l2,
    "cosine": continuous.build_cosine,
    "maxmargin": contrastive.build_maxmargin,
    "synmargin_proj": continuous.build_synmargin("proj"),
    "synmargin_diff": continuous.build_synmargin("diff"),
    "margin_random": continuous.build_margin_random,
    "nllvmf": continuous.build_nllvmf,
    "infonce": contrastive.build_infonce,
    "nllvmf_nce": contrastive.build_nllvmf_nce,
}

CONTINUOUS_LOSSES = frozenset(name for name in LOSSES if name != "ce")

# Which nearest-neighbour criterion a continuous model decodes with, per loss.
DECODE_CRITERION = {"nllvmf": "vmf", "nllvmf_nce": "vmf", "l2": "l2"}


def build_loss(opt, table, log_prior=None):
    """``log_prior``: log p_train(w) [V], for -sampling_correction (infonce, nllvmf_nce) only."""
    return LOSSES[opt.loss](opt, table) if log_prior is None else LOSSES[opt.loss](opt, table, log_prior)


def decode_criterion(loss_name):
    return DECODE_CRITERION.get(loss_name, "cosine")
