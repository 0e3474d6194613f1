"""A vectors file as bytes: read in chunks (plain or gzip, whatever its name), split into lines and each line
into its word and the rest, and the fastText header recognised. inputters/embeddings.py parses the values."""

import os
import zlib
from collections.abc import Generator, Iterable, Iterator
from functools import partial
from typing import BinaryIO

from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import check_regular_file

DEFAULT_CHUNK_BYTES = 1 << 18  # 256 KiB: fastest here; larger blocks spill the caches
_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
_TRAILING_SPACE = b" \t\r\v\f"

# what follows a line's word: a view into the chunk where possible (no copy), else bytes
Rest = bytes | memoryview


def iter_chunks(path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Generator[bytes, None, None]:
    """Yield the bytes of a plain or ``.gz`` file, about ``chunk_bytes`` at a time.

    A gzip file (recognised by its first bytes, whatever its name) is inflated with zlib
    directly, which is faster than the gzip module. Read errors, including a corrupt or
    truncated ``.gz``, become a UserError naming the file. Close the generator
    (``contextlib.closing``) to stop early."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, expected a vector file")
    check_regular_file(path, "a vector file")
    try:
        with open(path, "rb") as f:
            if f.peek(2)[:2] == _GZIP_MAGIC:
                yield from _inflate(f, chunk_bytes)
            else:
                yield from iter(partial(f.read, chunk_bytes), b"")
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None


def _inflate(raw: BinaryIO, chunk_bytes: int, in_bytes: int = 1 << 20) -> Iterator[bytes]:
    """Decompress a gzip stream (several members allowed, zero padding between them skipped),
    yielding at most ``chunk_bytes`` at a time. zlib checks each member's CRC and length."""
    inflater, started, pending = zlib.decompressobj(31), False, b""
    while True:
        if not pending:
            pending = raw.read(in_bytes)
            if not pending:
                tail = inflater.flush()
                if tail:
                    yield tail
                if started and not inflater.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                return
        started, before = True, len(pending)
        out = inflater.decompress(pending, chunk_bytes)
        pending = inflater.unconsumed_tail
        if not out and len(pending) == before and not inflater.eof:
            raise zlib.error("decompression makes no progress")  # never loop forever
        if inflater.eof:  # the rest is in unused_data (unconsumed_tail may repeat it)
            pending = inflater.unused_data.lstrip(b"\0")
            inflater, started = zlib.decompressobj(31), False
        if out:
            yield out


def iter_word_blocks(chunks: Iterable[bytes]) -> Iterator[tuple[list[bytes], list[Rest]]]:
    """Turn byte chunks into blocks ``(words, rests)``, one entry per complete line: the
    bytes before the line's first space, and what follows that space without trailing
    whitespace (a memoryview into the chunk where possible: no copy). A line that spans
    chunks is carried over whole; a last line without ``\\n`` is kept; a UTF-8 byte-order
    mark at the start of the file is dropped."""
    carry, bom = b"", _BOM  # the mark is only dropped from the first line
    for data in chunks:
        last = data.rfind(b"\n")
        if last < 0:
            carry += data
            continue
        first = data.find(b"\n")
        word, _, rest = (carry + data[:first]).removeprefix(bom).partition(b" ")
        words: list[bytes] = [word]
        rests: list[Rest] = [rest.rstrip()]
        bom = b""
        view, find = memoryview(data), data.find
        pos = first + 1
        while pos <= last:
            end = find(b"\n", pos)
            space = find(b" ", pos, end)
            if space < 0:
                words.append(data[pos:end])
                rests.append(b"")
            else:
                words.append(data[pos:space])
                stop = end
                while stop > space + 1 and data[stop - 1] in _TRAILING_SPACE:
                    stop -= 1
                rests.append(view[space + 1 : stop])
            pos = end + 1
        carry = data[last + 1 :]
        yield words, rests
    carry = carry.removeprefix(bom)
    if carry:
        word, _, rest = carry.partition(b" ")
        yield [word], [rest.rstrip()]


def parse_header(line: bytes) -> tuple[int, int] | None:
    """``(count, dim)`` if ``line`` is a word2vec/fastText ``COUNT DIM`` header, else None."""
    parts = line.split()
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    return None
