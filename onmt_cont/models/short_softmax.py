"""The attention's softmax over short rows on the CPU, for training's many short sentences.

PyTorch's CPU softmax vectorises along the last dimension; below one AVX-512 vector of float32 (16 values) it
runs scalar code, and at Multi30k's lengths (most sentences under 16 pieces) that code was a tenth of a
Transformer-Tiny update. Written out as four passes (row maxima, exp2, sums, division), with its backward as two,
the softmax over rows of 8 to 13 values runs 5-7× faster forward and 6× faster backward; from 16 values up
PyTorch's kernel is as fast or faster, so :data:`SHORT_ROWS` is the crossover (lab/bench/short_softmax.py).
"""

import math

import torch
from torch import Tensor

from onmt_cont.losses.linear_ce import LOG2E

__all__ = ["LOG2E", "SHORT_ROWS", "exp2_softmax"]

LN2 = math.log(2.0)

# rows shorter than this go through exp2_softmax (the crossover measured on an AVX-512 CPU)
SHORT_ROWS = 16


class _Exp2Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.to(torch.float32, copy=True)
        y.sub_(y.amax(-1, keepdim=True)).exp2_()
        y.div_(y.sum(-1, keepdim=True))
        ctx.save_for_backward(y)
        ctx.in_dtype = x.dtype
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        gy = grad.float() * y  # ∂x2 = ln 2 · y ⊙ (∂y − Σ ∂y ⊙ y)
        return gy.addcmul_(y, gy.sum(-1, keepdim=True), value=-1.0).mul_(LN2).to(ctx.in_dtype)


def exp2_softmax(x2: Tensor) -> Tensor:
    """softmax(x2 · ln 2) over the last dimension, in float32: the softmax of scores that the caller computed
    in base-2 units (``x2`` = scores · log2 e, the factor folded into a product it runs anyway), as
    2^(x2 − max) / Σ 2^(x2 − max). Its gradient is with respect to ``x2``, in ``x2``'s dtype."""
    return _Exp2Softmax.apply(x2)
