"""``-threads``: how many intra-op threads torch uses, shared by train.py, translate.py and bench/.

PyTorch's default is one thread per core. Its intra-op threads wait for each other at the end
of every operation, so when another process holds a core, the thread that lost it stalls all
the others: a run with a thread on every core slows down several times over while one other
process is busy, where a run that leaves that core free barely slows down (docs/benchmarks.md,
"Threads under contention", bench/contention.py). The default here is therefore the cores
that no other process is using at start-up, shared among the processes torchrun starts on
this machine; OMP_NUM_THREADS, when set, wins over that guess (torchrun sets it to 1 per
process unless it is already set).

A start-up guess alone fails in two ways: two jobs started in the same second each see the
other still asleep and take every core, and a job that took every core on an idle machine
keeps them after a second job starts. So each process *claims* its threads (a small file per
process, :class:`ThreadShare`; a fixed count too): a starter that chooses by default counts the
threads that live jobs have claimed as busy even while they sleep, the choice is made under a
file lock so that starters take turns, and a training or translation run re-reads the claims
every few seconds and lowers its threads to its share (raising them again, up to its start-up
choice, when the others finish).
"""

import atexit
import contextlib
import os
import tempfile
import time

import torch

try:
    import fcntl
except ImportError:  # no flock(): default threads fall back to the start-up guess alone
    fcntl = None

from onmt_cont.utils.errors import UserError

HELP = ("torch intra-op threads. Default: OMP_NUM_THREADS when it is set (torchrun sets 1 per process), "
        "else the cores no other process is using at start-up (from /proc/loadavg's running count), divided "
        "among the processes torchrun starts on this machine: all cores on an idle machine, fewer while other "
        "processes run, because PyTorch's one thread per core stalls when another process holds a core "
        "(docs/benchmarks.md). Every job claims its threads, so default jobs started together share the "
        "cores, and default training and translation lower their threads while later jobs claim theirs. "
        "0: PyTorch's own default (one per core)")

# where processes claim their threads (one file per process); the variable moves it, "off" turns claims off
CLAIMS_ENV = "ONMT_CONT_THREAD_CLAIMS"
# how often a training or translation run re-reads the claims (seconds)
REFRESH_S = 5.0


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


def auto_threads(requested=None, processes=1, claimed=0.0):
    """``requested``, else the idle cores (all of them on an idle machine, fewer while other
    processes run or other jobs have claimed threads: ``claimed``) divided among ``processes``;
    at least 1."""
    if requested:
        return requested
    cores = os.cpu_count() or 1
    idle = max(1, min(cores, int(cores - max(busy_cores(), claimed) + 0.5)))
    return max(1, idle // processes)


def claims_dir():
    """The folder of thread claims: $ONMT_CONT_THREAD_CLAIMS, else one per user in the temp folder;
    None when that variable is "off" (the start-up guess alone, as before claims)."""
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    d = os.environ.get(CLAIMS_ENV) or os.path.join(tempfile.gettempdir(), f"onmt_cont-threads-{uid}")
    return None if d == "off" else d


def start_time(pid):
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), so that a claim
    of a dead process is not taken for a new process that got its number; "" without /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def alive(pid, started):
    """Whether process ``pid`` runs and, where /proc tells, is the one that started at ``started``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    return not started or start_time(pid) in ("", started)


class ThreadShare:
    """This process's claim on threads, in ``directory`` (:func:`claims_dir`): a file named by its
    pid holding "threads start-time parent-pid". ``processes`` > 1 (torchrun's local processes,
    which share a parent) divides the cores among them, so their claims are not counted again."""

    def __init__(self, directory, processes=1):
        self.dir, self.processes = directory, processes
        self.pid, self.ppid = os.getpid(), os.getppid()
        self.path = os.path.join(directory, str(self.pid))
        self.cap = self.threads = None  # the start-up choice, the count now
        self.fixed = False  # an explicit count: claimed, never changed
        self.next_check = 0.0

    @contextlib.contextmanager
    def locked(self):
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, ".lock"), "a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def others(self):
        """Threads claimed by other live processes (claims of dead ones are removed)."""
        total = 0
        for name in os.listdir(self.dir):
            if not name.isdigit() or int(name) == self.pid:
                continue
            path = os.path.join(self.dir, name)
            try:
                with open(path, encoding="utf-8") as f:
                    n, started, ppid = f.read().split()
                n, ppid = int(n), int(ppid)
            except (OSError, ValueError):
                continue  # being written or removed right now, or not ours
            if not alive(int(name), started):
                with contextlib.suppress(OSError):
                    os.remove(path)
            elif not (self.processes > 1 and ppid == self.ppid):
                total += n
        return total

    def write(self, n):
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{n} {start_time(self.pid) or '-'} {self.ppid}\n")
        os.replace(tmp, self.path)

    def start(self, fixed=None):
        """Claim ``fixed`` threads, or choose them (:func:`auto_threads`, other claims counted
        busy) and claim them."""
        with self.locked():
            claimed = self.others()  # also clears the claims of processes that were killed
            n = fixed or auto_threads(None, self.processes, claimed=claimed)
            self.write(n)
        self.cap = self.threads = n
        self.fixed = bool(fixed)
        self.next_check = time.monotonic() + REFRESH_S
        atexit.register(self.release)
        return n

    def refresh(self, now=None):
        """At most every REFRESH_S seconds: this process's share of the cores the other claims
        leave, at most its start-up choice. Sets torch's threads and returns (old, new) when the
        count changes, else None."""
        now = time.monotonic() if now is None else now
        if self.fixed or now < self.next_check:
            return None
        self.next_check = now + REFRESH_S
        try:
            with self.locked():
                cores = os.cpu_count() or 1
                n = max(1, min(self.cap, (cores - self.others()) // self.processes))
                if n != self.threads:
                    self.write(n)
        except OSError:  # the folder went away or became unwritable mid-run: keep the count, stop following
            self.fixed = True
            return None
        if n == self.threads:
            return None
        old, self.threads = self.threads, n
        torch.set_num_threads(n)
        return old, n

    def release(self):
        with contextlib.suppress(OSError):
            os.remove(self.path)


_share = None  # this process's ThreadShare, while its claim holds


def claim_threads(processes, fixed=None):
    """Claim ``fixed`` threads (an explicit count, which never changes), or choose the default and
    claim it, through a :class:`ThreadShare` where the claims folder can be used; else ``fixed``
    or the start-up guess alone. Returns the count."""
    global _share
    if _share is not None:  # an earlier call in this process (tests, tools): its claim ends here
        _share.release()
        _share = None
    directory = claims_dir()
    if fcntl is not None and directory is not None:
        share = ThreadShare(directory, processes)
        try:
            n = share.start(fixed)
        except OSError:
            pass  # the temp folder cannot be written: no claims
        else:
            _share = share
            return n
    return fixed or auto_threads(None, processes)


def refresh_threads():
    """A long job calls this often (it does the work at most every REFRESH_S seconds): (old, new)
    when its default thread count changed because other jobs claimed or freed theirs, else None."""
    return None if _share is None else _share.refresh()


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
        claim_threads(1, fixed=torch.get_num_threads())
        return torch.get_num_threads()
    if requested is None and omp_threads():
        # the user's (or torchrun's: 1 per process) explicit setting; an in-process caller may have
        # changed torch's count since start-up, so set it again
        requested = omp_threads()
    set_threads(claim_threads(local_processes(), fixed=requested))
    return torch.get_num_threads()


def omp_threads():
    """OMP_NUM_THREADS as a positive int, or None when unset or not a positive number."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None
