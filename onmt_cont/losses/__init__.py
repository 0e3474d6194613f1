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

from argparse import Namespace

from torch import Tensor

from onmt_cont.losses import continuous, contrastive, softmax
from onmt_cont.losses.spec import Loss, LossFn

# -loss NAME -> its Loss (onmt_cont.losses.spec): what it is and how it is built
LOSSES: dict[str, Loss] = {spec.name: spec for spec in softmax.SPECS + continuous.SPECS + contrastive.SPECS}

# the built-in continuous losses
CONTINUOUS_LOSSES = frozenset(name for name, spec in LOSSES.items() if spec.continuous)


def register_loss(spec: Loss) -> Loss:
    """Add a loss of another module to -loss (docs/extending.md): train.py's choices and help, its checks, the
    model builder and the decoder read it from LOSSES as they read the built-in ones. A taken name is refused."""
    if spec.name in LOSSES:
        raise ValueError(f"a loss is already registered as {spec.name!r}")
    LOSSES[spec.name] = spec
    return spec


def build_loss(opt: Namespace, table: Tensor | None, log_prior: Tensor | None = None) -> LossFn:
    """``log_prior``: log p_train(w) [V], for -sampling_correction (infonce, nllvmf_nce) only."""
    return LOSSES[opt.loss](opt, table, log_prior)


def decode_criterion(loss_name: str) -> str:
    """The nearest-neighbour criterion a continuous model of this loss decodes with."""
    return LOSSES[loss_name].criterion
