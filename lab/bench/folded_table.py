#!/usr/bin/env python
"""The continuous output layer folded into the decoder's size: a candidate speed-up of greedy decoding.

A linear generator predicts ê = W h + b from the decoder state h [d] (d = -rnn_size, 128 in the
recommended row), and greedy search ranks words by êᵀe(w) + b(w) over the table [V, m] (m = 300). That is
hᵀ(Wᵀe(w)) + (bᵀe(w) + b(w)): with the table folded once into T' = table · W [V, d] and c = table · b + bias,
each step is a [n, d] × [d, V] product instead of [n, m] × [m, V]. This script collects the decoder states of
a real greedy decode of -src, times both products on them (one thread, alternating repeats, as ratios in one
run) and counts the states whose argmax differs (float rounding can flip near-ties).

translate.py decodes with the fold (ContinuousGenerator.step_scores). With -whole this script also times whole
decodes of the -lines sentences (Translator.translate_lines, greedy and -beam_size), with and without the fold,
alternating, and counts the sentences whose translation differs.

    python lab/bench/folded_table.py -model RUN/model_best.pt -src VAL.src -threads 1 [-whole -beam_size 5]
"""

import argparse
import itertools
import sys
import time

import torch

from onmt_cont.constants import PAD_ID
from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import DecodingConfig


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-model", required=True, help="a continuous checkpoint with -generator linear")
    p.add_argument("-src", required=True, help="tokenized sources to decode greedily (their states are timed)")
    p.add_argument("-lines", type=int, default=500, help="source lines decoded")
    p.add_argument("-batch", type=int, default=64, help="states per timed product (a decoding batch's rows)")
    p.add_argument("-repeats", type=int, default=5)
    p.add_argument("-threads", type=int, default=1)
    p.add_argument("-whole", action="store_true", help="also time whole decodes with and without the fold")
    p.add_argument("-beam_size", type=int, default=5, help="-whole: the beam decode's size (greedy is timed too)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    tr = build_translator(DecodingConfig(beam_size=1, block_ngram_repeat=0), [args.model])
    gen = tr.model.generator
    if not getattr(gen, "continuous", False) or not isinstance(gen.proj, torch.nn.Linear):
        sys.exit(f"error: -model {args.model}: expected a continuous model with -generator linear")
    states = []
    hook = gen.proj.register_forward_pre_hook(
        lambda _m, inp: states.append(inp[0].detach().reshape(-1, inp[0].size(-1)))
    )
    with open(args.src, encoding="utf-8") as f:
        lines = list(itertools.islice(f, args.lines))
    with torch.no_grad():
        tr.translate_lines([x.strip() for x in lines], batch_size=args.batch)
    hook.remove()
    h = torch.cat(states)
    table = gen.table.float()
    bias = gen.bias.detach().float() if gen.bias is not None else torch.zeros(table.size(0))
    w, b = gen.proj.weight.detach().float(), gen.proj.bias.detach().float()
    folded, const = table @ w, table @ b + bias  # [V, d], [V]
    folded[PAD_ID], const[PAD_ID] = 0, float("-inf")

    def plain(x):
        s = (x @ w.t() + b) @ table.t() + bias
        s[:, PAD_ID] = float("-inf")
        return s

    def fold(x):
        return x @ folded.t() + const

    with torch.no_grad():
        same = sum(int((plain(x).argmax(1) == fold(x).argmax(1)).sum()) for x in h.split(args.batch))
        chunks = h.split(args.batch)
        times = {"plain": [], "folded": []}
        for _ in range(args.repeats):
            for name, fn in (("plain", plain), ("folded", fold)):
                start = time.perf_counter()
                for x in chunks:
                    fn(x)
                times[name].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in times.items()}
    print(
        f"{h.size(0):,} decoder states of {args.lines} sentences; table {table.size(0):,} x {table.size(1)}, "
        f"decoder size {h.size(1)}; {args.threads} thread(s), best of {args.repeats}"
    )
    print(f"plain  [n, {table.size(1)}] x [{table.size(1)}, V]: {best['plain']:.3f} s")
    print(f"folded [n, {h.size(1)}] x [{h.size(1)}, V]: {best['folded']:.3f} s ({best['folded'] / best['plain']:.2f}x)")
    print(f"same greedy word: {same:,} of {h.size(0):,} states ({100 * same / h.size(0):.3f}%)")
    if args.whole:
        for beam in (1, args.beam_size):
            whole(args.model, [x.strip() for x in lines], beam, args.batch, args.repeats)


def unfolded(gen, dec_out, greedy=False):
    """ContinuousGenerator.step_scores without the fold: the scores of ê = proj(dec_out)."""
    out = gen(dec_out)
    return gen.greedy_scores(out) if greedy else gen.scores(out)


def whole(model, lines, beam, batch, repeats):
    """Whole decodes with and without the fold, alternating; the best of ``repeats`` each."""
    tr = build_translator(DecodingConfig(beam_size=beam, block_ngram_repeat=0), [model])
    gen = tr.model.generator
    times, outputs = {"unfolded": [], "folded": []}, {}
    for rep in range(repeats):
        for name in ("unfolded", "folded") if rep % 2 == 0 else ("folded", "unfolded"):
            if name == "unfolded":  # an instance attribute hides the method
                gen.step_scores = lambda dec_out, greedy=False: unfolded(gen, dec_out, greedy)
            else:
                gen.__dict__.pop("step_scores", None)
            start = time.perf_counter()
            outputs[name] = tr.translate_lines(lines, batch_size=batch)
            times[name].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in times.items()}
    same = sum(a == b for a, b in zip(outputs["unfolded"], outputs["folded"], strict=True))
    print(
        f"whole decode, beam {beam}, {len(lines)} sentences: unfolded {best['unfolded']:.2f} s, folded "
        f"{best['folded']:.2f} s ({best['folded'] / best['unfolded']:.2f}x); same translation: {same} of "
        f"{len(lines)}"
    )


if __name__ == "__main__":
    main()
