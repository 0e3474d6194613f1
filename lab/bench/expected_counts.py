"""Time of the sampling correction's expected counts (Negatives.log_expected_counts, -sampling_correction)
on a batch of the de->en recipe's size, against the implementation it replaced (float64 [N, S]
counts and their log, each per-token id bisected in the sorted shared words, each token's own
repeats by C compares), and whether the two give the same bits. Synthetic: a random unit table, a
skewed unigram prior, -tokens targets drawn from it; the candidates are those of train.py's default
sources for nllvmf_nce (inbatch, random, gold_nn), the shared ones made distinct as the losses do.

    python lab/bench/expected_counts.py                  # 900 tokens, V 9,800, 64 random draws, 32 neighbours
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from onmt_cont.losses.negatives import Negatives


def former(neg, target, shared, per_token):
    """The former Negatives.log_expected_counts (its base computation is the current one's)."""
    vocab, n = neg.table.size(0), target.numel()
    base = torch.zeros(vocab, dtype=torch.float64)
    base += n * neg.unigram
    base[1:] += neg.num_sampled / (vocab - 1)
    base[0] = 0.0
    expected = base[shared].unsqueeze(0).repeat(n, 1)
    order = shared.argsort()
    ordered = shared[order]
    ids = per_token.clamp_min(0)
    lo = torch.searchsorted(ordered, ids)
    count = ((torch.searchsorted(ordered, ids, right=True) - lo) * (per_token > 0)).flatten()
    lo = lo.flatten()
    rows = torch.arange(per_token.size(0)).repeat_interleave(per_token.size(1))
    total = int(count.sum())
    entry = torch.arange(count.numel()).repeat_interleave(count, output_size=total)
    k = torch.arange(total) - (torch.cumsum(count, 0) - count)[entry]
    expected.index_put_((rows[entry], order[lo[entry] + k]), torch.ones((), dtype=expected.dtype), accumulate=True)
    own = torch.zeros(per_token.shape, dtype=base.dtype)
    for c in range(per_token.size(1)):
        own += per_token == per_token[:, c : c + 1]
    return torch.log(torch.cat([expected, base[ids] + own * (per_token > 0)], 1)).float()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-tokens", type=int, default=900)
    p.add_argument("-vocab", type=int, default=9800)
    p.add_argument("-num_sampled", type=int, default=64)
    p.add_argument("-ann_candidates", type=int, default=32)
    p.add_argument("-reps", type=int, default=30)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    table = F.normalize(torch.randn(args.vocab, 300, generator=gen), dim=-1)
    table[0] = 0
    prior = torch.log_softmax(torch.randn(args.vocab, generator=gen) * 3, 0)
    neg = Negatives(
        ("inbatch", "random", "gold_nn"),
        table,
        num_sampled=args.num_sampled,
        ann_candidates=args.ann_candidates,
        log_prior=prior,
        counts="unigram",
    )  # the former's rule
    target = torch.multinomial(prior.exp(), args.tokens, replacement=True, generator=gen).clamp_min(4)
    torch.manual_seed(0)
    shared, per_token = neg(None, target)
    shared = torch.unique(shared)
    fns = {
        "former": lambda: former(neg, target, shared, per_token),
        "current": lambda: neg.log_expected_counts(target, shared, per_token),
    }
    times = {name: [] for name in fns}
    for rep in range(args.reps):
        for name, fn in fns.items() if rep % 2 else reversed(fns.items()):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    ms = {name: statistics.median(t[2:]) * 1000 for name, t in times.items()}
    same = torch.equal(fns["former"](), fns["current"]())
    print(
        f"{args.tokens} tokens, {shared.numel()} distinct shared words, {per_token.size(1)} per-token ids, "
        f"V {args.vocab:,}, {args.threads} thread(s), median of {args.reps - 2}"
    )
    print(
        f"former {ms['former']:.2f} ms, current {ms['current']:.2f} ms, current / former "
        f"{ms['current'] / ms['former']:.2f}; the same bits: {same}"
    )


if __name__ == "__main__":
    main()
