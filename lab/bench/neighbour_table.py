"""The one-off cost of ``-negatives gold_nn``: finding every target word's ``-ann_candidates``
nearest words once before training (onmt_cont.losses.negatives.table_neighbours), and how many of
the exact neighbours the faiss index finds (recall on 2,000 rows, against exact products).

Tables: ann_speed.synthetic_table's clustered unit rows (like related words in real tables; random
directions have no neighbours for an index to find), and ``-emb FILE`` a real .vec/.vec.gz.

    python lab/bench/neighbour_table.py -threads 1 -vocabs 50000,300000 -emb ../shared/data/embeddings/de.ft300.vec.gz
"""

import argparse
import os
import time

import torch

from lab.bench import (
    ann_speed,
    benchlib,
)
from onmt_cont.losses.negatives import EXACT_UP_TO, table_neighbours


def recall(found, table, rows=2000):
    """Fraction of the exact k+1 neighbours of the first ``rows`` words that ``found`` holds."""
    n = min(rows, table.size(0) - 1)
    exact = (table[1 : n + 1] @ table[1:].t()).topk(found.size(1), dim=1).indices + 1
    return (found[1 : n + 1, :, None] == exact[:, None, :]).any(-1).float().mean().item()


def measure(name, table, k, threads, exact_up_to=EXACT_UP_TO):
    start = time.perf_counter()
    found = table_neighbours(table, k, threads, exact_up_to)
    seconds = time.perf_counter() - start
    how = "exact" if table.size(0) <= exact_up_to or table.device.type != "cpu" else "faiss ivf"
    print(f"{name:28s} {table.size(0) - 1:>9,d} {how:>10s} {seconds:9.1f} {recall(found, table):8.3f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-vocabs", default="50000,300000", help="sizes of the synthetic tables ('' for none)")
    p.add_argument("-emb", default=None, help="also a real vector file (.vec or .vec.gz)")
    p.add_argument("-k", type=int, default=32, help="neighbours per word (train.py -ann_candidates)")
    benchlib.add_setup_args(p)
    args = p.parse_args()
    device = benchlib.setup(args, "neighbour_table.py")
    print(f"machine: {benchlib.machine_line(device)}; k = {args.k}")
    print(f"{'table':28s} {'words':>9s} {'search':>10s} {'seconds':>9s} {'recall':>8s}")
    for v in [int(x) for x in args.vocabs.split(",") if x]:
        measure("synthetic, clustered", ann_speed.synthetic_table(v).to(device), args.k, args.threads)
    if args.emb:
        from onmt_cont.translate.open_vocab import read_extension

        _, vectors = read_extension(args.emb)
        table = torch.zeros(vectors.size(0) + 1, vectors.size(1))
        table[1:] = torch.nn.functional.normalize(vectors.float(), dim=-1)
        name = os.path.basename(args.emb)
        measure(name, table.to(device), args.k, args.threads, exact_up_to=table.size(0))  # exact
        measure(name, table.to(device), args.k, args.threads, exact_up_to=0)  # faiss


if __name__ == "__main__":
    main()
