"""``-threads``: how many intra-op threads torch uses, shared by train.py, translate.py and bench/.

PyTorch's default is one thread per core. Its intra-op threads wait for each other at the end
of every operation, so when another process holds a core, the thread that lost it stalls all
the others: on the 2-core machine the quickstart's training ran several times slower with 2
threads while one other process was busy, and barely slower with 1 (docs/benchmarks.md,
"Threads under contention", bench/contention.py). The default here is therefore the cores
that no other process is using at start-up, shared among the processes torchrun starts on
this machine; OMP_NUM_THREADS, when set, wins over that guess (torchrun sets it to 1 per
process unless it is already set).
"""

import os
import time

import torch

from onmt_cont.utils.errors import UserError

HELP = ("torch intra-op threads. Default: OMP_NUM_THREADS when it is set (torchrun sets 1 per process), "
        "else the cores no other process is using at start-up (from /proc/loadavg's running count), divided "
        "among the processes torchrun starts on this machine: all cores on an idle machine, fewer while other "
        "processes run, because PyTorch's one thread per core stalls when another process holds a core "
        "(docs/benchmarks.md). 0: PyTorch's own default (one per core)")


def add_threads_arg(parser, help_text=HELP):
    """Add ``-threads`` (read by :func:`apply_threads`) to a parser or argument group."""
    parser.add_argument("-threads", type=int, default=None, help=help_text)


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


def local_processes():
    """How many processes of this job share this machine: torchrun's LOCAL_WORLD_SIZE, else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def auto_threads(requested=None, processes=1):
    """``requested``, else the idle cores (all of them on an idle machine, fewer while other
    processes run) divided among ``processes``; at least 1."""
    if requested:
        return requested
    cores = os.cpu_count() or 1
    idle = max(1, min(cores, int(cores - busy_cores() + 0.5)))
    return max(1, idle // processes)


def set_threads(n):
    """Use ``n`` intra-op threads and one inter-op thread (nothing here runs operations in parallel;
    the inter-op count can only be set once per process, so later calls keep it)."""
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


def apply_threads(requested, flag="-threads"):
    """Apply ``-threads``: None -> :func:`auto_threads` (among torchrun's local processes), 0 -> leave
    PyTorch's default, N -> N. Returns the thread count torch now uses."""
    if requested is not None and requested < 0:
        raise UserError(f"{flag} must be at least 0 (0: PyTorch's default), got {requested}")
    if requested == 0:
        return torch.get_num_threads()
    if requested is None and omp_threads():
        # the user's (or torchrun's: 1 per process) explicit setting; an in-process caller may have
        # changed torch's count since start-up, so set it again
        requested = omp_threads()
    set_threads(auto_threads(requested, local_processes()))
    return torch.get_num_threads()


def omp_threads():
    """OMP_NUM_THREADS as a positive int, or None when unset or not a positive number."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None
