"""Keep freed memory in the process instead of handing it back to the system at every step.

glibc's malloc serves a large block (a beam step's scores over a 10K-word vocabulary for 320
hypotheses are 12.5 MB) with a fresh mmap, or from the top of its heap, which it gives back to the
system once more than M_TRIM_THRESHOLD bytes are free there. Either way a decoding step's big
tensors land on new pages, and the kernel faults in and zeroes every page on its first write: in a
one-thread beam search that was about a tenth of the loop, in a training step 6% (continuous) to 11%
(ce, whose [tokens, V] logits are the big tensors) of the time (docs/benchmarks.md, "Freed memory
kept"). :func:`keep_freed_memory` raises both thresholds, so a step reuses the pages the previous
step freed. The process's peak memory is unchanged; its resident size no longer falls back after a
peak. Set per process, by translate.py and train.py; a C library without ``mallopt`` (not glibc) is left as
it is, and so is a threshold the user set in the environment (glibc's MALLOC_*_ variables).
ONMT_CONT_KEEP_FREED_MEMORY=0 leaves glibc's own behaviour (its resident size falls back after a peak).
"""

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest: blocks above it are still mmapped and unmapped on free
TRIM_THRESHOLD = 1 << 30


def keep_freed_memory():
    """Raise glibc's mmap and trim thresholds for this process. -> whether both were set (False
    without glibc's mallopt, where the environment already sets them, or with
    ONMT_CONT_KEEP_FREED_MEMORY=0)."""
    if os.environ.get("ONMT_CONT_KEEP_FREED_MEMORY") == "0":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first: setting it fixes the trim one's dynamic value too
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
