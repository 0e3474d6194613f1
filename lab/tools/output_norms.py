#!/usr/bin/env python
"""Diagnose a continuous-output model: how long its predicted vectors are and how saturated the
decoder's tanh output (the generator's input) is, over greedy decoding of a source file.

    python lab/tools/output_norms.py -model RUN/model_best.pt -src tok/val.fr -lines 100

Prints, per checkpoint: the fraction of decoder-output units with |h| > 0.99, the mean norm ‖ê‖,
and how many distinct translations the lines got. A model whose loss asks for a long ê (NLLvMF
with λ2 = 1: the optimum κ solves A_m(κ) = cos θ − λ1) can reach it only by saturating h, and a
saturated h no longer depends on the input: every sentence gets the same words.
"""

import argparse

import torch

from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.threads import apply_threads


def diagnose(model_path, lines, batch_size=32):
    tr = build_translator(DecodingConfig(beam_size=1, block_ngram_repeat=0), [model_path])
    if not tr.model.generator.continuous:
        raise SystemExit(f"{model_path}: not a continuous-output model")
    hs, es = [], []

    def hook(module, inputs, output):
        hs.append(inputs[0].reshape(-1, inputs[0].size(-1)))
        es.append(output.reshape(-1, output.size(-1)))

    handle = tr.model.generator.proj.register_forward_hook(hook)
    with torch.no_grad():
        outputs = tr.translate_lines(lines, batch_size, lower=tr.lower)
    handle.remove()
    h, e = torch.cat(hs), torch.cat(es)
    return {
        "saturated": (h.abs() > 0.99).float().mean().item(),
        "norm": e.norm(dim=-1).mean().item(),
        "distinct": len(set(outputs)),
        "lines": len(lines),
        "first": outputs[0] if outputs else "",
    }


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-model", nargs="+", required=True)
    p.add_argument("-src", required=True)
    p.add_argument("-lines", type=int, default=100, help="first N lines of -src")
    p.add_argument("-threads", type=int, default=1, help="torch threads (0: PyTorch's default)")
    args = p.parse_args(argv)
    if args.lines < 1:  # [: -5] would silently take all lines but the last 5
        raise UserError(f"-lines must be at least 1, got {args.lines}")
    apply_threads(args.threads)
    lines = [line for _, line in read_lines(args.src)][: args.lines]
    if not any(line.split() for line in lines):
        raise UserError(f"{args.src}: no non-empty line to translate")
    print(f"{'model':48s} {'|h|>0.99':>8s} {'mean ||e||':>10s} {'distinct outputs':>16s}  first output")
    for path in args.model:
        r = diagnose(path, lines)
        print(
            f"{path:48s} {r['saturated']:8.3f} {r['norm']:10.1f} {r['distinct']:>7d} of {r['lines']:<6d}  "
            f"{r['first'][:50]}"
        )


if __name__ == "__main__":
    main()
