"""Progress bars for long jobs, and the one-line summary each script ends with.

Bars are tqdm's, on stderr, and shown only when stderr is a terminal (tqdm's ``disable=None``):
logs, pipes and tests stay free of carriage returns, and stdout carries only the scripts'
report lines. A finished bar is erased (``leave=False``); the summary line says what was done.
"""

import sys

from tqdm import tqdm


def progress(iterable=None, desc=None, total=None, unit="it"):
    """A tqdm bar over ``iterable`` (or a manual one, ``.update(n)``, when None) on stderr, off when
    stderr is not a terminal. ``total`` None shows a count and a rate but no ETA."""
    return tqdm(
        iterable,
        desc=desc,
        total=total,
        unit=unit,
        unit_scale=True,
        file=sys.stderr,
        disable=None,
        leave=False,
        dynamic_ncols=True,
    )


def write(message):
    """Print a line to stdout without breaking a progress bar that is being drawn."""
    tqdm.write(message, file=sys.stdout)


def summary(done, seconds, written, rate=None):
    """Print the line a script ends with: ``<done> in <T>s[ (<rate>)]: wrote <written>``.

    done: what was processed ("read 2,000,000 vectors"); written: the output files, each with what
    it holds ("emb.dec.pt [898, 300] float32"); rate: (count, unit) -> "98.0 sent/s"."""
    speed = f" ({rate[0] / max(seconds, 1e-9):,.1f} {rate[1]}/s)" if rate else ""
    print(f"{done} in {seconds:.1f}s{speed}: wrote {', '.join(written)}")
