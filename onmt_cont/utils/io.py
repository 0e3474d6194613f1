"""Atomic writes and text reading with errors that name the file and line."""

import gzip
import io
import os
import pickle
import re
import stat
import tempfile
import zipfile
from contextlib import contextmanager

import torch

from onmt_cont.utils.errors import UserError


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
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix="-" + _temp_tail(os.path.basename(target), directory, prefix),
                                   dir=directory)
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


class Prefix:
    """An output or input prefix (preprocess.py -save_data, train.py -save_model and -data): the
    files are PREFIX + a suffix that ``pattern`` (a regular expression) matches in full."""

    def __init__(self, path, pattern):
        self.path, self.pattern = path, re.compile(pattern)

    def matches(self, path):
        """Is ``path`` one of this prefix's files (by name, after resolving both)?"""
        directory, base = os.path.split(_resolved(self.path))
        other_dir, other = os.path.split(_resolved(path))
        return (other_dir == directory and other.startswith(base)
                and self.pattern.fullmatch(other[len(base):]) is not None)

    def existing(self):
        """This prefix's files that exist now."""
        directory, base = os.path.split(os.path.abspath(self.path))
        try:
            names = os.listdir(directory or ".")
        except OSError:
            return []
        return [os.path.join(directory, n) for n in sorted(names)
                if n.startswith(base) and self.pattern.fullmatch(n[len(base):])]


def _resolved(path):
    return os.path.realpath(os.path.abspath(path))


def _identity(path):
    """(st_dev, st_ino) of an existing regular file or folder, else None (a pipe, /dev/stdin, none)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else None


def _entries(named):
    """{flag: path | [paths] | Prefix | None} -> [(flag, path or Prefix)], "-" (standard input) left out."""
    out = []
    for flag, value in named.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is not None and v != "-" and v != "":
                out.append((flag, v))
    return out


def refuse_output_over_inputs(outputs, inputs):
    """Raise a :class:`UserError` when a file a script would write is one of the files it reads,
    or two of its outputs are one file: a careless argument order must not replace a checkpoint
    or a corpus with text. Call it before anything is read or written.

    ``outputs`` and ``inputs`` map a flag (``"-output"``) to a path, a list of paths, a
    :class:`Prefix` or None. Paths are compared resolved (symbolic links followed) and by
    (st_dev, st_ino), so a hard link is caught too; a prefix clashes with a path that is the
    prefix itself or one of its files (by name, or an existing one by inode)."""
    outs = _entries(outputs)
    ins = [(flag, v, "reads") for flag, v in _entries(inputs)]
    for i, (oflag, out) in enumerate(outs):
        for iflag, other, role in ins + [(f, v, "writes too") for f, v in outs[i + 1:]]:
            if _clash(out, other):
                if isinstance(out, Prefix):
                    what = f"{oflag} {out.path}: its files would replace {iflag} {_shown(other)}"
                elif isinstance(other, Prefix):
                    what = f"{oflag} {out} is one of the files of {iflag} {other.path}"
                else:
                    what = f"{oflag} {out} is {iflag} {other}"
                raise UserError(f"{what}, which this run {role}: give another {oflag} (nothing was written)")


def _shown(x):
    return x.path if isinstance(x, Prefix) else x


def _clash(a, b):
    """Do output ``a`` and ``b`` (an input, or another output) name one file?"""
    a_files = [a.path, *a.existing()] if isinstance(a, Prefix) else [a]
    b_files = [b.path, *b.existing()] if isinstance(b, Prefix) else [b]
    if any(_same(x, y) for x in a_files for y in b_files):
        return True
    return any(p.matches(x) for p, others in ((a, b_files), (b, a_files)) if isinstance(p, Prefix) for x in others)


def _same(a, b):
    if _resolved(a) == _resolved(b):
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _write_error(path, exc):
    reason = (exc.strerror or str(exc)).lower()
    return UserError(f"cannot write {path}: {reason} (nothing was written; an earlier {os.path.basename(path)}, "
                     "if any, is unchanged)")


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


def pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (a PID past any real one too)
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


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


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path, what, why=""):
    """``path`` must be a regular file (symbolic links followed): a missing path, a folder, a FIFO
    (whose open waits for a writer for ever), a device such as /dev/urandom (endless) or a socket is
    a UserError naming ``what`` it should be, before anything opens it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: is {_kind(mode)}, expected {what} (a regular file{': ' + why if why else ''})")


