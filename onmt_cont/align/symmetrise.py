"""Symmetrisation of two directions' alignments (Koehn et al. 2003; Moses / atools definitions)."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from onmt_cont.align import Alignment

_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersect(fwd: Alignment, rev: Alignment) -> Alignment:
    return sorted(set(fwd) & set(rev))


def union(fwd: Alignment, rev: Alignment) -> Alignment:
    return sorted(set(fwd) | set(rev))


def grow_diag_final_and(fwd: Alignment, rev: Alignment) -> Alignment:
    """Start from the intersection; grow into union links next to (incl. diagonally) a link,
    where the source or the target word is still unaligned; then add the remaining links of
    each direction whose two words are both unaligned. Scans source-major, as Koehn's pseudocode.
    """
    both = set(fwd) | set(rev)
    align = set(fwd) & set(rev)
    src_done = {i for i, _ in align}
    tgt_done = {j for _, j in align}

    def add(p: tuple[int, int]) -> None:
        align.add(p)
        src_done.add(p[0])
        tgt_done.add(p[1])

    grown = True
    while grown and align != both:
        grown = False
        # A heap replays the grid scan: links added behind the cursor wait for the next pass,
        # links added ahead of it are visited in this one, without touching empty cells.
        heap = sorted(align)
        while heap:
            i, j = heapq.heappop(heap)
            for di, dj in _NEIGHBOURS:
                p = (i + di, j + dj)
                if p in both and p not in align and (p[0] not in src_done or p[1] not in tgt_done):
                    add(p)
                    grown = True
                    if p > (i, j):
                        heapq.heappush(heap, p)
    for direction in (fwd, rev):  # final-and
        for p in sorted(direction):
            if p[0] not in src_done and p[1] not in tgt_done:
                add(p)
    return sorted(align)


SYMMETRISERS: dict[str, Callable[[Alignment, Alignment], Alignment]] = {
    "grow-diag-final-and": grow_diag_final_and,
    "intersect": intersect,
    "union": union,
    "forward": lambda fwd, rev: sorted(fwd),
    "reverse": lambda fwd, rev: sorted(rev),
}
