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

The default folder is a predictable name in the shared temp folder, so it is used only while it is
safe: made with mode 0700, and before each use checked with ``lstat`` to be a real folder (not a
link) owned by this user that no group or other user can write into; otherwise claims are off,
said in one warning line. Inside it, a claim is written to a new ``PID.tmp`` (``O_EXCL``,
``O_NOFOLLOW``) renamed into place, other entries are read only when ``lstat`` shows a regular
file (a FIFO or a link is never opened), and every number read is bounded.
"""

import atexit
import contextlib
import errno
import os
import stat
import sys
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
# a claim file's name: a pid (Linux's pid_max is at most 2**22), its text: "threads start-time parent-pid"
MAX_PID = 1 << 22
MAX_THREADS = 1 << 16
MAX_REQUEST = 1024  # -threads: more would only start threads the machine cannot run (and 10^5 fail to start)
CLAIM_BYTES = 64  # a claim is one short line; a longer file is not one
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


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


class UnsafeClaims(OSError):
    """The claims folder (or its lock file) cannot be trusted: claims are off."""


def unsafe_reason(directory):
    """Why ``directory`` must not hold claims (None: it may). It must be a folder, not a symbolic
    link, owned by this user, that no group or other user can write into: anyone can create a
    predictable name in a shared /tmp first and plant links or FIFOs in it."""
    try:
        st = os.lstat(directory)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_claims_dir(directory):
    """Create the claims folder with mode 0700 (its parents as needed) unless it exists; then check
    it (:func:`unsafe_reason`). Raises UnsafeClaims with the reason."""
    parent = os.path.dirname(os.path.abspath(directory))
    try:
        os.makedirs(parent, exist_ok=True)
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass  # made earlier (or a file, a link: checked below)
    except OSError as exc:
        raise UnsafeClaims(f"cannot be created ({exc.strerror})") from None
    reason = unsafe_reason(directory)
    if reason:
        raise UnsafeClaims(reason)


def bounded_int(text, low, high):
    """``text`` as an int in [low, high] (ASCII digits only), else None."""
    if not text.isascii() or not text.isdigit() or len(text) > len(str(high)):
        return None
    value = int(text)
    return value if low <= value <= high else None


def open_regular(path, flags, mode=0o600):
    """os.open that never follows a symbolic link, never blocks on a FIFO, and refuses what is not
    a regular file (OSError)."""
    name = os.path.basename(path)
    try:
        fd = os.open(path, flags | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeClaims(f"holds {name}, a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeClaims(f"holds {name}, which is not a regular file")
    return fd


def read_claim(path):
    """A claim file -> (threads, start-time, parent pid), or None when it is not a claim: not a
    regular file (never opened then), too long, or numbers out of range."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = open_regular(path, os.O_RDONLY)
        try:
            text = os.read(fd, CLAIM_BYTES + 1)
        finally:
            os.close(fd)
    except OSError:
        return None  # being written or removed right now, or not a file
    fields = text.decode("ascii", "replace").split() if len(text) <= CLAIM_BYTES else []
    if len(fields) != 3:
        return None
    n, ppid = bounded_int(fields[0], 1, MAX_THREADS), bounded_int(fields[2], 0, MAX_PID)
    started = fields[1] if fields[1] == "-" or bounded_int(fields[1], 0, 10**30) is not None else None
    if n is None or ppid is None or started is None:
        return None
    return n, started.strip("-"), ppid


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
        make_claims_dir(self.dir)
        fd = open_regular(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def others(self):
        """Threads claimed by other live processes (claims of dead ones are removed)."""
        total = 0
        for name in os.listdir(self.dir):
            pid = bounded_int(name, 1, MAX_PID)
            if pid is None or pid == self.pid:
                continue
            path = os.path.join(self.dir, name)
            claim = read_claim(path)
            if claim is None:
                continue
            n, started, ppid = claim
            if not alive(pid, started):
                with contextlib.suppress(OSError):
                    os.remove(path)
            elif not (self.processes > 1 and ppid == self.ppid):
                total += n
        return total

    def write(self, n):
        """Write the claim to a new PID.tmp (never through a link or into an existing file), then
        rename it over PID (a rename replaces a link, it does not follow it)."""
        tmp = f"{self.path}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:  # left by a killed process that had this pid, or planted: not opened
            os.unlink(tmp)
            fd = os.open(tmp, flags, 0o600)
        try:
            os.write(fd, f"{n} {start_time(self.pid) or '-'} {self.ppid}\n".encode("ascii"))
        finally:
            os.close(fd)
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
        except OSError as exc:  # the folder went away or became unusable mid-run: keep the count, stop following
            self.fixed = True
            warn_claims_off(self.dir, exc if isinstance(exc, UnsafeClaims) else
                            f"cannot be used ({exc.strerror or exc})")
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
_warned = set()  # claims folders this process has warned about (once each)


def warn_claims_off(directory, reason):
    if directory not in _warned:
        _warned.add(directory)
        print(f"warning: thread claims off: {directory} {reason}; -threads' default is the start-up guess alone "
              f"(remove it, or set {CLAIMS_ENV} to a folder of your own)", file=sys.stderr)


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
        except UnsafeClaims as exc:
            warn_claims_off(directory, exc)
        except OSError as exc:  # the temp folder cannot be written: no claims
            warn_claims_off(directory, f"cannot be used ({exc.strerror or exc})")
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
    if requested is not None and not 0 <= requested <= MAX_REQUEST:
        raise UserError(f"{flag} must be from 0 (PyTorch's default) to {MAX_REQUEST}, got {requested}")
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
