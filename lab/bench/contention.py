#!/usr/bin/env python
"""The quickstart's LSTM training command under CPU contention, for each -threads setting.

Prepares the shipped sample once (preprocess.py and embeddings_to_torch.py, as
docs/quickstart.sh does), then times the whole quickstart ``train.py`` command as it was when
docs/benchmarks.md's table was measured (ARCH=lstm, the paper's NLLvMF tied; process start,
data loading, -train_steps updates, checkpoint) with each ``-threads`` setting, both with the
machine as it is ("idle") and while competing busy loops run ("busy": -busy processes, each a
Python ``while True`` loop that keeps one core busy, started by this script a second before the
command and killed after it). Settings and conditions are interleaved within each repeat so
that load from elsewhere spreads over all of them; every cell is the median of -repeats runs.

Settings: ``auto`` is train.py without -threads (its default: the cores no other process uses
at start-up), ``0`` is PyTorch's own default (one thread per core), ``N`` is ``-threads N``.
OMP_NUM_THREADS is removed from the commands' environment, so the defaults are the real ones.

    python lab/bench/contention.py [-repeats 3] [-train_steps 30] [-busy 1] [-settings auto,0,1,2] 2> runs.log
    python lab/bench/contention.py -summarize runs.log   # the table again from the per-run lines
                                                         # (also partial; a .log.gz too)

Prints a markdown table: median seconds idle and busy, busy/idle, and each cell over the
fastest setting of its condition.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from lab import ROOT, log_path, open_text

# keeps one core busy; ends by itself once this script is gone (killed before it could stop it)
BUSY_LOOP = "import os\np = os.getppid()\nwhile os.getppid() == p:\n    for _ in range(10**6):\n        pass\n"
LINE = re.compile(r"repeat \d+ (idle|busy) -threads (\S+)\s*: +([\d.]+) s \((\S+) threads\)")


def busy_cores(samples=10, interval=0.05):
    """Processes running now, other than this one: the mean over half a second of /proc/loadavg's
    running count (the load average itself would still count a job that has just finished).
    0 where /proc/loadavg does not exist."""
    counts = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg", encoding="utf-8") as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return 0.0
        time.sleep(interval)
    return sum(counts) / len(counts)


def prepare(tmp):
    """The quickstart's data: shards and the aligned target table under ``tmp``."""
    steps = [
        [
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
            f"{tmp}/data",
            "-tgt_emb",
            "data/en.vec.gz",
            "-shard_size",
            "1000",
            "-shuffle",
        ],
        [
            "embeddings_to_torch.py",
            "-emb_file_dec",
            "data/en.vec.gz",
            "-dict_file",
            f"{tmp}/data.vocab.pt",
            "-output_file",
            f"{tmp}/emb",
            "-normalize",
        ],
    ]
    for cmd in steps:
        subprocess.run([sys.executable, *cmd], cwd=ROOT, check=True, capture_output=True)


def train_command(tmp, steps, setting):
    """docs/quickstart.sh's ARCH=lstm train.py command with the paper's loss, capped at ``steps`` updates."""
    cmd = [
        sys.executable,
        "train.py",
        "-data",
        f"{tmp}/data",
        "-save_model",
        f"{tmp}/model",
        "-tgt_emb",
        f"{tmp}/emb.dec.pt",
        "-loss",
        "nllvmf",
        "-tie_emb",
        "-generator",
        "linear",
        "-brnn",
        "-rnn_size",
        "256",
        "-word_vec_size",
        "256",
        "-enc_layers",
        "1",
        "-dec_layers",
        "2",
        "-dropout",
        "0.2",
        "-batch_size",
        "32",
        "-epochs",
        "12",
        "-train_steps",
        str(steps),
        "-valid_steps",
        "100000",
        "-save_checkpoint_steps",
        "100000",
        "-report_every",
        "50",
    ]
    if setting != "auto":
        cmd += ["-threads", setting]
    return cmd


