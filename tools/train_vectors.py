#!/usr/bin/env python
"""Train target-side word vectors on tokenized text and write them in the fastText text format
(``.vec`` or ``.vec.gz``: a ``COUNT DIM`` header, then ``word v1 ... vDIM`` per line), the format
embeddings_to_torch.py and preprocess.py -tgt_emb read.

Skip-gram with subword n-grams (fastText's model, through gensim), by default as the shared
vectors were made: 300 dimensions, 10 epochs. ``</s>`` gets a vector too, as fastText files have.

    python tools/train_vectors.py -input tok/train.en -output vectors.en.vec.gz
    python tools/train_vectors.py -input tok/train.en -input more_english.tok -output vectors.en.vec.gz

More monolingual target text (``-input`` again) gives better vectors and words the parallel data lacks.
Needs gensim (``pip install gensim``).
"""

import argparse
import gzip
from collections import Counter

from onmt_cont.inputters.embeddings import MAX_DIM
from onmt_cont.utils import numbers
from onmt_cont.utils.atomic import atomic_path
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs

MAX_EPOCHS = 10_000


class Sentences:
    """The tokenized lines of every input, re-read on each pass (gensim iterates several times)."""

    def __init__(self, paths):
        self.paths = paths

    def __iter__(self):
        for path in self.paths:
            for _, line in read_lines(path):
                words = line.split()
                if words:
                    yield words + ["</s>"]


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-input",
        action="append",
        required=True,
        help="tokenized text, one sentence per line (repeat for several files)",
    )
    p.add_argument("-output", required=True, help=".vec or .vec.gz file to write")
    p.add_argument("-dim", type=int, default=300, help="vector size")
    p.add_argument("-epochs", type=int, default=10, help="passes over the text")
    p.add_argument("-min_count", type=int, default=1, help="words seen fewer times get no vector")
    p.add_argument("-window", type=int, default=5, help="context window")
    p.add_argument("-threads", type=int, default=1, help="worker threads")
    p.add_argument("-seed", type=numbers.seed, default=1, help="random seed of the training: 0 to 2^32 - 1")
    args = p.parse_args(argv)
    refuse_output_over_inputs({"-output": args.output}, {"-input": args.input})
    for name in ("dim", "epochs", "min_count", "window", "threads"):
        if getattr(args, name) < 1:
            raise UserError(f"-{name} must be at least 1, got {getattr(args, name)}")
    for name, most in (("dim", MAX_DIM), ("epochs", MAX_EPOCHS), ("window", MAX_EPOCHS)):
        if getattr(args, name) > most:  # a table of terabytes, or a run that never ends
            raise UserError(f"-{name} must be at most {most:,}, got {getattr(args, name)}")
    if not args.output.endswith((".vec", ".vec.gz")):
        raise UserError(f"-output {args.output}: expected a .vec or .vec.gz file name")
    try:
        from gensim.models import FastText
    except ImportError:
        raise UserError("tools/train_vectors.py needs gensim: pip install gensim") from None

    sentences = Sentences(args.input)
    counts = Counter(w for words in sentences for w in words[:-1])  # reads every file: a bad one fails here
    if not counts:
        raise UserError(f"-input {' '.join(args.input)}: no words")
    if max(counts.values()) < args.min_count:  # gensim: "you must first build vocabulary", a traceback
        raise UserError(
            f"-min_count {args.min_count}: no word of -input is seen that often (the most frequent: "
            f"{max(counts.values())} times)"
        )
    model = FastText(
        sentences=sentences,
        vector_size=args.dim,
        sg=1,
        window=args.window,
        min_count=args.min_count,
        epochs=args.epochs,
        workers=args.threads,
        seed=args.seed,
    )
    words = model.wv.index_to_key
    opener = gzip.open if args.output.endswith(".gz") else open
    with atomic_path(args.output) as tmp, opener(tmp, "wt", encoding="utf-8") as f:
        f.write(f"{len(words)} {args.dim}\n")
        for word in words:
            f.write(word + " " + " ".join(f"{v:.5f}" for v in model.wv[word]) + "\n")
    print(f"trained {len(words):,} vectors of {args.dim} dimensions: wrote {args.output}")


if __name__ == "__main__":
    main()
