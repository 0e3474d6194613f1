"""Softmax-side losses: cross-entropy over the full vocabulary or a sampled part of it
(``-generator joint -joint_sample``), plus the ReWE regulariser (``-rewe_lambda``)."""

import torch
import torch.nn.functional as F

from onmt_cont.losses.continuous import cosine, l2
from onmt_cont.outputs import SampledLogits

# ReWE's regression loss between the head's ê [N, m] and e(y) [N, m] -> [N]: the cosine embedding
# loss 1 − cos (the paper's best) or the squared error ‖ê − e(y)‖² summed over the dimensions.
REWE_LOSSES = {"cosine": cosine, "mse": l2}


def cross_entropy(output, target, label_smoothing=0.0):
    """output: logits [N, vocab], or :class:`SampledLogits` (the softmax, and any label smoothing,
    then run over the candidates only); target: [N] word ids -> [N] per-token cross-entropy."""
    if isinstance(output, SampledLogits):
        output, target = output.logits, torch.searchsorted(output.candidates, target)
    return F.cross_entropy(output.float(), target, reduction="none", label_smoothing=label_smoothing)


def nll_plus_rewe(output, target, target_vec, rewe_lambda, rewe_loss="cosine", label_smoothing=0.0):
    """Jauregi Unanue et al. (2019), eq. 7, per token: NLL + λ·ReWE_loss(ê, e(y)).
    output: a ReWEOutput (logits [N, vocab], embedding [N, m]); target_vec: e(y) [N, m].

    λ = 0 leaves the head out of the graph: its gradient would be all zeros, but zero tensors
    among the gradients change how the clipping norm's floating-point sum rounds, and a λ = 0 run
    must train bit for bit like plain cross-entropy."""
    nll = cross_entropy(output.logits, target, label_smoothing)
    if rewe_lambda == 0:
        return nll
    return nll + rewe_lambda * REWE_LOSSES[rewe_loss](output.embedding.float(), target_vec)


def build_ce(opt, table=None):
    smoothing = opt.label_smoothing
    rewe_lambda = getattr(opt, "rewe_lambda", None)
    if rewe_lambda is None:
        return lambda output, target: cross_entropy(output, target, smoothing)
    rewe_loss = opt.rewe_loss
    return lambda output, target: nll_plus_rewe(output, target, table[target], rewe_lambda, rewe_loss, smoothing)
