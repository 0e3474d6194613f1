"""Greedy decoding speed: sentences/s of a softmax model and of continuous models.

The models share the encoder and decoder (same sizes and, built from the same seed, the same
weights: build_model initialises the encoder and decoder before the generator); only the
output layer differs. Decoding is the toolkit's ``greedy_search``: for the softmax model
log_softmax over H×V logits, for a continuous model nearest-neighbour search of ê (H×m)
against the unit-length [V, m] table (-loss nllvmf scores with the vMF density, -loss cosine
with the cosine; both are one [m, V] product per step).

The weights are untrained, so </s> is made impossible (its softmax bias at -1e4, its table row
zero: cosine 0 and vMF êᵀe = 0 lose to the best of V random directions): every sentence then
decodes exactly ``-max_length`` words and all models do the same number of steps.

    python bench/decode_speed.py                # small and paper sizes, 50K and 300K words
    python bench/decode_speed.py -sizes small -vocabs 50000 -sentences 64
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchlib  # noqa: E402
from benchlib import UserError  # noqa: E402

from onmt_cont.constants import EOS_ID  # noqa: E402
from onmt_cont.translate.search import greedy_search  # noqa: E402

ROWS = [("softmax (ce)", ["-loss", "ce"]), ("nllvmf", ["-loss", "nllvmf"]), ("cosine", ["-loss", "cosine"])]


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-sizes", default="small,paper", help="comma list of benchlib.SIZES")
    p.add_argument("-vocabs", default="50000,300000", help="target vocabulary sizes")
    p.add_argument("-batch_size", type=int, default=32, help="sentences per batch (translate.py's default)")
    p.add_argument("-sentences", type=int, default=None, help="sentences per timing (default: 128 small, 64 paper)")
    p.add_argument("-max_length", type=int, default=benchlib.SRC_LEN, help="words decoded per sentence")
    p.add_argument("-reps", type=int, default=3, help="timings per model (median), after one warm-up batch")
    p.add_argument(
        "-threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: the idle cores, from the load average: 2 on the idle 2-core "
        "benchmark machine, 1 while another process keeps a core busy)",
    )
    p.add_argument("-gpu", type=int, default=None, help="CUDA device id; CPU when absent")
    p.add_argument("-seed", type=int, default=1)
    return p


def build(size, row_args, vocab, device, seed):
    opt = benchlib.row_options(size, row_args)
    table = benchlib.synthetic_table(vocab) if benchlib.needs_table(opt, vocab) else None
    torch.manual_seed(seed)
    model = benchlib.build_model(opt, benchlib.SRC_VOCAB, vocab, table).to(device).eval()
    with torch.no_grad():
        gen = model.generator
        if gen.continuous:
            gen.table[EOS_ID] = 0
        else:
            gen.proj.bias[EOS_ID] = -1e4
    return model


def decode_all(model, batches, max_length):
    for batch in batches:
        lengths = torch.full((batch["size"],), max_length, device=batch["src"].device)
        ids, _ = greedy_search(model, batch["src"], batch["src_lengths"], lengths)
        assert all(len(x) == max_length for x in ids), "a sentence ended early: </s> was not suppressed"


def measure(size, vocab, args, device):
    n = args.sentences or (64 if size == "paper" else 128)
    batches = [
        benchlib.synthetic_batch(min(args.batch_size, n - i), benchlib.SRC_VOCAB, vocab, device, seed=args.seed + i)
        for i in range(0, n, args.batch_size)
    ]
    models, out = {}, {}
    for label, row_args in ROWS:
        try:
            models[label] = build(size, row_args, vocab, device, args.seed)
        except (UserError, ValueError) as exc:
            out[label] = {"na": str(exc)}
    for model in models.values():
        decode_all(model, batches[:1], args.max_length)  # warm-up
    times = {label: [] for label in models}
    labels = list(models)
    for rep in range(args.reps):
        for label in labels[rep % len(labels) :] + labels[: rep % len(labels)]:
            times[label].append(benchlib.timed(lambda m=models[label]: decode_all(m, batches, args.max_length), device))
    for label in labels:
        t = benchlib.median(times[label])
        out[label] = {
            "sent_s": n / t,
            "tokens_s": n * args.max_length / t,
            "spread": (max(times[label]) - min(times[label])) / t,
        }
    return out, n


def main():
    args = build_parser().parse_args()
    device = benchlib.setup(args, "decode_speed.py")
    start = time.perf_counter()
    print(f"machine: {benchlib.machine_line(device)}")
    print(
        f"greedy decoding, batches of {args.batch_size}, {benchlib.SRC_LEN}-word sources, {args.max_length} words "
        f"out per sentence; median of {args.reps}"
    )
    head = f"{'size':6s} {'target words':>12s} " + " ".join(f"{label + ' sent/s':>20s}" for label, _ in ROWS)
    head += " " + " ".join(f"{label + ' / ce':>14s}" for label, _ in ROWS[1:])
    print(head)
    print("-" * len(head))
    for size in args.sizes.split(","):
        for vocab in [int(v) for v in args.vocabs.split(",")]:
            res, _ = measure(size, vocab, args, device)
            ce = res[ROWS[0][0]].get("sent_s")
            cells = [
                f"{res[label]['sent_s']:20.1f}" if "sent_s" in res[label] else f"{'n/a':>20s}" for label, _ in ROWS
            ]
            ratios = [
                f"{res[label]['sent_s'] / ce:14.2f}" if "sent_s" in res[label] and ce else f"{'n/a':>14s}"
                for label, _ in ROWS[1:]
            ]
            print(f"{size:6s} {vocab:12,d} " + " ".join(cells) + " " + " ".join(ratios), flush=True)
    print(f"(ran {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
