"""Forward + backward time of the contrastive losses' per-token candidate products
(losses.negatives.candidate_dots: gold_nn / ann candidates), against gathering the [N, C, m] rows
and multiplying, with a frozen and with a trained table (-train_table). Both are timed in
alternating order in one run; the ratio is the median of one over the median of the other.

    python bench/candidate_dots.py                      # N 1000 tokens, C 32, V 9,800, m 300, 1 thread
    python bench/candidate_dots.py -vocab 50000 -tokens 2000
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from onmt_cont.losses.negatives import _TokenDots  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-tokens", type=int, default=1000)
    p.add_argument("-candidates", type=int, default=32)
    p.add_argument("-vocab", type=int, default=9800)
    p.add_argument("-dim", type=int, default=300)
    p.add_argument("-reps", type=int, default=12)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, args.vocab, (args.tokens, args.candidates), generator=gen)

    def gather(vec, table):
        return torch.einsum("nm,ncm->nc", vec, table[ids])

    def custom(vec, table):
        return _TokenDots.apply(vec, table, ids)

    print(f"N {args.tokens} tokens, C {args.candidates} candidates, V {args.vocab:,}, m {args.dim}, "
          f"{args.threads} thread(s), median of {args.reps - 2} (2 warm-up)")
    for trained in (False, True):
        table = torch.randn(args.vocab, args.dim, generator=gen, requires_grad=trained)
        vec = torch.randn(args.tokens, args.dim, generator=gen, requires_grad=True)
        times = {"gather": [], "candidate_dots": []}
        for rep in range(args.reps):
            order = [("gather", gather), ("candidate_dots", custom)]
            for name, fn in order if rep % 2 else order[::-1]:
                start = time.perf_counter()
                fn(vec, table).sum().backward()
                times[name].append(time.perf_counter() - start)
                vec.grad = table.grad = None
        old, new = (statistics.median(times[k][2:]) for k in ("gather", "candidate_dots"))
        print(f"table {'trained' if trained else 'frozen '}: gather {old * 1000:.0f} ms, candidate_dots "
              f"{new * 1000:.0f} ms, ratio {new / old:.2f}")


if __name__ == "__main__":
    main()
