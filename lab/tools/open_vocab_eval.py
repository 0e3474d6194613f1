"""Open-vocabulary statistics of translations: output words outside the training target
vocabulary (how many, which, how many of them are right) and word F1 by training frequency.

    python lab/tools/open_vocab_eval.py -train_tgt train.en -vocab data.vocab.tgt.txt -ref test.en \\
        -hyp greedy.en greedy_ext.en

Word F1 by training frequency is lab/tools/rare_word_f1.py's (compare-mt's definition), in four coarse
buckets of the word's count in the training targets: 0 (never seen as a target), 1-4, 5-99, 100+;
<unk> and the other specials are no word of either text here.
"""

import argparse
from collections import Counter

from lab.tools.rare_word_f1 import rare_word_f1
from onmt_cont.constants import SPECIALS, UNK
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import check_readable, read_lines

BUCKETS = [("0", 0, 0), ("1-4", 1, 4), ("5-99", 5, 99), ("100+", 100, float("inf"))]


def read(path):
    """Tokens per line; <unk> (and any other special) left out: it is no word of either text."""
    return [[w for w in line.split() if w not in SPECIALS] for _, line in read_lines(path)]


def word_f1(hyps, refs, train_lines):
    """-> list of (bucket label, ref words, hyp words, precision, recall, F1)."""
    table = rare_word_f1(
        [" ".join(t) for t in train_lines], [" ".join(r) for r in refs], [" ".join(h) for h in hyps], BUCKETS, SPECIALS
    )
    return [(b, s["ref"], s["hyp"], s["precision"], s["recall"], s["f1"]) for b, s in table.items()]


def new_words(hyps, refs, vocab):
    """Output tokens outside ``vocab``: (count, Counter of types, correct count)."""
    types, correct, total = Counter(), 0, 0
    for hyp, ref in zip(hyps, refs, strict=True):
        r = Counter(ref)
        for w, c in Counter(w for w in hyp if w not in vocab).items():
            types[w] += c
            total += c
            correct += min(c, r.get(w, 0))
    return total, types, correct


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-train_tgt", required=True, help="tokenized training targets")
    p.add_argument("-vocab", required=True, help="PREFIX.vocab.tgt.txt of the model")
    p.add_argument("-ref", required=True)
    p.add_argument("-hyp", nargs="+", required=True)
    opt = p.parse_args(argv)
    for path in (opt.train_tgt, opt.vocab, opt.ref, *opt.hyp):
        check_readable(path)
    train_lines = read(opt.train_tgt)
    if opt.vocab.endswith(".pt"):  # not UTF-8: a UnicodeDecodeError traceback
        raise UserError(f"-vocab {opt.vocab}: expected the text file PREFIX.vocab.tgt.txt, not PREFIX.vocab.pt")
    vocab = {line.split("\t")[0].strip() for _, line in read_lines(opt.vocab)}
    refs = read(opt.ref)
    ref_oov = sum(1 for r in refs for w in r if w not in vocab)
    print(f"reference tokens outside the training target vocabulary: {ref_oov} of {sum(map(len, refs))}")
    for path in opt.hyp:
        hyps = read(path)
        if len(hyps) != len(refs):
            raise UserError(f"{path}: {len(hyps)} lines, but -ref {opt.ref} has {len(refs)} (one line per sentence)")
        n_unk = sum(line.split().count(UNK) for _, line in read_lines(path))
        total, types, correct = new_words(hyps, refs, vocab)
        n = sum(map(len, hyps))
        print(
            f"\n{path}: {n} words and {n_unk} {UNK}; outside the training vocabulary: {total} tokens "
            f"({100 * total / max(n, 1):.2f}%), {len(types)} types, {correct} also in the reference"
        )
        print("  most frequent: " + ", ".join(f"{w} ({c})" for w, c in types.most_common(15)))
        print(f"  {'train count':>11} {'ref':>6} {'hyp':>6} {'prec':>6} {'recall':>6} {'F1':>6}")
        for label, nr, nh, pr, rc, f in word_f1(hyps, refs, train_lines):
            print(f"  {label:>11} {nr:>6} {nh:>6} {pr:>6.3f} {rc:>6.3f} {f:>6.3f}")


if __name__ == "__main__":
    main()
