"""Softmax-side losses: cross-entropy over the full vocabulary or a sampled part of it
(``-generator joint -joint_sample``), plus the ReWE regulariser (``-rewe_lambda``)."""

from argparse import Namespace
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from onmt_cont.losses.continuous import cosine, l2
from onmt_cont.losses.linear_ce import linear_cross_entropy
from onmt_cont.losses.spec import Loss, LossFn
from onmt_cont.opts import upgrade
from onmt_cont.outputs import HiddenLogits, ReWEOutput, SampledLogits

# ReWE's regression loss between the head's ê [N, m] and e(y) [N, m] -> [N]: the cosine embedding
# loss 1 − cos (the paper's best) or the squared error ‖ê − e(y)‖² summed over the dimensions.
REWE_LOSSES = {"cosine": cosine, "mse": l2}


class _SmoothedCrossEntropy(torch.autograd.Function):
    """F.cross_entropy(logits, target, reduction="none", label_smoothing=eps) in fewer passes over
    [N, V]: the target distribution is (1 − ε)·onehot(y) + ε/V, so the loss is
    −(1 − ε)·log p_y − ε/V·Σ_w log p_w, and its gradient g·(p − ε/V) − g·(1 − ε) at y.
    The backward pass is one exp and one fused multiply-add over [N, V] plus N entries at the
    targets; PyTorch's builds the smoothed target's gradient from fills and adds, then runs
    log_softmax's backward (lab/bench/label_smoothing.py times the two, forward and backward)."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, eps: float) -> Tensor:
        logp = torch.log_softmax(logits, dim=-1)
        at = target.unsqueeze(1)
        loss = logp.gather(1, at).squeeze(1).mul_(-(1.0 - eps))
        if eps:
            loss.sub_(logp.sum(1), alpha=eps / logp.size(1))
        ctx.save_for_backward(logp, at)
        ctx.eps = eps
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        logp, at = ctx.saved_tensors
        eps, g = ctx.eps, grad.unsqueeze(1)
        out = torch.exp(logp)
        if eps:  # g·p − g·ε/V, one pass written over p
            torch.addcmul(g * (-eps / logp.size(1)), out, g, out=out)
        else:
            out.mul_(g)
        # − g·(1 − ε) at the targets (one per row: a gather and a scatter, deterministic on CUDA too)
        out.scatter_(1, at, out.gather(1, at).sub_(g, alpha=1.0 - eps))
        return out, None, None


def cross_entropy(
    output: Tensor | HiddenLogits | SampledLogits, target: Tensor, label_smoothing: float = 0.0
) -> Tensor:
    """output: logits [N, vocab], :class:`HiddenLogits` (computed in chunks by linear_cross_entropy) or
    :class:`SampledLogits` (the softmax, and any label smoothing,
    then run over the candidates only); target: [N] word ids -> [N] per-token cross-entropy, the
    same as ``F.cross_entropy(..., reduction="none", label_smoothing=...)`` up to rounding."""
    if isinstance(output, HiddenLogits):
        return linear_cross_entropy(*output, target, label_smoothing)
    if isinstance(output, SampledLogits):
        target = torch.searchsorted(output.candidates, target)
        output = output.logits
    return _SmoothedCrossEntropy.apply(output.float(), target, float(label_smoothing))


def nll_plus_rewe(
    output: ReWEOutput,
    target: Tensor,
    target_vec: Tensor,
    rewe_lambda: float,
    rewe_loss: str = "cosine",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Jauregi Unanue et al. (2019), eq. 7, per token: NLL + λ·ReWE_loss(ê, e(y)).
    output: a ReWEOutput (logits [N, vocab], embedding [N, m]); target_vec: e(y) [N, m].

    λ = 0 leaves the head out of the graph: its gradient would be all zeros, but zero tensors
    among the gradients change how the clipping norm's floating-point sum rounds, and a λ = 0 run
    must train bit for bit like plain cross-entropy."""
    nll = cross_entropy(output.logits, target, label_smoothing)
    if rewe_lambda == 0:
        return nll
    return nll + rewe_lambda * REWE_LOSSES[rewe_loss](output.embedding.float(), target_vec)


def build_ce(opt: Namespace, table: Tensor | None = None) -> LossFn:
    smoothing = opt.label_smoothing
    rewe_lambda = upgrade(opt).rewe_lambda
    if rewe_lambda is None:
        return lambda output, target: cross_entropy(output, target, smoothing)
    if table is None:  # train.py's checks ask for -tgt_emb with -rewe_lambda
        raise ValueError("-rewe_lambda needs the target embeddings (-tgt_emb)")
    rewe_loss = opt.rewe_loss
    return lambda output, target: nll_plus_rewe(output, target, table[target], rewe_lambda, rewe_loss, smoothing)


SPECS = [Loss("ce", build_ce, "softmax cross-entropy", continuous=False, criterion="softmax", vocab_logits="logits")]
