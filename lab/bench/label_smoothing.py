"""Time of ce's loss, forward and backward, on the CPU: losses/softmax.py's cross_entropy (the
smoothed target's gradient written in one pass over the softmax) against F.cross_entropy with the same
label_smoothing, on [tokens, vocab] logits of the word_choice recipe's ce rows (64 sentences of about
13 target words against the 9,799-word fr->en target vocabulary), for a smoothing and for none.

    python lab/bench/label_smoothing.py                  # one thread
    python lab/bench/label_smoothing.py -gpu 0 -tokens 830 3320 13280 -vocab 9799 50000   # CUDA (synchronised)
"""

import argparse

import torch
import torch.nn.functional as F

from lab.bench.benchlib import alternating_ms
from onmt_cont.losses.softmax import cross_entropy


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-tokens", type=int, nargs="+", default=[830], help="target tokens of a batch (rows of the logits)")
    p.add_argument("-vocab", type=int, nargs="+", default=[9799])
    p.add_argument("-smoothing", type=float, nargs="+", default=[0.1, 0.0])
    p.add_argument("-reps", type=int, default=30)
    p.add_argument("-threads", type=int, default=1)
    p.add_argument("-gpu", type=int, default=-1, help="CUDA device index (-1: the CPU); each call is synchronised")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.gpu >= 0 and not torch.cuda.is_available():
        p.error(f"-gpu {args.gpu}: PyTorch sees no CUDA device here")
    device = torch.device("cuda", args.gpu) if args.gpu >= 0 else torch.device("cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{args.threads} thread(s)"
    for vocab in args.vocab:
        for tokens in args.tokens:
            torch.manual_seed(0)
            logits = (torch.randn(tokens, vocab) * 3).to(device)
            target = torch.randint(0, vocab, (tokens,)).to(device)
            grad = torch.rand(tokens).to(device)
            print(f"[{tokens}, {vocab}] logits, {where}, forward + backward, median of {args.reps - 2} (ms)")
            for eps in args.smoothing:
                fns = {
                    "F.cross_entropy": lambda x, e=eps, t=target: F.cross_entropy(
                        x, t, reduction="none", label_smoothing=e
                    ),
                    "softmax.py": lambda x, e=eps, t=target: cross_entropy(x, t, e),
                }

                def call(fn, x=logits, g=grad):
                    fn(x.detach().requires_grad_()).backward(g)
                    sync()

                ms = alternating_ms(fns, args.reps, call)
                print(
                    f"label_smoothing {eps}: F.cross_entropy {ms['F.cross_entropy']:.3f}, softmax.py "
                    f"{ms['softmax.py']:.3f}, ratio {ms['softmax.py'] / ms['F.cross_entropy']:.2f}"
                )


if __name__ == "__main__":
    main()
