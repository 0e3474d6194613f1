"""The Pharaoh format of alignments: "i-j" per link, 0-based, source-target, one line per sentence pair."""

from __future__ import annotations

import re

from onmt_cont.align import Alignment
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines

_LINK = re.compile(r"([0-9]+)-([0-9]+)")


def read_pharaoh(path: str, src_lens: list[int], tgt_lens: list[int]) -> list[Alignment]:
    """Read and validate alignments against the corpus sentence lengths (one line per pair)."""
    lines = list(read_lines(path))
    if len(lines) != len(src_lens):
        raise UserError(f"{path}: {len(lines)} lines, but the corpus has {len(src_lens)} sentence pairs")
    out = []
    for (lineno, line), m, n in zip(lines, src_lens, tgt_lens, strict=True):
        links = set()
        for tok in line.split():
            match = _LINK.fullmatch(tok)
            if not match:
                raise UserError(
                    f"{path}, line {lineno}: expected links 'i-j' (0-based source-target positions), got {tok!r}"
                )
            i, j = int(match[1]), int(match[2])
            if i >= m or j >= n:
                raise UserError(
                    f"{path}, line {lineno}: link {tok} is outside the sentence pair (source has "
                    f"{m} words, target {n}; positions are 0-based)"
                )
            links.add((i, j))
        out.append(sorted(links))
    return out


def format_pharaoh(alignments: list[Alignment]) -> str:
    """One line per sentence pair: space-separated ``i-j`` links."""
    return "".join(" ".join(f"{i}-{j}" for i, j in links) + "\n" for links in alignments)
