"""fast_align's model of word alignment, in numpy, and the alignment of a corpus in both directions.

The model is the reparameterised IBM Model 2 of Dyer, Chahuneau & Smith (2013). For one
direction, each word ``f_i`` of the generated side (length ``m``, ``i = 1..m``) picks a
position ``a_i`` on the conditioning side (length ``n``, ``j = 1..n``, ``0`` is NULL)::

    p(a_i = 0)            = p0
    p(a_i = j | i, m, n)  = (1 - p0) * exp(-λ |i/m - j/n|) / Z_λ(i, m, n)      (j >= 1)
    p(f_i | a_i = j)      = t(f_i | e_j)                                       (e_0 = NULL)

``t`` is trained by EM (or, with ``vb_alpha``, by variational Bayes with a symmetric
Dirichlet prior, as fast_align's ``-v``). Only pairs that co-occur in some sentence pair
get an entry, so memory is O(co-occurrences), not |F| x |E|. λ stays fixed unless
``optimize_tension`` is set; then after each M-step it is set to the value that maximises
the expected log prior of the alignments (one-dimensional and concave, so a safeguarded
Newton search finds it). fast_align takes a few gradient steps towards the same optimum.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma

from onmt_cont.align import Alignment
from onmt_cont.align.symmetrise import SYMMETRISERS
from onmt_cont.utils.progress import progress

# Cells per padded batch: big enough that numpy, not Python, dominates; small enough
# that the handful of [B, M, N] float64 temporaries stay a few MB.
MAX_CELLS = 1 << 18


@dataclass
class AlignConfig:
    """Options of the diagonal IBM Model 2 (defaults are fast_align's)."""

    iterations: int = 5
    p0: float = 0.08  # probability of aligning to NULL
    tension: float = 4.0  # λ, the pull towards the diagonal
    optimize_tension: bool = False
    vb_alpha: float | None = None  # None: plain EM; else Dirichlet concentration for VB


def encode(sents: list[list[str]]) -> list[np.ndarray]:
    """Map tokens to ids ``1..V`` (0 is kept for NULL/padding). Returns one int64 array per sentence."""
    vocab: dict[str, int] = {}
    return [np.array([vocab.setdefault(w, len(vocab) + 1) for w in s], dtype=np.int64) for s in sents]


class _Batch:
    """Sentence pairs of similar length, padded to ``[B, M]`` (generated side) and ``[B, N]``.

    ``pair[b, i, j]`` indexes the t-table entry of ``(f_i, e_j)``, ``null[b, i]`` that of
    ``(f_i, NULL)``; padding points at a sentinel entry whose probability is 0.
    """

    def __init__(self, index: np.ndarray, gen: list[np.ndarray], cond: list[np.ndarray]):
        self.index = index  # [B] sentence numbers in the corpus
        self.m = np.array([len(gen[k]) for k in index], dtype=np.int64)  # [B]
        self.n = np.array([len(cond[k]) for k in index], dtype=np.int64)  # [B]
        big_m, big_n = max(int(self.m.max()), 1), max(int(self.n.max()), 1)
        self.f = np.zeros((len(index), big_m), dtype=np.int64)  # [B, M]
        self.e = np.zeros((len(index), big_n), dtype=np.int64)  # [B, N]
        for row, k in enumerate(index):
            self.f[row, : self.m[row]] = gen[k]
            self.e[row, : self.n[row]] = cond[k]
        self.fmask = np.arange(big_m)[None, :] < self.m[:, None]  # [B, M]
        # Per-cell indices, filled by the model; int32 because they are the bulk of the memory.
        self.pair = np.empty(self.f.shape + (big_n,), dtype=np.int32)  # [B, M, N]
        self.null = np.empty(self.f.shape, dtype=np.int32)  # [B, M]
        self.triple = np.empty(self.f.shape, dtype=np.int32)  # [B, M] (m, n, i) index, for λ

    def geometry(self) -> tuple[np.ndarray, np.ndarray]:
        """Cell mask and diagonal feature h = -|i/m - j/n| (1-based, as in the paper; 0 on padding).

        Both ``[B, M, N]``; recomputed on demand because that is cheaper than holding them in memory.
        """
        i = np.arange(1, self.f.shape[1] + 1)[None, :, None]
        j = np.arange(1, self.e.shape[1] + 1)[None, None, :]
        m, n = self.m[:, None, None], self.n[:, None, None]
        mask = (i <= m) & (j <= n)
        h = np.where(mask, -np.abs(i / np.maximum(m, 1) - j / np.maximum(n, 1)), 0.0)
        return mask, h


def _batches(gen: list[np.ndarray], cond: list[np.ndarray], max_cells: int) -> list[_Batch]:
    """Sort pairs by length so padding is small, then cut into batches of <= max_cells cells."""
    m = np.array([len(s) for s in gen])
    n = np.array([len(s) for s in cond])
    order = np.lexsort((n, m))
    out, start, widest_n = [], 0, 1
    for stop in range(1, len(order) + 1):
        if stop < len(order):
            # Sorted by m, so the newest row has the widest source; n needs a running max.
            next_n = max(widest_n, n[order[stop]])
            if (stop + 1 - start) * max(m[order[stop]], 1) * next_n <= max_cells:
                widest_n = next_n
                continue
        out.append(_Batch(order[start:stop], gen, cond))
        start, widest_n = stop, max(n[order[stop]], 1) if stop < len(order) else 1
    return out


def _index(codes: Iterable[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Hash integer codes to dense indices: (sorted unique codes ``[P]``, one int32 index array per input).

    Deduplicating each array first keeps the sorts small and the peak memory near one
    batch's worth, instead of sorting every cell of the corpus at once.
    """
    local = []
    for c in codes:
        u, inv = np.unique(c, return_inverse=True)
        local.append((u, inv.ravel().astype(np.int32)))
    uniq = np.unique(np.concatenate([np.zeros(0, np.int64)] + [u for u, _ in local]))
    return uniq, [np.searchsorted(uniq, u).astype(np.int32)[inv] for u, inv in local]


class DiagonalIBM2:
    """One direction of fast_align's model: t(f | e) for generated words f, conditioning words e."""

    def __init__(self, gen: list[np.ndarray], cond: list[np.ndarray], config: AlignConfig):
        self.config = config
        self.tension = config.tension
        self.n_sents = len(gen)
        self.batches = _batches(gen, cond, MAX_CELLS)
        stride = max((int(s.max()) for s in cond if len(s)), default=0) + 1  # e ids 1..V, NULL 0
        # Codes f * stride + e name the pairs; NULL pairs come last in each batch's array.
        codes = (
            np.concatenate([(b.f[:, :, None] * stride + b.e[:, None, :])[b.geometry()[0]], (b.f * stride)[b.fmask]])
            for b in self.batches
        )
        uniq, parts = _index(codes)
        self.n_pairs = len(uniq)
        self.pair_e = uniq % stride  # [P] conditioning word of each t-table entry
        for b, part in zip(self.batches, parts, strict=True):
            mask = b.geometry()[0]
            b.pair.fill(self.n_pairs)
            b.pair[mask] = part[: mask.sum()]
            b.null.fill(self.n_pairs)
            b.null[b.fmask] = part[mask.sum() :]
        del parts
        # Types of f seen with each e: the support the VB prior spreads α over.
        self.support = np.bincount(self.pair_e, minlength=stride).astype(np.float64)
        # fast_align starts from a uniform t; a constant makes the first E-step use the prior alone.
        n_f = max((int(s.max()) for s in gen if len(s)), default=0)
        self.t = np.full(self.n_pairs + 1, 1.0 / max(n_f, 1))
        self.t[-1] = 0.0  # sentinel for padding
        if config.optimize_tension:
            self._index_triples(max(max(map(len, gen), default=0), max(map(len, cond), default=0)) + 1)

    def _index_triples(self, width: int) -> None:
        """Index the distinct (m, n, i): the prior's normaliser depends on nothing else."""
        codes = [
            ((b.m[:, None] * width + b.n[:, None]) * width + np.arange(1, b.f.shape[1] + 1))[b.fmask]
            for b in self.batches
        ]
        uniq, parts = _index(codes)
        self.tri_m, self.tri_n, self.tri_i = uniq // width // width, uniq // width % width, uniq % width
        for b, part in zip(self.batches, parts, strict=True):
            b.triple.fill(len(uniq))
            b.triple[b.fmask] = part

    def _scores(self, b: _Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint p(a_i = j, f_i): NULL column ``[B, M]``, word columns ``[B, M, N]``; and h ``[B, M, N]``."""
        mask, h = b.geometry()
        w = np.exp(self.tension * h) * mask
        z = w.sum(-1, keepdims=True)
        prior = (1.0 - self.config.p0) * w / np.where(z > 0, z, 1.0)
        # An empty conditioning sentence leaves NULL as the only choice.
        p_null = np.where(b.n > 0, self.config.p0, 1.0)[:, None] * b.fmask
        return p_null * self.t[b.null], prior * self.t[b.pair], h

    def iterate(self, on_batch: Callable[[int], object] | None = None) -> float:
        """One EM (or VB) iteration over the corpus. Returns the mean log-likelihood per generated word.
        ``on_batch(pairs)`` is called after each batch (a progress bar's update)."""
        counts = np.zeros(self.n_pairs + 1)
        tri_weight = np.zeros(len(self.tri_m) + 1) if self.config.optimize_tension else None
        emp_feature, loglik, words = 0.0, 0.0, 0
        for b in self.batches:
            lik0, lik, h = self._scores(b)
            z = lik0 + lik.sum(-1)  # [B, M]
            z = np.where(b.fmask, np.maximum(z, 1e-300), 1.0)
            post0, post = lik0 / z, lik / z[:, :, None]
            counts += np.bincount(b.pair.ravel(), weights=post.ravel(), minlength=self.n_pairs + 1)
            counts += np.bincount(b.null.ravel(), weights=post0.ravel(), minlength=self.n_pairs + 1)
            loglik += float(np.log(z).sum())
            words += int(b.fmask.sum())
            if self.config.optimize_tension:
                emp_feature += float((post * h).sum())
                tri_weight += np.bincount(
                    b.triple.ravel(), weights=((1.0 - post0) * b.fmask).ravel(), minlength=len(tri_weight)
                )
            if on_batch:
                on_batch(len(b.index))
        self._m_step(counts[:-1])
        if self.config.optimize_tension:
            self.tension = self._fit_tension(emp_feature, tri_weight[:-1])
        return loglik / max(words, 1)

    def _m_step(self, counts: np.ndarray) -> None:
        """Renormalise expected counts ``[P]`` per conditioning word into t(f | e)."""
        total = np.bincount(self.pair_e, weights=counts, minlength=len(self.support))
        alpha = self.config.vb_alpha
        if alpha is None:
            t = counts / np.maximum(total[self.pair_e], 1e-300)
        else:
            # Mean-field VB: exp(E[log θ]) under the Dirichlet posterior (not normalised, on purpose).
            t = np.exp(digamma(counts + alpha) - digamma(total[self.pair_e] + alpha * self.support[self.pair_e]))
        self.t[:-1] = t

    def _fit_tension(self, emp_feature: float, weight: np.ndarray) -> float:
        """λ where E_posterior[h] = Σ_cells weight * E_prior(λ)[h]: the expected log prior's maximum.

        ``weight``: ``[K]`` posterior mass off NULL for each distinct (m, n, i). The objective
        is concave in λ, so its derivative ``g`` falls monotonically: Newton inside a bracket.
        """
        keep = weight > 0
        m, n, i, w = self.tri_m[keep], self.tri_n[keep], self.tri_i[keep], weight[keep]
        if len(w) == 0:
            return self.tension
        j = np.arange(1, int(n.max()) + 1)
        h = np.where(j[None, :] <= n[:, None], -np.abs(i[:, None] / m[:, None] - j[None, :] / n[:, None]), 0.0)
        valid = j[None, :] <= n[:, None]

        def grad(lam: float) -> tuple[float, float]:
            p = np.exp(lam * h) * valid
            p /= p.sum(1, keepdims=True)
            mean = (p * h).sum(1)
            var = (p * h * h).sum(1) - mean**2
            return emp_feature - float(w @ mean), -float(w @ var)

        lo, hi, lam = 0.0, 50.0, self.tension
        for _ in range(50):
            g, dg = grad(lam)
            lo, hi = (lam, hi) if g > 0 else (lo, lam)
            step = lam - g / dg if dg < 0 else (lo + hi) / 2
            lam = step if lo < step < hi else (lo + hi) / 2
            if hi - lo < 1e-6 or abs(g) < 1e-9 * w.sum():
                break
        return float(lam)

    def viterbi(self) -> list[Alignment]:
        """Most probable link for each generated word, as ``(gen_pos, cond_pos)`` pairs, NULL dropped."""
        out: list[Alignment] = [[] for _ in range(self.n_sents)]
        for b in self.batches:
            lik0, lik, _ = self._scores(b)
            best = np.argmax(np.concatenate([lik0[:, :, None], lik], axis=-1), axis=-1)  # [B, M], 0 = NULL
            for row, k in enumerate(b.index):
                pos = np.nonzero(best[row, : b.m[row]])[0]
                out[k] = list(zip(pos.tolist(), (best[row, pos] - 1).tolist(), strict=True))
        return out


def train_direction(
    gen: list[np.ndarray],
    cond: list[np.ndarray],
    config: AlignConfig,
    log: Callable[[str], None] | None = None,
    name: str = "",
) -> list[Alignment]:
    """Train one direction and return its Viterbi alignments as ``(gen_pos, cond_pos)`` pairs."""
    model = DiagonalIBM2(gen, cond, config)
    with progress(desc=f"{name} EM", total=config.iterations * len(gen), unit="pairs") as bar:
        for it in range(1, config.iterations + 1):
            start = time.perf_counter()
            ll = model.iterate(bar.update)
            if log:
                log(
                    f"{name} iteration {it}: {time.perf_counter() - start:.3f} s, "
                    f"log-likelihood/word {ll:.4f}, tension {model.tension:.3f}"
                )
    return model.viterbi()


def align_corpus(
    src: list[list[str]],
    tgt: list[list[str]],
    sym: str = "grow-diag-final-and",
    config: AlignConfig | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Alignment]:
    """Align tokenized sentence pairs; returns ``(source_pos, target_pos)`` links per pair."""
    config = config or AlignConfig()
    src_ids, tgt_ids = encode(src), encode(tgt)
    fwd = rev = [[] for _ in src]
    if sym != "reverse":
        fwd = train_direction(src_ids, tgt_ids, config, log, "forward")
    if sym != "forward":
        rev = [sorted((i, j) for j, i in links) for links in train_direction(tgt_ids, src_ids, config, log, "reverse")]
    combine = SYMMETRISERS[sym]
    return [combine(f, r) for f, r in zip(fwd, rev, strict=True)]
