#!/usr/bin/env python
"""Peak resident memory of translate.py, preprocess.py and train.py against the input size.

In a temporary directory: trains a tiny tied NLLvMF model for a few steps on data/ and
translates synthetic source files (words drawn from data/train.fr, greedy); writes synthetic
parallel corpora of short sentences (lab/bench/shard_memory.py's write_corpus), preprocesses each
into shards and trains a tiny model for a few hundred steps that cross several shards. Every
command runs as its own process with one thread (OMP_NUM_THREADS=1); its peak RSS is the
ru_maxrss that ``os.wait4`` returns for it. This parent imports no torch and stays small, so
that a child's figure is its own (Linux carries the parent's peak across fork and exec).

    python lab/bench/load_memory.py                      # everything (minutes; see docs/benchmarks.md)
    python lab/bench/load_memory.py -parts translate -translate_lines 10000,200000 -code /tmp/old_checkout

``-code DIR`` runs the scripts of another checkout (e.g. an older commit from ``git archive``),
for before/after rows; the models and corpora are made with this checkout's scripts.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

from lab import ROOT
from lab.bench.shard_memory import write_corpus

TINY = ["-rnn_size", "32", "-word_vec_size", "16", "-batch_size", "64", "-seed", "1"]


def run_measured(cmd, log):
    """Run ``cmd`` (a list) with one thread, stdout and stderr to ``log``; -> (peak RSS MB, seconds).
    A failing command stops the benchmark with the end of its log."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH="")
    start = time.time()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait for it again
    seconds = time.time() - start
    if proc.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        sys.exit(f"load_memory: {' '.join(cmd)} exited with {proc.returncode}:\n{tail}")
    return usage.ru_maxrss / 1024, seconds


def script(code, name):
    return [sys.executable, os.path.join(code, name + ".py")]


def tiny_translation_model(tmp):
    """preprocess -tgt_emb, embeddings_to_torch -normalize, 20 steps of tied NLLvMF on data/."""
    data, prefix = os.path.join(ROOT, "data"), os.path.join(tmp, "m30k")
    steps = [
        script(ROOT, "preprocess")
        + [
            "-train_src",
            f"{data}/train.fr",
            "-train_tgt",
            f"{data}/train.en",
            "-valid_src",
            f"{data}/valid.fr",
            "-valid_tgt",
            f"{data}/valid.en",
            "-save_data",
            prefix,
            "-tgt_emb",
            f"{data}/en.vec.gz",
        ],
        script(ROOT, "embeddings_to_torch")
        + [
            "-emb_file_dec",
            f"{data}/en.vec.gz",
            "-dict_file",
            prefix + ".vocab.pt",
            "-output_file",
            prefix + ".emb",
            "-normalize",
        ],
        script(ROOT, "train")
        + [
            "-data",
            prefix,
            "-save_model",
            prefix,
            "-tgt_emb",
            prefix + ".emb.dec.pt",
            "-loss",
            "nllvmf",
            "-tie_emb",
            "-train_steps",
            "20",
            "-learning_rate",
            "0.005",
            "-report_every",
            "10",
            *TINY,
        ],
    ]
    for cmd in steps:
        run_measured(cmd, os.path.join(tmp, "setup.log"))
    return prefix + "_last.pt"


def write_source(path, n, seed=1):
    """n lines of words drawn from data/train.fr, with its sentence lengths."""
    with open(os.path.join(ROOT, "data", "train.fr"), encoding="utf-8") as f:
        sents = [line.split() for line in f if line.strip()]
    words = [w for s in sents for w in s]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(rng.choices(words, k=len(rng.choice(sents)))) + "\n")


def translate_rows(args, tmp):
    model = tiny_translation_model(tmp)
    rows = []
    for n in args.translate_lines:
        src, out = os.path.join(tmp, f"src{n}.fr"), os.path.join(tmp, f"out{n}.en")
        write_source(src, n)
        cmd = script(args.code, "translate") + [
            "-model",
            model,
            "-src",
            src,
            "-output",
            out,
            "-batch_size",
            "128",
            "-max_length",
            str(args.max_length),
        ]
        mb, sec = run_measured(cmd, os.path.join(tmp, f"translate{n}.log"))
        rows.append(("translate.py", f"{n:,} lines", "", mb, sec))
        os.remove(src)
    return rows


