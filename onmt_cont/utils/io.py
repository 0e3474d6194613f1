"""Reading text with errors that name the file and line: plain or gzip UTF-8, and the checks that a
path is a readable regular file."""

import gzip
import io
import os
import re
import stat

from onmt_cont.utils.errors import UserError


def _kind(mode):
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
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
        raise UserError(
            f"{path}, line {lineno}: a NUL byte (at byte {raw.index(0)}): not UTF-8 text (UTF-16? save it as UTF-8)"
        )
    return drop_invisible(line.rstrip("\r\n"))  # a byte-order mark at the start (Notepad) goes with the others


# Invisible format characters that would stick to a word and make another, invisible word of it (issue 77.23): a
# byte-order mark (U+FEFF) anywhere, bidirectional controls (U+200E/F, U+202A-E, U+2066-9), the soft hyphen and the
# word joiner are dropped; a zero-width space (U+200B), a word break, is read as a space. The zero-width (non-)joiner
# (U+200C/D) stays: it is part of words in Persian, Indic scripts and emoji.
_INVISIBLE = re.compile("[\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
_INVISIBLE_MAP = {
    0x200B: " ",
    **{ord(c): None for c in "\u00ad\u200e\u200f\u2060\ufeff"},
    **{c: None for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}


def drop_invisible(line):
    """``line`` without the invisible format characters above (a zero-width space becomes a space)."""
    return line.translate(_INVISIBLE_MAP) if _INVISIBLE.search(line) else line
