#!/usr/bin/env python
"""Fit a model's frequency-bin offsets on a held-out set (translate.py -freq_offsets).

    python tools/calibrate_offsets.py -model RUN/model_best.pt -src val.de -tgt val.en \\
        -decode_prior 0.25 -output RUN/offsets.0.25.json
    python translate.py -model RUN/model_best.pt -src test.de -output test.pred.en \\
        -decode_prior 0.25 -freq_offsets RUN/offsets.0.25.json

Each round decodes -src greedily (the model's own search, with -decode_prior and
-block_ngram_repeat as given), counts the output's tokens in each bin of training counts (1, 2-4,
5-9, 10-99, 100-999, 1000+) against -tgt's, and moves each bin's offset towards the target ratio:
1 (as often as the reference), or with -match the ratios of another system's output on the same
sources (e.g. a softmax model's), or with -target ratios given by hand (e.g. the "target" that an
earlier -match fit saved in its offsets file, when those outputs are gone). The round nearest the
target is written, or with -keep bleu the round whose output scores the highest BLEU against -tgt.
The file records the model it was fitted on (continuous or softmax, and a hash of the target
vocabulary), and translate.py refuses it for another model. See onmt_cont/translate/calibration.py.
Tune on validation data, never on a test set.
"""

import argparse
import math
import os

import torch

from onmt_cont.evaluate import tokenized_bleu
from onmt_cont.translate.calibration import (
    FREQ_BINS,
    bin_tokens,
    fit_offsets,
    ratios,
    save_offsets,
)
from onmt_cont.translate.checks import check_decoding_options, search_defaults
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.translator import Translator
from onmt_cont.utils import numbers
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import check_readable, read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.threads import add_threads_arg, apply_threads
from onmt_cont.utils.writable import check_writable_folder

MAX_ROUNDS = 1000
MAX_STEP = 10.0
MAX_TARGET = 1000.0


def read(path):
    check_readable(path)
    return [line for _, line in read_lines(path)]


