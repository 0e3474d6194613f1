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
# -expected_counts: the in-batch source's expected counts (Negatives.log_expected_counts)
EXPECTED_COUNTS = ("unigram", "batch", "sentence")


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
# much again twice for topk's workspace: at 300K words a fixed 4,096-row chunk would need about 5 GB.
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
                 prefix_window=PREFIX_WINDOW, counts="unigram"):
        if counts not in EXPECTED_COUNTS:
            raise ValueError(f"expected counts {counts!r}: expected one of {', '.join(EXPECTED_COUNTS)}")
        self.sources, self.table, self.counts = tuple(sources), table, counts
        self.num_sampled, self.k, self.prefix_window = num_sampled, ann_candidates, prefix_window
        # p_train(w) [V]: how often in-batch draws give each word under counts="unigram"
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
        """log E_i(j) [N, S + C]: for each candidate j of token i, how many times the sources put j among
        token i's candidates, in expectation given the batch (-sampling_correction). A contrastive logit
        minus log E is the correction of a sampled softmax for its proposal (Bengio & Senécal 2008; Yi et
        al. 2019, the balance heuristic over the mixture of sources).

        ``counts="unigram"`` (the default, the rule of the results' continuous rows): ``inbatch`` puts j
        among the candidates N · p_train(j) times, p_train the add-one smoothed training unigram, as if
        the batch's targets were independent draws from it; ``random`` -num_sampled / (V − 1); ``exact``
        1; the per-token ``gold_nn``/``ann`` lists 1 for each time j is in token i's list. The batch's
        targets are no independent draws (the token's own sentence is always in its batch, a batch of B
        sentences holds exactly B </s>, smoothing lifts the rare words), so this estimate of the
        normaliser is biased.
        ``counts="batch"``: ``inbatch`` puts j among token i's candidates exactly as often as j stands
        in the batch outside token i's own position, c(j) (that position holds the gold word, which is
        masked). With E_i(j) = c(j) + the other terms, the expected value over the random draws of
        Σ over the candidates of exp(logit_j) / E_i(j) is Σ_{j ≠ gold} exp(logit_j) exactly: the
        normaliser's estimate is unbiased on the batch as it is. The loss divides by that estimate, so
        the gradient is still not the full softmax's (lab/bench/correction_push.py measures the rules).
        ``counts="sentence"``: unbiased over how batches are formed, given the token: its own sentence is
        always in the batch and counted exactly, the batch's </s> exactly, the other sentences' words as
        draws from the training word frequencies (:meth:`_sentence_expected`).
        Padding and −1 ids get log 0 = −inf (they are masked)."""
        n = target.numel()
        base = self._base(target)
        if "inbatch" in self.sources and self.counts == "sentence":
            return self._sentence_expected(target, shared, per_token, base)
        log_base = torch.log(base)
        parts = []
        if shared is not None:  # the same for every token, but where a shared word is also in its own list
            parts.append(_shared_expected(log_base, base, shared, per_token, n))
        if per_token is not None:
            parts.append(torch.log(base[per_token.clamp_min(0)] + _own_counts(per_token) * (per_token > 0)).float())
        return torch.cat(parts, 1)


    def _base(self, target):
        """E(j) [V] float64 from the sources that treat every token alike: random, exact, and in-batch under the
        unigram and batch rules (the sentence rule's in-batch term is its own: :meth:`_sentence_expected`)."""
        vocab, n = self.table.size(0), target.numel()
        base = torch.zeros(vocab, dtype=torch.float64, device=target.device)
        if "random" in self.sources:
            base[1:] += self.num_sampled / (vocab - 1)
        if "exact" in self.sources:
            base[1:] += 1.0
        if "inbatch" in self.sources and self.counts != "sentence":
            if self.counts == "batch":
                base += torch.bincount(target, minlength=vocab).to(base.dtype)
            elif self.unigram is None:
                raise ValueError("in-batch negatives need the training unigram distribution (log_prior)")
            else:
                base += n * self.unigram
        base[0] = 0.0
        return base

    def log_expected_parts(self, target, words, per_token):
        """:meth:`log_expected_counts` in parts, for distinct shared ``words`` [U] under the unigram and batch rules:
        (log E of each shared word [U], the pairs (rows, cols, log E) whose token's own list holds that word too
        (or None), log E of the per-token candidates [N, C] (or None)); float32. None under the sentence rule."""
        if "inbatch" in self.sources and self.counts == "sentence":
            return None
        base = self._base(target)
        col = torch.log(base[words]).float()
        hits = own = None
        if per_token is not None:
            where, times = _hits(words, per_token, base.size(0))
            rows, cols = where // words.numel(), where % words.numel()
            hits = rows, cols, torch.log(base[words[cols]] + times).float()
            own = torch.log(base[per_token.clamp_min(0)] + _own_counts(per_token) * (per_token > 0)).float()
        return col, hits, own

    def _sentence_expected(self, target, shared, per_token, base):
        """log E_i(j) under counts="sentence": the batch is token i's own sentence plus other sentences
        drawn from the corpus. In-batch, j is among token i's candidates as often as it stands in the own
        sentence outside position i, s_i(j), plus, in the other sentences, exactly once per sentence for
        </s> (a batch holds one per sentence) and K_i · q(j) times for a word, K_i the other sentences'
        words (not </s>) and q(j) its frequency among the training words (``log_prior`` holds log q);
        ``base`` [V] holds the random term already; the per-token terms are counted as the other rules do."""
        if self.unigram is None:
            raise ValueError("-expected_counts sentence needs the training word frequencies (log_prior)")
        n = target.numel()
        own, length, own_eos = own_sentence_words(target)
        eos_total = int((target == EOS_ID).sum())
        other_eos = (eos_total - own_eos).double()  # [N]: </s> of the other sentences
        other_words = (n - length - other_eos).clamp_min(0)  # [N]: K_i
        freq = self.unigram.clone()
        freq[0] = 0.0
        freq[EOS_ID] = 0.0
        lists = own if per_token is None else torch.cat([per_token, own], 1)  # each entry adds 1 to its word

        parts = []
        if shared is not None:  # E [N, U] of the distinct shared words: a broadcast sum, then the hits
            words, inverse = torch.unique(shared, return_inverse=True)
            got = (other_words.unsqueeze(1) * freq[words] + base[words]).float()
            got += (words == EOS_ID).float() * other_eos.float().unsqueeze(1)
            where, times = _hits(words, lists, base.size(0))
            got.view(-1).index_add_(0, where, times.to(got.dtype))
            got = torch.log(got)
            same = words.numel() == shared.numel() and torch.equal(words, shared)
            parts.append(got if same else got[:, inverse])
        if per_token is not None:
            ids = per_token.clamp_min(0)
            got = other_words.unsqueeze(1) * freq[ids] + base[ids]
            got += (ids == EOS_ID) * other_eos.unsqueeze(1)
            got += _own_counts(lists)[:, : per_token.size(1)]  # in its own lists (itself included) and sentence
            parts.append(torch.log(torch.where(per_token > 0, got, torch.zeros_like(got))).float())
        return torch.cat(parts, 1)


