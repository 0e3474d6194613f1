"""Dropout with a cheaper CPU mask than PyTorch's.

On the CPU, ``nn.Dropout`` draws its mask with ``bernoulli_``: one generator call and a float
conversion per element, a visible share of a small model's update on one thread
(lab/bench/dropout_mask.py times both masks). Here one 64-bit draw of the same generator
(``torch.manual_seed`` seeds it, checkpoints save it) gives four 16-bit lanes, and a lane
keeps its element when it is at or above ``round(p * 65536)`` of 65536: the drop probability is ``p``
rounded to a multiple of 1/65536 (0.1 becomes 0.1000061), and kept elements are scaled by the
inverse of the keep probability actually used, so the expectation is exactly the input. A float32
mask is saved with that scale in it, so the backward pass is one multiplication. CUDA tensors keep
``F.dropout``: its fused kernel draws with Philox and is not the cost there. Masks differ from
``nn.Dropout``'s, so a run does not repeat, seed for seed, one trained with ``nn.Dropout``.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANES = 65536  # the values of one 16-bit lane


def _keep_mask(shape: torch.Size, p: float, dtype: torch.dtype) -> tuple[Tensor, float | None]:
    """-> (mask, scale): each element dropped independently with probability q = round(p * 65536) / 65536.
    For float32 and float64 the mask is 1 / (1 - q) where an element is kept and 0 where it is dropped, and
    scale is None; for other dtypes (bfloat16 and float16 under -amp) the mask is 0 / 1 and scale is
    1 / (1 - q), applied to the product, since that factor rounded to 8 or 11 bits would bias every kept
    element the same way (1.1111 is 1.1094 in bfloat16)."""
    dropped = min(round(p * LANES), LANES - 1)  # p within 2^-17 of 1: drop 65535 of 65536
    numel = math.prod(shape)
    words = torch.empty((numel + 3) // 4, dtype=torch.int64).random_(-(2**63), None)
    lanes = words.view(torch.int16)[:numel].view(shape)  # uniform over [-32768, 32767]
    mask = torch.empty(shape, dtype=dtype)
    torch.ge(lanes, dropped - LANES // 2, out=mask)  # written as 0 / 1 of dtype: cheaper than bool, then cast
    scale = LANES / (LANES - dropped)
    if dtype in (torch.float32, torch.float64):
        return mask.mul_(scale), None
    return mask, scale


class _MaskedScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, scale):
        ctx.save_for_backward(mask)
        ctx.scale = scale
        out = x * mask
        return out if scale is None else out.mul_(scale)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        grad = grad * mask
        return (grad if ctx.scale is None else grad.mul_(ctx.scale)), None, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """F.dropout(x, p, training) with the CPU mask above; CUDA (and any other device) is F.dropout's."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if round(p * LANES) == 0:  # p < 1/131072: nothing is ever dropped
        return x
    return _MaskedScale.apply(x, *_keep_mask(x.shape, p, x.dtype))


class Dropout(nn.Module):
    """nn.Dropout(p) with the CPU mask of :func:`dropout` (the same state_dict: none)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
