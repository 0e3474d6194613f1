"""The elementwise passes of losses/linear_ce.py's chunk, each way it could be written, on one CPU thread: the
exponential of shifted logits (``exp_`` against ``exp2`` of the exponent times log2 e, as ``exp_shifted_`` does)
and the cast of the bfloat16 logits to float32 with the bias (``add(out=)`` of mixed dtypes against ``copy_``
then ``add_``), on one chunk of the Transformer-Tiny softmax preset (263 rows x 9,710 words), the logits drawn
like a trained model's (N(0, 4^2), so that most shifted values lie within [-30, 0]).

    python lab/bench/exp_kernels.py                      # one thread
"""

import argparse

import torch

from lab.bench.benchlib import alternating_ms
from onmt_cont.losses.linear_ce import LOG2E, exp_shifted_


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-rows", type=int, default=263)
    p.add_argument("-vocab", type=int, default=9710)
    p.add_argument("-reps", type=int, default=60)
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    logits = torch.randn(args.rows, args.vocab) * 4
    top = logits.amax(1, keepdim=True)
    z = torch.empty_like(logits)
    low = logits.bfloat16()
    bias = torch.randn(args.vocab)

    exps = {
        "exp_": lambda: z.copy_(logits).sub_(top).exp_(),
        "exp_shifted_ (exp2)": lambda: exp_shifted_(z.copy_(logits), top),
        "copy_ alone": lambda: z.copy_(logits),
    }
    casts = {
        "add(bf16, bias, out=f32)": lambda: torch.add(low, bias, out=z),
        "copy_ then add_": lambda: z.copy_(low).add_(bias),
    }
    print(f"[{args.rows} x {args.vocab}] float32, {args.threads} thread(s), median of {args.reps - 2} (ms)")
    for table in (exps, casts):
        for name, ms in alternating_ms(table, args.reps, lambda fn: fn()).items():
            print(f"  {name:28s} {ms:7.3f}")
    ref = torch.exp((logits - top).double())
    exp_shifted_(z.copy_(logits), top)
    live = ref > 1e-30
    rel = ((z.double() - ref).abs() / ref)[live].max().item()
    print(f"exp_shifted_ against float64 exp, where exp > 1e-30: largest relative error {rel:.2e} (log2 e = {LOG2E})")


if __name__ == "__main__":
    main()
