"""translate.py's files: the source (and -tgt) are streamed, read -chunk_size lines at a time
(:func:`read_chunks`), and the translations written into a temporary file beside -output, renamed onto it
only at the end (:func:`output_file`), so memory does not grow with the file and a failed or interrupted run
(Ctrl-C, SIGTERM) leaves neither -output nor the temporary file; the next run to the same -output removes one
that a SIGKILL left (:func:`remove_stale_outputs`). ``-src -`` reads standard input; a pipe (``-src <(...)``,
/dev/stdin) is read once, as it comes: a chunk is what has arrived (at most -chunk_size lines), so a line fed
alone is translated and written before the next one is read. Without -output (or with ``-output -``) the
translations go to standard output, flushed after each chunk; an -output that is no regular file (a FIFO,
/dev/null, a terminal, a link to one) is written in place, never replaced."""

import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice, zip_longest
from typing import TextIO

from onmt_cont.inputters.corpus import count_lines
from onmt_cont.utils.atomic import atomic_path, remove_stale_temps
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import check_readable, decode_line, read_lines

# a longer line from a stream is refused (a source such as /dev/zero never ends one)
MAX_STREAM_LINE = 1 << 20


def stream_chunks(path: str, size: int) -> Iterator[list[str]]:
    """Yield lists of the lines of a stream (a pipe, standard input, a FIFO, a terminal) as they
    arrive: each waits for one line, then takes the lines that can be read without waiting, at most
    ``size``. A line fed on its own is thus translated before the next one comes (line in, line
    out), and a pipe full of text still fills whole chunks. A line longer than MAX_STREAM_LINE
    bytes is a UserError naming it."""
    check_readable(path)
    fd = os.open(path, os.O_RDONLY)
    buf, lineno = b"", 0
    chunk: list[str] = []
    try:
        while True:
            while len(chunk) < size and (end := buf.find(b"\n")) >= 0:
                lineno += 1
                chunk.append(decode_line(path, lineno, buf[: end + 1]))
                buf = buf[end + 1 :]
            if chunk and (len(chunk) >= size or not _readable(fd)):
                yield chunk
                chunk = []
                continue
            if len(buf) > MAX_STREAM_LINE:
                raise UserError(
                    f"{path}, line {lineno + 1}: longer than {MAX_STREAM_LINE:,} bytes without a line "
                    "end: not a sentence per line (a device such as /dev/zero?)"
                )
            data = os.read(fd, 1 << 16)  # waits until something arrives
            if not data:
                break
            buf += data
        if buf:
            lineno += 1
            chunk.append(decode_line(path, lineno, buf))
        if chunk:
            yield chunk
    finally:
        os.close(fd)


def _readable(fd: int) -> bool:
    """Can ``fd`` be read now without waiting?"""
    import select

    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def read_chunks(src_path: str, tgt_path: str | None, size: int) -> Iterator[tuple[list[str], list[str] | None]]:
    """Yield ``(src_lines, ref_lines)`` of at most ``size`` lines each (``ref_lines`` None without
    ``tgt_path``), streaming. Files of different lengths are a UserError at the end of the shorter.
    A stream source without ``tgt_path`` comes in the chunks :func:`stream_chunks` makes."""
    if tgt_path is None:
        if is_stream(src_path):
            for chunk in stream_chunks(src_path, size):
                yield chunk, None
            return
        src = (line for _, line in read_lines(src_path))
        while chunk := list(islice(src, size)):
            yield chunk, None
        return
    src = (line for _, line in read_lines(src_path))
    # None past the end of the shorter file (a line is never None)
    pairs = zip_longest(src, (line for _, line in read_lines(tgt_path)))
    n = 0
    while block := list(islice(pairs, size)):
        src_lines, ref_lines = [], []
        for k, (s, t) in enumerate(block):
            if s is None or t is None:
                short, long_ = (src_path, tgt_path) if s is None else (tgt_path, src_path)
                raise UserError(
                    f"{short} ends after line {n + k} but {long_} goes on: -src and -tgt must "
                    "have the same number of lines"
                )
            src_lines.append(s)
            ref_lines.append(t)
        n += len(block)
        yield src_lines, ref_lines


STDIN = "/dev/stdin"  # -src - and -tgt -


def is_stream(path: str) -> bool:
    """A pipe, a FIFO, standard input or a terminal: read once, in order, never counted ahead."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def output_file(path: str) -> Iterator[TextIO]:
    """The translations' text file: standard output for ``-`` (left open), else written through
    :func:`atomic_path` (a regular file is replaced at the end only; a FIFO or device in place)."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        yield out


def remove_stale_outputs(output: str, log: Callable[[str], None]) -> None:
    """Remove the temporary files that killed runs left beside -output (a file, not ``-``), and say so."""
    if output == "-":
        return
    out_dir = os.path.dirname(os.path.abspath(output))
    stale = remove_stale_temps(out_dir, os.path.basename(output), exact=True)
    if stale:
        log(f"removed {len(stale)} temporary file(s) that killed runs left beside -output: {', '.join(stale)}")


def count_source(src: str, tgt: str | None, src_name: str, tgt_name: str | None) -> int | None:
    """The source's lines, None for a stream. A binary line count (no decoding, no lines kept) finds a -tgt of
    the wrong length before any decoding; a pipe can be read only once: it is not counted, and a -tgt of another
    length is found at its end (:func:`read_chunks`). ``src_name``, ``tgt_name``: the flags' values."""
    n_src = None if is_stream(src) else count_lines(src)
    if tgt and n_src is not None and not is_stream(tgt) and (n_tgt := count_lines(tgt)) != n_src:
        raise UserError(f"-tgt {tgt_name} has {n_tgt} lines but -src {src_name} has {n_src}")
    return n_src
