#!/usr/bin/env python
"""Kill train.py with SIGKILL at seeded random moments, resume each time from the newest
loadable checkpoint, and compare the end with an uninterrupted run of the same options.

    python3 lab/tools/kill_resume.py -out /tmp/kr -kills 4 -seed 1 -loss nllvmf

Data: the first -n_train pairs of data/train.{fr,en} (-n_valid of valid), preprocessed with the
sample's fastText vectors (a tied 300-d table). Every run is a subprocess of train.py with one
thread and -save_checkpoint_steps 1, so the newest checkpoint is at most a step old. Kill points:
one lands inside a checkpoint write (the child's torch.save writes half the file, then waits;
the parent kills it then), the others a seeded random delay after a seeded random
PREFIX_step_K.pt appears. After every kill the script checks that each PREFIX_*.pt on disk
loads; at the end, that every PREFIX_step_N.pt, PREFIX_best.pt and PREFIX_last.pt holds the
same parameters, optimiser state and progress as the uninterrupted run's, bit for bit, and that
no temporary file is left. Prints one line per kill and a summary; exits 1 on any difference.
"""

import argparse
import io
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import torch

from lab import ROOT, open_text
from onmt_cont.models.checkpoint import load_checkpoint, newest_checkpoint
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.overwrite import refuse_output_over_inputs

WORK_MARKER = ".kill_resume"  # in -out: a folder this tool made, which a new run may empty


