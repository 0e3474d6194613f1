"""A worker process of lab/bench/train_speed.py: one row's model, driven over stdin and stdout with
one JSON object per line, so that its peak memory is its own.

Its first line is the configuration (size, train.py options of the row, target vocabulary,
gpu, threads, seed, spread of the target lengths); it replies with the parameter counts, or an ``error`` when train.py
refuses the options. Then, one reply each:

- ``{"cmd": "step", "batch": B, "n": k}``: k updates on a synthetic batch of B sentences, their seconds;
- ``{"cmd": "stats", "batch": B}``: peak memory so far (CPU: growth of the peak RSS since before
  the model was built; GPU: torch.cuda.max_memory_allocated) and the batch's target tokens;
- ``{"cmd": "max_batch", "budget_mb": X}``: GPU only, the largest batch whose update fits X MB.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from unittest import mock

import torch

from lab.bench import benchlib
from lab.bench.benchlib import UserError
from onmt_cont.losses import negatives
from onmt_cont.utils.threads import apply_threads


@contextlib.contextmanager
def neighbour_standin(table):
    """-negatives gold_nn looks up a [V, k+1] table of each word's neighbours, found once before
    training. On a CPU above EXACT_UP_TO words that one-off faiss search takes minutes per worker
    (lab/bench/neighbour_table.py times it), and an update's time depends only on the lookup's shape:
    so here random word ids of that shape stand in for it. Exact on a GPU: the real search."""
    if table is None or table.device.type != "cpu" or table.size(0) <= negatives.EXACT_UP_TO:
        yield
        return

    def standin(table, k, threads=None):
        gen = torch.Generator().manual_seed(0)
        return torch.randint(1, table.size(0), (table.size(0), k + 1), generator=gen)

    with mock.patch.object(negatives, "table_neighbours", standin):
        yield


class Model:
    """One row's model, optimiser and Trainer, as train.py's Run builds them."""

    def __init__(self, cfg):
        apply_threads(cfg["threads"])
        self.device = benchlib.resolve_device(cfg["gpu"])
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.cfg = cfg
        self.rss_before_mb = benchlib.max_rss_mb()
        opt = benchlib.row_options(cfg["size"], cfg["row_args"], cfg["gpu"])
        vocab = cfg["vocab"]
        table = benchlib.synthetic_table(vocab) if benchlib.needs_table(opt, vocab) else None
        start = time.perf_counter()
        # the model, optimiser, loss and Trainer, through train.py's own builder (the table: on the CPU here)
        with neighbour_standin(table if self.device.type == "cpu" else None):
            self.trainer = benchlib.build_trainer(opt, benchlib.SRC_VOCAB, vocab, self.device, table, seed=cfg["seed"])
        del table  # the model holds its own normalised copy where it needs one
        self.build_s = time.perf_counter() - start
        self.model, self.opt, self.steps, self.batches = self.trainer.model, opt, 0, {}

    def batch(self, size):
        if size not in self.batches:
            self.batches[size] = benchlib.synthetic_batch(
                size,
                benchlib.SRC_VOCAB,
                self.cfg["vocab"],
                self.device,
                seed=self.cfg["seed"] + size,
                tgt_len_sd=self.cfg["tgt_len_sd"],
            )
        return self.batches[size]

    def step(self, size):
        batch = self.batch(size)

        def update():
            self.steps += 1
            benchlib.train_step(self.trainer, self.opt, batch, self.steps)

        return benchlib.timed(update, self.device)

    def params(self):
        count, frozen = benchlib.parameter_count, benchlib.frozen_count
        m = self.model
        return {
            "input_layer": count(m.decoder.embeddings),
            "input_frozen": frozen(m.decoder.embeddings),
            "output_layer": count(m.generator),
            "output_frozen": frozen(m.generator),
            "trainable": count(m),
        }

    def peak_mb(self):
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        return benchlib.max_rss_mb() - self.rss_before_mb

    def max_batch(self, budget_mb, largest=8192):
        """GPU: the largest batch (a multiple of 8) whose update's peak memory fits ``budget_mb``."""
        if self.device.type != "cuda":
            return None

        def fits(size):
            self.batches.clear()
            self.trainer.optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            try:
                self.step(size)
            except torch.cuda.OutOfMemoryError:
                return False
            finally:
                self.batches.clear()
                torch.cuda.empty_cache()
            return torch.cuda.max_memory_allocated(self.device) / 2**20 <= budget_mb

        lo, hi = 0, 8
        while hi <= largest and fits(hi):
            lo, hi = hi, hi * 2
        while hi - lo > 8:
            mid = (lo + hi) // 16 * 8
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo


def serve():
    """The worker's loop: a config line, then commands until stdin closes or ``quit``."""

    def reply(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    cfg = json.loads(sys.stdin.readline())
    try:
        model = Model(cfg)
    except (UserError, ValueError) as exc:
        reply({"error": str(exc)})
        return
    reply({"build_s": model.build_s, "params": model.params(), "lr": model.opt.learning_rate})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "step":
            reply({"times": [model.step(cmd["batch"]) for _ in range(cmd.get("n", 1))]})
        elif cmd["cmd"] == "stats":
            reply(
                {
                    "peak_mb": model.peak_mb(),
                    "rss_before_mb": model.rss_before_mb,
                    "tokens": benchlib.target_tokens(model.batch(cmd.get("batch", 64))),
                }
            )
        elif cmd["cmd"] == "max_batch":
            reply({"max_batch": model.max_batch(cmd["budget_mb"])})
        else:
            return


class WorkerFailed(RuntimeError):
    pass


class Worker:
    """The parent's handle on one worker process: ``info`` is its first reply (``error``, or
    ``params`` and ``lr``); ``step`` runs updates there and returns their seconds."""

    def __init__(self, label, row_args, size, vocab, gpu, threads, seed, tgt_len_sd):
        self.label = label
        cfg = {"size": size, "row_args": row_args, "vocab": vocab, "gpu": gpu, "threads": threads, "seed": seed}
        cfg["tgt_len_sd"] = tgt_len_sd
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.info = self.ask(cfg)
        if "error" in self.info:
            self.close()

    def ask(self, obj):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.stderr.seek(0)
            tail = self.stderr.read().strip().splitlines()[-3:]
            raise WorkerFailed(f"{self.label}: worker exited {self.proc.returncode}: {' | '.join(tail)}")
        return json.loads(line)

    def step(self, batch, n=1):
        return self.ask({"cmd": "step", "batch": batch, "n": n})["times"]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait()
        self.stderr.close()


if __name__ == "__main__":
    serve()
