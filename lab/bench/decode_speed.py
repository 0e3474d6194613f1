"""Greedy decoding speed: sentences/s of a softmax model and of continuous models.

The models share the encoder and decoder (same sizes and, built from the same seed, the same
weights: build_model initialises the encoder and decoder before the generator); only the
output layer differs. Decoding is the toolkit's ``greedy_search``: for the softmax model
log_softmax over H×V logits, for a continuous model nearest-neighbour search of ê (H×m)
against the unit-length [V, m] table (-loss nllvmf scores with the vMF density, -loss cosine
with the cosine; both are one [m, V] product per step).

The weights are untrained, so </s> is made impossible (its softmax bias at -1e4, its table row
zero: cosine 0 and vMF êᵀe = 0 lose to the best of V random directions): every sentence then
decodes exactly ``-max_length`` words and all models do the same number of steps.

Then approximate search (``-ann faiss``): recall@1 of the faiss index against exact search and
its speed-up over exact search per query, on synthetic tables of ``-ann_sizes`` words, with the
index settings translate.py uses by default (or ``-ann_sweep``). lab/bench/ann_speed.py makes the
tables and queries and does the measurement. faiss runs on the CPU, so this part is a CPU measurement even with
``-gpu``.

    python lab/bench/decode_speed.py                # small and paper sizes, 50K and 300K words; ANN at 50K, 300K, 1M
    python lab/bench/decode_speed.py -sizes small -vocabs 50000 -sentences 64 -ann_sizes none
    python lab/bench/decode_speed.py -sizes none -ann_sizes 300000 -ann_sweep 16 32 64   # ANN only
    python lab/bench/decode_speed.py -sizes small,transformer -ann_sizes none   # LSTM against Transformer

The transformer size (benchlib.SIZES) decodes with its key/value cache: one new position per
step, attending to the cached keys and values of the earlier ones.
"""

import argparse
import os
import time

import torch

from lab.bench import (
    ann_speed,
    benchlib,
)
from lab.bench.benchlib import UserError
from onmt_cont.constants import EOS_ID
from onmt_cont.translate.search import greedy_search

ROWS = [("softmax (ce)", ["-loss", "ce"]), ("nllvmf", ["-loss", "nllvmf"]), ("cosine", ["-loss", "cosine"])]


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-sizes", default="small,paper", help="comma list of benchlib.SIZES (small, paper, transformer), or none"
    )
    p.add_argument("-vocabs", default="50000,300000", help="target vocabulary sizes")
    p.add_argument("-batch_size", type=int, default=32, help="sentences per batch (translate.py's default)")
    p.add_argument("-sentences", type=int, default=None, help="sentences per timing (default: 128 small, 64 paper)")
    p.add_argument("-max_length", type=int, default=benchlib.SRC_LEN, help="words decoded per sentence")
    p.add_argument("-reps", type=int, default=3, help="timings per model (median), after one warm-up batch")
    benchlib.add_setup_args(p)
    p.add_argument("-seed", type=int, default=1)
    p.add_argument(
        "-ann_sizes", default="50000,300000,1000000", help="table sizes for the approximate-search rows, or none"
    )
    p.add_argument("-ann_index", choices=["ivf", "hnsw"], default="ivf", help="as translate.py -ann_index")
    p.add_argument(
        "-ann_sweep",
        type=int,
        nargs="+",
        default=None,
        help="search settings to try (nprobe for ivf, efSearch for hnsw); default: translate.py's default",
    )
    p.add_argument("-ann_nlist", type=int, default=None, help="ivf cells (default translate.py's, 4·sqrt(words))")
    p.add_argument("-ann_hnsw_m", type=int, default=16, help="hnsw links per node")
    p.add_argument("-ann_queries", type=int, default=512, help="queries per table")
    p.add_argument(
        "-ann_query_noise",
        type=float,
        default=1.0,
        help="query = a table row + this much noise (relative to its length): 1.0 gives cos ≈ 0.7 to the row, "
        "what our Multi30k models' predictions have to the gold word; 0.5 gives cos ≈ 0.9",
    )
    p.add_argument(
        "-ann_like",
        default=None,
        help="a .vec/.vec.gz: draw the tables from a Gaussian with its unit vectors' mean and covariance "
        "(no clusters: the hard case) instead of the clustered synthetic table",
    )
    return p


