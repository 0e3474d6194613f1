"""argparse types for numeric options whose every accepted value must be usable: finite floats
(no nan, no inf, no non-zero number that rounds to 0) and seeds that every generator accepts.
They run on the command line's text and on a YAML config's values alike (opts.py converts
those through the same type)."""

import argparse
import math
import re

# torch.manual_seed takes 64 bits, numpy's generators any non-negative integer; train.py derives
# further seeds from -seed (seed * 1000003 + epoch, ...), which 32 bits keep inside 64.
SEED_MAX = 2**32 - 1
_NONZERO_DIGIT = re.compile(r"[1-9]")


def finite_float(text):
    """A float option's value: refused when it is nan or ±inf (``1e400`` becomes inf), or when a
    non-zero number such as ``1e-400`` becomes 0.0 (the option would silently be off)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"expected a finite number, got {text!r}" + (" (beyond the float range)" if not _is_inf_text(text) else "")
        )
    mantissa = re.split(r"[eE]", str(text).strip(), maxsplit=1)[0]
    if value == 0.0 and _NONZERO_DIGIT.search(mantissa):
        raise argparse.ArgumentTypeError(f"{text!r} is too small for a float: it would be 0.0 (write 0 if you mean 0)")
    return value


def _is_inf_text(text):
    return str(text).strip().lstrip("+-").lower() in ("inf", "infinity", "nan")


def seed(text):
    """A -seed: an integer from 0 to SEED_MAX."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0 to {SEED_MAX} (2^32 - 1), got {text}")
    return value
