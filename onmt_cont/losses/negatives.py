"""Negative words for the contrastive losses (``-negatives``), drawn from the frozen unit table.

A negative source gives, for a batch of N tokens, either word ids shared by all tokens
(``[S]``, scored with one matrix product) or ids per token (``[N, C]``, scored row by row):

- ``exact`` (shared): every word of the table; the cost of a step grows with the vocabulary;
- ``inbatch`` (shared): the N target words of the batch, repeats included (so frequent words
  appear more often: negatives drawn from the data's unigram distribution);
- ``random`` (shared): ``-num_sampled`` words drawn uniformly from 1..V−1 (global RNG, saved in
  checkpoints);
- ``gold_nn`` (per token): the ``-ann_candidates`` nearest table words of the gold word. The table
  is frozen, so they are found once, before training, with a faiss index over the table
  (onmt_cont.ann; exactly on a GPU or for tables of up to EXACT_UP_TO words), and each
  step only looks them up: flat in V;
- ``ann`` (per token): the ``-ann_candidates`` nearest table words of the prediction ê, searched in
  the same faiss index at every step (on the CPU). The index searches a fixed number of cells of
  about √V words each, so its cost grows like √V, and it moves ê to the CPU once per step;
- ``prefix`` (per token): the up to ``-prefix_window`` words before the token in its own target
  sentence (the gold word itself, where it repeats, is masked like any gold word): token-level
  unlikelihood on the previous context (Welleck et al. 2019) as negatives, against a decoder
  that repeats words it has already written. Read from the batch's targets alone, flat in V.

faiss-cpu is needed only where an index is built: ``gold_nn`` over more than EXACT_UP_TO words on
the CPU, ``ann`` over more than EXACT_UP_TO words; where it is missing, training stops before its
first step and says so.

Ids that are no negative (the gold word itself, padding, −1 where faiss found fewer) are
masked by :func:`invalid`. The table is frozen (a buffer of ContinuousGenerator, never a
parameter), which is what makes precomputing ``gold_nn`` and building one index correct.
"""

import warnings

import torch
import torch.nn.functional as F

from onmt_cont.constants import EOS_ID
from onmt_cont.utils.amp import outside_autocast

SOURCES = ("exact", "inbatch", "random", "gold_nn", "ann", "prefix")
PREFIX_WINDOW = 16  # -prefix_window's default: Multi30k's target sentences have 13 words on average
SHARED = ("exact", "inbatch", "random")


