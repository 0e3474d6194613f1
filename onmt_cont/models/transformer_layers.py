"""The Transformer's layers (Vaswani et al., 2017), which :mod:`onmt_cont.models.transformer` stacks:
position vectors, multi-head attention with ``scaled_dot_product_attention`` and a key/value split for
the decoder's cache, the feed-forward block, and one encoder and one decoder layer, pre-norm or
post-norm."""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from onmt_cont.models.dropout import Dropout, dropout
from onmt_cont.models.short_softmax import LOG2E, SHORT_ROWS, exp2_softmax
from onmt_cont.utils.amp import autocast_dtype


class PositionalEncoding(nn.Module):
    """Position vectors added to the (scaled) word embeddings: the fixed sinusoids of Vaswani et
    al. (computed for the positions asked, so no length limit), or a learned table of
    ``max_positions`` rows (positions past it reuse the last row)."""

    def __init__(self, dim: int, kind: str = "sinusoidal", max_positions: int = 1024):
        super().__init__()
        if kind not in ("sinusoidal", "learned"):
            raise ValueError(f"-position_encoding must be sinusoidal or learned, got {kind}")
        self.dim, self.kind = dim, kind
        self.table = nn.Embedding(max_positions, dim) if kind == "learned" else None

    def forward(self, length: int, offset: int, device: torch.device | str) -> Tensor:
        """-> [length, dim]: the vectors of positions offset .. offset + length - 1."""
        pos = torch.arange(offset, offset + length, device=device)
        if self.table is not None:
            return self.table(pos.clamp(max=self.table.num_embeddings - 1))
        half = torch.arange(0, self.dim, 2, device=device, dtype=torch.float32)
        angle = pos.float().unsqueeze(1) * torch.exp(half * (-math.log(10000.0) / self.dim))
        pe = torch.zeros(length, self.dim, device=device)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : self.dim // 2])
        return pe


class MultiHeadAttention(nn.Module):
    """Multi-head attention split in two, so the decoder can cache: :meth:`keys_values` projects
    the attended sequence, :meth:`attend` runs queries against (cached) keys and values."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.query = nn.Linear(dim, dim)
        self.key_value = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout

    def _split(self, x: Tensor) -> Tensor:  # [batch, len, dim] -> [batch, heads, len, head_dim]
        return x.view(x.size(0), x.size(1), self.heads, self.head_dim).transpose(1, 2)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x: [batch, len, dim] -> keys, values: [batch, heads, len, head_dim]."""
        k, v = self.key_value(x).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def attend(
        self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: [batch, len_q, dim] queries; mask: bool, True where a query may attend, broadcast to
        [batch, heads, len_q, len_k]. Returns [batch, len_q, dim] and, with ``need_weights``, the
        attention probabilities averaged over heads [batch, len_q, len_k] (else None)."""
        q = self._split(self.query(x))
        if self.training and q.device.type == "cpu":
            ctx = self._attend_cpu_training(q, keys, values, mask)
        else:
            ctx = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
            )
        out = self.out(ctx.transpose(1, 2).reshape(x.size(0), x.size(1), -1))
        weights = None
        if need_weights:  # the alignment only; the context above is SDPA's
            scores = torch.matmul(q, keys.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores.float(), dim=-1).mean(1)
        return out, weights

    def _attend_cpu_training(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Training on the CPU: SDPA's math path written out, softmax(q·kᵀ / sqrt(head_dim) + mask) · v, with
        models/dropout.py's cheaper mask on the probabilities. Faster than SDPA's fused CPU kernel at
        training's short sentences and many of them: forward and backward 2.8× in float32 and 9.7× in
        bfloat16, whose fused backward is slow (lab/bench/tiny_step.py). The products run in q's dtype
        (bfloat16 under -amp), the softmax in float32. ``mask`` becomes an additive bias; a query that may
        attend nowhere gets a zero context, as SDPA gives it. Rows shorter than SHORT_ROWS keys take
        models/short_softmax.py's exp2 softmax, the scores in base 2 (log2 e folded into q's scale)."""
        short = keys.size(-2) < SHORT_ROWS
        scale = (LOG2E if short else 1.0) / math.sqrt(self.head_dim)
        scores = torch.matmul(q * scale, keys.transpose(-1, -2))
        if mask is not None:
            scores = scores + attention_bias(mask, scores.dtype)
        if short:
            probs = exp2_softmax(scores)
        else:  # the cast first: 2.5× faster than softmax(dtype=) at these sizes
            probs = torch.softmax(scores.float(), dim=-1)
        if mask is not None:
            nowhere = ~mask.any(-1, keepdim=True)
            if nowhere.any():
                probs = probs.masked_fill(nowhere, 0.0)
        return torch.matmul(dropout(probs.to(values.dtype), self.dropout), values)


def attention_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean attention mask (True: may attend) -> 0 where True, a large finite negative where False."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -0.5 * torch.finfo(dtype).max)


def compute_input(x: Tensor) -> Tensor:
    """``x`` in the dtype its products run in: under autocast the autocast dtype, cast once here for every
    Linear that reads it (autocast would cast it again for each), else ``x`` itself."""
    dtype = autocast_dtype(x.device.type)
    return x if dtype is None else x.to(dtype)


def residual(x: Tensor, y: Tensor, drop: Callable[[Tensor], Tensor]) -> Tensor:
    """x + drop(y) in x's dtype: y (bfloat16 under -amp) is cast first, so the dropout and the sum run in
    float32 without a mixed-dtype add (on the CPU 4× slower than the cast and the add together)."""
    return x + drop(y.to(x.dtype))


NORMS = ("pre", "post")


class FeedForward(nn.Module):
    """Linear-ReLU-dropout-Linear; ``dropout`` is the one between the two layers (-ff_dropout)."""

    def __init__(self, dim: int, ff: int, dropout: float):
        super().__init__()
        self.w1, self.w2 = nn.Linear(dim, ff), nn.Linear(ff, dim)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.dropout(torch.relu(self.w1(x))))


