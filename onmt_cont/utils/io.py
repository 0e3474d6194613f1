"""Atomic writes and text reading with errors that name the file and line."""

import gzip
import io
import os
import tempfile
from contextlib import contextmanager

import torch

from onmt_cont.utils.errors import UserError


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    os.close(fd)
    try:
        yield tmp
        # mkstemp makes the file private (0600); give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_torch_save(obj, path):
    """``torch.save`` to a temporary file, then rename, so readers never see half a file."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def atomic_write_text(path, text):
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def check_readable(path):
    """A missing path or a directory is the user's mistake, not a traceback."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, expected a text file")


def open_text(path, mode="rt"):
    """Open a plain or ``.gz`` text file as UTF-8 (strict: bad bytes raise)."""
    check_readable(path)
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") or "r"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_lines(path):
    """Yield ``(line_number, line_without_newline)``, 1-based; invalid UTF-8 names the file and line.

    A Windows line end (CRLF) is stripped whole, so no token ends in ``\\r``. Lines are split at
    ``\\n`` only: a lone ``\\r`` or a Unicode line separator stays inside the line (``str.split``
    then treats it as a space), so line numbers agree with ``wc -l`` and with the parallel file."""
    check_readable(path)
    opener = gzip.open if path.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UserError(
                        f"{path}, line {lineno}: invalid UTF-8 ({exc.reason} at byte {exc.start})"
                    ) from None
                yield lineno, line.rstrip("\r\n")
    except (OSError, EOFError) as exc:  # no permission, a corrupt or truncated .gz
        where = f", line {lineno + 1}" if lineno else ""
        raise UserError(f"{path}{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def load_checkpoint_data(path):
    """``torch.load`` with ``weights_only=True``: our files hold plain data only."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    return torch.load(path, map_location="cpu", weights_only=True)
