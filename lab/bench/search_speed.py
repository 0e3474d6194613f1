"""Decoding speed of the batched searches against the searches they replaced, on
trained checkpoints: greedy search with finished sentences leaving the batch against greedy
search that computes every sentence to the batch's end, and beam search over the whole batch
against beam search one sentence at a time (tests/search_reference.py, the former code). Both
sides of a row run in this process, one after the other, on the same sentences, with the same
threads, and write the same words (checked): compare the ratio, not the absolute numbers.

    python lab/bench/search_speed.py -models runs/x/model_best.pt runs/y/model_best.pt -src val.fr -n 500
"""

import argparse
import os
import sys
import time

import torch

from lab import repo_module
from onmt_cont.translate import search, translator
from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.utils.threads import apply_threads

# the tests' reference searches (tests/ is no package): what the batched searches are timed against
_reference = repo_module("tests/search_reference.py")
full_batch_greedy_search = _reference.full_batch_greedy_search
sequential_beam_search = _reference.sequential_beam_search


def timed(tr, lines, batch_size):
    start = time.perf_counter()
    out = tr.translate_lines(lines, batch_size)
    return time.perf_counter() - start, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-models", nargs="+", required=True, help="checkpoints written by train.py")
    p.add_argument("-src", required=True, help="tokenized source sentences")
    p.add_argument("-n", type=int, default=500, help="sentences (the first n)")
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-beam_size", type=int, default=5)
    p.add_argument("-threads", type=int, default=1)
    p.add_argument("-reps", type=int, default=2, help="timings of each side, alternating (the fastest counts)")
    args = p.parse_args(argv)
    apply_threads(args.threads)
    with open(args.src, encoding="utf-8") as f:
        lines = [line.strip() for _, line in zip(range(args.n), f, strict=False)]
    words = sum(len(x.split()) for x in lines)
    print(f"{len(lines)} sentences ({words} source words), batch {args.batch_size}, {args.threads} thread(s)")
    print("| model | search | before (sent/s) | now (sent/s) | now / before |")
    print("| --- | --- | ---: | ---: | ---: |")
    real_greedy, real_beam = search.greedy_search, translator.beam_search
    for path in args.models:
        name = os.path.relpath(path)
        for label, beam in (("greedy", 1), (f"beam {args.beam_size}", args.beam_size)):
            tr = build_translator(DecodingConfig(beam_size=beam, block_ngram_repeat=0), [path])
            tr.translate_lines(lines[: args.batch_size], args.batch_size)  # warm-up: one-time allocations
            times = {"before": [], "now": []}
            for _ in range(args.reps):  # alternating, the best of each: the machine's noise hits both
                for side in ("before", "now"):
                    if side == "before" and beam == 1:
                        translator.greedy_search = full_batch_greedy_search
                    elif side == "before":
                        translator.beam_search = sequential_beam_search
                    seconds, out = timed(tr, lines, args.batch_size)
                    translator.greedy_search, translator.beam_search = real_greedy, real_beam
                    times[side].append(seconds)
                    if side == "before":
                        out_before = out
                    else:
                        out_now = out
            before, now = min(times["before"]), min(times["now"])
            same = sum(a == b for a, b in zip(out_before, out_now, strict=True))
            print(
                f"| {name} | {label} | {len(lines) / before:.1f} | {len(lines) / now:.1f} | "
                f"{before / now:.2f}x | " + ("" if same == len(lines) else f"{len(lines) - same} lines differ")
            )
            sys.stdout.flush()


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
