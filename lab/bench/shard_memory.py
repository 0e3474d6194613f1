#!/usr/bin/env python
"""Resident memory of a training epoch's data pipeline grows with the shard size, not the corpus.

Writes a synthetic tokenized corpus, preprocesses it twice (one corpus of S pairs in one shard,
one of K*S pairs in K shards of S), then, each in a fresh process, iterates one epoch of
batches exactly as train.py does and reports the peak RSS (ru_maxrss) of that process (VmHWM).

    python lab/bench/shard_memory.py [-pairs_per_shard 20000] [-shards 20]

lab/bench/load_memory.py measures the whole scripts (preprocess.py, train.py, translate.py) the same
way, on its corpora.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile


def write_corpus(path, n, seed, lengths=(8, 30), vocab=20000):
    """PATH.src / PATH.tgt: n pairs of uniform random words ``w0..`` / ``v0..`` (``vocab`` a side),
    each side ``lengths[0]..lengths[1]`` words long; streamed, so the writer stays small."""
    rng = random.Random(seed)
    lo, hi = lengths
    with open(path + ".src", "w") as fs, open(path + ".tgt", "w") as ft:
        for _ in range(n):
            fs.write(" ".join(f"w{rng.randrange(vocab)}" for _ in range(rng.randint(lo, hi))) + "\n")
            ft.write(" ".join(f"v{rng.randrange(vocab)}" for _ in range(rng.randint(lo, hi))) + "\n")


def worker(prefix):
    from onmt_cont.inputters.batching import ShardedIterator
    from onmt_cont.inputters.corpus import shard_paths

    it = ShardedIterator(shard_paths(prefix, "train"), 64, "sents", seed=1)
    batches = sum(1 for _ in it.epoch(0))
    print(json.dumps({"batches": batches, "max_rss_mb": peak_rss_mb()}))


def peak_rss_mb():
    """VmHWM: the peak resident set of this process image. (ru_maxrss would also count the
    parent's pages shared at fork time, before exec.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-pairs_per_shard", type=int, default=20000)
    p.add_argument("-shards", type=int, default=20)
    p.add_argument("-_worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._worker:
        return worker(args._worker)
    from onmt_cont.bin import preprocess

    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for k in (1, args.shards):
            n = k * args.pairs_per_shard
            corpus = os.path.join(tmp, f"c{k}")
            write_corpus(corpus, n, seed=k)
            preprocess.main(
                [
                    "-train_src",
                    corpus + ".src",
                    "-train_tgt",
                    corpus + ".tgt",
                    "-valid_src",
                    corpus + ".src",
                    "-valid_tgt",
                    corpus + ".tgt",
                    "-save_data",
                    corpus,
                    "-shard_size",
                    str(args.pairs_per_shard),
                ]
            )
            out = subprocess.run(
                [sys.executable, __file__, "-_worker", corpus], capture_output=True, text=True, check=True
            )
            rows.append((k, n, json.loads(out.stdout)))
        print(f"\n{'shards':>6} {'pairs':>9} {'batches':>8} {'peak RSS (MB)':>14}")
        for k, n, r in rows:
            print(f"{k:>6} {n:>9} {r['batches']:>8} {r['max_rss_mb']:>14.0f}")
        ratio = rows[1][2]["max_rss_mb"] / rows[0][2]["max_rss_mb"]
        print(f"peak RSS ratio, {args.shards}x the corpus in {args.shards}x the shards: {ratio:.2f}")


if __name__ == "__main__":
    main()
