"""Forward + backward time of the contrastive losses' per-token candidate products
(losses.token_dots.candidate_dots: gold_nn / ann / prefix candidates), against gathering the [N, C, m]
rows and multiplying, and against the implementation it replaced (the same gather, a few MB of
rows at a time, gathered again in the backward), with a frozen and with a trained table
(-train_table). All are timed in turns in one run; each ratio is the median of candidate_dots over
the median of the other.

    python lab/bench/candidate_dots.py                      # N 1000 tokens, C 32, V 9,800, m 300, 1 thread
    python lab/bench/candidate_dots.py -vocab 50000 -tokens 2000
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from onmt_cont.losses.token_dots import _TokenDots, table_gradient

CHUNK_BYTES = 4 << 20  # the former implementation's rows at a time


class _ChunkedGather(torch.autograd.Function):
    """The former _TokenDots: gathered rows, CHUNK_BYTES of them at a time, gathered again in the
    backward; a trained table's gradient as now (one sparse product)."""

    @staticmethod
    def forward(ctx, vec, table, ids):
        ctx.save_for_backward(vec, table, ids)
        step = max(1, CHUNK_BYTES // (ids.size(1) * table.size(1) * table.element_size()))
        return torch.cat(
            [
                torch.einsum("nm,ncm->nc", vec[i : i + step], F.embedding(ids[i : i + step], table))
                for i in range(0, ids.size(0), step)
            ]
        )

    @staticmethod
    def backward(ctx, grad):
        vec, table, ids = ctx.saved_tensors
        step = max(1, CHUNK_BYTES // (ids.size(1) * table.size(1) * table.element_size()))
        grad_vec = torch.cat(
            [
                torch.bmm(grad[i : i + step].unsqueeze(1), F.embedding(ids[i : i + step], table)).squeeze(1)
                for i in range(0, ids.size(0), step)
            ]
        )
        grad_table = table_gradient(vec, table, ids, grad) if ctx.needs_input_grad[1] else None
        return grad_vec, grad_table, None


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

    def former(vec, table):
        return _ChunkedGather.apply(vec, table, ids)

    fns = {"gather": gather, "former": former, "candidate_dots": custom}

    print(
        f"N {args.tokens} tokens, C {args.candidates} candidates, V {args.vocab:,}, m {args.dim}, "
        f"{args.threads} thread(s), median of {args.reps - 2} (2 warm-up)"
    )
    for trained in (False, True):
        table = torch.randn(args.vocab, args.dim, generator=gen, requires_grad=trained)
        vec = torch.randn(args.tokens, args.dim, generator=gen, requires_grad=True)
        times = {name: [] for name in fns}
        for rep in range(args.reps):
            order = list(fns.items())
            for name, fn in order if rep % 2 else order[::-1]:
                start = time.perf_counter()
                fn(vec, table).sum().backward()
                times[name].append(time.perf_counter() - start)
                vec.grad = table.grad = None
        ms = {name: statistics.median(t[2:]) * 1000 for name, t in times.items()}
        new = ms["candidate_dots"]
        print(
            f"table {'trained' if trained else 'frozen '}: gather {ms['gather']:.1f} ms, former "
            f"{ms['former']:.1f} ms, candidate_dots {new:.1f} ms; candidate_dots / gather "
            f"{new / ms['gather']:.2f}, / former {new / ms['former']:.2f}"
        )


if __name__ == "__main__":
    main()
