"""User-facing errors: a message that names the bad input, and a non-zero exit."""

import os
import re
import sys
from functools import wraps


class UserError(Exception):
    """Bad input from the user (file, option, data). Printed without a traceback."""


class UserValueError(UserError, ValueError):
    """A UserError of the Python API (onmt_cont.load, Model.translate): also a ValueError, as Python callers expect."""


class UserTypeError(UserError, TypeError):
    """A UserError of the Python API for an argument of the wrong type: also a TypeError."""


# control characters (C0 but tab and newline, DEL, C1) and bidirectional overrides: shown escaped, so that a name or
# a line read from a file cannot move the cursor, retitle the terminal or reorder what is printed around it
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text):
    """``text`` with its control characters escaped (``\\x1b``), for messages that quote files or checkpoints."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def cli_main(func):
    """Wrap a script's ``main(argv)`` so a :class:`UserError` prints ``error: ...`` and exits 2. A
    reader of standard output that stops early (``translate.py ... | head``) ends the script quietly
    with status 141 (128 + SIGPIPE), as any Unix filter, not with a BrokenPipeError traceback."""

    @wraps(func)
    def wrapper(argv=None):
        try:
            return func(argv)
        except UserError as exc:
            print(f"error: {printable(exc)}", file=sys.stderr)
            raise SystemExit(2) from None
        except BrokenPipeError:
            # the rest of the output has no reader: point stdout at /dev/null so that the flush at exit
            # does not fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(141) from None

    return wrapper