def timed_run(cmd, env):
    """Seconds the whole command took; the threads train.py logged (its 'device cpu (N threads)')."""
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"contention.py: {' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    threads = out.stdout.split("device cpu (", 1)[1].split(" ", 1)[0] if "device cpu (" in out.stdout else "?"
    return seconds, threads


def start_busy(n):
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(n)]
    time.sleep(1.0)  # let them reach the run queue before train.py looks at it
    return procs


def stop_busy(procs):
    for p in procs:
        p.kill()
        p.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-repeats", type=int, default=3, help="runs per cell (the median is reported)")
    p.add_argument("-train_steps", type=int, default=30, help="updates per training command")
    p.add_argument("-busy", type=int, default=1, help="competing busy-loop processes in the busy condition")
    p.add_argument("-settings", default="auto,0,1,2", help="comma-separated -threads settings (auto: none given)")
    p.add_argument(
        "-summarize", metavar="LOG", help="print the table from a saved stderr log of this script, and run nothing"
    )
    args = p.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    settings = args.settings.split(",")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    times = {(s, c): [] for s in settings for c in ("idle", "busy")}
    used = {}
    background = []
    with tempfile.TemporaryDirectory() as tmp:
        prepare(tmp)
        for r in range(args.repeats):
            for cond in ("idle", "busy") if r % 2 == 0 else ("busy", "idle"):
                for s in settings if r % 2 == 0 else settings[::-1]:
                    background.append(busy_cores())  # other people's processes, before ours start
                    procs = start_busy(args.busy) if cond == "busy" else []
                    try:
                        seconds, threads = timed_run(train_command(tmp, args.train_steps, s), env)
                    finally:
                        stop_busy(procs)
                    times[s, cond].append(seconds)
                    used.setdefault((s, cond), set()).add(threads)
                    print(
                        f"repeat {r + 1} {cond:4s} -threads {s:4s}: {seconds:6.1f} s ({threads} threads)",
                        file=sys.stderr,
                        flush=True,
                    )
    print(
        f"machine: {os.cpu_count()} cores; {args.busy} competing busy loop(s) in 'busy'; other processes "
        f"running before each command (mean of /proc/loadavg's running count): {statistics.mean(background):.2f} "
        f"(min {min(background):.1f}, max {max(background):.1f}); {args.repeats} repeats, "
        f"{args.train_steps} updates per command"
    )
    print()
    print_table(settings, times, used)


def summarize(path):
    """Rebuild the table from the per-run lines main() writes to stderr (cells may have fewer runs)."""
    times, used, settings = {}, {}, []
    path = log_path(path)  # lab/results keeps its logs gzipped
    with open_text(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            cond, s, seconds, threads = m.group(1), m.group(2), float(m.group(3)), m.group(4)
            if s not in settings:
                settings.append(s)
            times.setdefault((s, cond), []).append(seconds)
            used.setdefault((s, cond), set()).add(threads)
    settings = [s for s in settings if (s, "idle") in times and (s, "busy") in times]
    if not settings:
        sys.exit(f"contention.py: {path}: no setting has both an idle and a busy run")
    runs = sorted({len(times[s, c]) for s in settings for c in ("idle", "busy")})
    print(f"from {path}: {'-'.join(map(str, runs[:: max(1, len(runs) - 1)]))} run(s) per cell")
    print()
    print_table(settings, times, used)


def print_table(settings, times, used):
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {c: min(med[s, c] for s in settings) for c in ("idle", "busy")}
    print(
        "| -threads | threads used (idle / busy) | idle s | busy s | busy / idle | idle / fastest idle "
        "| busy / fastest busy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in settings:
        label = {"auto": "(default)", "0": "0 (PyTorch's: one per core)"}.get(s, s)
        th = " / ".join(",".join(sorted(used[s, c])) for c in ("idle", "busy"))
        print(
            f"| {label} | {th} | {med[s, 'idle']:.1f} | {med[s, 'busy']:.1f} | "
            f"{med[s, 'busy'] / med[s, 'idle']:.2f} | {med[s, 'idle'] / best['idle']:.2f} | "
            f"{med[s, 'busy'] / best['busy']:.2f} |"
        )


if __name__ == "__main__":
    main()
