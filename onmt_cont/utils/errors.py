"""User-facing errors: a message that names the bad input, and a non-zero exit."""

import sys
from functools import wraps


class UserError(Exception):
    """Bad input from the user (file, option, data). Printed without a traceback."""


def cli_main(func):
    """Wrap a script's ``main(argv)`` so a :class:`UserError` prints ``error: ...`` and exits 2."""

    @wraps(func)
    def wrapper(argv=None):
        try:
            return func(argv)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    return wrapper
