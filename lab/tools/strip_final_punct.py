#!/usr/bin/env python
"""A copy of a parallel set whose sentences lose their final . ! ? : a validation set that shows the
loops a continuous decoder falls into on such sources.

    python lab/tools/strip_final_punct.py -src val.de -tgt val.en -out_src val_nop.de -out_tgt val_nop.en

A test set whose sources lack a final mark far more often than validation's (Multi30k de->en's
test_2017) can show loops that validation barely shows; such a copy of validation shows them too.
Each source that ends with . ! or ? (and holds another token) loses it, and its reference loses its
own final mark where it has one, as train.py -drop_final_punct does at probability 1 (a source
without a final mark mostly has a reference without one too). Prints how many sources changed;
each file is written whole or not at all.
"""

import argparse
import sys

from onmt_cont.inputters.batching import FINAL_PUNCT
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs


def strip(words):
    """A token list without its final . ! ? where it has one and another token."""
    return words[:-1] if len(words) > 1 and words[-1] in FINAL_PUNCT else words


def strip_pairs(src, tgt):
    """Token lists of both sides -> (new sources, new targets, sources changed). A target loses its
    mark only where its source did, as -drop_final_punct."""
    out_src, out_tgt, changed = [], [], 0
    for s, t in zip(src, tgt, strict=True):
        s2 = strip(s)
        if len(s2) < len(s):
            changed += 1
            t = strip(t)
        out_src.append(s2)
        out_tgt.append(t)
    return out_src, out_tgt, changed


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-src", required=True, help="tokenized sources")
    p.add_argument("-tgt", required=True, help="tokenized references, line by line with -src")
    p.add_argument("-out_src", required=True)
    p.add_argument("-out_tgt", required=True)
    args = p.parse_args(argv)
    try:
        refuse_output_over_inputs(
            {"-out_src": args.out_src, "-out_tgt": args.out_tgt}, {"-src": args.src, "-tgt": args.tgt}
        )
        src = [line.split() for _, line in read_lines(args.src)]
        tgt = [line.split() for _, line in read_lines(args.tgt)]
        if len(src) != len(tgt):
            raise UserError(
                f"{args.src} has {len(src)} lines, {args.tgt} {len(tgt)}: expected one reference per source line"
            )
        new_src, new_tgt, changed = strip_pairs(src, tgt)
        atomic_write_text(args.out_src, "".join(" ".join(w) + "\n" for w in new_src))
        atomic_write_text(args.out_tgt, "".join(" ".join(w) + "\n" for w in new_tgt))
    except (UserError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{changed} of {len(src)} sources lost their final . ! ?: wrote {args.out_src}, {args.out_tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