def ann_rows(args, threads):
    """Recall@1 and speed-up of approximate search, one printed row per table size and setting."""
    print()
    print(
        f"approximate search (-ann faiss -ann_index {args.ann_index}), CPU, {threads} thread(s), "
        f"{args.ann_queries} queries in batches of {args.batch_size}, query noise {args.ann_query_noise}, "
        f"table: {'Gaussian like ' + args.ann_like if args.ann_like else 'clustered (50 words per cluster)'}"
    )
    head = (
        f"{'target words':>12s} {'setting':>13s} {'recall@1':>8s} {'exact ms/query':>14s} {'ann ms/query':>12s} "
        f"{'speed-up':>8s} {'build s':>7s}"
    )
    print(head)
    print("-" * len(head))
    found = {}
    for n in [int(v) for v in args.ann_sizes.split(",")]:
        for r in ann_speed.measure(
            n,
            n_queries=args.ann_queries,
            batch=args.batch_size,
            kind=args.ann_index,
            sweep=args.ann_sweep,
            threads=threads,
            query_noise=args.ann_query_noise,
            like=args.ann_like,
            **({"nlist": args.ann_nlist} if args.ann_index == "ivf" else {"hnsw_m": args.ann_hnsw_m}),
        ):
            print(
                f"{n:12,d} {r['setting']:>13s} {r['recall_at_1']:8.3f} {r['exact_ms_per_query']:14.3f} "
                f"{r['ann_ms_per_query']:12.3f} {r['speedup']:7.1f}x {r['build_s']:7.1f}",
                flush=True,
            )
            found.setdefault(n, r)
    for n, r in found.items():
        print(
            f"ANN {args.ann_index} ({r['setting']}) at {n} words: recall@1 {r['recall_at_1']:.3f} "
            f"at {r['speedup']:.1f}x the speed of exact search"
        )


def build(size, row_args, vocab, device, seed):
    opt = benchlib.row_options(size, row_args)
    table = benchlib.synthetic_table(vocab) if benchlib.needs_table(opt, vocab) else None
    torch.manual_seed(seed)
    model = benchlib.build_model(opt, benchlib.SRC_VOCAB, vocab, table).to(device).eval()
    with torch.no_grad():
        gen = model.generator
        if gen.continuous:
            gen.table[EOS_ID] = 0
        else:
            gen.proj.bias[EOS_ID] = -1e4
    return model


def decode_all(model, batches, max_length):
    for batch in batches:
        lengths = torch.full((batch["size"],), max_length, device=batch["src"].device)
        ids, _ = greedy_search(model, batch["src"], batch["src_lengths"], lengths)
        assert all(len(x) == max_length for x in ids), "a sentence ended early: </s> was not suppressed"


def measure(size, vocab, args, device):
    n = args.sentences or (64 if size == "paper" else 128)
    batches = [
        benchlib.synthetic_batch(min(args.batch_size, n - i), benchlib.SRC_VOCAB, vocab, device, seed=args.seed + i)
        for i in range(0, n, args.batch_size)
    ]
    models, out = {}, {}
    for label, row_args in ROWS:
        try:
            models[label] = build(size, row_args, vocab, device, args.seed)
        except (UserError, ValueError) as exc:
            out[label] = {"na": str(exc)}
    for model in models.values():
        decode_all(model, batches[:1], args.max_length)  # warm-up
    times = {label: [] for label in models}
    labels = list(models)
    for rep in range(args.reps):
        for label in labels[rep % len(labels) :] + labels[: rep % len(labels)]:
            times[label].append(benchlib.timed(lambda m=models[label]: decode_all(m, batches, args.max_length), device))
    for label in labels:
        t = benchlib.median(times[label])
        out[label] = {
            "sent_s": n / t,
            "tokens_s": n * args.max_length / t,
            "spread": (max(times[label]) - min(times[label])) / t,
        }
    return out, n


def main(argv=None):
    args = build_parser().parse_args(argv)
    device = benchlib.setup(args, "decode_speed.py")
    start = time.perf_counter()
    print(f"machine: {benchlib.machine_line(device)}")
    print(
        f"greedy decoding, batches of {args.batch_size}, {benchlib.SRC_LEN}-word sources, {args.max_length} words "
        f"out per sentence; median of {args.reps}"
    )
    sizes = [] if args.sizes == "none" else args.sizes.split(",")
    head = f"{'size':11s} {'target words':>12s} " + " ".join(f"{label + ' sent/s':>20s}" for label, _ in ROWS)
    head += " " + " ".join(f"{label + ' / ce':>14s}" for label, _ in ROWS[1:])
    if sizes:
        print(head)
        print("-" * len(head))
    for size in sizes:
        for vocab in [int(v) for v in args.vocabs.split(",")]:
            res, _ = measure(size, vocab, args, device)
            ce = res[ROWS[0][0]].get("sent_s")
            cells = [
                f"{res[label]['sent_s']:20.1f}" if "sent_s" in res[label] else f"{'n/a':>20s}" for label, _ in ROWS
            ]
            ratios = [
                f"{res[label]['sent_s'] / ce:14.2f}" if "sent_s" in res[label] and ce else f"{'n/a':>14s}"
                for label, _ in ROWS[1:]
            ]
            print(f"{size:11s} {vocab:12,d} " + " ".join(cells) + " " + " ".join(ratios), flush=True)
    if args.ann_sizes != "none":
        ann_rows(args, args.threads)
    print(f"(ran {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