def own_sentence_words(target):
    """target [N]: sentences one after the other, each ending with </s> (the last may lack it) ->
    (own [N, L]: the words of each token's own sentence, −1 at its own position and past the end; the
    sentence's length [N] and whether it ends with </s> [N], float64)."""
    n = target.numel()
    eos = (target == EOS_ID).long()
    sentence = torch.cumsum(eos, 0) - eos
    lengths = torch.bincount(sentence)
    starts = torch.cumsum(lengths, 0) - lengths
    longest = int(lengths.max()) if n else 0
    offset = torch.arange(longest, device=target.device).unsqueeze(0)
    pos = starts[sentence].unsqueeze(1) + offset
    ok = (offset < lengths[sentence].unsqueeze(1)) & (pos != torch.arange(n, device=target.device).unsqueeze(1))
    own = torch.where(ok, target[pos.clamp_max(max(n - 1, 0))], torch.full_like(pos, -1))
    ends = target[(starts + lengths - 1).clamp_min(0)] == EOS_ID
    return own, lengths[sentence].double(), ends[sentence].double()


def _hits(words, lists, vocab):
    """words [U] distinct, lists [N, C] (−1 padded) -> (where, times): the entries of an [N, U] matrix,
    flattened, whose row's list holds that column's word, and how many times. Each list entry is looked
    up in a [V] map of the words' columns: O(V + N·C)."""
    n = lists.size(0)
    column = torch.full((vocab,), -1, dtype=torch.long, device=words.device)
    column[words] = torch.arange(words.numel(), device=words.device)
    found = column[lists.clamp_min(0)]
    hit = (found >= 0) & (lists > 0)
    rows = torch.arange(n, device=found.device).unsqueeze(1).expand_as(found)[hit]
    return torch.unique(rows * words.numel() + found[hit], return_counts=True)


def _shared_expected(log_base, base, shared, per_token, n):
    """log E [N, S] of the shared candidates: log base(j), or log(base(j) + k) where token i's own
    list holds j k times; float32. Scored on the distinct shared words (the losses pass them
    distinct and sorted already): O(V + N·C + N·S) (:func:`_hits`); ``n``: the tokens."""
    words, inverse = torch.unique(shared, return_inverse=True)
    expected = log_base[words].float().expand(n, -1).clone()
    if per_token is not None:
        where, times = _hits(words, per_token, base.size(0))
        expected.view(-1)[where] = torch.log(base[words[where % words.numel()]] + times).float()
    if words.numel() == shared.numel() and torch.equal(words, shared):
        return expected
    return expected[:, inverse]


def _sorted_runs(ids):
    """ids [N, C] -> (each row sorted, the sort's order, [N, C] True where a sorted row starts a run
    of equal ids)."""
    ordered, order = ids.sort(1)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    return ordered, order, first


def _own_counts(per_token):
    """[N, C]: how many times each entry's id is in its own row (1 for an id found once)."""
    _, order, first = _sorted_runs(per_token)
    run = first.flatten().cumsum(0) - 1  # each sorted entry's run of equal ids
    times = torch.bincount(run)[run].view(per_token.shape)
    return torch.empty_like(times).scatter_(1, order, times)


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


def table_gradient(vec, table, ids, grad):
    """A trained table's gradient of the products vec[n] · table[ids[n, c]] given theirs, ``grad`` [N, C]:
    one sparse [V, N] x dense [N, m] product."""
    n, c = ids.shape
    tokens = torch.arange(n, device=ids.device).repeat_interleave(c)
    weights = torch.sparse_coo_tensor(torch.stack([ids.flatten(), tokens]), grad.flatten(), (table.size(0), n),
                                      check_invariants=False)
    return torch.sparse.mm(weights, vec)


def _csr_pattern(ids, vocab, dtype=torch.float32):
    """The entries of a valid sparse CSR [N, vocab] matrix for the candidates ``ids`` [N, C] (each
    row's columns sorted and distinct, as torch.sparse requires: a token's candidates can repeat a
    word), and how to read its values back: value ``distinct`` [N·C] of ``ids.sort(1)``'s order
    ``order`` [N, C]; ``dtype``: its values'. -> (pattern, distinct, order)."""
    n = ids.size(0)
    ordered, order, first = _sorted_runs(ids)
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
