"""Time of the softmax output layer's logits product on the CPU, forward and backward with ce's loss: PyTorch's
``F.linear(h, W, b)`` (what nn.Linear, and so every softmax generator, runs) against the same product written in
other orders, on the word_choice recipe's ce batch ([830, 128] decoder states, 9,799 target words).

    python lab/bench/logits_product.py                    # one thread
    python lab/bench/logits_product.py -tokens 830 1216 -vocab 9799 50000

Variants (equal results up to rounding; the script checks that first):
  linear       F.linear(h, W, b)
  mm_add       h @ Wᵀ, then + b
  transposed   (b[:, None] + W @ hᵀ)ᵀ, a [vocab, tokens] product read as [tokens, vocab], made contiguous
"""

import argparse

import torch
import torch.nn.functional as F

from lab.bench.benchlib import alternating_ms
from onmt_cont.losses.softmax import cross_entropy

VARIANTS = {
    "linear": lambda h, w, b: F.linear(h, w, b),
    "mm_add": lambda h, w, b: torch.mm(h, w.t()) + b,
    "transposed": lambda h, w, b: torch.addmm(b.unsqueeze(1), w, h.t()).t().contiguous(),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-tokens", type=int, nargs="+", default=[830])
    p.add_argument("-vocab", type=int, nargs="+", default=[9799])
    p.add_argument("-dim", type=int, default=128)
    p.add_argument("-reps", type=int, default=20)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for vocab in args.vocab:
        for tokens in args.tokens:
            gen = torch.Generator().manual_seed(0)
            h = torch.randn(tokens, args.dim, generator=gen)
            w = torch.randn(vocab, args.dim, generator=gen) * args.dim**-0.5
            b = torch.randn(vocab, generator=gen) * 0.1
            target = torch.randint(0, vocab, (tokens,), generator=gen)
            results = {}
            for name, fn in VARIANTS.items():
                hh, ww, bb = (t.clone().requires_grad_() for t in (h, w, b))
                logits = fn(hh, ww, bb)
                cross_entropy(logits, target, 0.1).sum().backward()
                results[name] = (logits.detach(), hh.grad, ww.grad, bb.grad)
            for name, got in results.items():
                for a, want in zip(got, results["linear"], strict=True):
                    torch.testing.assert_close(a, want, rtol=1e-4, atol=1e-4, msg=f"{name} differs from linear")

            def call(fn, inputs=(h, w, b), target=target):
                hh, ww, bb = (t.detach().requires_grad_() for t in inputs)
                cross_entropy(fn(hh, ww, bb), target, 0.1).sum().backward()

            ms = alternating_ms(VARIANTS, args.reps, call)
            fwd = alternating_ms(VARIANTS, args.reps, lambda fn, inputs=(h, w, b): fn(*inputs))
            print(
                f"[{tokens}, {args.dim}] x [{args.dim}, {vocab}], {args.threads} thread(s), median of "
                f"{args.reps - 2} (ms): "
                + ", ".join(
                    f"{name} {ms[name]:.1f} (forward {fwd[name]:.1f}; {ms[name] / ms['linear']:.2f}x)"
                    for name in VARIANTS
                )
            )


if __name__ == "__main__":
    main()