def prepare_data(workdir, n_train=200, n_valid=40):
    """Cut the sample, preprocess it against the sample vectors, write the table. -> train.py args."""
    from onmt_cont.bin import embeddings_to_torch, preprocess

    os.makedirs(workdir, exist_ok=True)
    data = os.path.join(ROOT, "data")
    for split, n in (("train", n_train), ("valid", n_valid)):
        for lang in ("fr", "en"):
            with open(os.path.join(data, f"{split}.{lang}"), encoding="utf-8") as f:
                lines = f.read().splitlines()[:n]
            with open(os.path.join(workdir, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    prefix, vec = os.path.join(workdir, "d"), os.path.join(data, "en.vec.gz")
    quiet = io.StringIO()
    sys.stdout, real_stdout = quiet, sys.stdout
    try:
        preprocess.main(
            [
                "-train_src",
                os.path.join(workdir, "train.fr"),
                "-train_tgt",
                os.path.join(workdir, "train.en"),
                "-valid_src",
                os.path.join(workdir, "valid.fr"),
                "-valid_tgt",
                os.path.join(workdir, "valid.en"),
                "-save_data",
                prefix,
                "-tgt_emb",
                vec,
            ]
        )
        embeddings_to_torch.main(
            [
                "-emb_file_dec",
                vec,
                "-dict_file",
                prefix + ".vocab.pt",
                "-output_file",
                os.path.join(workdir, "emb"),
                "-normalize",
            ]
        )
    finally:
        sys.stdout = real_stdout
    return ["-data", prefix, "-tgt_emb", os.path.join(workdir, "emb.dec.pt")]


def train_args(data_args, save_model, loss="nllvmf", steps=30, extra=()):
    """A tiny tied model with dropout, validation (best checkpoint, early-stopping counters) every 4
    steps, a checkpoint every step."""
    return [
        *data_args,
        "-save_model",
        save_model,
        "-loss",
        loss,
        "-tie_emb",
        "-rnn_size",
        "16",
        "-word_vec_size",
        "16",
        "-dropout",
        "0.3",
        "-batch_size",
        "20",
        "-valid_batch_size",
        "40",
        "-epochs",
        "100",
        "-train_steps",
        str(steps),
        "-valid_steps",
        "4",
        "-early_stopping",
        "100",
        "-save_checkpoint_steps",
        "1",
        "-report_every",
        "1",
        "-seed",
        "7",
        *extra,
    ]


def child_main(argv, stall_at=0, marker=None):
    """Run train.main(argv) in this process, one thread; with ``stall_at`` N, its N-th torch.save
    writes half the file, names it in ``marker`` and waits to be killed."""
    torch.set_num_threads(1)
    if stall_at:
        real_save, calls = torch.save, [0]

        def stalling_save(obj, f, *args, **kwargs):
            calls[0] += 1
            if calls[0] != stall_at:
                return real_save(obj, f, *args, **kwargs)
            buf = io.BytesIO()
            real_save(obj, buf, *args, **kwargs)
            data = buf.getvalue()
            f.write(data[: len(data) // 2])
            f.flush()
            with open(marker + ".part", "w", encoding="utf-8") as m:
                m.write(f.name)
            os.replace(marker + ".part", marker)  # the parent reads it as soon as it exists
            time.sleep(600)  # the parent kills us here
            f.write(data[len(data) // 2 :])

        torch.save = stalling_save
    from onmt_cont.bin import train

    train.main(argv)


def fork_is_safe():
    """Can a fork of this process run train.py? Not where CUDA is visible (Child says why)."""
    return not torch.cuda.is_available()


class Child:
    """train.py in a fresh interpreter (``fork=False``: what a user runs) or in a fork of this
    process (``fork=True``: the same code without the seconds of interpreter and torch start-up;
    the test suite's choice). stderr goes to ``err_path``. Where CUDA is visible the fork falls back
    to a fresh interpreter: once this process has run a backward pass, autograd has started its
    per-device threads, and a forked child's backward then fails ("Unable to handle autograd's
    threading in combination with fork-based multiprocessing"; seen on a GPU machine)."""

    def __init__(self, argv, err_path, stall_at=0, marker=None, fork=False):
        self.err_path = err_path
        self.err = open(err_path, "w", encoding="utf-8")
        if fork and fork_is_safe():
            self.pid = os.fork()
            if self.pid == 0:  # the child: never return into the caller's stack
                code = 1
                try:
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 1)
                    os.dup2(self.err.fileno(), 2)
                    sys.stdout, sys.stderr = open(os.devnull, "w"), open(2, "w", closefd=False)
                    child_main(argv, stall_at, marker)
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stderr.flush()
                    os._exit(code)
            self.proc = None
        else:
            extra = ["--stall", str(stall_at), marker] if stall_at else []
            self.proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--child", *extra, *argv],
                env=dict(os.environ, OMP_NUM_THREADS="1"),
                stdout=subprocess.DEVNULL,
                stderr=self.err,
            )
            self.pid = self.proc.pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            if self.proc is not None:
                self.returncode = self.proc.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        while self.poll() is None:
            time.sleep(0.01)
        self.err.close()
        return self.returncode

    def kill(self):
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        return self.wait()

    def stderr(self):
        with open(self.err_path, encoding="utf-8") as f:
            return f.read()


def wait_for(path, proc, timeout=300):
    """Poll until ``path`` exists; False if the child ended first."""
    end = time.time() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.time() > end:
            return False
        time.sleep(0.002)
    return True


def check_loadable(directory, name):
    """Every NAME_*.pt in ``directory`` loads as a checkpoint. -> (count, temporary files present)."""
    files = [f for f in os.listdir(directory) if f.startswith(name + "_") and f.endswith(".pt")]
    for f in files:
        load_checkpoint(os.path.join(directory, f))  # raises UserError if not
    temps = [f for f in os.listdir(directory) if f.startswith(".tmp-")]
    return len(files), temps


def plan_kills(rng, kills, steps):
    """-> ("step", K, delay seconds) at distinct, increasing K, and one ("save", N, None) placed at
    random among them: a kill inside the N-th checkpoint write (N <= 3) of that run. Every kill
    leaves at least 5 steps to go, so each run reaches its kill point."""
    ks = sorted(rng.sample(range(2, steps - 5), kills - 1))
    points = [("step", k, rng.uniform(0.0, 0.03)) for k in ks]
    points.insert(rng.randrange(kills), ("save", rng.randint(1, 3), None))
    return points


def run_killed(data_args, workdir, kills, seed, loss="nllvmf", steps=30, extra=(), log=print, fork=False):
    """Train to ``steps`` through ``kills`` SIGKILLs and resumes. -> list of per-kill records."""
    save = os.path.join(workdir, "m")
    os.makedirs(workdir, exist_ok=True)
    err, marker = os.path.join(workdir, "stderr.txt"), os.path.join(workdir, "stalled")
    rng = random.Random(seed)
    records, resume_from = [], None
    for kind, k, delay in plan_kills(rng, kills, steps):
        base = newest_checkpoint(save)
        done = load_checkpoint(base)["progress"]["step"] if base else 0
        args = train_args(data_args, save, loss, steps, extra) + (["-train_from", base] if base else [])
        if kind == "save":
            # every step writes PREFIX_step_N.pt, a validation that improves PREFIX_best.pt too
            if os.path.exists(marker):
                os.remove(marker)
            proc = Child(args, err, stall_at=k, marker=marker, fork=fork)
            if not wait_for(marker, proc):
                raise RuntimeError(f"train.py ended before its checkpoint write {k}: {proc.stderr()}")
            with open(marker, encoding="utf-8") as f:
                where = f"inside checkpoint write {k} ({os.path.basename(f.read())})"
        else:
            k = max(k, done + 1)
            proc = Child(args, err, fork=fork)
            if not wait_for(f"{save}_step_{k}.pt", proc):
                raise RuntimeError(f"train.py ended before step {k}: {proc.stderr()}")
            time.sleep(delay)
            where = f"{1000 * delay:.0f} ms after m_step_{k}.pt appeared"
        if proc.poll() is not None:
            raise RuntimeError(f"train.py ended before the kill ({where}): {proc.stderr()}")
        proc.kill()
        count, temps = check_loadable(workdir, "m")
        resume_from = newest_checkpoint(save)
        records.append(
            {
                "resumed_from": done,
                "where": where,
                "loadable": count,
                "temps": temps,
                "newest": os.path.basename(resume_from) if resume_from else None,
            }
        )
        log(
            f"kill {len(records)}: run from step {done}, killed {where}; {count} checkpoints on disk, all "
            f"loadable; {len(temps)} temporary file(s); newest {records[-1]['newest']}"
        )
    args = train_args(data_args, save, loss, steps, extra) + (["-train_from", resume_from] if resume_from else [])
    proc = Child(args, err, fork=fork)
    if proc.wait() != 0:
        raise RuntimeError(f"the last resumed run failed:\n{proc.stderr()}")
    return records


def _workers(agent_pid):
    """{pid: rank} of the live train.py workers torchrun's agent ``agent_pid`` started."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != agent_pid or fields[0] == "Z":
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except (OSError, IndexError, ValueError):
            continue
        if b"RANK" in env:
            found[int(entry)] = int(env[b"RANK"])
    return found


def torchrun_cmd(data_args, save, loss, steps, nproc, restarts, extra=()):
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        f"--max-restarts={restarts}",
        "--monitor-interval=0.2",
        os.path.join(ROOT, "train.py"),
        *train_args(data_args, save, loss, steps, ["-resume", "auto", *extra]),
    ]


def _resumes_logged(path):
    with open_text(path, errors="replace") as f:
        return len(re.findall(r"resumed from step \d+", f.read()))


def run_torchrun(data_args, workdir, loss="nllvmf", steps=30, nproc=2, kills=0, seed=1, log=print, timeout=900):
    """One ``torchrun --max-restarts`` run of train.py -resume auto; with ``kills``, SIGKILL one
    worker ``kills`` times, at seeded random steps K spread over the run: a seeded random worker
    a random 0-50 ms after PREFIX_step_K.pt appears, or (every third kill) rank 0 while a
    checkpoint's temporary file exists, i.e. inside a write. -> (per-kill records, the steps the
    restarts resumed from, from the log). Raises if the run fails."""
    os.makedirs(workdir, exist_ok=True)
    save = os.path.join(workdir, "m")
    err = open(os.path.join(workdir, "torchrun.log"), "w", encoding="utf-8")
    agent = subprocess.Popen(
        torchrun_cmd(data_args, save, loss, steps, nproc, kills + 1),
        stdout=err,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    rng, records, end = random.Random(seed), [], time.time() + timeout
    targets = sorted(rng.sample(range(2, steps - 1), kills)) if kills else []
    try:
        for i, target in enumerate(targets):
            inside_write = i % 3 == 2
            victim, resumed_yet = None, False
            while victim is None:
                if agent.poll() is not None or time.time() > end:
                    raise RuntimeError(f"torchrun ended (or timed out) before kill {i + 1}")
                workers = _workers(agent.pid)
                files = set(os.listdir(workdir))
                reached = any(f"m_step_{k}.pt" in files for k in range(target, steps + 1))
                # kill i+1 waits for restart i to have resumed: a kill while the new workers still
                # start up ends that restart before it logs, and the run has fewer resumes than kills
                # (seen under load: 2 of 3). Read once true: the log is not re-read in the tight
                # polling for a checkpoint write
                ready = len(workers) == nproc and reached
                resumed_yet = resumed_yet or (ready and _resumes_logged(err.name) >= i)
                if ready and resumed_yet:
                    if inside_write and any(f.startswith(".tmp-") for f in files):
                        victim = next(pid for pid, rank in workers.items() if rank == 0)
                        where = f"rank 0 inside a checkpoint write (step {target} or later)"
                    elif not inside_write:
                        time.sleep(rng.uniform(0.0, 0.05))
                        victim = rng.choice(sorted(workers))
                        where = f"rank {workers[victim]}, 0-50 ms after m_step_{target}.pt appeared"
                time.sleep(0.0005 if inside_write else 0.005)
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue
            newest = newest_checkpoint(save)
            step = load_checkpoint(newest)["progress"]["step"] if newest else 0
            records.append({"where": where, "newest_step": step})
            log(f"kill {i + 1}: {where}; newest complete checkpoint: step {step}")
            while _workers(agent.pid) and set(_workers(agent.pid)) & {victim} and time.time() < end:
                time.sleep(0.01)
        if agent.wait(timeout=max(1, end - time.time())) != 0:
            raise RuntimeError(f"torchrun exited {agent.returncode}; see {err.name}")
    finally:
        if agent.poll() is None:
            agent.kill()
        err.close()
    with open(err.name, encoding="utf-8") as f:
        text = f.read()
    resumed = [int(x) for x in re.findall(r"resumed from step (\d+)", text)]
    return records, resumed


def run_uninterrupted(data_args, workdir, loss="nllvmf", steps=30, extra=(), fork=False):
    os.makedirs(workdir, exist_ok=True)
    proc = Child(
        train_args(data_args, os.path.join(workdir, "m"), loss, steps, extra),
        os.path.join(workdir, "stderr.txt"),
        fork=fork,
    )
    if proc.wait() != 0:
        raise RuntimeError(f"the uninterrupted run failed:\n{proc.stderr()}")


def compare(ref_dir, dir_, name="m"):
    """-> list of differences between the checkpoints of two runs (empty: bitwise equal)."""
    ref_files = sorted(f for f in os.listdir(ref_dir) if f.startswith(name + "_") and f.endswith(".pt"))
    files = sorted(f for f in os.listdir(dir_) if f.startswith(name + "_") and f.endswith(".pt"))
    diffs = [] if ref_files == files else [f"files differ: {ref_files} vs {files}"]
    for f in set(ref_files) & set(files):
        a, b = load_checkpoint(os.path.join(ref_dir, f)), load_checkpoint(os.path.join(dir_, f))
        for key in ("model", "progress", "optim", "rng"):
            if not _equal(a[key], b[key]):
                diffs.append(f"{f}: {key} differs" + _max_diff(a[key], b[key]))
    temps = [f for f in os.listdir(dir_) if f.startswith(".tmp-")]
    if temps:
        diffs.append(f"temporary files left: {temps}")
    return diffs


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_equal, a, b))
    return a == b


def _max_diff(a, b):
    if isinstance(a, dict) and isinstance(b, dict) and all(isinstance(v, torch.Tensor) for v in a.values()):
        worst = max(((a[k].float() - b[k].float()).abs().max().item(), k) for k in a if k in b)
        return f" (largest |difference| {worst[0]:.3g} in {worst[1]})"
    return ""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-out", required=True, help="work folder (emptied first)")
    p.add_argument("-kills", type=int, default=4, help="SIGKILLs per run, one of them inside a checkpoint write")
    p.add_argument("-seeds", type=int, nargs="+", default=[1], help="one killed run per seed (the kill points)")
    p.add_argument("-loss", nargs="+", default=["nllvmf"], help="train.py -loss values to run")
    p.add_argument("-steps", type=int, default=30, help="training steps (-train_steps)")
    p.add_argument(
        "-torchrun",
        type=int,
        default=0,
        metavar="NPROC",
        help="instead: torchrun --nproc_per_node NPROC --max-restarts -kills+1 train.py -resume auto, "
        "killing one worker -kills times (every third inside rank 0's checkpoint write)",
    )
    p.add_argument(
        "-fork",
        action="store_true",
        help="run train.py in forks of this process rather than fresh interpreters (faster; the test suite's way)",
    )
    args = p.parse_args(argv)
    if args.kills < 1 or args.steps < args.kills + 7:
        p.error("-kills must be at least 1 and -steps at least -kills + 7")
    try:  # -out is emptied: never the sample it reads, nor a folder this tool did not make
        refuse_output_over_inputs({"-out": args.out}, {"the sample data": os.path.join(ROOT, "data")})
    except UserError as exc:
        p.error(str(exc))
    if os.path.lexists(args.out) and not (
        os.path.isdir(args.out)
        and not os.path.islink(args.out)
        and (not os.listdir(args.out) or os.path.isfile(os.path.join(args.out, WORK_MARKER)))
    ):
        p.error(
            f"-out {args.out} exists and is not a work folder of this tool (it would be emptied): give a new "
            "or empty folder"
        )
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    open(os.path.join(args.out, WORK_MARKER), "w").close()
    start_time = time.time()
    data_args = prepare_data(os.path.join(args.out, "data"))
    if args.torchrun:
        return main_torchrun(args, data_args, start_time)
    failures = total_kills = 0
    for loss in args.loss:
        ref = os.path.join(args.out, loss, "uninterrupted")
        run_uninterrupted(data_args, ref, loss, args.steps, fork=args.fork)
        for seed in args.seeds:
            print(f"-- -loss {loss}, seed {seed}")
            killed = os.path.join(args.out, loss, f"killed_seed{seed}")
            records = run_killed(data_args, killed, args.kills, seed, loss, args.steps, fork=args.fork)
            total_kills += len(records)
            diffs = compare(ref, killed)
            failures += bool(diffs)
            print(
                "   "
                + (
                    "; ".join(diffs)
                    if diffs
                    else f"after {len(records)} kills: every checkpoint equals the uninterrupted run's, bit for bit"
                )
            )
    print(
        f"{total_kills} kills in {len(args.loss) * len(args.seeds)} runs, {failures} with differences; "
        f"{time.time() - start_time:.0f}s"
    )
    return 1 if failures else 0


def main_torchrun(args, data_args, start_time):
    failures = total_kills = 0
    for loss in args.loss:
        ref = os.path.join(args.out, loss, "torchrun_uninterrupted")
        run_torchrun(data_args, ref, loss, args.steps, args.torchrun)
        for seed in args.seeds:
            print(f"-- torchrun, {args.torchrun} processes, -loss {loss}, seed {seed}")
            killed = os.path.join(args.out, loss, f"torchrun_killed_seed{seed}")
            records, resumed = run_torchrun(data_args, killed, loss, args.steps, args.torchrun, args.kills, seed)
            total_kills += len(records)
            diffs = compare(ref, killed)
            if len(resumed) != len(records) or any(r == 0 for r in resumed):
                diffs.append(f"expected {len(records)} resumes, none from step 0; the log has {resumed}")
            failures += bool(diffs)
            print(f"   restarts resumed from steps {resumed}")
            print(
                "   "
                + (
                    "; ".join(diffs)
                    if diffs
                    else f"after {len(records)} kills: every checkpoint equals the uninterrupted run's, bit for bit"
                )
            )
    print(
        f"{total_kills} kills in {len(args.loss) * len(args.seeds)} torchrun runs, {failures} with differences; "
        f"{time.time() - start_time:.0f}s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:3] == ["--child", "--stall"]:
        child_main(sys.argv[5:], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:2] == ["--child"]:
        child_main(sys.argv[2:])
    else:
        sys.exit(main())
