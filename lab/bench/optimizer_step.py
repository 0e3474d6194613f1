"""What Adam's implementation costs in a training update: PyTorch's per-tensor loop (its default on the
CPU) against the fused kernel (train.py's choice on the CPU).

For each row of the recipes' small Transformer (lab/bench/amp_shapes.py's TMODEL and ROWS), two trainers start
from the same parameters, one per implementation, and take turns on the same synthetic batches
(source length -src_len, Multi30k's mean is about 13 words). It prints the median ms of a whole
update (forward, backward, clip, Adam) and of Adam's step alone, and fused / loop as a ratio of the
same run. It also prints the largest difference between the two trainers' parameters, after the
first update (float rounding: the kernels do not agree bit for bit) and after the last (rounding
differences grow as training goes on, as any change of summation order makes them grow).

    python lab/bench/optimizer_step.py -threads 1              # CPU, one thread, both rows
    python lab/bench/optimizer_step.py -threads 1 -src_vocab 19900   # de->en's word source vocabulary
"""

import argparse
import sys
import time

import torch

from lab.bench import benchlib
from lab.bench.amp_shapes import ROWS, TMODEL

IMPLS = {"loop": False, "fused": True}


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_setup_args(p)
    p.add_argument("-rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    p.add_argument("-steps", type=int, default=20, help="timed updates per implementation (after 3 untimed)")
    p.add_argument("-batch_size", type=int, default=64, help="sentences per batch (the recipe's 64)")
    p.add_argument("-src_len", type=int, default=13, help="source words per sentence (Multi30k: about 13)")
    p.add_argument("-src_vocab", type=int, default=10_000, help="source words or pieces (de->en pieces: about 10K)")
    p.add_argument("-vocab", type=int, default=9800, help="target words (de->en's 9.8K)")
    return p


def trainers(args, row, device):
    """{impl: (Trainer, its Adam)} from one set of initial parameters."""
    opt = benchlib.row_options(TMODEL, ROWS[row], args.gpu)
    table = benchlib.synthetic_table(args.vocab) if benchlib.needs_table(opt, args.vocab) else None
    return {
        name: (benchlib.build_trainer(opt, args.src_vocab, args.vocab, device, table, fused=fused), opt)
        for name, fused in IMPLS.items()
    }


def max_difference(pair):
    """The largest difference between the two trainers' parameters."""
    loop, fused = (pair[name][0].model.parameters() for name in IMPLS)
    return max(float((a - b).detach().abs().max()) for a, b in zip(loop, fused, strict=True))


def main(argv=None):
    args = build_parser().parse_args(argv)
    if min(args.steps, args.batch_size, args.src_len) < 1 or min(args.vocab, args.src_vocab) < 10:
        raise SystemExit(
            "error: -steps, -batch_size and -src_len must be at least 1, -vocab and -src_vocab at least 10"
        )
    rows = args.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad:
        raise SystemExit(f"error: -rows: unknown {bad}; choose among {list(ROWS)}")
    device = benchlib.setup(args, "optimizer_step")
    print(benchlib.machine_line(device))
    print(
        f"issue 21's Transformer (d_model 128, 2+2 layers), {args.src_vocab:,} source and {args.vocab:,} target "
        f"words, batches of {args.batch_size} x {args.src_len} words; median of {args.steps} updates each, "
        "taken in turns"
    )
    print(
        f"{'row':16} {'trainable':>10} {'loop ms':>8} {'fused ms':>9} {'x loop':>7}  {'Adam loop':>9} "
        f"{'Adam fused':>10}  {'max |param diff|: 1 update, all':>32}"
    )
    for row in rows:
        pair = trainers(args, row, device)
        batches = [
            benchlib.synthetic_batch(args.batch_size, args.src_vocab, args.vocab, device, seed=i, src_len=args.src_len)
            for i in range(args.steps + 3)
        ]
        update = {name: [] for name in IMPLS}
        adam = {name: [] for name in IMPLS}
        for step, batch in enumerate(batches, 1):
            for name, (trainer, opt) in pair.items():
                inner = trainer.optimizer.step
                spent = []

                def timed_step(*a, inner=inner, spent=spent, **k):
                    start = time.perf_counter()
                    result = inner(*a, **k)
                    benchlib.sync(device)
                    spent.append(time.perf_counter() - start)
                    return result

                trainer.optimizer.step = timed_step
                torch.manual_seed(step)  # the same dropout masks and sampled candidates for both
                seconds = benchlib.timed(
                    lambda t=trainer, o=opt, b=batch, s=step: benchlib.train_step(t, o, b, s), device
                )
                trainer.optimizer.step = inner
                if step > 3:
                    update[name].append(1e3 * seconds)
                    adam[name].append(1e3 * sum(spent))
            if step == 1:
                first = max_difference(pair)
        loop, fused = (benchlib.median(update[n]) for n in IMPLS)
        last = max_difference(pair)
        count = sum(p.numel() for p in pair["loop"][0].model.parameters() if p.requires_grad)
        adam_loop, adam_fused = (benchlib.median(adam[n]) for n in IMPLS)
        print(
            f"{row:16} {count:>10,} {loop:8.1f} {fused:9.1f} {fused / loop:7.2f}  {adam_loop:9.1f} "
            f"{adam_fused:10.1f}  {first:23.1e}, {last:7.1e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
