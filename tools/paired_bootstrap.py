#!/usr/bin/env python
"""Is system A's BLEU above system B's by more than the test set's noise? Paired bootstrap over
sentences (Koehn 2004), with several seeds per system.

    python tools/paired_bootstrap.py -ref test.en -a A.s1.en A.s2.en A.s3.en -b B.s1.en B.s2.en \\
        [-tokenize none] [-n 1000] [-seed 1]

Each side's score is the mean corpus BLEU of its files (one file per training seed), so the
question asked is the one docs/results.md answers with seed means. A resample draws as many
sentence indices as the test set holds, with replacement, and scores every file on the same
indices; the difference mean(A) - mean(B) over the resamples gives a 95% interval (2.5th and
97.5th percentiles) and p, the share of resamples in which A's mean is not above B's (one-sided:
small p says A's lead is not an accident of which sentences the test set holds). Seeds vary the
model, resamples vary the sentences; this bootstrap only covers the second, so with one seed per
side it says nothing about training noise (docs/results.md gives the std over seeds for that).

The scores are sacreBLEU's: -tokenize none (default) for tokenized files, as translate.py's
"tokenized BLEU"; 13a for detokenized ones. Files of unequal length are an error naming the file.
"""

import argparse

import numpy as np
from sacrebleu.metrics.bleu import BLEU

from onmt_cont.utils import numbers
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines

MAX_RESAMPLES = 1_000_000  # 1000 is the usual count; more only costs time


# sacreBLEU's statistics methods are underscored, but its own paired test (sacrebleu.significance) is built on
# them; tests/lab/test_tools.py checks the scores against sacrebleu.corpus_bleu, so an API change fails there.
def sentence_stats(bleu, hyp_lines, ref_lines):
    """-> [sentences, stats] int64: sacreBLEU's sufficient statistics (hypothesis and reference
    lengths, matches and totals per n-gram order) of each sentence; their column sums score the corpus."""
    return np.asarray(bleu._extract_corpus_statistics(hyp_lines, [ref_lines]), dtype=np.int64)


def corpus_bleu(bleu, stats):
    """stats: [stats] summed over a corpus (or a resample) -> BLEU."""
    return bleu._compute_score_from_stats([int(x) for x in stats]).score


def paired_bootstrap(ref_lines, a_systems, b_systems, n=1000, seed=1, tokenize="none"):
    """a_systems, b_systems: lists of hypothesis line lists (one per seed), each as long as ref_lines.

    -> {"a": [BLEU per file], "b": [...], "delta": mean(a) - mean(b), "low"/"high": 95% interval of
    the difference over n resamples, "p": share of resamples with mean(a) <= mean(b)}."""
    if not a_systems or not b_systems:
        raise ValueError("each side needs at least one hypothesis file")
    if not ref_lines:
        raise ValueError("the reference is empty: there are no sentences to resample")
    bleu = BLEU(tokenize=tokenize, force=tokenize == "none")  # tokenized input is expected there
    stats = [sentence_stats(bleu, hyp, ref_lines) for hyp in (*a_systems, *b_systems)]
    na = len(a_systems)
    full = [corpus_bleu(bleu, s.sum(0)) for s in stats]
    rng = np.random.default_rng(seed)
    deltas = np.empty(n)
    for i in range(n):
        counts = np.bincount(rng.integers(0, len(ref_lines), len(ref_lines)), minlength=len(ref_lines))
        scores = [corpus_bleu(bleu, counts @ s) for s in stats]
        deltas[i] = np.mean(scores[:na]) - np.mean(scores[na:])
    low, high = np.percentile(deltas, [2.5, 97.5])
    return {
        "a": full[:na],
        "b": full[na:],
        "delta": float(np.mean(full[:na]) - np.mean(full[na:])),
        "low": float(low),
        "high": float(high),
        "p": float(np.mean(deltas <= 0)),
    }


def read_text(path):
    return [line for _, line in read_lines(path)]


def read_same_length(path, n, what):
    lines = read_text(path)
    if len(lines) != n:
        raise ValueError(f"{path}: {len(lines)} lines, but the reference has {n} ({what}: one line per sentence)")
    return lines


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-ref", required=True, help="reference, one sentence per line")
    p.add_argument("-a", nargs="+", required=True, help="system A's outputs, one file per seed")
    p.add_argument("-b", nargs="+", required=True, help="system B's outputs, one file per seed")
    p.add_argument("-n", type=int, default=1000, help="resamples (default 1000)")
    p.add_argument("-seed", type=numbers.seed, default=1, help="seed of the resampling: 0 to 2^32 - 1")
    p.add_argument(
        "-tokenize",
        default="none",
        choices=list(BLEU.TOKENIZERS),
        help="sacreBLEU tokenizer: none for tokenized files, 13a otherwise",
    )
    opt = p.parse_args(argv)
    if not 1 <= opt.n <= MAX_RESAMPLES:  # 10^11 would ask for 745 GiB, and never end
        p.error(f"-n must be from 1 to {MAX_RESAMPLES:,}, got {opt.n}")
    try:
        ref = read_text(opt.ref)
        a = [read_same_length(f, len(ref), "-a") for f in opt.a]
        b = [read_same_length(f, len(ref), "-b") for f in opt.b]
        r = paired_bootstrap(ref, a, b, n=opt.n, seed=opt.seed, tokenize=opt.tokenize)
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from None
    print(f"A: {' '.join(f'{x:.2f}' for x in r['a'])} (mean {np.mean(r['a']):.2f})")
    print(f"B: {' '.join(f'{x:.2f}' for x in r['b'])} (mean {np.mean(r['b']):.2f})")
    print(
        f"A - B: {r['delta']:+.2f}, 95% interval [{r['low']:+.2f}, {r['high']:+.2f}] over {opt.n} resamples "
        f"of the {len(ref)} sentences; p(A <= B) = {r['p']:.3f}"
    )


if __name__ == "__main__":
    main()
