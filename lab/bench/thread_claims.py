#!/usr/bin/env python
"""Two training jobs on one machine with -threads left to the default, with and without thread claims.

train.py's default thread count is the cores no other process uses at start-up. Two ways that
guess goes wrong on a shared machine: two jobs started in the same second ("together") each see
the other still asleep and take every core, and a job that took every core alone keeps them when
a second starts later ("late", -delay seconds after). With PyTorch's one thread per core, a job
whose threads outnumber the free cores stalls (docs/benchmarks.md, "Threads under contention").
Thread claims (onmt_cont/utils/threads.py) let starters count each other and let a training run
lower its threads while another job runs. ``ONMT_CONT_THREAD_CLAIMS=off`` gives the start-up
guess alone; each repeat runs both conditions of a scenario back to back, alternating which goes
first.

The jobs are lab/bench/contention.py's command (docs/quickstart.sh's ARCH=lstm train.py on the
shipped sample) capped at -train_steps updates. OMP_NUM_THREADS is removed from their
environment, so the default is the real one.

    python lab/bench/thread_claims.py [-repeats 2] [-train_steps 150] [-delay 10] [-scenarios together,late]

Prints a markdown table: per scenario and condition, the median wall seconds from the first
start to the last end, the threads each job logged at start-up and any change, and claims
on / off.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from lab import ROOT
from lab.bench.contention import prepare, train_command

CHANGE = re.compile(r"threads (\d+) -> (\d+):")


def job_threads(log):
    """'N' from train.py's 'device cpu (N threads)', then '->M' for each change the run logged."""
    with open(log, encoding="utf-8") as f:
        text = f.read()
    first = text.split("device cpu (", 1)[1].split(" ", 1)[0] if "device cpu (" in text else "?"
    return first + "".join(f"->{m.group(2)}" for m in CHANGE.finditer(text))


def scenario(tmp, steps, delay, claims, tag):
    """Wall seconds from the first job's start to the last one's end; each job's threads."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["ONMT_CONT_THREAD_CLAIMS"] = os.path.join(tmp, "claims") if claims else "off"
    start, jobs, logs = time.perf_counter(), [], []
    for j in range(2):
        if j and delay:
            time.sleep(delay)
        save = os.path.join(tmp, f"{tag}_{j}")
        os.makedirs(save, exist_ok=True)
        logs.append(os.path.join(save, "train.log"))
        cmd = train_command(tmp, steps, "auto")
        cmd[cmd.index("-save_model") + 1] = os.path.join(save, "model")
        jobs.append(subprocess.Popen(cmd + ["-log_file", logs[-1]], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for job in jobs:
        err = job.communicate()[1]
        if job.returncode != 0:
            sys.exit(f"thread_claims.py: a job failed:\n{err[-2000:]}")
    return time.perf_counter() - start, " / ".join(job_threads(log) for log in logs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-repeats", type=int, default=2)
    p.add_argument("-train_steps", type=int, default=150)
    p.add_argument("-delay", type=float, default=10.0, help="seconds between the two starts in 'late'")
    p.add_argument("-scenarios", default="together,late")
    args = p.parse_args(argv)
    scenarios = args.scenarios.split(",")
    bad = [s for s in scenarios if s not in ("together", "late")]
    if bad:
        p.error(f"-scenarios: together and/or late, got {','.join(bad)}")
    times, threads = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        prepare(tmp)
        for r in range(args.repeats):
            for name in scenarios:
                order = (True, False) if r % 2 == 0 else (False, True)
                for claims in order:
                    delay = args.delay if name == "late" else 0.0
                    key = (name, claims)
                    secs, used = scenario(tmp, args.train_steps, delay, claims, f"r{r}_{name}_{int(claims)}")
                    times.setdefault(key, []).append(secs)
                    threads.setdefault(key, []).append(used)
                    print(f"repeat {r} {name} claims {'on' if claims else 'off'}: {secs:.1f} s (threads {used})",
                          file=sys.stderr, flush=True)
    print(f"{args.train_steps} updates per job, {os.cpu_count()} cores, -delay {args.delay:g} s, "
          f"{args.repeats} repeat(s); median wall seconds from the first start to the last end\n")
    print("| scenario | claims | seconds | threads per job (start->changes) | on / off |")
    print("| --- | --- | ---: | --- | ---: |")
    for name in scenarios:
        on, off = statistics.median(times[(name, True)]), statistics.median(times[(name, False)])
        for claims, secs in ((True, on), (False, off)):
            ratio = f"{on / off:.2f}" if claims else ""
            print(f"| {name} | {'on' if claims else 'off'} | {secs:.1f} | {'; '.join(threads[(name, claims)])} "
                  f"| {ratio} |")


if __name__ == "__main__":
    main()