def fmt(values):
    return " ".join("  nan" if math.isnan(v) else f"{v:5.2f}" for v in values)


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "-model",
        required=True,
        help="checkpoint (train.py); continuous models add the offsets to "
        "their nearest-neighbour scores, softmax models to their log-probabilities",
    )
    p.add_argument("-src", required=True, help="held-out tokenized sources (validation)")
    p.add_argument("-tgt", required=True, help="their tokenized references")
    p.add_argument("-output", required=True, help="the offsets file (JSON) for translate.py -freq_offsets")
    p.add_argument("-decode_prior", type=float, default=0.0, help="beta of translate.py -decode_prior to fit under")
    p.add_argument(
        "-match",
        nargs="+",
        help="other systems' tokenized outputs for -src (e.g. a softmax model's, one "
        "per seed): fit to their hyp/ref ratios (the mean over the files) instead of 1",
    )
    p.add_argument(
        "-target",
        type=float,
        nargs=len(FREQ_BINS),
        metavar="RATIO",
        help="fit to these hyp/ref ratios, one per bin (1, 2-4, 5-9, 10-99, 100-999, 1000+), instead of "
        '1: e.g. the "target" an earlier -match fit wrote into its offsets file',
    )
    p.add_argument("-rounds", type=int, default=8, help="decodes of -src (default 8)")
    p.add_argument("-step", type=float, default=0.5, help="the share of log(wanted / found) each round moves a bin")
    p.add_argument("-min_tokens", type=int, default=20, help="bins with fewer reference tokens keep offset 0")
    p.add_argument(
        "-keep",
        choices=["target", "bleu"],
        default="target",
        help="which round's offsets to write: "
        "the one nearest the target (default), or the one of the highest -tgt BLEU (tokenized): the "
        "number of rounds then acts as a shrinkage that validation chooses",
    )
    p.add_argument("-block_ngram_repeat", type=int, default=None, help="as translate.py's (default 3)")
    p.add_argument(
        "-beam_size",
        type=int,
        default=None,
        help="the search to fit under, as translate.py's (default 5; "
        "1: greedy); the file records it, and translate.py takes it only under the same -beam_size",
    )
    p.add_argument("-batch_size", type=int, default=32, help="sentences per batch")
    add_threads_arg(p)
    for action in p._actions:  # nan, inf and a non-zero value that rounds to 0 are refused (-target: below)
        if action.dest in ("decode_prior", "step"):
            action.type = numbers.finite_float
    args = p.parse_args(argv)
    args.beam_size, args.block_ngram_repeat = search_defaults(args.beam_size, args.block_ngram_repeat)
    refuse_output_over_inputs(
        {"-output": args.output}, {"-model": args.model, "-src": args.src, "-tgt": args.tgt, "-match": args.match}
    )
    if not 1 <= args.rounds <= MAX_ROUNDS:
        raise UserError(
            f"-rounds must be at least 1 and at most {MAX_ROUNDS} (each decodes -src once), got {args.rounds}"
        )
    if not 0 < args.step <= MAX_STEP:  # NaN fails too
        raise UserError(
            f"-step must be positive and at most {MAX_STEP:g} (1 moves a bin by the whole "
            f"log(wanted / found)), got {args.step}"
        )
    if args.min_tokens < 1:
        raise UserError(f"-min_tokens must be at least 1, got {args.min_tokens}")
    if args.batch_size < 1:
        raise UserError(f"-batch_size must be at least 1, got {args.batch_size}")
    if args.target is not None:
        if args.match:
            raise UserError("-target and -match both set the ratios to fit to: give one of them")
        if not all(0 < t <= MAX_TARGET for t in args.target):
            raise UserError(
                f"-target must be {len(FREQ_BINS)} positive ratios of at most {MAX_TARGET:g}, got "
                f"{' '.join(map(str, args.target))}"
            )
    check_decoding_options(decode_prior=args.decode_prior, block_ngram_repeat=args.block_ngram_repeat)
    # -output is checked before the decodes, which take most of the time
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UserError(f"-output {args.output}: directory {out_dir} does not exist")
    if os.path.isdir(args.output):
        raise UserError(f"-output {args.output}: is a directory, expected a file name")
    check_writable_folder(out_dir, f"-output {args.output}")  # a probe file: read-only mounts too, and as root
    src, ref = read(args.src), read(args.tgt)
    if len(src) != len(ref):
        raise UserError(f"-tgt {args.tgt} has {len(ref)} lines but -src {args.src} has {len(src)}")
    for flag, path, lines in (("-src", args.src, src), ("-tgt", args.tgt, ref)):
        if not any(line.split() for line in lines):
            raise UserError(
                f"{flag} {path}: no words ({'empty' if not lines else f'{len(lines)} blank lines'}): "
                "expected held-out sentences, one per line"
            )
    apply_threads(args.threads)
    # the translator checks -decode_prior, the model's training counts, and that -decode_prior is for a
    # continuous one
    if args.beam_size < 1:
        raise UserError(f"-beam_size must be at least 1 (1: greedy), got {args.beam_size}")
    config = DecodingConfig(
        decode_prior=args.decode_prior, block_ngram_repeat=args.block_ngram_repeat, beam_size=args.beam_size
    )
    translator = Translator.from_checkpoint(args.model, config, offsets=[0.0] * len(FREQ_BINS))
    vocab = translator.tgt_vocab
    counts = dict(zip(vocab.itos, vocab.counts, strict=True))
    ref_bins = bin_tokens(ref, counts)
    if args.match:
        found = []
        for path in args.match:
            other = read(path)
            if len(other) != len(src):
                raise UserError(f"-match {path} has {len(other)} lines but -src {args.src} has {len(src)}")
            found.append(ratios(bin_tokens(other, counts), ref_bins))
        target = [sum(col) / len(col) for col in zip(*found, strict=True)]
    elif args.target is not None:
        target = list(args.target)
    else:
        target = [1.0] * len(FREQ_BINS)

    def decode(offsets):
        translator.set_freq_offsets(offsets)
        with torch.no_grad():
            # lower: as translate.py, the source is lowercased for a model trained on lowercased text
            return translator.translate_lines(src, batch_size=args.batch_size, lower=translator.lower)

    names = [n for n, _, _ in FREQ_BINS]
    print(f"bins {' '.join(f'{n:>5}' for n in names)}")
    print(f"reference tokens {' '.join(f'{n:5d}' for n in ref_bins)}")
    print(f"target hyp/ref {fmt(target)}")

    scored = {}  # the last round's outputs and BLEU: printed by report, reused by -keep bleu's score

    def bleu_of(outputs):
        if scored.get("outputs") is not outputs:
            scored.update(outputs=outputs, bleu=tokenized_bleu(outputs, ref)[0])
        return scored["bleu"]

    def report(i, offsets, outputs, rat):
        print(
            f"round {i}: offsets {fmt(offsets)} | hyp/ref {fmt(rat)} | BLEU (tokenized) {bleu_of(outputs):.2f}",
            flush=True,
        )

    score = bleu_of if args.keep == "bleu" else None
    offsets, _, rat = fit_offsets(decode, ref, counts, target, args.rounds, args.step, args.min_tokens, report, score)
    source = os.path.abspath(args.src)
    if args.match:
        source += " (matching " + ", ".join(args.match) + ")"
    elif args.target is not None:
        source += " (-target " + " ".join(map(str, args.target)) + ")"
    save_offsets(args.output, offsets, args.decode_prior, target, source, translator.offsets_model)
    print(f"kept offsets {fmt(offsets)} (hyp/ref {fmt(rat)}) -> {args.output}")


if __name__ == "__main__":
    main()