def parse_sources(text):
    """'inbatch,random,gold_nn' -> a tuple of source names; raises ValueError with what is wrong."""
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in SOURCES]
    if not names or bad:
        raise ValueError(f"expected a comma list of {', '.join(SOURCES)}, got {text!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"a source is named twice in {text!r}")
    if "exact" in names and len(names) > 1:
        raise ValueError(f"exact already holds every word: it takes no other source (got {text!r})")
    return names


# Up to this many rows the neighbours are found exactly with matrix products (16K words x 300
# dims: about 10 s on one core, once): faiss's k-means needs ≥ 39 points per cell and gains
# nothing on such tables. Larger tables use one faiss IVF index (4·√V cells).
EXACT_UP_TO = 16384
# The memory one chunk of an exact all-rows search may take: its [rows, V] float32 products, and as
# much again twice for topk's workspace. At 300K words a fixed 4,096-row chunk took 4.9 GB.
EXACT_SEARCH_BYTES = 1 << 30


def search_chunk_rows(vocab, budget=None):
    """Rows per chunk of an exact search against ``vocab`` table rows: [rows, vocab] float32
    products with 3x headroom fit in ``budget`` bytes (default EXACT_SEARCH_BYTES); at least 1."""
    budget = EXACT_SEARCH_BYTES if budget is None else budget
    return max(1, budget // (3 * 4 * max(vocab, 1)))


def _faiss_index(table, threads, need):
    from onmt_cont.ann import FaissIndex

    return FaissIndex(table, "ivf", threads=threads or torch.get_num_threads(), need=need)


def _exact_search(table, queries, k):
    """The k rows 1.. of ``table`` with the largest inner products with ``queries`` [n, m]: [n, k]."""
    dots = queries @ table[1:].t()
    return dots.topk(min(k, dots.size(1)), dim=1).indices + 1


def table_neighbours(table, k, threads=None, exact_up_to=None):
    """The k+1 nearest rows (inner product, the row itself included) of every row of ``table``
    [V, m]: LongTensor [V, k+1] on the table's device, −1 where fewer were found; row 0 (padding,
    never a target) is all −1. Exact up to ``exact_up_to`` rows (default EXACT_UP_TO) and on a GPU;
    else faiss, which only then must be installed."""
    vocab = table.size(0)
    exact_up_to = EXACT_UP_TO if exact_up_to is None else exact_up_to
    # On a GPU the exact products are fast (300K words: ~5e13 FLOPs, seconds) and beat faiss-cpu.
    need = (f"-negatives gold_nn over {vocab:,} target words on the CPU (exact search up to {exact_up_to:,})",
            "train on a GPU (-gpu), where the neighbours are found exactly")
    index = _faiss_index(table, threads, need) if vocab > exact_up_to and table.device.type == "cpu" else None
    ids = torch.full((vocab, k + 1), -1, dtype=torch.long, device=table.device)
    # bounds the [chunk, V] products (by memory, whatever V is) / faiss's result buffers
    chunk = search_chunk_rows(vocab) if index is None else 65536
    with torch.no_grad():
        for start in range(1, vocab, chunk):
            rows = table[start : start + chunk]
            found = _exact_search(table, rows, k + 1) if index is None else index.search(rows, k + 1)
            ids[start : start + chunk, : found.size(1)] = found.to(table.device)
    return ids


class PredictionIndex:
    """``search(unit [N, m], k)`` -> the k nearest table rows of each prediction [N, k] (−1: fewer):
    a faiss IVF index over the table, or exact products up to ``exact_up_to`` rows."""

    def __init__(self, table, threads=None, exact_up_to=None):
        self.table = table
        vocab = table.size(0)
        exact_up_to = EXACT_UP_TO if exact_up_to is None else exact_up_to
        need = (f"-negatives ann over {vocab:,} target words (exact search up to {exact_up_to:,})",
                "leave ann out of -negatives")
        self.index = _faiss_index(table, threads, need) if vocab > exact_up_to else None

    def search(self, unit, k):
        if self.index is None:
            return _exact_search(self.table, unit, k)
        return self.index.search(unit, k).to(unit.device)


class Negatives:
    """The candidate negatives of one batch from ``sources`` (see the module docstring).

    ``__call__(unit [N, m], target [N])`` -> (shared ids [S] or None, per-token ids [N, C] or None)."""

    def __init__(self, sources, table, num_sampled=64, ann_candidates=32, threads=None, log_prior=None,
                 prefix_window=PREFIX_WINDOW):
        self.sources, self.table = tuple(sources), table
        self.num_sampled, self.k, self.prefix_window = num_sampled, ann_candidates, prefix_window
        # p_train(w) [V]: how often in-batch draws give each word, for log_expected_counts
        self.unigram = None if log_prior is None else log_prior.double().exp().to(table.device)
        self.neighbours = table_neighbours(table, ann_candidates, threads) if "gold_nn" in sources else None
        self.index = PredictionIndex(table, threads) if "ann" in sources else None

    def __call__(self, unit, target):
        vocab = self.table.size(0)
        shared, per_token = [], []
        for source in self.sources:
            if source == "exact":
                shared.append(torch.arange(1, vocab, device=target.device))
            elif source == "inbatch":
                shared.append(target)
            elif source == "random":
                shared.append(torch.randint(1, vocab, (self.num_sampled,), device=target.device))
            elif source == "gold_nn":
                per_token.append(self.neighbours[target])
            elif source == "prefix":
                per_token.append(prefix_words(target, self.prefix_window))
            else:  # ann
                with torch.no_grad():
                    per_token.append(self.index.search(unit.detach(), self.k))
        return (torch.cat(shared) if shared else None), (torch.cat(per_token, 1) if per_token else None)


    def log_expected_counts(self, target, shared, per_token):
        """log E_i(j) [N, S + C]: for each candidate j of token i, the expected number of times the
        sources put j among token i's candidates (-sampling_correction). A contrastive logit minus
        log E is the correction of a sampled softmax for its proposal (Bengio & Senécal 2008; Yi et
        al. 2019): Σ over candidates of exp(logit_j) / E_i(j) is an unbiased estimate of the sum
        over every word (the balance heuristic over the mixture of sources). Per source:
        ``inbatch`` N · p_train(j) (the batch's targets are draws from the training unigram
        distribution, </s> included), ``random`` -num_sampled / (V − 1), ``exact`` 1, and the
        per-token ``gold_nn``/``ann`` lists 1 for each time j is in token i's list. Padding and −1
        ids get log 0 = −inf (they are masked)."""
        vocab, n = self.table.size(0), target.numel()
        base = torch.zeros(vocab, dtype=torch.float64, device=target.device)
        if "inbatch" in self.sources:
            if self.unigram is None:
                raise ValueError("in-batch negatives need the training unigram distribution (log_prior)")
            base += n * self.unigram
        if "random" in self.sources:
            base[1:] += self.num_sampled / (vocab - 1)
        if "exact" in self.sources:
            base[1:] += 1.0
        base[0] = 0.0
        parts = []
        if shared is not None:
            expected = base[shared].unsqueeze(0).repeat(n, 1)
            if per_token is not None:  # + 1 where a shared word is also in token i's own list
                expected.index_put_(_matches(per_token, shared), torch.ones((), dtype=expected.dtype), accumulate=True)
            parts.append(expected)
        if per_token is not None:
            own = torch.zeros(per_token.shape, dtype=base.dtype, device=base.device)
            for c in range(per_token.size(1)):  # j's occurrences in its own token's lists (C x [N, C] compares)
                own += per_token == per_token[:, c : c + 1]
            parts.append(base[per_token.clamp_min(0)] + own * (per_token > 0))
        return torch.log(torch.cat(parts, 1)).float()


def prefix_words(target, k):
    """target [N]: a batch's target sentences one after the other, each ending with </s> (as
    TrainingForward flattens them) -> [N, k]: the k words before each token in its own sentence,
    nearest first, −1 where the sentence has fewer."""
    eos = (target == EOS_ID).long()
    sentence = torch.cumsum(eos, 0) - eos  # the number of </s> before each token
    before = torch.arange(target.numel(), device=target.device).unsqueeze(1) - torch.arange(
        1, k + 1, device=target.device).unsqueeze(0)  # [N, k]
    ok = before >= 0
    before = before.clamp_min(0)
    ok &= sentence[before] == sentence.unsqueeze(1)
    return torch.where(ok, target[before], torch.full_like(before, -1))


def _matches(per_token, shared):
    """(rows, columns) of every pair (i, s) with shared[s] == per_token[i, c] for some c (once per such
    c): found by bisecting each list entry in the sorted shared ids, O(N·C·log S + matches) instead
    of comparing all N·S·C pairs."""
    order = shared.argsort()
    ordered = shared[order]
    ids = per_token.clamp_min(0)
    lo = torch.searchsorted(ordered, ids)
    count = (torch.searchsorted(ordered, ids, right=True) - lo) * (per_token > 0)
    count, lo = count.flatten(), lo.flatten()
    rows = torch.arange(per_token.size(0), device=shared.device).repeat_interleave(per_token.size(1))
    total = int(count.sum())
    # the k-th match of entry e sits at ordered position lo[e] + k
    entry = torch.arange(count.numel(), device=shared.device).repeat_interleave(count, output_size=total)
    first = torch.cumsum(count, 0) - count
    k = torch.arange(total, device=shared.device) - first[entry]
    return rows[entry], order[lo[entry] + k]


def candidate_dots(vec, table, shared, per_token):
    """vec [N, m] · e(j) for every candidate: [N, S + C] (shared first, then per-token); the rows
    of invalid per-token ids (−1) are read at 0 and must be masked with :func:`invalid`. Always in
    float32, under -amp too: the gold logit is float32, and in bf16 the negatives' would be off by
    about 0.2 at a logit scale of 67 (nllvmf_nce's logits grow with κ = ‖ê‖)."""
    parts = []
    with outside_autocast(vec.device.type):
        vec, table = vec.float(), table.float()
        if shared is not None:
            parts.append(vec @ table[shared].t())
        if per_token is not None:
            parts.append(_TokenDots.apply(vec, table, per_token.clamp_min(0)))
    return torch.cat(parts, 1)


class _TokenDots(torch.autograd.Function):
    """vec [N, m], table [V, m], ids [N, C] -> vec[n] · table[ids[n, c]]: [N, C], without gathering
    the [N, C, m] rows.

    Gathering them (1,000 tokens x 32 x 300 floats: 38 MB) and multiplying row by row was most of
    this product's time on the CPU, and the backward gathered them again. On the CPU the products
    are one sampled dense-dense product (torch.sparse.sampled_addmm: only the N·C entries of
    vec · tableᵀ, reading each table row in place), and the prediction's gradient
    Σ_c grad[n, c] · table[ids[n, c]] is one weighted embedding bag: 0.29x the time of the former
    chunked gather for a de->en batch, forward and backward, and 0.95x for a whole update of the
    recipe's de->en row (bench/candidate_dots.py, docs/results/token_dots/). Other devices gather
    the rows for the products. Both agree with gathering to float rounding, not bit for bit
    (another order of the sums). A trained table's (-train_table) gradient is one sparse [V, N] x
    dense [N, m] product instead of scattering N·C rows of m values one by one."""

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
            else:
                grad_vec = F.embedding_bag(ids, table, per_sample_weights=grad.contiguous(), mode="sum")
        if ctx.needs_input_grad[1]:
            n, c = ids.shape
            tokens = torch.arange(n, device=ids.device).repeat_interleave(c)
            weights = torch.sparse_coo_tensor(torch.stack([ids.flatten(), tokens]), grad.flatten(),
                                              (table.size(0), n), check_invariants=False)
            grad_table = torch.sparse.mm(weights, vec)
        return grad_vec, grad_table, None


def _csr_pattern(ids, vocab, dtype=torch.float32):
    """The entries of a valid sparse CSR [N, vocab] matrix for the candidates ``ids`` [N, C] (each
    row's columns sorted and distinct, as torch.sparse requires: a token's candidates can repeat a
    word), and how to read its values back: value ``distinct`` [N·C] of ``ids.sort(1)``'s order
    ``order`` [N, C]; ``dtype``: its values'. -> (pattern, distinct, order)."""
    n, c = ids.shape
    ordered, order = ids.sort(1)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    crow = torch.zeros(n + 1, dtype=ids.dtype, device=ids.device)
    crow[1:] = first.sum(1).cumsum(0)
    cols = ordered[first]
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the one op used on it is tested
        warnings.simplefilter("ignore", UserWarning)
        values = torch.zeros(cols.numel(), dtype=dtype, device=ids.device)
        pattern = torch.sparse_csr_tensor(crow, cols, values, (n, vocab), check_invariants=False)
    return pattern, first.flatten().cumsum(0) - 1, order


def invalid(target, shared, per_token):
    """[N, S + C] True where a candidate is no negative: the gold word, padding (0), or −1."""
    parts = []
    if shared is not None:
        parts.append((shared.unsqueeze(0) == target.unsqueeze(1)) | (shared.unsqueeze(0) <= 0))
    if per_token is not None:
        parts.append((per_token == target.unsqueeze(1)) | (per_token <= 0))
    return torch.cat(parts, 1)


def candidate_ids(index, shared, per_token):
    """Positions [N, K] in the candidate list of :func:`candidate_dots` -> word ids [N, K], without
    materialising the [N, S + C] id matrix (S is the whole vocabulary for ``exact``)."""
    s = 0 if shared is None else shared.numel()
    from_shared = shared[index.clamp_max(s - 1)] if shared is not None else None
    if per_token is None:
        return from_shared
    from_token = per_token.gather(1, (index - s).clamp_min(0))
    return from_token if shared is None else torch.where(index < s, from_shared, from_token)
