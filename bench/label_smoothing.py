"""Time of ce's loss, forward and backward, on the CPU: losses/softmax.py's cross_entropy (the
smoothed target's gradient written in one pass over the softmax) against F.cross_entropy with the same
label_smoothing, on [tokens, vocab] logits of the word_choice recipe's ce rows (64 sentences of about
13 target words against the 9,799-word fr->en target vocabulary), for a smoothing and for none.

    python bench/label_smoothing.py                  # one thread
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchlib import alternating_ms  # noqa: E402

from onmt_cont.losses.softmax import cross_entropy  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-tokens", type=int, default=830, help="target tokens of a batch (rows of the logits)")
    p.add_argument("-vocab", type=int, default=9799)
    p.add_argument("-smoothing", type=float, nargs="+", default=[0.1, 0.0])
    p.add_argument("-reps", type=int, default=30)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    logits = torch.randn(args.tokens, args.vocab) * 3
    target = torch.randint(0, args.vocab, (args.tokens,))
    grad = torch.rand(args.tokens)
    print(f"[{args.tokens}, {args.vocab}] logits, {args.threads} thread(s), forward + backward, "
          f"median of {args.reps - 2} (ms)")
    for eps in args.smoothing:
        fns = {"F.cross_entropy": lambda x, e=eps: F.cross_entropy(x, target, reduction="none", label_smoothing=e),
               "softmax.py": lambda x, e=eps: cross_entropy(x, target, e)}
        ms = alternating_ms(fns, args.reps, lambda fn: fn(logits.detach().requires_grad_()).backward(grad))
        print(f"label_smoothing {eps}: F.cross_entropy {ms['F.cross_entropy']:.2f}, softmax.py "
              f"{ms['softmax.py']:.2f}, ratio {ms['softmax.py'] / ms['F.cross_entropy']:.2f}")


if __name__ == "__main__":
    main()
