"""Parsing the numeric part of many vector-file lines at once, with numpy.

``parse_values`` tries, in order: a fixed-point fast path (``_parse_fixed``: the
``-?D(D).dddddd`` numbers fastText, word2vec and GloVe write, turned into integers eight bytes
at a time), one ``np.fromstring`` call for the block, and finally line by line, which is slow
but says which lines are malformed and why. Every path gives the values of Python's ``float()``.
"""

import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

# Tables are stored as float32: a larger value would become inf there (and its square
# overflows the float64 sums of squared lengths long before that, at 1e154), so such a line is
# as malformed as one holding "inf".
FLOAT32_MAX = float(np.finfo(np.float32).max)

# a malformed line: (index in the block, reason, its number of values where that was wrong, else None)
Malformed = tuple[int, str, int | None]


def parse_values(
    rests: Sequence[bytes | memoryview], dim: int, scratch: "Scratch | None" = None
) -> tuple[np.ndarray, list[Malformed]]:
    """Parse the numeric part of many lines (bytes or memoryviews, no trailing whitespace;
    values separated by single spaces for the fast paths, any whitespace otherwise).

    Returns ``(values [n, dim] float64, bad)`` where ``bad`` lists ``(index, reason,
    n_values or None)`` of malformed lines (their rows are zeros); ``n_values`` is set when
    the line had the wrong number of values. Values equal Python's ``float()`` of the text; a
    value that is nan, inf or beyond the float32 range makes its line malformed.
    """
    n = len(rests)
    if n == 0:
        return np.zeros((0, dim)), []
    values = _parse_fixed(rests, dim, scratch or Scratch())
    if values is not None:
        return values, []
    lines = [bytes(r) for r in rests]  # memoryviews lack the bytes methods used below
    values = _parse_block_fromstring(lines, dim)
    if values is not None:
        return values, []
    return _parse_lines(lines, dim)


def _parse_block_fromstring(rests: list[bytes], dim: int) -> np.ndarray | None:
    """One ``np.fromstring`` call for the block, when every line has ``dim`` fields."""
    if any(r.count(b" ") != dim - 1 for r in rests):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # older numpy only warned
            values = np.fromstring(b" ".join(rests), dtype=np.float64, sep=" ")
    except (ValueError, DeprecationWarning):
        return None
    # Each space-separated field gives at most one value, so the total pins every line.
    if values.size != len(rests) * dim or not (np.abs(values) <= FLOAT32_MAX).all():  # False for nan
        return None
    return values.reshape(len(rests), dim)


def _parse_lines(rests: list[bytes], dim: int) -> tuple[np.ndarray, list[Malformed]]:
    """Line by line: slow, but says which lines are malformed and why."""
    values = np.zeros((len(rests), dim))
    bad: list[Malformed] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for i, rest in enumerate(rests):
            row: np.ndarray | None
            try:
                row = np.fromstring(rest, dtype=np.float64, sep=" ")
            except (ValueError, DeprecationWarning):
                row = None
            n_fields = len(rest.split())
            if n_fields != dim:
                bad.append((i, f"expected {dim} values after the word, found {n_fields}", n_fields))
            elif row is None or row.size != dim:
                bad.append((i, "a value is not a number", None))
            elif not (np.abs(row) <= FLOAT32_MAX).all():
                bad.append((i, "a value is not finite in float32 (nan, inf, or beyond ±3.4e38)", None))
            else:
                values[i] = row
    return values, bad


# The fixed-point fast path works on 8-byte little-endian words (SWAR: "SIMD within a
# register"): for each token it loads the 8 bytes that start at the digit before the '.',
# ``I . f1 .. f6``, checks them and turns the digits into an integer with three multiply-adds.
_U = np.uint64
_ZEROS = _U(0x3030303030303030)  # eight '0'
_HIGH_NIBBLES = _U(0xF0F0F0F0F0F0F0F0)
_SIXES = _U(0x0606060606060606)
_SPACES = _U(0x2020202020202020)
_ONES = _U(0x0101010101010101)
_TOP_BITS_FROM_BYTE3 = _U(0x8080808080000000)
_DECIMAL_BYTES = _U(0xFFFFFFFFFFFF0000)
_ZEROS_BUT_BYTE1 = _U(0x3030303030300030)
_LEAD = b"\0" * 7


