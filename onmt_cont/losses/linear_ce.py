"""The softmax's output layer and its label-smoothed cross-entropy as one operation, in row chunks.

``linear_cross_entropy(hidden, weight, bias, target, eps)`` is
``cross_entropy(hidden @ weight.T + bias, target, label_smoothing=eps)`` per token, without ever holding the
[tokens, vocab] logits: the rows go through in chunks of about CHUNK_ELEMENTS logits, small enough to stay in
the CPU's caches, and each chunk's gradient is computed in the forward pass, while its logits are at hand:

    logits z = h·Wᵀ + b, p = softmax(z), lse = log Σ exp z
    loss     = lse − (1 − ε)·z_y − ε/V·Σ_w z_w
    ∂loss/∂z = p − (1 − ε)·onehot(y) − ε/V

so ∂h = (∂z)·W, ∂W = (∂z)ᵀ·h and ∂b = Σ_rows ∂z. The ε/V term is a rank-one correction applied once, and
Σ_w z_w = h·(Σ_w W_w) + Σ_w b_w needs no pass over the logits. A training step's loss is the sum of the
per-token losses times one factor, so the backward pass only scales the gradients kept from the forward;
a gradient that differs from row to row (any other use) recomputes them chunk by chunk, weighted.

Under autocast (``dtype`` bfloat16) the products run in bfloat16 and the softmax in float32, as autocast
runs a Linear and then the float32 loss; the gradients are accumulated in float32. It replaces three
products over [tokens, vocab] and five passes of float32 over that matrix (log-softmax, its exp, the
backward's multiply-add) by the same three products on cache-sized pieces: lab/bench/tiny_step.py times it.
"""

import torch
from torch import Tensor

from onmt_cont.utils.amp import autocast_dtype, outside_autocast

# logits per chunk: 256 rows of a 10K-word vocabulary, 10 MB of float32 (measured on the Tiny preset's
# sizes: 128 and 512 rows are slower)
CHUNK_ELEMENTS = 256 * 10_000

LOG2E = 1.4426950408889634


def exp_shifted_(z: Tensor, top: Tensor) -> Tensor:
    """``z`` ← exp(z − top) in place, for float32 ``z`` whose rows' maxima are ``top``: as 2^((z − top)·log2 e),
    because PyTorch's float32 exp on the CPU takes twice as long as its exp2 (lab/bench/exp_kernels.py). Rounding
    the exponent costs a relative 2^-24·|z − top|: 6e-8 for the terms within 1 of the row's largest, which
    dominate its sum (at least 1), 2e-6 for one e^-30 of it."""
    z.sub_(top).mul_(LOG2E)
    return torch.exp2(z, out=z)


def chunk_rows(vocab: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(vocab, 1))


def _chunks(hidden, weight, bias, target, eps, dtype, row_grad=None, with_loss=True, with_grad=True):
    """The loop of both passes. -> (loss [N] float32 or None, ∂h [N, d], ∂W [V, d], ∂b [V] (float32, of the
    loss summed with weights ``row_grad`` [N] (None: 1 each)) or None each without ``with_grad``)."""
    n, vocab = hidden.size(0), weight.size(0)
    dev = hidden.device
    w = weight.to(dtype)
    h = hidden.to(dtype)
    wsum = weight.float().sum(0)  # Σ_w W_w: [d]
    bsum = bias.float().sum() if bias is not None else 0.0
    loss = torch.empty(n, device=dev) if with_loss else None
    if with_grad:
        grad_h = torch.empty(n, hidden.size(1), device=dev)
        grad_w = torch.zeros(vocab, hidden.size(1), device=dev)
        grad_b = torch.zeros(vocab, device=dev)
    rows = chunk_rows(vocab)
    z_buf = torch.empty(min(rows, n), vocab, device=dev)
    g_buf = torch.empty(min(rows, n), vocab, device=dev, dtype=dtype) if dtype != torch.float32 else None
    for i in range(0, n, rows):
        hr, y = h[i : i + rows], target[i : i + rows]
        r = hr.size(0)
        z = z_buf[:r]
        if dtype == torch.float32:
            torch.mm(hr, w.t(), out=z)
        else:  # the cast, then the bias: a mixed-dtype add(out=) takes 1.6x as long (exp_kernels.py)
            z.copy_(torch.mm(hr, w.t()))
        if bias is not None:
            z.add_(bias)
        at = torch.arange(r, device=dev)
        z_gold = z[at, y]
        top = z.amax(1, keepdim=True)
        exp_shifted_(z, top)
        total = z.sum(1, keepdim=True)
        if with_loss:
            z_sum = hidden[i : i + r].float() @ wsum + bsum
            loss[i : i + r] = total.log().squeeze(1) + top.squeeze(1) - (1.0 - eps) * z_gold - (eps / vocab) * z_sum
        if not with_grad:
            continue
        z.mul_(total.reciprocal_())  # p
        z[at, y] -= 1.0 - eps  # ∂z without its −ε/V
        if row_grad is not None:
            z.mul_(row_grad[i : i + r, None])
        g = z if g_buf is None else g_buf[:r].copy_(z)
        grad_h[i : i + r] = torch.mm(g, w)
        grad_w += torch.mm(g.t(), hr).float()  # cast, then add: a mixed-dtype += is 7x slower on the CPU
        grad_b += z.sum(0)
    if not with_grad:
        return loss, None, None, None
    # the −ε/V of every logit's gradient, as rank-one corrections
    weights = row_grad.float() if row_grad is not None else torch.ones(n, device=dev)
    grad_h.sub_(torch.outer(weights, wsum), alpha=eps / vocab)
    grad_w.sub_((weights @ hidden.float()).mul_(eps / vocab))  # the same row for every word
    grad_b.sub_(weights.sum() * (eps / vocab))
    return loss, grad_h, grad_w, grad_b


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, eps, dtype):
        want = any(ctx.needs_input_grad[:3])
        loss, gh, gw, gb = _chunks(hidden, weight, bias, target, eps, dtype, with_grad=want)
        ctx.eps, ctx.dtype, ctx.has_bias = eps, dtype, bias is not None
        if want:
            ctx.save_for_backward(hidden, weight, bias, target, gh, gw, gb)
        return loss

    @staticmethod
    def backward(ctx, grad):
        hidden, weight, bias, target, gh, gw, gb = ctx.saved_tensors
        g = grad.float()
        if g.numel() and bool(g.amin() == g.amax()):  # one factor for every token: scale what the forward kept
            c = g[0]
            gh, gw, gb = gh * c, gw * c, gb * c
        else:
            _, gh, gw, gb = _chunks(hidden, weight, bias, target, ctx.eps, ctx.dtype, g, with_loss=False)
        return (gh.to(hidden.dtype), gw.to(weight.dtype), gb.to(bias.dtype) if ctx.has_bias else None, None, None, None)


def linear_cross_entropy(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, eps: float = 0.0
) -> Tensor:
    """hidden [N, d], weight [V, d], bias [V] or None, target [N] -> [N] float32 per-token label-smoothed
    cross-entropy of the logits hidden·weightᵀ + bias. Products in the autocast dtype where autocast is on."""
    dev = hidden.device.type
    dtype = autocast_dtype(dev) or torch.float32
    with outside_autocast(dev):
        return _LinearCrossEntropy.apply(hidden, weight, bias, target, float(eps), dtype)
