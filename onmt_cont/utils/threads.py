"""``-threads``: how many intra-op threads torch uses, shared by train.py, translate.py and the benchmarks.

The rule users of PyTorch tools expect, with no state shared between processes: ``-threads N``;
else OMP_NUM_THREADS when it is set (torchrun sets 1 per process unless it is set already); else
the machine's cores divided among the processes torchrun starts on it (LOCAL_WORLD_SIZE). ``0``
leaves PyTorch's own default (one thread per core).

PyTorch's intra-op threads wait for each other at the end of every operation, so a job whose
threads outnumber the cores left to it slows down several times over while another process is busy
(docs/benchmarks.md, "Threads under contention"): on a shared machine give each job its share with
``-threads`` or OMP_NUM_THREADS.
"""

import os
from argparse import ArgumentParser, _ArgumentGroup

import torch

from onmt_cont.utils.errors import UserError

HELP = (
    "torch intra-op threads. Default: OMP_NUM_THREADS when it is set (torchrun sets 1 per process), else "
    "the machine's cores divided among the processes torchrun starts on it (LOCAL_WORLD_SIZE). On a shared "
    "machine give each job its share: PyTorch's threads stall when another process holds a core "
    "(docs/benchmarks.md). 0: PyTorch's own default (one per core)"
)

MAX_REQUEST = 1024  # -threads: more would only start threads the machine cannot run (and 10^5 fail to start)


def add_threads_arg(parser: ArgumentParser | _ArgumentGroup, help_text: str = HELP) -> None:
    """Add ``-threads`` (read by :func:`apply_threads`) to a parser or argument group."""
    parser.add_argument("-threads", type=int, default=None, help=help_text)


def local_processes() -> int:
    """How many processes of this job share this machine: torchrun's LOCAL_WORLD_SIZE, else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def omp_threads() -> int | None:
    """OMP_NUM_THREADS as a positive int, or None when unset or not a positive number."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None


def default_threads() -> int:
    """OMP_NUM_THREADS when set, else the cores divided among torchrun's local processes; at least 1."""
    return omp_threads() or max(1, (os.cpu_count() or 1) // local_processes())


def threads_problem(requested: int) -> str | None:
    """What is wrong with a ``-threads`` value ("must be from 0 ..."), or None: a configuration field's check."""
    return None if 0 <= requested <= MAX_REQUEST else f"must be from 0 (PyTorch's default) to {MAX_REQUEST}"


def apply_threads(requested: int | None, flag: str = "-threads") -> int:
    """Apply ``-threads``: None -> :func:`default_threads`, 0 -> leave PyTorch's default, N -> N.
    Returns the thread count torch now uses."""
    problem = None if requested is None else threads_problem(requested)
    if problem:
        raise UserError(f"{flag} {problem}, got {requested}")
    if requested != 0:
        # set even when it is torch's count already: an in-process caller may have changed it since start-up
        torch.set_num_threads(requested or default_threads())
    return torch.get_num_threads()
