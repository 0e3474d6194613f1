"""Does a batch of a new shape cost more than its arithmetic under -amp? Update time on batches whose
lengths are new, then on the same batches again.

Why: training under ``-amp`` on a GPU that starts slower than float32 and speeds up as it goes on
(docs/gpu.md) is what a cost paid once per new shape looks like (a kernel plan built per shape, e.g.
cuDNN's attention graphs), and real batches change lengths at every step. This script separates
the two costs, one fresh process per mode so that no cache carries over:

- ``new``: ``-steps`` updates, each on a batch of a source length no earlier update had (6, 7, ...
  words; targets about as long, as train.py's batches by length are);
- ``seen``: the same batches again, whose shapes are now known.

It prints the median milliseconds per update of each phase, their ratio, and on a GPU the
attention kernels the profiler saw in one update (which backend scaled_dot_product_attention took).
The modes: ``fp32``; ``bf16`` (train.py's -amp); on a GPU also ``bf16_no_cudnn_sdpa``, bf16 with
PyTorch's cuDNN attention backend switched off (``torch.backends.cuda.enable_cudnn_sdp(False)``).

    python lab/bench/amp_shapes.py -gpu 0                  # ce and nllvmf_nce tied, every mode
    python lab/bench/amp_shapes.py -steps 4 -threads 1     # CPU: fp32 and bf16 (the third mode needs a GPU)
"""

import argparse
import json
import os
import subprocess
import sys

import torch

from lab.bench import benchlib

