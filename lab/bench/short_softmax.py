"""The attention's softmax over short rows on one CPU thread: PyTorch's softmax and its backward against
models/short_softmax.py's exp2 softmax (four passes forward, two backward), at the shapes a Transformer-Tiny
batch of 8,192 tokens gives ([8192 / S sentences, 4 heads, S, S] for rows of S keys). Below 16 keys PyTorch's
kernel runs scalar code; the ratio column says where the crossover is (SHORT_ROWS).

    python lab/bench/short_softmax.py                    # one thread
"""

import argparse

import torch

from lab.bench.benchlib import alternating_ms
from onmt_cont.models.short_softmax import LOG2E, SHORT_ROWS, exp2_softmax


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-lengths", default="4,8,13,15,16,17,22,35,50")
    p.add_argument("-tokens", type=int, default=8192)
    p.add_argument("-reps", type=int, default=30)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"one thread per row; SHORT_ROWS = {SHORT_ROWS}; milliseconds, median of {args.reps} alternating turns")
    print("| keys | shape | softmax fwd | exp2 fwd | softmax bwd | exp2 bwd | fwd + bwd: softmax / exp2 |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for s in (int(v) for v in args.lengths.split(",")):
        shape = (max(1, args.tokens // s), 4, s, s)
        ms = time_rows(shape, args.reps)
        ratio = (ms["softmax fwd"] + ms["softmax bwd"]) / (ms["exp2 fwd"] + ms["exp2 bwd"])
        print(
            f"| {s} | {list(shape)} | {ms['softmax fwd']:.2f} | {ms['exp2 fwd']:.2f} | {ms['softmax bwd']:.2f} | "
            f"{ms['exp2 bwd']:.2f} | {ratio:.2f} |"
        )


def time_rows(shape, reps):
    """{which: median ms} of both softmaxes, forward and backward, on scores of ``shape``."""
    scores = torch.randn(shape) * 3
    x = scores.clone().requires_grad_()
    x2 = (scores * LOG2E).requires_grad_()
    grad = torch.randn(shape)
    y_ref, y_ours = torch.softmax(x, -1), exp2_softmax(x2)
    fns = {
        "softmax fwd": lambda: torch.softmax(scores, -1),
        "exp2 fwd": lambda: exp2_softmax(x2.detach()),
        "softmax bwd": lambda: torch.autograd.grad(y_ref, x, grad, retain_graph=True),
        "exp2 bwd": lambda: torch.autograd.grad(y_ours, x2, grad, retain_graph=True),
    }
    return alternating_ms(fns, reps, lambda f: f())


if __name__ == "__main__":
    main()
