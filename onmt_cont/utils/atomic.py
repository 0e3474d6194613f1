"""Atomic writes: a file is replaced whole or not at all, and a killed writer's temporary files can be
told from a live one's and removed."""

import os
import re
import stat
import tempfile
from contextlib import contextmanager

import torch

from onmt_cont.utils.errors import UserError
from onmt_cont.utils.process import pid_alive


def _existing_target(path):
    """What writing ``path`` should touch: (the file to write, its stat or None). A symbolic link is
    followed to what it names, so the link itself is never replaced by a file."""
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        return target, os.stat(target)
    except OSError:
        return target, None


def _keep_owner_and_mode(tmp, old):
    """Give the new file the old one's permission bits (a file kept 0600 stays 0600) and, where this
    process may, its owner and group."""
    os.chmod(tmp, stat.S_IMODE(old.st_mode))
    if hasattr(os, "chown"):
        try:
            os.chown(tmp, old.st_uid, old.st_gid)
        except OSError:
            pass  # not root: the file keeps this process's owner


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary file, ``.tmp-PID-XXXXXXXX-NAME``, is fsynced before the rename and the directory
    after it, so after a crash ``path`` holds the old file or the new one, never a mix. A killed
    writer leaves its temporary file behind (nothing runs on SIGKILL): the PID in the name lets
    :func:`remove_stale_temps` tell such leftovers from a live writer's file. An ``OSError`` (a
    full disk, no permission) becomes a :class:`UserError` naming ``path``; ``path`` is untouched.

    Only regular files are replaced. A ``path`` that exists and is no regular file (a FIFO, a
    character device such as /dev/null or a terminal, a socket, /dev/stdout), or a symbolic link
    to one, is yielded as it is and written in place: replacing it would turn /dev/null into a
    file of translations (as root) or leave a FIFO's reader waiting for ever. A symbolic link to a
    regular file is followed: the file it names is replaced, the link kept. A replaced file keeps
    its permission bits (and, where this process may, its owner and group)."""
    target, old = _existing_target(path)
    if old is not None and not stat.S_ISREG(old.st_mode):
        if stat.S_ISDIR(old.st_mode):
            raise UserError(f"{path}: is a directory, expected a file name")
        try:
            yield target
        except OSError as exc:  # /dev/full, a FIFO whose reader went: one line, not a traceback
            raise UserError(f"cannot write {path}: {(exc.strerror or str(exc)).lower()}") from None
        return
    directory = os.path.dirname(os.path.abspath(target))
    prefix = f".tmp-{os.getpid()}-"
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=prefix, suffix="-" + _temp_tail(os.path.basename(target), directory, prefix), dir=directory
        )
    except OSError as exc:
        raise _write_error(path, exc) from None
    os.close(fd)
    try:
        yield tmp
        _fsync(tmp)
        if old is not None:
            _keep_owner_and_mode(tmp, old)
        else:  # mkstemp makes the file private (0600); give it the permissions a plain open() would
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(exc, OSError):
            raise _write_error(path, exc) from None
        raise
    _fsync_directory(directory)


def _temp_tail(name, directory, prefix):
    """``name`` as the end of a temporary file's name: cut (at a character) so that the whole name,
    ``prefix`` + 8 random characters + "-" + it, stays within the file system's name limit. A 255-byte
    -output was refused with "file name too long" for its temporary file alone."""
    try:
        limit = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        limit = 255
    room = max(1, limit - len(prefix.encode()) - 9)
    raw = name.encode("utf-8", "surrogateescape")
    return name if len(raw) <= room else raw[:room].decode("utf-8", "ignore")


def _write_error(path, exc):
    reason = (exc.strerror or str(exc)).lower()
    return UserError(
        f"cannot write {path}: {reason} (nothing was written; an earlier {os.path.basename(path)}, "
        "if any, is unchanged)"
    )


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory):
    """Make the rename durable. Best effort: some filesystems refuse fsync on a directory, and the
    new file is in place already, so a failure here must not be reported as a failed write."""
    try:
        _fsync(directory)
    except OSError:
        pass


_TEMP_NAME = re.compile(r"^\.tmp-(\d+)-[^-]+-(.+)$")


def remove_stale_temps(directory, name_prefix, exact=False):
    """Delete ``.tmp-PID-*-NAME`` files in ``directory`` whose NAME starts with ``name_prefix``
    (``exact``: is ``name_prefix``) and whose writer (PID) is no longer running: what a killed
    :func:`atomic_path` leaves behind. Returns the names removed."""
    removed = []
    for entry in os.listdir(directory):
        m = _TEMP_NAME.match(entry)
        if not m or not (m.group(2) == name_prefix if exact else m.group(2).startswith(name_prefix)):
            continue
        if pid_alive(int(m.group(1))):
            continue
        path = os.path.join(directory, entry)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):  # only files atomic_path made: no folder, no link
                continue
            os.remove(path)
            removed.append(entry)
        except OSError:  # another process cleaned it first, or a read-only folder: left as it is
            pass
    return removed


def atomic_torch_save(obj, path):
    """``torch.save`` to a temporary file, then rename, so readers never see half a file."""
    with atomic_path(path) as tmp:
        torch_save_to(obj, tmp)


def torch_save_to(obj, path):
    """``torch.save`` to ``path``, a failed write raising its OSError (inside :func:`atomic_path`,
    which reports it with the path). Several files that belong together: enter an atomic_path
    for each, write them all with this, and they are renamed into place only once all are written."""
    with open(path, "wb") as f:
        writer = _ErrorKeepingWriter(f)
        try:
            torch.save(obj, writer)
        except Exception:
            # torch's C++ writer turns a failed write (a full disk) into "unexpected pos ...":
            # re-raise the OSError behind it
            if writer.error is not None:
                raise writer.error from None
            raise


class _ErrorKeepingWriter:
    """A file's ``write`` that remembers the OSError it raised."""

    def __init__(self, f):
        self.f = f
        self.name = f.name
        self.error = None

    def write(self, data):
        try:
            return self.f.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self):
        self.f.flush()


def atomic_link(existing, path):
    """Make ``path`` a second name of the regular file ``existing`` (a hard link), atomically: linked
    under a temporary name beside ``path``, then renamed onto it. -> False, with nothing changed,
    where the file system cannot link (the caller then writes a copy)."""
    target, old = _existing_target(path)
    if old is not None and not stat.S_ISREG(old.st_mode):
        return False
    directory = os.path.dirname(os.path.abspath(target))
    tmp = os.path.join(directory, f".tmp-{os.getpid()}-link-{_temp_tail(os.path.basename(target), directory, '')}")
    try:
        os.link(existing, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, target)
    except OSError as exc:
        os.remove(tmp)
        raise _write_error(path, exc) from None
    _fsync_directory(directory)
    return True


def atomic_write_text(path, text):
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
