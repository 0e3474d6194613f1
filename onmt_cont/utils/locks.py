"""One writer per output prefix: train.py's -save_model and preprocess.py's -save_data are locked
(``flock`` on PREFIX.lock) for as long as a run writes them, so a second run on the same prefix is
refused at once with the first one's PID instead of the two interleaving their checkpoints or
shards without a word. The lock goes with the process, so a killed run holds none; a run that ends
removes the file (a SIGKILLed one leaves it, unlocked, for the next run to take)."""

import os
from contextlib import contextmanager

from onmt_cont.utils.errors import UserError

try:
    import fcntl
except ImportError:  # not POSIX: no lock (Windows is not a platform the toolkit runs on)
    fcntl = None


def lock_path(prefix):
    return prefix + ".lock"


def _open_locked(path, prefix, what):
    """-> a descriptor of ``path`` holding its exclusive lock, the file still at ``path`` (a run that
    ended between our open and our lock removed the file we opened: then open it again); None where
    the file system has no locks."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"{what} {prefix}: cannot create the lock file {path} ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise UserError(
                f"{what} {prefix}: another run (PID {holder}) is writing this prefix now ({path} is "
                f"locked): wait for it to end, or give another {what}; nothing was written"
            ) from None
        except OSError:  # no locks on this file system
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextmanager
def prefix_lock(prefix, what):
    """Hold an exclusive lock on ``prefix`` (the option ``what``, e.g. "-save_model") inside the
    block; a UserError naming the holder's PID if another process holds it. A file system without
    locks (some network mounts) is passed over: the block runs unlocked."""
    if fcntl is None:
        yield None
        return
    path = lock_path(prefix)
    fd = _open_locked(path, prefix, what)
    if fd is None:
        yield None
        return
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield path
    finally:
        try:
            os.remove(path)  # still locked: a run that opened it meanwhile sees it gone and opens anew
        except OSError:
            pass
        os.close(fd)  # closing releases the lock
