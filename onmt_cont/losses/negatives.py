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

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from onmt_cont.constants import EOS_ID
from onmt_cont.losses.expected_counts import EXPECTED_COUNTS, ExpectedCounts

if TYPE_CHECKING:  # imported where an index is built: faiss is optional
    from onmt_cont.ann import FaissIndex

SOURCES = ("exact", "inbatch", "random", "gold_nn", "ann", "prefix")
PREFIX_WINDOW = 16  # -prefix_window's default: Multi30k's target sentences have 13 words on average
SHARED = ("exact", "inbatch", "random")


def parse_sources(text: str) -> tuple[str, ...]:
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


def search_chunk_rows(vocab: int, budget: int | None = None) -> int:
    """Rows per chunk of an exact search against ``vocab`` table rows: [rows, vocab] float32
    products with 3x headroom fit in ``budget`` bytes (default EXACT_SEARCH_BYTES); at least 1."""
    budget = EXACT_SEARCH_BYTES if budget is None else budget
    return max(1, budget // (3 * 4 * max(vocab, 1)))


def _faiss_index(table: Tensor, threads: int | None, need: tuple[str, str]) -> "FaissIndex":
    from onmt_cont.ann import FaissIndex

    return FaissIndex(table, "ivf", threads=threads or torch.get_num_threads(), need=need)


def _exact_search(table: Tensor, queries: Tensor, k: int) -> Tensor:
    """The k rows 1.. of ``table`` with the largest inner products with ``queries`` [n, m]: [n, k]."""
    dots = queries @ table[1:].t()
    return dots.topk(min(k, dots.size(1)), dim=1).indices + 1


def table_neighbours(table: Tensor, k: int, threads: int | None = None, exact_up_to: int | None = None) -> Tensor:
    """The k+1 nearest rows (inner product, the row itself included) of every row of ``table``
    [V, m]: LongTensor [V, k+1] on the table's device, −1 where fewer were found; row 0 (padding,
    never a target) is all −1. Exact up to ``exact_up_to`` rows (default EXACT_UP_TO) and on a GPU;
    else faiss, which only then must be installed."""
    vocab = table.size(0)
    exact_up_to = EXACT_UP_TO if exact_up_to is None else exact_up_to
    # On a GPU the exact products are fast (300K words: ~5e13 FLOPs, seconds) and beat faiss-cpu.
    need = (
        f"-negatives gold_nn over {vocab:,} target words on the CPU (exact search up to {exact_up_to:,})",
        "train on a GPU (-gpu), where the neighbours are found exactly",
    )
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

    def __init__(self, table: Tensor, threads: int | None = None, exact_up_to: int | None = None):
        self.table = table
        vocab = table.size(0)
        exact_up_to = EXACT_UP_TO if exact_up_to is None else exact_up_to
        need = (
            f"-negatives ann over {vocab:,} target words (exact search up to {exact_up_to:,})",
            "leave ann out of -negatives",
        )
        self.index = _faiss_index(table, threads, need) if vocab > exact_up_to else None

    def search(self, unit: Tensor, k: int) -> Tensor:
        if self.index is None:
            return _exact_search(self.table, unit, k)
        return self.index.search(unit, k).to(unit.device)


class Negatives(ExpectedCounts):
    """The candidate negatives of one batch from ``sources`` (see the module docstring).

    ``__call__(unit [N, m], target [N])`` -> (shared ids [S] or None, per-token ids [N, C] or None); their
    expected counts come from :class:`~onmt_cont.losses.expected_counts.ExpectedCounts`."""

    def __init__(
        self,
        sources: Iterable[str],
        table: Tensor,
        num_sampled: int = 64,
        ann_candidates: int = 32,
        threads: int | None = None,
        log_prior: Tensor | None = None,
        prefix_window: int = PREFIX_WINDOW,
        counts: str = "unigram",
    ):
        if counts not in EXPECTED_COUNTS:
            raise ValueError(f"expected counts {counts!r}: expected one of {', '.join(EXPECTED_COUNTS)}")
        sources = tuple(sources)
        self.sources, self.table, self.counts = sources, table, counts
        self.num_sampled, self.k, self.prefix_window = num_sampled, ann_candidates, prefix_window
        # p_train(w) [V]: how often in-batch draws give each word under counts="unigram"
        self.unigram = None if log_prior is None else log_prior.double().exp().to(table.device)
        self.neighbours = table_neighbours(table, ann_candidates, threads) if "gold_nn" in sources else None
        self.index = PredictionIndex(table, threads) if "ann" in sources else None

    def __call__(self, unit: Tensor, target: Tensor) -> tuple[Tensor | None, Tensor | None]:
        vocab = self.table.size(0)
        shared: list[Tensor] = []
        per_token: list[Tensor] = []
        for source in self.sources:
            if source == "exact":
                shared.append(torch.arange(1, vocab, device=target.device))
            elif source == "inbatch":
                shared.append(target)
            elif source == "random":
                shared.append(torch.randint(1, vocab, (self.num_sampled,), device=target.device))
            elif source == "gold_nn":
                assert self.neighbours is not None  # built when gold_nn is among the sources
                per_token.append(self.neighbours[target])
            elif source == "prefix":
                per_token.append(prefix_words(target, self.prefix_window))
            else:  # ann
                assert self.index is not None  # built when ann is among the sources
                with torch.no_grad():
                    per_token.append(self.index.search(unit.detach(), self.k))
        return (torch.cat(shared) if shared else None), (torch.cat(per_token, 1) if per_token else None)


def prefix_words(target: Tensor, k: int) -> Tensor:
    """target [N]: a batch's target sentences one after the other, each ending with </s> (as
    TrainingForward flattens them) -> [N, k]: the k words before each token in its own sentence,
    nearest first, −1 where the sentence has fewer."""
    eos = (target == EOS_ID).long()
    sentence = torch.cumsum(eos, 0) - eos  # the number of </s> before each token
    before = torch.arange(target.numel(), device=target.device).unsqueeze(1) - torch.arange(
        1, k + 1, device=target.device
    ).unsqueeze(0)  # [N, k]
    ok = before >= 0
    before = before.clamp_min(0)
    ok &= sentence[before] == sentence.unsqueeze(1)
    return torch.where(ok, target[before], torch.full_like(before, -1))


def invalid(target: Tensor, shared: Tensor | None, per_token: Tensor | None) -> Tensor:
    """[N, S + C] True where a candidate is no negative: the gold word, padding (0), or −1."""
    parts = []
    if shared is not None:
        parts.append((shared.unsqueeze(0) == target.unsqueeze(1)) | (shared.unsqueeze(0) <= 0))
    if per_token is not None:
        parts.append((per_token == target.unsqueeze(1)) | (per_token <= 0))
    return torch.cat(parts, 1)


def candidate_ids(index: Tensor, shared: Tensor | None, per_token: Tensor | None) -> Tensor:
    """Positions [N, K] in the candidate list of :func:`~onmt_cont.losses.token_dots.candidate_dots` -> word
    ids [N, K], without materialising the [N, S + C] id matrix (S is the whole vocabulary for ``exact``)."""
    if shared is None:
        assert per_token is not None  # a candidate list holds shared or per-token ids, or both
        return per_token.gather(1, index.clamp_min(0))
    s = shared.numel()
    from_shared = shared[index.clamp_max(s - 1)]
    if per_token is None:
        return from_shared
    from_token = per_token.gather(1, (index - s).clamp_min(0))
    return torch.where(index < s, from_shared, from_token)
