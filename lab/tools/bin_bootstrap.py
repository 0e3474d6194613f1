"""Is a frequency bin written more or less often by system A than by reference system B beyond the test
set's noise? The calibration check (lab/tools/quality_report.py -calibration_ref) divides A's
output/reference token ratio in a bin of training counts (mean over A's seeds) by B's; this tool gives
that quotient a bootstrap interval over the test set's sentences, so that a quotient near the
-tolerance (1.3) can be told from one that the sentences alone could produce.

    python lab/tools/bin_bootstrap.py -train train.en -ref test.en -a A.s1.en A.s2.en -b B.s1.en B.s2.en [-bin 1]

A resample draws as many sentences as the test set holds, with replacement, the same for every
system; in it each system's bin ratio is (its output tokens of the bin's words) / (the reference's),
and the quotient is mean(A's ratios) / mean(B's). Printed: the quotient on the whole test set, its 95%
interval (2.5th and 97.5th percentiles), and the share of resamples in which it is further than
-tolerance from 1 either way (the quotient's distance is max(q, 1/q)). As tools/paired_bootstrap.py,
this covers the sentences, not the seeds: with few seeds the interval is too narrow.
"""

import argparse

import numpy as np

from lab import repo_module
from onmt_cont.translate.calibration import FREQ_BINS
from onmt_cont.utils import numbers
from onmt_cont.utils.errors import UserError, cli_main

# tools/paired_bootstrap.py, the user-facing tool (tools/ is no package), reads the files the same way
_paired = repo_module("tools/paired_bootstrap.py")
read_same_length, read_text = _paired.read_same_length, _paired.read_text

BINS = {name: (lo, hi) for name, lo, hi in FREQ_BINS}
MAX_RESAMPLES = 1_000_000  # 1000 is the usual count; more only costs time


def bin_counts(train_lines, ref_lines, systems, lo, hi):
    """-> (reference tokens of the bin per sentence [S], each system's output tokens of it [systems, S]):
    the words whose count in the training targets ``train_lines`` is in [lo, hi]."""
    freq = {}
    for line in train_lines:
        for w in line.split():
            freq[w] = freq.get(w, 0) + 1

    def count(lines):
        return np.array([sum(lo <= freq.get(w, 0) <= hi for w in line.split()) for line in lines], dtype=np.int64)

    return count(ref_lines), np.stack([count(hyp) for hyp in systems])


def bin_bootstrap(train_lines, ref_lines, a_systems, b_systems, lo, hi, n=1000, seed=1, tolerance=1.3):
    """a_systems, b_systems: lists of hypothesis line lists (one per seed), each as long as ref_lines.

    -> {"ref": reference tokens of the bin, "a"/"b": each system's output/reference ratio,
    "quotient": mean(a) / mean(b), "low"/"high": its 95% interval over n resamples, "beyond": share of
    resamples with max(q, 1/q) > tolerance}."""
    if not a_systems or not b_systems:
        raise ValueError("each side needs at least one hypothesis file")
    ref, hyp = bin_counts(train_lines, ref_lines, [*a_systems, *b_systems], lo, hi)
    if ref.sum() == 0:
        raise ValueError(f"the reference has no token of the bin (training count {lo} to {hi})")
    na = len(a_systems)
    if hyp[na:].sum() == 0:
        raise ValueError("system B writes no token of the bin: the quotient is undefined")
    full = hyp.sum(1) / ref.sum()
    rng = np.random.default_rng(seed)
    weights = np.stack(
        [np.bincount(rng.integers(0, len(ref_lines), len(ref_lines)), minlength=len(ref_lines)) for _ in range(n)]
    )  # [n, sentences]: how often each sentence is drawn
    totals = hyp @ weights.T  # [systems, n]: each system's output tokens of the bin in each resample
    a, b = totals[:na].mean(0), totals[na:].mean(0)
    q = a[b > 0] / b[b > 0]  # the reference count cancels: both ratios share the resample's
    low, high = np.percentile(q, [2.5, 97.5])
    distance = np.maximum(q, 1.0 / np.maximum(q, 1e-12))
    return {
        "ref": int(ref.sum()),
        "a": full[:na].tolist(),
        "b": full[na:].tolist(),
        "quotient": float(full[:na].mean() / full[na:].mean()),
        "low": float(low),
        "high": float(high),
        "beyond": float(np.mean(distance > tolerance)),
        "resamples": len(q),
    }


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-train", required=True, help="the training targets, tokenized, one sentence per line")
    p.add_argument("-ref", required=True, help="reference, tokenized, one sentence per line")
    p.add_argument("-a", nargs="+", required=True, help="system A's outputs, one file per seed")
    p.add_argument("-b", nargs="+", required=True, help="reference system B's outputs, one file per seed")
    p.add_argument("-bin", default="1", choices=list(BINS), help="training-count bin (default 1: words seen once)")
    p.add_argument("-n", type=int, default=1000, help="resamples (default 1000)")
    p.add_argument("-seed", type=numbers.seed, default=1, help="seed of the resampling: 0 to 2^32 - 1")
    p.add_argument(
        "-tolerance",
        type=float,
        default=1.3,
        help="the calibration check's tolerance, either way from 1 (default 1.3, as lab/tools/quality_report.py)",
    )
    opt = p.parse_args(argv)
    if not 1 <= opt.n <= MAX_RESAMPLES:  # 10^11 would ask for 745 GiB, and never end
        p.error(f"-n must be from 1 to {MAX_RESAMPLES:,}, got {opt.n}")
    if not 1 <= opt.tolerance < float("inf"):  # nan passed "< 1" and printed "beyond nanx"
        p.error(f"-tolerance must be at least 1, got {opt.tolerance}")
    try:
        train = read_text(opt.train)
        ref = read_text(opt.ref)
        a = [read_same_length(f, len(ref), "-a") for f in opt.a]
        b = [read_same_length(f, len(ref), "-b") for f in opt.b]
        r = bin_bootstrap(train, ref, a, b, *BINS[opt.bin], n=opt.n, seed=opt.seed, tolerance=opt.tolerance)
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from None
    print(f"bin {opt.bin}: {r['ref']} reference tokens in {len(ref)} sentences")
    print(f"A output/reference: {' '.join(f'{x:.2f}' for x in r['a'])} (mean {np.mean(r['a']):.2f})")
    print(f"B output/reference: {' '.join(f'{x:.2f}' for x in r['b'])} (mean {np.mean(r['b']):.2f})")
    q = r["quotient"]
    print(
        f"A / B: {q:.2f} ({max(q, 1 / q):.2f}x {'over' if q >= 1 else 'under'}), 95% interval "
        f"[{r['low']:.2f}, {r['high']:.2f}] over {r['resamples']} resamples; beyond {opt.tolerance}x either way "
        f"in {100 * r['beyond']:.1f}% of them"
    )


if __name__ == "__main__":
    main()
