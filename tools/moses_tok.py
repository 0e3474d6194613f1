#!/usr/bin/env python
"""Tokenize raw text the way ../shared/data's vectors were trained: Moses, no escaping, lowercase.

python tools/moses_tok.py -lang en < raw.en > tok.en
"""

import argparse
import sys

from onmt_cont.utils.errors import UserError, cli_main


def stdin_lines(stream):
    """Standard input's lines as text; a line that is not UTF-8 is an error naming it (read with
    Python's default, it became a lone surrogate that the tokenizer's pipe cannot encode)."""
    for lineno, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"standard input, line {lineno}: invalid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None


@cli_main
def main(argv=None):
    from mosestokenizer import MosesTokenizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-lang", required=True, help="language code for the Moses rules (en, de, fr)")
    p.add_argument("-no_lower", action="store_true", help="keep case (the shared vectors are lowercased)")
    args = p.parse_args(argv)
    with MosesTokenizer(args.lang, no_escape=True) as tok:
        for line in stdin_lines(sys.stdin.buffer):
            line = line.strip()
            out = " ".join(tok(line)) if line else ""
            sys.stdout.write((out if args.no_lower else out.lower()) + "\n")


if __name__ == "__main__":
    main()