class Scratch:
    """Work arrays kept from block to block: allocating fresh large temporaries for every
    block (and faulting their pages in) is a measurable part of the parsing time."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, size: int, dtype: DTypeLike) -> np.ndarray:
        """A work array ``[size]`` of ``dtype`` (contents undefined), reused under ``name``."""
        arr = self._arrays.get(name)
        if arr is None or arr.size < size or arr.dtype != dtype:
            arr = np.empty(max(size, 1024), dtype)
            self._arrays[name] = arr
        return arr[:size]


def _parse8(x: np.ndarray) -> np.ndarray:
    """Eight ASCII digits (first digit in the lowest byte) -> their integer value, in place
    (the multiply-shift steps of simdjson's parse_eight_digits_unrolled)."""
    for mask, mul, shift in (
        (0x0F0F0F0F0F0F0F0F, 2561, 8),  # 10 * 256 + 1: pairs of digits
        (0x00FF00FF00FF00FF, 6553601, 16),  # 100 * 65536 + 1: groups of four
        (0x0000FFFF0000FFFF, 42949672960001, 32),  # 10000 * 2**32 + 1: all eight
    ):
        x &= _U(mask)
        x *= _U(mul)
        x >>= _U(shift)
    return x


def _parse_fixed(rests: Sequence[bytes | memoryview], dim: int, scratch: Scratch) -> np.ndarray | None:
    """Vectorised parse of a block where every value is ``-?\\d{1,2}\\.\\d{1,6}`` (what
    fastText, word2vec and GloVe text files contain) and every line has ``dim`` values.

    Returns None (caller falls back) if any token or line does not fit. Exact: each value is
    an integer of at most 8 digits divided by 1e6, which IEEE division rounds correctly, the
    same as ``float()``. Why the checks suffice: every byte is accounted for, because each
    '.' claims a token ``[-]D[D].F..F `` whose bytes are checked, tokens cannot overlap (a
    token's trailing space cannot lie inside the next one), and their lengths add up to the
    whole block.
    """
    n = len(rests)
    ntok = n * dim
    lens = np.fromiter(map(len, rests), np.int64, n)
    core_len = int(lens.sum()) + n - 1
    # 7 zero bytes, b" ", the rests joined by spaces, b" ", zeros up to a multiple of 8 bytes
    # (at least 8). The core starts at byte 8, so "k bytes before a dot" is a view a[8-k:].
    buf = b" ".join([_LEAD, *rests, b"\0" * (8 + (-(core_len + 1)) % 8)])
    a = np.frombuffer(buf, np.uint8)
    is_dot = np.equal(a[8 : 8 + core_len], 46, out=scratch.get("is_dot", core_len, bool))
    dots = np.flatnonzero(is_dot)  # relative to byte 8
    if dots.size != ntok:
        return None
    words64 = np.frombuffer(buf, "<u8")
    if not words64.flags.aligned:
        words64 = words64.copy()
    u, t1, t2 = (scratch.get(name, ntok, np.uint64) for name in ("u", "t1", "t2"))
    # u: the 8 bytes from the digit before each dot (byte 7 + dot), from two aligned loads.
    p = np.add(dots, 7, out=scratch.get("p", ntok, np.int64))
    np.bitwise_and(p.view(np.uint64), _U(7), out=t1)
    t1 <<= _U(3)
    p >>= 3
    np.take(words64, p, out=u)
    u >>= t1
    np.subtract(_U(64), t1, out=t1)
    np.take(words64[1:], p, out=t2)
    t2 <<= t1  # a shift by 64 gives 0 in numpy
    u |= t2
    # The first space among bytes 3..7 of u ends the token (lowest flag of the classic
    # zero-byte test, which is exact); none there means 6 decimals and a space after u.
    np.bitwise_xor(u, _SPACES, out=t1)
    np.subtract(t1, _ONES, out=t2)
    np.invert(t1, out=t1)
    t2 &= t1
    t2 &= _TOP_BITS_FROM_BYTE3
    np.negative(t2, out=t1)
    t1 &= t2  # 2**(8k+7) for a space at byte k, or 0
    # Decimals = k - 2, from the float32 exponent 127+8k+7: bits >> 26 = 16 + k (0 for none).
    exps = t1.astype(np.float32).view(np.int32)
    exps >>= 26
    no_space = exps == 0
    n_no_space = int(np.count_nonzero(no_space))
    if n_no_space:
        if not (a[15:].take(dots[no_space]) == 32).all():
            return None
        exps[no_space] = 24
    # x: '0', the integer digit where the '.' was, the decimals (bytes 2 .. k-1), then '0's:
    # eight digits whose value is I*10^6 + decimals*10^(6-n_decimals).
    t1 >>= _U(7)
    t1 -= _U(1)  # bytes 0..k-1 (all 8 bytes when there was no space in u)
    t1 &= _DECIMAL_BYTES
    x = np.bitwise_and(u, t1, out=t2)
    np.invert(t1, out=t1)
    t1 &= _ZEROS_BUT_BYTE1
    x |= t1
    u &= _U(0xFF)
    u <<= _U(8)
    x |= u
    # Every byte of x must be '0'..'9': high nibble 3, also after adding 6.
    np.bitwise_and(x, _HIGH_NIBBLES, out=t1)
    t1 ^= _ZEROS
    t3 = np.add(x, _SIXES, out=p.view(np.uint64))
    t3 &= _HIGH_NIBBLES
    t3 ^= _ZEROS
    t1 |= t3
    if t1.any():
        return None
    # Before the integer digit: a sign, a space, or one more digit (then a sign or space).
    b2 = a[6:].take(dots)
    neg = b2 == 45
    two_digits = b2 >= 48
    n_two = int(np.count_nonzero(two_digits))
    if n_two:
        two_digits &= b2 <= 57
        n_two = int(np.count_nonzero(two_digits))
        b3 = a[5:].take(dots)
        if (two_digits & (b3 >= 48) & (b3 <= 57)).any():
            return None
        neg[two_digits] = b3[two_digits] == 45
    n_neg = int(np.count_nonzero(neg))
    n_decimals = int(exps.sum(dtype=np.int64)) - 18 * ntok
    if n_decimals + 3 * ntok + n_two + n_neg != core_len + 1:
        return None
    last = slice(dim - 1, None, dim)  # the last token of each line ends the line
    if not np.array_equal(dots[last] + exps[last] - 17, np.cumsum(lens + 1) - 1):
        return None
    mant = _parse8(x)  # (I*10^n_decimals + decimals) * 10^(6-n_decimals)
    if n_two:
        mant += np.where(two_digits, b2 - np.uint8(48), np.uint8(0)).astype(np.uint64) * _U(10_000_000)
    values = mant.view(np.int64).astype(np.float64)
    values /= 1e6
    t1[...] = neg
    t1 <<= _U(63)
    values.view(np.uint64)[...] |= t1  # the sign bit
    return values.reshape(n, dim)
