"""The contrastive losses' candidate products ê · e(j), and the custom autograd function that takes the
per-token ones on the CPU without gathering the table's rows."""

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from onmt_cont.utils.amp import outside_autocast


def table_rows(table: Tensor, ids: Tensor) -> Tensor:
    """``table[ids]``: [*ids.shape, m], by index_select. On the CPU PyTorch's advanced indexing gathers rows
    element by element, 6x slower for the loss's [tokens x 300] gathers (7,000 rows of an 18,000-word table:
    11.5 against 1.9 ms on one thread); the gradient is the same."""
    return table.index_select(0, ids.reshape(-1)).view(*ids.shape, table.size(-1))


def candidate_dots(vec: Tensor, table: Tensor, shared: Tensor | None, per_token: Tensor | None) -> Tensor:
    """vec [N, m] · e(j) for every candidate: [N, S + C] (shared first, then per-token); the rows
    of invalid per-token ids (−1) are read at 0 and must be masked with
    :func:`~onmt_cont.losses.negatives.invalid`. Always in float32, under -amp too: the gold logit is
    float32, and in bf16 the negatives' would be off by about 0.2 at a logit scale of 67 (nllvmf_nce's
    logits grow with κ = ‖ê‖)."""
    parts = []
    with outside_autocast(vec.device.type):
        vec, table = vec.float(), table.float()
        if shared is not None:
            parts.append(vec @ table_rows(table, shared).t())
        if per_token is not None:
            parts.append(_TokenDots.apply(vec, table, per_token.clamp_min(0)))
    return torch.cat(parts, 1)


class _TokenDots(torch.autograd.Function):
    """vec [N, m], table [V, m], ids [N, C] -> vec[n] · table[ids[n, c]]: [N, C]; on the CPU without
    gathering the [N, C, m] rows.

    Gathering them (1,000 tokens x 32 x 300 floats: 38 MB) and multiplying row by row was most of
    this product's time on the CPU, and the backward gathered them again. On the CPU the products
    are one sampled dense-dense product (torch.sparse.sampled_addmm: only the N·C entries of
    vec · tableᵀ, reading each table row in place), and the prediction's gradient
    Σ_c grad[n, c] · table[ids[n, c]] is one weighted embedding bag (lab/bench/candidate_dots.py times
    it against gathering). Other devices gather the rows (in one chunk: a GPU's allocator caches
    its blocks). The CPU's products and
    gradient agree with gathering to float rounding, not bit for bit (another order of the sums).
    A trained table's (-train_table) gradient is one sparse [V, N] x dense [N, m] product instead
    of scattering N·C rows of m values one by one."""

    @staticmethod
    def forward(ctx, vec, table, ids):
        ctx.save_for_backward(vec, table, ids)
        if ids.numel() == 0:
            return vec.new_zeros(ids.shape)
        if ids.device.type != "cpu":
            return torch.einsum("nm,ncm->nc", vec, F.embedding(ids, table))
        pattern, distinct, order = _csr_pattern(ids, table.size(0), vec.dtype)
        values = torch.sparse.sampled_addmm(pattern, vec, table.t(), beta=0.0).values()
        return torch.empty_like(ids, dtype=vec.dtype).scatter_(1, order, values[distinct].view(ids.shape))

    @staticmethod
    def backward(ctx, grad):
        vec, table, ids = ctx.saved_tensors
        grad_vec = grad_table = None
        if ctx.needs_input_grad[0]:
            if ids.numel() == 0:
                grad_vec = torch.zeros_like(vec)
            elif ids.device.type != "cpu":  # other devices: the gathered rows
                grad_vec = torch.bmm(grad.unsqueeze(1), F.embedding(ids, table)).squeeze(1)
            else:
                grad_vec = F.embedding_bag(ids, table, per_sample_weights=grad.contiguous(), mode="sum")
        if ctx.needs_input_grad[1]:
            grad_table = table_gradient(vec, table, ids, grad)
        return grad_vec, grad_table, None


def table_gradient(vec: Tensor, table: Tensor, ids: Tensor, grad: Tensor) -> Tensor:
    """A trained table's gradient of the products vec[n] · table[ids[n, c]] given theirs, ``grad`` [N, C]:
    one sparse [V, N] x dense [N, m] product."""
    n, c = ids.shape
    tokens = torch.arange(n, device=ids.device).repeat_interleave(c)
    weights = torch.sparse_coo_tensor(
        torch.stack([ids.flatten(), tokens]), grad.flatten(), (table.size(0), n), check_invariants=False
    )
    return torch.sparse.mm(weights, vec)


def _csr_pattern(ids: Tensor, vocab: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor, Tensor]:
    """The entries of a valid sparse CSR [N, vocab] matrix for the candidates ``ids`` [N, C] (each
    row's columns sorted and distinct, as torch.sparse requires: a token's candidates can repeat a
    word), and how to read its values back: value ``distinct`` [N·C] of ``ids.sort(1)``'s order
    ``order`` [N, C]; ``dtype``: its values'. -> (pattern, distinct, order)."""
    n = ids.size(0)
    ordered, order, first = sorted_runs(ids)
    crow = torch.zeros(n + 1, dtype=ids.dtype, device=ids.device)
    crow[1:] = first.sum(1).cumsum(0)
    cols = ordered[first]
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the one op used on it is tested
        warnings.simplefilter("ignore", UserWarning)
        values = torch.zeros(cols.numel(), dtype=dtype, device=ids.device)
        pattern = torch.sparse_csr_tensor(crow, cols, values, (n, vocab), check_invariants=False)
    return pattern, first.flatten().cumsum(0) - 1, order


def sorted_runs(ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """ids [N, C] -> (each row sorted, the sort's order, [N, C] True where a sorted row starts a run
    of equal ids)."""
    ordered, order = ids.sort(1)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    return ordered, order, first
