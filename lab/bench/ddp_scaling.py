#!/usr/bin/env python
"""Training throughput with 1 and 2 processes (torchrun, gloo on CPU; nccl with -gpu).

Prepares data/ (the shipped sample) once, then trains the same model for -steps updates with
the same global batch: one process using every core, then torchrun with N processes of
cores/N threads each. Reports target tokens/s from train.py's own log lines (the last
-report_every window, after warm-up) and the ratio.

    python lab/bench/ddp_scaling.py [-steps 60] [-nproc 2] [-rnn_size 256]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from lab import ROOT


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    rates = [float(x) for x in re.findall(r"(\d+) tgt tok/s", out.stdout)]
    return rates[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-steps", type=int, default=60)
    p.add_argument("-nproc", type=int, default=2)
    p.add_argument("-rnn_size", type=int, default=256)
    p.add_argument("-batch_size", type=int, default=64)
    args = p.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "preprocess.py",
                "-train_src",
                "data/train.fr",
                "-train_tgt",
                "data/train.en",
                "-valid_src",
                "data/valid.fr",
                "-valid_tgt",
                "data/valid.en",
                "-save_data",
                f"{tmp}/d",
                "-tgt_emb",
                "data/en.vec.gz",
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                sys.executable,
                "embeddings_to_torch.py",
                "-emb_file_dec",
                "data/en.vec.gz",
                "-dict_file",
                f"{tmp}/d.vocab.pt",
                "-output_file",
                f"{tmp}/e",
                "-normalize",
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        train = [
            "train.py",
            "-data",
            f"{tmp}/d",
            "-tgt_emb",
            f"{tmp}/e.dec.pt",
            "-save_model",
            f"{tmp}/m",
            "-loss",
            "nllvmf",
            "-tie_emb",
            "-brnn",
            "-rnn_size",
            str(args.rnn_size),
            "-word_vec_size",
            str(args.rnn_size),
            "-batch_size",
            str(args.batch_size),
            "-train_steps",
            str(args.steps),
            "-report_every",
            str(args.steps // 2),
            "-valid_steps",
            "100000",
            "-save_checkpoint_steps",
            "100000",
        ]
        one = run([sys.executable, *train], threads=cores)
        many = run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}", *train],
            threads=max(1, cores // args.nproc),
        )
    print(
        f"machine: {cores} CPU cores; model rnn {args.rnn_size}, global batch {args.batch_size} sentences, "
        f"nllvmf tied, {args.steps} steps (tokens/s of the last {args.steps // 2})"
    )
    print(f"1 process, {cores} threads: {one:.0f} tgt tok/s")
    print(
        f"{args.nproc} processes, {max(1, cores // args.nproc)} thread(s) each: {many:.0f} tgt tok/s "
        f"({many / one:.2f}x)"
    )


if __name__ == "__main__":
    main()
