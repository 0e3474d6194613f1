"""Finding before training that the outputs can be written: a read-only folder, a log file that
is a folder or a pipe, are errors at start, not after hours of training."""

import os
import stat
import tempfile

from onmt_cont.utils.errors import UserError


def _reason(exc):
    return (exc.strerror or str(exc)).lower()


def check_writable_folder(folder, what, name="probe"):
    """Create and remove a file in ``folder``; a UserError naming ``what`` (the option) if that
    fails. The file is named like :func:`onmt_cont.utils.atomic.atomic_path`'s temporary files
    (``.tmp-PID-XXXX-NAME``), so a run killed in between leaves nothing the next one keeps."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".tmp-{os.getpid()}-", suffix=f"-{name}", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise UserError(f"{what}: cannot write in the folder {folder} ({_reason(exc)}); nothing was written") from None


def check_log_file(path, what="-log_file"):
    """A log file that can be appended to: not a folder, not a pipe (opening one waits for a
    reader), in a folder that exists and takes new files, or an existing file that can be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{what} {path}: the folder {folder} does not exist")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        check_writable_folder(folder, f"{what} {path}", os.path.basename(path))
        return
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot use it ({_reason(exc)})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {path} is a folder: give a file name in it (e.g. {os.path.join(path, 'train.log')})")
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise UserError(f"{what} {path} is a pipe or a socket, not a file")
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot write it ({_reason(exc)})") from None
