"""The shared candidates' part of a contrastive softmax in row chunks: log Σ_j exp(logit_ij) over the S words every
token shares (in-batch and random negatives), without the [N, S] logits passing through memory a dozen times.

For token i and shared word j the logit is

    logit_ij = ê_i · e_j + col_j + Δ_ij        (−inf where the pair is dead: j is i's gold word, or padding)

``col`` [S] holds what depends on the word alone (its bias, the log of its copies among the candidates, minus
the log of its expected count), Δ the few pairs whose expected count differs from the column's (j also in i's
own per-token list), given as sparse entries. In float32 the chunk's logits are one float32 product. Under
autocast the product runs in its dtype (bfloat16: 4× faster), which rounds its output to 2^-9 of the output's
magnitude: at nllvmf_nce's scale (‖ê‖ ≈ 60) up to 0.1 for the logits near the row's top. So the product gives
ê_i · e_j − c_i instead, by an extra column, where ``shift`` c_i is the caller's reference near the top (the
gold word's logit ê_i · e_y, near it once the model has learnt anything); c_i cancels in the softmax and is
added back to lse_i. On a real table at cosine 0.8 to the gold, the error on lse falls from 0.014 to 0.007 on
average and on the gradient's u_i from 1.8% to 0.3% at most (lab/bench/shared_block_bf16.py).
The logits are reduced to lse_i, and turned into the gradient's two factors while they are at hand:
u_i = Σ_j p_ij e_j (the prediction's gradient is g_i · u_i) and p_ij kept for the column's gradient Σ_i g_i p_ij;
under autocast both in its dtype, as autocast's backward products run. lab/bench/tiny_step.py times it in the
continuous preset's update; the unfused composition (candidate_dots, masks, corrections, logsumexp) is what
tests/unit/losses/test_fast_cpu_training.py holds it to.
"""

import torch
from torch import Tensor

from onmt_cont.utils.amp import autocast_dtype, outside_autocast

# logits per chunk: 256 rows of 3,000 shared words
CHUNK_ELEMENTS = 256 * 3000


def _entries(rows, cols, values, n_cols):
    """Sparse entries sorted by row -> (flat index row·S + col, values, the row where each starts)."""
    flat = rows * n_cols + cols
    order = torch.argsort(flat)
    return flat[order], (values[order] if values is not None else None), rows[order]


class _SharedLogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, vec, words, col, add_at, add_values, dead_at, low, shift):
        n, s = vec.size(0), words.size(0)
        rows = max(1, CHUNK_ELEMENTS // max(s, 1))
        want_vec, want_col = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
        lse = torch.empty(n, device=vec.device)
        u = torch.empty_like(vec) if want_vec else None
        probs = torch.empty(n, s, dtype=low, device=vec.device) if want_col else None
        table_low = words.to(low)
        low_product = low != torch.float32 and shift is not None
        if low_product:  # [ê, −c] · [e, 1] = ê · e − c in the low dtype; c as rounded there, to add back exactly
            shift = shift.to(low)
            vec_aug = torch.cat([vec.to(low), -shift[:, None]], 1)
            words_aug = torch.cat([table_low, table_low.new_ones(s, 1)], 1)
            shift = shift.float()
        # in float32 the chunk is worked on where its probabilities are kept (a copy of each chunk saved)
        in_place = want_col and probs.dtype == torch.float32
        z_buf = None if in_place else torch.empty(min(rows, n), s, device=vec.device)
        for i in range(0, n, rows):
            r = min(rows, n - i)
            z = probs[i : i + r] if in_place else z_buf[:r]
            if low_product:
                z.copy_(torch.mm(vec_aug[i : i + r], words_aug.t()))
            else:
                torch.mm(vec[i : i + r], words.t(), out=z)
            z.add_(col)
            flat = z.view(-1)
            lo, hi = torch.searchsorted(add_at, torch.tensor([i * s, (i + r) * s], device=vec.device)).tolist()
            if hi > lo:
                flat.index_add_(0, add_at[lo:hi] - i * s, add_values[lo:hi])
            lo, hi = torch.searchsorted(dead_at, torch.tensor([i * s, (i + r) * s], device=vec.device)).tolist()
            if hi > lo:
                flat[dead_at[lo:hi] - i * s] = float("-inf")
            top = z.amax(1, keepdim=True)
            top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a row with no live word
            z.sub_(top).exp_()
            total = z.sum(1, keepdim=True)
            lse[i : i + r] = total.log().squeeze(1) + top.squeeze(1)
            if low_product:
                lse[i : i + r] += shift[i : i + r]
            if want_vec or want_col:
                z.mul_(total.clamp_min(torch.finfo(torch.float32).tiny).reciprocal_())  # p
                if want_col and not in_place:
                    probs[i : i + r].copy_(z)
                if want_vec:  # p in the low dtype: the rows just written, else cast here
                    u[i : i + r] = torch.mm(probs[i : i + r] if want_col else z.to(low), table_low).float()
        ctx.save_for_backward(u, probs)
        return lse

    @staticmethod
    def backward(ctx, grad):
        u, probs = ctx.saved_tensors
        grad_vec = grad_col = None
        if ctx.needs_input_grad[0]:
            grad_vec = u * grad.unsqueeze(1)
        if ctx.needs_input_grad[2]:
            rows = max(1, CHUNK_ELEMENTS // max(probs.size(1), 1))
            grad_col = torch.zeros(probs.size(1), device=probs.device)
            for i in range(0, probs.size(0), rows):  # in p's dtype: casting p to float32 took 20x the product
                grad_col += (grad[i : i + rows].to(probs.dtype) @ probs[i : i + rows]).float()
        return grad_vec, None, grad_col, None, None, None, None, None


def shared_logsumexp(
    vec: Tensor,
    words: Tensor,
    col: Tensor,
    add: tuple[Tensor, Tensor, Tensor] | None = None,
    dead: tuple[Tensor, Tensor] | None = None,
    shift: Tensor | None = None,
) -> Tensor:
    """vec [N, m] (ê, float32), words [S, m] (the shared candidates' table rows), col [S] (float32) ->
    [N] log Σ_j exp(vec_i · words_j + col_j + Δ_ij), float32. ``add``: (rows, cols, values) of Δ's nonzero
    entries; ``dead``: (rows, cols) of the pairs left out. −inf for a row with no live word. ``shift`` [N]: a
    reference near each row's top logit (no gradient), which lets the product run in the autocast dtype; without
    it the product runs in float32. Gradients flow to ``vec`` and ``col`` (``words`` is the frozen table's)."""
    s = words.size(0)
    empty = torch.empty(0, dtype=torch.long, device=vec.device)
    add_at, add_values = empty, torch.empty(0, device=vec.device)
    if add is not None and add[0].numel():
        add_at, add_values, _ = _entries(add[0], add[1], add[2].float(), s)
    dead_at = empty
    if dead is not None and dead[0].numel():
        dead_at, _, _ = _entries(dead[0], dead[1], None, s)
    dev = vec.device.type
    low = autocast_dtype(dev) or torch.float32
    with outside_autocast(dev):
        ref = shift.detach().float() if shift is not None else None
        return _SharedLogSumExp.apply(vec.float(), words.float(), col.float(), add_at, add_values, dead_at, low, ref)
