"""Approximate nearest-neighbour search over a unit-length target table with faiss (``-ann faiss``).

The decode criterion of every continuous model is the largest inner product êᵀe(w) against
unit rows (vMF: log C_m(‖ê‖) is the same for every word; cosine: ê's norm is too; l2 on a unit
table: −‖ê‖² + 2êᵀe(w) − 1), so one inner-product index serves all of them. The index only
proposes candidates: :class:`~onmt_cont.models.generators.ContinuousGenerator` rescores them
exactly with its criterion.

Two index kinds (both ``METRIC_INNER_PRODUCT``):

- ``ivf``: ``IndexIVFFlat``, ``nlist`` k-means cells (default 4·√N; k-means on 64 rows per cell,
  10 iterations), ``nprobe`` cells searched;
- ``hnsw``: ``IndexHNSWFlat`` with ``M`` links per node and ``efSearch`` candidates.

Rows of different lengths (the generator's search rows carry the word bias, prior and offsets as
extra columns, so they are not unit) get the maximum-inner-product reduction of Bachrach et al.
(2014): one more column, sqrt(M² − ‖x‖²) with M the longest row's norm, makes every row M long, and
the queries get a 0 there. Inner products are unchanged, and on rows of one length the largest inner
product is the nearest row, which is what the IVF cells and HNSW graphs are built around: without
it, the cells of a biased table followed the row lengths and missed most neighbours.

Built once per table (the Translator builds it after any ``-tgt_emb_extend``), never saved.
"""

import math

import numpy as np
import torch

from onmt_cont.utils.errors import UserError

KINDS = ("ivf", "hnsw")
SAMPLE_PER_CELL = 64


def import_faiss(need="-ann faiss", otherwise="decode with exact search (leave out -ann)"):
    """The faiss module, or a UserError that says what ``need``s it, how to install it, and ``otherwise``."""
    try:
        import faiss
    except ImportError as exc:
        raise UserError(
            f"{need} needs the faiss-cpu package ({exc}): python3 -m pip install faiss-cpu, or {otherwise}"
        ) from None
    return faiss


class FaissIndex:
    """Inner-product index over rows 1.. of ``table`` [vocab, m] (row 0, padding, is no word).

    ``search(queries [n, m], k)`` -> LongTensor [n, k] of table row ids, best first, −1 where the
    index found fewer than k. ``need``: (what needs faiss, what to do instead) for the error where
    faiss is missing (default: ``-ann faiss``'s)."""

    def __init__(
        self, table, kind="ivf", nlist=None, nprobe=64, hnsw_m=16, ef_search=64, threads=None, seed=1234, need=None
    ):
        faiss = import_faiss(*need) if need else import_faiss()
        if kind not in KINDS:
            raise UserError(f"-ann_index must be one of {KINDS}, got {kind!r}")
        if threads:
            faiss.omp_set_num_threads(threads)
        rows = table[1:].detach().cpu().double()
        norms = rows.norm(dim=1)
        self.augmented = bool(len(rows)) and bool((norms.max() - norms.min()) > 1e-4 * max(float(norms.max()), 1.0))
        if self.augmented:  # the MIPS reduction: every row as long as the longest
            rows = torch.cat([rows, (norms.max() ** 2 - norms**2).clamp(min=0).sqrt().unsqueeze(1)], 1)
        rows = np.ascontiguousarray(rows.float().numpy())
        n, d = rows.shape
        if kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = ef_search
        else:
            # faiss's guideline: 4·√N to 16·√N cells; it wants ≥ 39 training points per cell.
            nlist = nlist or max(1, min(n // 39, round(4 * math.sqrt(n))))
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed, index.cp.niter = seed, 10
            # k-means on a sample of SAMPLE_PER_CELL points per cell: enough for the cells' centroids.
            m = SAMPLE_PER_CELL * nlist
            sample = rows if n <= m else rows[np.random.default_rng(seed).choice(n, m, replace=False)]
            index.train(sample)
            index.nprobe = min(nprobe, nlist)
        index.add(rows)
        self.index, self.kind, self.size = index, kind, n

    def search(self, queries, k):
        q = queries.detach().cpu().float()
        if self.augmented:
            q = torch.cat([q, q.new_zeros(len(q), 1)], 1)
        q = np.ascontiguousarray(q.numpy())
        _, ids = self.index.search(q, k)
        ids = torch.from_numpy(ids)
        return torch.where(ids >= 0, ids + 1, ids)