def check_readable(path):
    """A missing path or a directory is the user's mistake, not a traceback; so is a regular file
    that is plainly not UTF-8 text: gzip data without the ``.gz`` name, or UTF-16/32 (a
    byte-order mark; Windows' "Unicode"), which line counts would otherwise misread."""
    if not os.path.exists(path):
        if path in ("/dev/stdin", "/proc/self/fd/0") and _closed(0):  # -src - under `<&-`
            raise UserError(f"{path}: standard input is closed: give a file, or feed it text (a pipe or <)")
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, expected a text file")
    if path.endswith(".gz") or not os.path.isfile(path):  # a pipe is read once, by the reader alone
        return
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return  # the reader says why
    if head.startswith(b"\x1f\x8b"):
        raise UserError(f"{path}: is gzip-compressed: name it {os.path.basename(path)}.gz (or gunzip it)")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{path}: is UTF-16 or UTF-32 text (it starts with a byte-order mark): save it as UTF-8")


def _closed(fd):
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def open_text(path, mode="rt"):
    """Open a plain or ``.gz`` text file as UTF-8 (strict: bad bytes raise)."""
    check_readable(path)
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") or "r"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_lines(path):
    """Yield ``(line_number, line_without_newline)``, 1-based; invalid UTF-8 names the file and line.

    A Windows line end (CRLF) is stripped whole, so no token ends in ``\\r``; a UTF-8 byte-order mark
    at the start is dropped; a NUL byte is an error (not text). Lines are split at
    ``\\n`` only: a lone ``\\r`` or a Unicode line separator stays inside the line (``str.split``
    then treats it as a space), so line numbers agree with ``wc -l`` and with the parallel file."""
    check_readable(path)
    opener = gzip.open if path.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                yield lineno, decode_line(path, lineno, raw)
    except (OSError, EOFError) as exc:  # no permission, a corrupt or truncated .gz
        where = f", line {lineno + 1}" if lineno else ""
        raise UserError(f"{path}{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def decode_line(path, lineno, raw):
    """One line of :func:`read_lines`: bytes -> text without its line end, or a UserError naming
    ``path`` and ``lineno``."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}, line {lineno}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from None
    if "\x00" in line:  # UTF-16 without a byte-order mark, or a binary file
        raise UserError(f"{path}, line {lineno}: a NUL byte (at byte {raw.index(0)}): not UTF-8 text "
                        "(UTF-16? save it as UTF-8)")
    return drop_invisible(line.rstrip("\r\n"))  # a byte-order mark at the start (Notepad) goes with the others


# Invisible format characters that would stick to a word and make another, invisible word of it (issue 77.23): a
# byte-order mark (U+FEFF) anywhere, bidirectional controls (U+200E/F, U+202A-E, U+2066-9), the soft hyphen and the
# word joiner are dropped; a zero-width space (U+200B), a word break, is read as a space. The zero-width (non-)joiner
# (U+200C/D) stays: it is part of words in Persian, Indic scripts and emoji.
_INVISIBLE = re.compile("[\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
_INVISIBLE_MAP = {0x200B: " ", **{ord(c): None for c in "\u00ad\u200e\u200f\u2060\ufeff"},
                  **{c: None for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}}


def drop_invisible(line):
    """``line`` without the invisible format characters above (a zero-width space becomes a space)."""
    return line.translate(_INVISIBLE_MAP) if _INVISIBLE.search(line) else line


def load_checkpoint_data(path, what="a file written by onmt_cont"):
    """``torch.load`` with ``weights_only=True``: our files hold plain data only, and a file that
    holds anything else (a pickled object whose unpickling would run code) is refused unread.
    Any failure is a :class:`UserError` "PATH: not WHAT (why)"."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, not {what}")
    check_regular_file(path, what)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    except Exception as exc:  # torch.load's errors vary with what the file holds
        raise UserError(f"{path}: not {what} ({_why_unloadable(path, exc)})") from None


def _why_unloadable(path, exc):
    if os.path.getsize(path) == 0:
        return "empty file"
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"PK\x03\x04":
            return "truncated or corrupt torch.save file: its zip directory is missing"
        return "not a torch.save file"
    if isinstance(exc, pickle.UnpicklingError):
        return ("it holds Python objects other than tensors and plain data; refused without unpickling them, "
                "since unpickling can run code")
    return f"corrupt torch.save file: {type(exc).__name__}"