# the recipes' small Transformer (TMODEL, dropout 0.1) and two rows on it: ce and the continuous row
TMODEL = [
    "-encoder_type",
    "transformer",
    "-decoder_type",
    "transformer",
    "-rnn_size",
    "128",
    "-word_vec_size",
    "128",
    "-layers",
    "2",
    "-heads",
    "4",
    "-transformer_ff",
    "512",
    "-dropout",
    "0.1",
    "-attention_dropout",
    "0.1",
    "-param_init",
    "0",
    "-param_init_glorot",
    "-decay_method",
    "noam",
    "-warmup_steps",
    "1000",
]
ROWS = {
    "ce": ["-loss", "ce", "-label_smoothing", "0.1", "-average_decay", "1e-4"],
    "nllvmf_nce tied": [
        "-loss",
        "nllvmf_nce",
        "-lambda1",
        "0.02",
        "-lambda2",
        "0.1",
        "-tie_emb",
        "-sampling_correction",
        "-word_bias",
        "-average_decay",
        "1e-4",
    ],
}
FIRST_LEN = 6  # the first batch's source length; each next batch's is one word longer
MODES = ("fp32", "bf16", "bf16_no_cudnn_sdpa")
ATTENTION = ("attention", "fmha", "flash", "cudnn", "sdpa", "softmax")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_setup_args(p)
    p.add_argument("-rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    p.add_argument("-modes", default=None, help=f"comma list of {', '.join(MODES)} (default: all this device runs)")
    p.add_argument("-steps", type=int, default=30, help="updates per phase, each on a batch of a new source length")
    p.add_argument("-batch_size", type=int, default=64, help="sentences per batch (the recipe's 64)")
    p.add_argument("-vocab", type=int, default=9800, help="target words (de->en's 9.8K)")
    p.add_argument("-json", default=None, help="also write the results here")
    p.add_argument("-worker", nargs=2, metavar=("ROW", "MODE"), help=argparse.SUPPRESS)
    return p


def attention_kernels(trainer, opt, batch, step):
    """The GPU kernels of one update whose names say attention, with their counts."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        benchlib.train_step(trainer, opt, batch, step)
        torch.cuda.synchronize()
    names = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and any(a in e.name.lower() for a in ATTENTION):
            names[e.name[:80]] = names.get(e.name[:80], 0) + 1
    return dict(sorted(names.items(), key=lambda kv: -kv[1])[:6])


def worker(args, row, mode):
    """One row in one mode, in this (fresh) process: {"new": ms, "seen": ms, "kernels": {...}}."""
    device = benchlib.setup(args, "amp_shapes")
    if mode == "bf16_no_cudnn_sdpa":
        torch.backends.cuda.enable_cudnn_sdp(False)
    opt = benchlib.row_options(TMODEL, ROWS[row], args.gpu)
    table = benchlib.synthetic_table(args.vocab) if benchlib.needs_table(opt, args.vocab) else None
    amp = None if mode == "fp32" else torch.bfloat16
    trainer = benchlib.build_trainer(opt, benchlib.SRC_VOCAB, args.vocab, device, table, amp=amp)
    warm = benchlib.synthetic_batch(args.batch_size, benchlib.SRC_VOCAB, args.vocab, device, seed=0, src_len=4)
    benchlib.train_step(trainer, opt, warm, 1)  # handles, allocator, autocast: not what is measured
    batches = [
        benchlib.synthetic_batch(
            args.batch_size, benchlib.SRC_VOCAB, args.vocab, device, seed=i, src_len=FIRST_LEN + i, tgt_len_sd=1.0
        )
        for i in range(args.steps)
    ]
    step = 1
    out = {}
    for phase in ("new", "seen"):
        times = []
        for batch in batches:
            step += 1
            times.append(1e3 * benchlib.timed(lambda b=batch, s=step: benchlib.train_step(trainer, opt, b, s), device))
        out[phase] = benchlib.median(times)
        out[phase + "_total_s"] = sum(times) / 1e3
    out["kernels"] = attention_kernels(trainer, opt, batches[-1], step + 1) if device.type == "cuda" else {}
    return out


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args, *args.worker)))
        return 0
    if args.steps < 1 or args.batch_size < 1 or args.vocab < 10:
        raise SystemExit("error: -steps and -batch_size must be at least 1, -vocab at least 10")
    rows = args.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad:
        raise SystemExit(f"error: -rows: unknown {bad}; choose among {list(ROWS)}")
    on_gpu = args.gpu is not None
    modes = args.modes.split(",") if args.modes else [m for m in MODES if on_gpu or m != "bf16_no_cudnn_sdpa"]
    bad = [m for m in modes if m not in MODES or (m == "bf16_no_cudnn_sdpa" and not on_gpu)]
    if bad:
        raise SystemExit(f"error: -modes: {bad} not among {list(MODES)} (bf16_no_cudnn_sdpa needs -gpu)")
    device = benchlib.setup(args, "amp_shapes")
    print(benchlib.machine_line(device))
    last = FIRST_LEN + args.steps - 1
    print(
        f"issue 21's Transformer (d_model 128, 2+2 layers), {args.vocab:,} target words, batches of "
        f"{args.batch_size}; {args.steps} updates per phase, source lengths {FIRST_LEN}..{last}"
    )
    print(f"{'row':16} {'mode':20} {'new ms':>8} {'seen ms':>8} {'new/seen':>8}  attention kernels (one update)")
    results = []
    base = [
        sys.executable,
        os.path.abspath(__file__),
        "-steps",
        str(args.steps),
        "-batch_size",
        str(args.batch_size),
        "-vocab",
        str(args.vocab),
    ]
    base += ["-gpu", str(args.gpu)] if on_gpu else []
    base += ["-threads", str(args.threads)] if args.threads else []
    for row in rows:
        for mode in modes:
            done = subprocess.run(base + ["-worker", row, mode], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{row:16} {mode:20} failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:120]}")
                results.append({"row": row, "mode": mode, "error": done.stderr[-2000:]})
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            kernels = ", ".join(f"{n} x{c}" for n, c in r["kernels"].items()) or "-"
            print(f"{row:16} {mode:20} {r['new']:8.1f} {r['seen']:8.1f} {r['new'] / r['seen']:8.2f}  {kernels}")
            results.append({"row": row, "mode": mode, **r})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