def corpus_rows(args, tmp):
    """preprocess.py on each corpus size (and train.py on its shards), plus the -variants_at corpus
    with -shuffle and with -big_shard pairs per shard."""
    rows = []
    valid = os.path.join(tmp, "valid")
    write_corpus(valid, 1000, seed=0, lengths=args.lengths, vocab=args.vocab)
    for n in args.pairs:
        corpus, prefix = os.path.join(tmp, f"c{n}"), os.path.join(tmp, f"p{n}")
        start = time.time()
        write_corpus(corpus, n, seed=n, lengths=args.lengths, vocab=args.vocab)
        print(f"wrote {n:,} synthetic pairs in {time.time() - start:.0f}s", flush=True)
        base = script(args.code, "preprocess") + [
            "-train_src",
            corpus + ".src",
            "-train_tgt",
            corpus + ".tgt",
            "-valid_src",
            valid + ".src",
            "-valid_tgt",
            valid + ".tgt",
        ]
        variants = [("", args.shard_size, [])]
        if n == args.variants_at:
            variants += [("-shuffle", args.shard_size, ["-shuffle"]), ("-big", args.big_shard, [])]
        for label, shard, extra in variants:
            save = base + ["-save_data", prefix + label, "-shard_size", str(shard), *extra]
            if "preprocess" in args.parts:
                mb, sec = run_measured(save, os.path.join(tmp, f"preprocess{n}{label}.log"))
                rows.append(("preprocess.py " + " ".join(extra), f"{n:,} pairs", f"{shard:,}", mb, sec))
                print(rows[-1], flush=True)
            if "train" not in args.parts or label == "-shuffle":
                continue
            if "preprocess" not in args.parts:
                run_measured(save, os.path.join(tmp, f"preprocess{n}{label}.log"))
            cmd = script(args.code, "train") + [
                "-data",
                prefix + label,
                "-save_model",
                prefix + label,
                "-loss",
                "ce",
                "-train_steps",
                str(args.train_steps),
                "-valid_steps",
                "100000",
                "-report_every",
                "100",
                *TINY,
            ]
            mb, sec = run_measured(cmd, os.path.join(tmp, f"train{n}{label}.log"))
            crossed = args.train_steps * 64 / shard
            rows.append(
                (f"train.py ({args.train_steps} steps, ~{crossed:.1f} shards)", f"{n:,} pairs", f"{shard:,}", mb, sec)
            )
            print(rows[-1], flush=True)
        for path in os.listdir(tmp):  # this size's corpus and shards: the disk is shared
            if path.startswith((f"c{n}.", f"p{n}")):
                os.remove(os.path.join(tmp, path))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("-parts", default="translate,preprocess,train", help="comma-separated: which scripts")
    p.add_argument("-code", default=ROOT, help="checkout whose preprocess/train/translate.py are measured")
    p.add_argument("-translate_lines", type=ints, default=[10_000, 200_000], help="source lines per translate row")
    p.add_argument(
        "-max_length",
        type=int,
        default=4,
        help="translate.py -max_length: a model trained for 20 "
        "steps never ends a sentence; 4-word outputs keep 200K lines to minutes on a busy 2-core machine",
    )
    p.add_argument("-pairs", type=ints, default=[100_000, 500_000, 2_000_000], help="corpus sizes")
    p.add_argument("-shard_size", type=int, default=5_000, help="pairs per shard for the corpus-size rows")
    p.add_argument(
        "-variants_at",
        type=int,
        default=500_000,
        help="corpus size of the -shuffle and -big_shard rows "
        "(500K: the 2M-pair runs take 10 minutes each on a busy 2-core machine)",
    )
    p.add_argument("-big_shard", type=int, default=200_000, help="a larger shard size, on the -variants_at corpus")
    p.add_argument("-train_steps", type=int, default=300, help="train.py steps of 64 pairs")
    p.add_argument("-lengths", type=ints, default=[3, 12], help="shortest,longest synthetic sentence")
    p.add_argument("-vocab", type=int, default=5000, help="synthetic words per side")
    p.add_argument("-tmp", default=None, help="directory for the temporary files (default: the system's)")
    args = p.parse_args()
    args.parts = args.parts.split(",")
    args.code = os.path.abspath(args.code)
    start = time.time()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        if "translate" in args.parts:
            rows += translate_rows(args, tmp)
        if "preprocess" in args.parts or "train" in args.parts:
            rows += corpus_rows(args, tmp)
    print(f"\ncode: {args.code}; one thread; total {time.time() - start:.0f}s\n")
    print("| command | input | shard size | peak RSS (MB) | seconds |")
    print("| --- | --- | ---: | ---: | ---: |")
    for cmd, size, shard, mb, sec in rows:
        print(f"| {cmd.strip()} | {size} | {shard} | {mb:.0f} | {sec:.0f} |")


if __name__ == "__main__":
    main()
