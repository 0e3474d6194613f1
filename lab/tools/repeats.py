#!/usr/bin/env python
"""Repetition in outputs: tokens of not-so-frequent words that repeat within their own sentence.

    python lab/tools/repeats.py -train train.en -max_count 1000 -files ref.en ce.en cont.en

A continuous decoder can fall into loops ("... is be be be be ...", "a thin @-@ haired girl in a
thin @-@ haired girl ..."); this counts them. Per file (tokenized, one sentence
per line): the tokens, the repeats (a sentence's tokens of words seen fewer than -max_count times
in -train, minus its distinct such words: frequent words such as "a" or "," repeat in any
sentence and are left out), the sentences with at least one repeat, and repeats per 1,000 tokens.
Give the reference among the files for its own (small) count.
"""

import argparse
import sys
from collections import Counter

from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines


def repeats(sentences, counts, max_count):
    """token lists, training counts -> (tokens, repeats, sentences with a repeat)."""
    tokens = total = with_repeat = 0
    for words in sentences:
        tokens += len(words)
        rare = [w for w in words if counts.get(w, 0) < max_count]
        extra = len(rare) - len(set(rare))
        total += extra
        with_repeat += extra > 0
    return tokens, total, with_repeat


def read(path):
    return [line.split() for _, line in read_lines(path)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-train", required=True, help="tokenized training targets (the counts)")
    p.add_argument("-files", required=True, nargs="+", help="tokenized outputs (and the reference)")
    p.add_argument("-max_count", type=int, default=1000, help="words seen this often or more are left out")
    args = p.parse_args(argv)
    if args.max_count < 1:
        p.error(f"-max_count must be at least 1, got {args.max_count}")
    try:
        counts = Counter(w for words in read(args.train) for w in words)
        rows = [(path, repeats(read(path), counts, args.max_count)) for path in args.files]
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"file\ttokens\trepeats (words seen < {args.max_count} times)\tsentences with one\tper 1,000 tokens")
    for path, (tokens, total, sents) in rows:
        print(f"{path}\t{tokens}\t{total}\t{sents}\t{1000 * total / max(tokens, 1):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
