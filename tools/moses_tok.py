#!/usr/bin/env python
"""Tokenize raw text the way ../shared/data's vectors were trained: Moses, no escaping, lowercase.

    python tools/moses_tok.py -lang en < raw.en > tok.en
"""

import argparse
import sys

from mosestokenizer import MosesTokenizer


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-lang", required=True, help="language code for the Moses rules (en, de, fr)")
    p.add_argument("-no_lower", action="store_true", help="keep case (the shared vectors are lowercased)")
    args = p.parse_args(argv)
    with MosesTokenizer(args.lang, no_escape=True) as tok:
        for line in sys.stdin:
            line = line.strip()
            out = " ".join(tok(line)) if line else ""
            sys.stdout.write((out if args.no_lower else out.lower()) + "\n")


if __name__ == "__main__":
    main()
