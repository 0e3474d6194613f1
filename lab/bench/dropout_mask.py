"""Time of one dropout, forward and backward, on the CPU: models/dropout.py (four 16-bit lanes per
64-bit draw of the generator, a float mask with the scale in it) against F.dropout (bernoulli_ per
element, as nn.Dropout and scaled_dot_product_attention draw it), at the shapes of the word_choice
recipe's Transformer (d_model 128, feed-forward 512, 4 heads, 64 sentences of about 22 words): the
feed-forward's inner activations, the residual branches, the attention probabilities. Also prints the
drop rate each gives on the largest shape.

    python lab/bench/dropout_mask.py                     # p 0.1, one thread
"""

import argparse

import torch
import torch.nn.functional as F

from lab.bench.benchlib import alternating_ms
from onmt_cont.models.dropout import dropout

SHAPES = {
    "feed-forward inner [64, 22, 512]": (64, 22, 512),
    "residual [64, 22, 128]": (64, 22, 128),
    "attention [64, 4, 22, 22]": (64, 4, 22, 22),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-p", type=float, default=0.1)
    p.add_argument("-batch", type=int, default=64, help="sentences (the first dimension of every shape)")
    p.add_argument("-reps", type=int, default=40)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fns = {"F.dropout": lambda x: F.dropout(x, args.p, True), "models/dropout.py": lambda x: dropout(x, args.p)}
    print(f"p {args.p}, {args.threads} thread(s), forward + backward, median of {args.reps - 2} (ms)")
    for label, shape in SHAPES.items():
        x = torch.randn(args.batch, *shape[1:], requires_grad=True)
        grad = torch.randn_like(x)
        ms = alternating_ms(fns, args.reps, lambda fn, x=x, grad=grad: fn(x).backward(grad))
        print(
            f"{label}: F.dropout {ms['F.dropout']:.3f}, models/dropout.py {ms['models/dropout.py']:.3f}, "
            f"ratio {ms['models/dropout.py'] / ms['F.dropout']:.2f}"
        )
    x = torch.ones(args.batch, *next(iter(SHAPES.values()))[1:])
    rates = {name: float((fn(x) == 0).float().mean()) for name, fn in fns.items()}
    print("drop rate: " + ", ".join(f"{name} {rate:.4f}" for name, rate in rates.items()))


if __name__ == "__main__":
    main()
