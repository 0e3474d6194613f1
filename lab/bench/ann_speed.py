"""Approximate vs exact nearest-neighbour search over synthetic unit-length target tables: the
measurement behind ``lab/bench/decode_speed.py``'s approximate-search rows (run that script:
``python lab/bench/decode_speed.py -sizes none -ann_sweep 32 64 128``).

For each table size: recall@1 of the faiss index against exact search (the exact argmax of
êᵀe(w), what greedy decoding picks), the time per query of both, in batches of ``batch`` queries
(decoding searches once per step for a batch of sentences), the speed-up, and the index build
time.

The table: rows of the same cluster share a centre (cos ≈ 0.7 to it), like the groups of related
words in real embedding tables; a table of independent random directions has no neighbourhood
structure and no index can beat a scan on it. Queries: a table row plus noise, so that the
cosine to the row is ≈ 0.7 (about what a trained model's prediction has to the gold word).

``like=FILE`` (a .vec/.vec.gz; decode_speed.py's ``-ann_like``) replaces the clustered table by
draws from a Gaussian with the mean and covariance of that file's unit vectors, normalised: a
real table's overall shape without its neighbourhoods, the hard case for any index (a check on
how much the clustered numbers depend on the clusters).

``measure(n, ...)`` returns one result dict per setting.
"""

import math
import time

import torch

from onmt_cont.ann import FaissIndex


def synthetic_table(n, dim=300, words_per_cluster=50, spread=1.0, seed=0):
    """[n + 1, dim] unit rows (row 0 the zero padding row), in clusters of ``words_per_cluster``."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(max(1, n // words_per_cluster), dim, generator=gen)
    centres = torch.nn.functional.normalize(centres, dim=-1)
    rows = centres[torch.randint(len(centres), (n,), generator=gen)]
    rows += spread * torch.randn(n, dim, generator=gen) / math.sqrt(dim)
    table = torch.zeros(n + 1, dim)
    table[1:] = torch.nn.functional.normalize(rows, dim=-1)
    return table


def gaussian_table_like(path, n, seed=0):
    """[n + 1, dim] unit rows drawn from a Gaussian fitted to the unit vectors of the vector file
    at ``path`` (row 0 the zero padding row)."""
    from onmt_cont.translate.open_vocab import read_extension

    _, vectors = read_extension(path)
    unit = torch.nn.functional.normalize(vectors.double(), dim=-1)
    mean = unit.mean(0)
    cov = torch.cov(unit.t())
    chol = torch.linalg.cholesky(cov + 1e-8 * torch.eye(cov.size(0), dtype=cov.dtype))
    gen = torch.Generator().manual_seed(seed)
    rows = mean + torch.randn(n, len(mean), generator=gen, dtype=torch.float64) @ chol.t()
    table = torch.zeros(n + 1, len(mean))
    table[1:] = torch.nn.functional.normalize(rows, dim=-1).float()
    return table


def synthetic_queries(table, n_queries, noise=1.0, seed=1):
    gen = torch.Generator().manual_seed(seed)
    rows = table[1 + torch.randint(table.size(0) - 1, (n_queries,), generator=gen)]
    return rows + noise * torch.randn(rows.shape, generator=gen) / math.sqrt(table.size(1))


def exact_top1(table, queries, batch):
    """The decoder's exact search: ids [n] of the largest êᵀe(w), padding excluded."""
    out = []
    for q in queries.split(batch):
        dots = q @ table.t()
        dots[:, 0] = float("-inf")
        out.append(dots.argmax(-1))
    return torch.cat(out)


def _timed(fn, repeat=1):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(
    n,
    dim=300,
    n_queries=512,
    batch=32,
    kind="ivf",
    sweep=None,
    threads=1,
    seed=0,
    query_noise=1.0,
    like=None,
    **index_args,
):
    """Recall@1 and speed of a :class:`FaissIndex` against exact search on ``n`` synthetic words.

    ``sweep``: search-time settings to try on the one index (``efSearch`` for hnsw, ``nprobe``
    for ivf; default the index's own). Returns one dict per setting: {"words", "kind",
    "setting", "recall_at_1", "exact_ms_per_query", "ann_ms_per_query", "speedup", "build_s"}."""
    torch.set_num_threads(threads)
    table = synthetic_table(n, dim, seed=seed) if like is None else gaussian_table_like(like, n, seed=seed)
    queries = synthetic_queries(table, n_queries, query_noise, seed=seed + 1)
    exact_s, exact = _timed(lambda: exact_top1(table, queries, batch), repeat=2)
    build_s, index = _timed(lambda: FaissIndex(table, kind, threads=threads, **index_args))
    results = []
    for setting in sweep or [None]:
        if setting is not None:
            if kind == "hnsw":
                index.index.hnsw.efSearch = setting
            else:
                index.index.nprobe = setting
        ann_s, approx = _timed(lambda: torch.cat([index.search(q, 1)[:, 0] for q in queries.split(batch)]), 2)
        results.append(
            {
                "words": n,
                "kind": kind,
                "setting": (
                    f"efSearch={index.index.hnsw.efSearch}" if kind == "hnsw" else f"nprobe={index.index.nprobe}"
                ),
                "recall_at_1": (approx == exact).float().mean().item(),
                "exact_ms_per_query": 1000 * exact_s / n_queries,
                "ann_ms_per_query": 1000 * ann_s / n_queries,
                "speedup": exact_s / ann_s,
                "build_s": build_s,
            }
        )
    return results