def _check_norm(norm: str) -> None:
    if norm not in NORMS:
        raise ValueError(f"-layer_norm must be pre or post, got {norm}")


class EncoderLayer(nn.Module):
    def __init__(
        self,
        dim: int,
        heads: int,
        ff: int,
        dropout: float,
        attn_dropout: float,
        norm: str = "pre",
        ff_dropout: float | None = None,
    ):
        super().__init__()
        _check_norm(norm)
        self.post = norm == "post"
        self.norm_attn, self.norm_ff = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, heads, attn_dropout)
        self.ff = FeedForward(dim, ff, dropout if ff_dropout is None else ff_dropout)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        if self.post:
            h = compute_input(x)
            k, v = self.attn.keys_values(h)
            x = self.norm_attn(residual(x, self.attn.attend(h, k, v, mask)[0], self.dropout))
            return self.norm_ff(residual(x, self.ff(compute_input(x)), self.dropout))
        h = compute_input(self.norm_attn(x))
        k, v = self.attn.keys_values(h)
        x = residual(x, self.attn.attend(h, k, v, mask)[0], self.dropout)
        return residual(x, self.ff(compute_input(self.norm_ff(x))), self.dropout)


class DecoderLayer(nn.Module):
    def __init__(
        self,
        dim: int,
        heads: int,
        ff: int,
        dropout: float,
        attn_dropout: float,
        norm: str = "pre",
        ff_dropout: float | None = None,
    ):
        super().__init__()
        _check_norm(norm)
        self.post = norm == "post"
        self.norm_self, self.norm_ctx, self.norm_ff = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = MultiHeadAttention(dim, heads, attn_dropout)
        self.ctx_attn = MultiHeadAttention(dim, heads, attn_dropout)
        self.ff = FeedForward(dim, ff, dropout if ff_dropout is None else ff_dropout)
        self.dropout = Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        past: tuple[Tensor, Tensor] | None,
        memory: tuple[Tensor, Tensor],
        causal: Tensor | None,
        src_mask: Tensor,
        need_weights: bool,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor | None]:
        """past: (keys, values) of the earlier positions or None; memory: the cross-attention's
        (keys, values). Returns x, this layer's (keys, values) through x's positions, and the
        cross-attention weights (or None)."""
        if self.post:
            h = compute_input(x)
            k, v = self.self_attn.keys_values(h)
            if past is not None:
                k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
            x = self.norm_self(residual(x, self.self_attn.attend(h, k, v, causal)[0], self.dropout))
            ctx, weights = self.ctx_attn.attend(compute_input(x), memory[0], memory[1], src_mask, need_weights)
            x = self.norm_ctx(residual(x, ctx, self.dropout))
            return self.norm_ff(residual(x, self.ff(compute_input(x)), self.dropout)), (k, v), weights
        h = compute_input(self.norm_self(x))
        k, v = self.self_attn.keys_values(h)
        if past is not None:
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
        x = residual(x, self.self_attn.attend(h, k, v, causal)[0], self.dropout)
        ctx, weights = self.ctx_attn.attend(
            compute_input(self.norm_ctx(x)), memory[0], memory[1], src_mask, need_weights
        )
        x = residual(x, ctx, self.dropout)
        return residual(x, self.ff(compute_input(self.norm_ff(x))), self.dropout), (k, v), weights
