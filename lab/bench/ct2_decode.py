"""Decoding speed on CTranslate2 (issue 71.2): our checkpoints through translate.py, their CTranslate2 exports
(onmt_cont_convert, float32 and int8) through translate.py -engine ctranslate2 and through a plain CTranslate2
loop, against OpenNMT-py's own Transformer through onmt_translate and through CTranslate2 (its converter,
ct2-opennmt-py-converter, float32 and int8: how OpenNMT-py users deploy, the fair anchor).

Every row translates the same tokenized sentences (-test, by default the validation set: no test set is
decoded here) greedily and with beam 5, one thread, batches of -batch_size sentences, each run a whole process,
alternating between the rows, the fastest of -reps. "loop" is the translation loop timed inside the process
(lab/bench/decode_timer.py), net of start-up; "whole" the process from start to exit. Each row also gives its
tokenized BLEU against the -test references and, for our exports, how many lines equal translate.py's on the
same checkpoint.

    python lab/bench/ct2_decode.py -data runs/word_choice_fr-en/tok -out runs/ct2_decode \\
        -theirs runs/peer_fr-en_d0.2/onmt_step_9968.pt \\
        -ours ce=runs/word_choice_fr-en/t_ce_d01_avg.s1/model_best.pt \\
        -ours continuous=runs/word_choice_fr-en/t_nce_both_avg_d00_lr1_ns2048.s1/model_best.pt -prior continuous=0.25

OpenNMT-py is a benchmark-only dependency (lab/bench/peer_decode.py says how it installs beside torch 2.13);
without it the OpenNMT-py rows are left out.
"""

import argparse
import importlib.util
import json
import os
import sys

from lab import ROOT
from lab.bench import peerlib
from lab.bench.peer_decode import run
from onmt_cont.evaluate import tokenized_bleu

TIMER = os.path.join(ROOT, "lab", "bench", "decode_timer.py")


def convert_all(args, ours, priors, env, log):
    """The exports: {row name: (kind, model)}; kind "torch" / "export" (translate.py) or "ct2" (plain loop)."""
    rows = {}
    for name, ckpt in ours.items():
        rows[f"onmt_cont {name}, translate.py"] = ("torch", ckpt, name)
        for quant in ("float32", "int8"):
            out = os.path.join(args.out, f"ct2_{name}_{quant}")
            if not os.path.exists(out):
                prior = ["-decode_prior", priors[name]] if name in priors else []
                run(
                    [
                        sys.executable,
                        "-m",
                        "onmt_cont.bin.convert",
                        "-model",
                        ckpt,
                        "-output",
                        out,
                        "-quantization",
                        quant,
                        *prior,
                    ],
                    env,
                    log,
                )
            rows[f"onmt_cont {name}, CTranslate2 {quant}, translate.py"] = ("export", out, name)
        rows[f"onmt_cont {name}, CTranslate2 float32, plain loop"] = (
            "ct2",
            os.path.join(args.out, f"ct2_{name}_float32"),
            name,
        )
    if args.theirs and importlib.util.find_spec("onmt") is not None:
        rows["OpenNMT-py, onmt_translate"] = ("peer", args.theirs, None)
        for quant in ("float32", "int8"):
            out = os.path.join(args.out, f"ct2_peer_{quant}")
            if not os.path.exists(out):
                convert_peer(args.theirs, out, quant)
            rows[f"OpenNMT-py, CTranslate2 {quant}"] = ("ct2", out, None)
    elif args.theirs:
        print("OpenNMT-py is not installed: its rows are left out (see lab/bench/peer_decode.py)")
    return rows


def convert_peer(checkpoint, out, quantization):
    """ct2-opennmt-py-converter's conversion of an OpenNMT-py checkpoint. OpenNMT-py 3.5's default -self_attn_type
    is scaled-dot-flash (the same attention through PyTorch's fused kernel), which the converter refuses by name:
    its option check is given scaled-dot, the computation CTranslate2 implements; the checkpoint is untouched."""
    from ctranslate2.converters import opennmt_py

    check = opennmt_py.check_opt

    def check_as_scaled_dot(opt, num_source_embeddings):
        if getattr(opt, "self_attn_type", "scaled-dot") == "scaled-dot-flash":
            opt.self_attn_type = "scaled-dot"
        return check(opt, num_source_embeddings)

    opennmt_py.check_opt = check_as_scaled_dot
    try:  # the converter's own loader (--unsafe_deserialization: OpenNMT-py's checkpoints hold its option objects)
        opennmt_py.OpenNMTPyConverter(checkpoint, unsafe_deserialization=True).convert(out, quantization=quantization)
    finally:
        opennmt_py.check_opt = check


def command(kind, model, src, output, beam, batch, times, prior, block):
    if kind in ("torch", "export"):
        extra = ["-decode_prior", prior] if kind == "torch" and prior else []
        return [
            sys.executable,
            TIMER,
            times,
            "onmt_cont",
            "translate.py",
            "-model",
            model,
            "-src",
            src,
            "-output",
            output,
            "-beam_size",
            str(beam),
            "-batch_size",
            str(batch),
            "-threads",
            "1",
            "-tokenized",
            "-block_ngram_repeat",
            str(block),
            *extra,
        ]
    if kind == "peer":
        return [
            sys.executable,
            TIMER,
            times,
            "opennmt-py",
            "-model",
            model,
            "-src",
            src,
            "-output",
            output,
            "-beam_size",
            str(beam),
            "-batch_size",
            str(batch),
            "-batch_type",
            "sents",
            "-block_ngram_repeat",
            str(block),
        ]
    return [sys.executable, TIMER, times, "ctranslate2", model, src, output, str(beam), str(batch), str(block)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    peerlib.add_data_args(p, "folder of tokenized train/val/test files", "work folder (exports, outputs, log)")
    p.add_argument("-test", default="val", help="the sentences decoded: DATA/TEST.SRC, references DATA/TEST.TGT")
    p.add_argument("-ours", action="append", default=[], metavar="NAME=CHECKPOINT", required=True)
    p.add_argument(
        "-prior",
        action="append",
        default=[],
        metavar="NAME=BETA",
        help="a continuous row's -decode_prior (the one validation picked), fixed in its export",
    )
    p.add_argument("-theirs", default=None, help="an OpenNMT-py checkpoint (lab/bench/peer_time_to_quality.py)")
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-beams", default="1,5")
    p.add_argument("-reps", type=int, default=3)
    p.add_argument("-block_ngram_repeat", type=int, default=0, help="every row blocks repeated n-grams (0: none)")
    args = p.parse_args(argv)
    try:
        ours = dict(x.split("=", 1) for x in args.ours)
        priors = dict(x.split("=", 1) for x in args.prior)
    except ValueError:
        p.error("-ours and -prior take NAME=VALUE")
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "ct2_decode.log")
    env = peerlib.ENV
    rows = convert_all(args, ours, priors, env, log)
    src = os.path.join(args.data, f"{args.test}.{args.src}")
    with open(os.path.join(args.data, f"{args.test}.{args.tgt}"), encoding="utf-8") as f:
        refs = f.read().splitlines()
    n = len(refs)
    beams = [int(b) for b in args.beams.split(",")]
    whole, loop, outputs = {}, {}, {}
    for _ in range(args.reps):
        for beam in beams:
            for r, (label, (kind, model, name)) in enumerate(rows.items()):
                output = os.path.join(args.out, f"out_{r}_beam{beam}.txt")
                times = os.path.join(args.out, f"times_{r}_beam{beam}.json")
                seconds = run(
                    command(
                        kind,
                        model,
                        src,
                        output,
                        beam,
                        args.batch_size,
                        times,
                        priors.get(name),
                        args.block_ngram_repeat,
                    ),
                    env,
                    log,
                )
                key = (label, beam)
                whole[key] = min(whole.get(key, seconds), seconds)
                with open(times, encoding="utf-8") as f:
                    loop[key] = min(loop.get(key, float("inf")), json.load(f)["wall"])
                with open(output, encoding="utf-8") as f:
                    outputs[key] = f.read().splitlines()
    print(
        f"{args.test}.{args.src}: {n} sentences; 1 thread, batches of {args.batch_size}; the fastest of {args.reps} "
        "runs, alternating; loop: the translation loop timed inside the process; whole: the process"
        + (f"; -block_ngram_repeat {args.block_ngram_repeat}" if args.block_ngram_repeat else "")
    )
    anchor = "OpenNMT-py, CTranslate2 float32"
    for beam in beams:
        print(f"\n{'greedy' if beam == 1 else f'beam {beam}'}:\n")
        print(
            "| row | sent/s, loop | words/s, loop | sent/s, whole | over translate.py (same model), loop | "
            f"over {anchor}, loop | BLEU (tokenized) | lines = translate.py's |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, (_kind, _, name) in rows.items():
            key = (label, beam)
            words = sum(len(x.split()) for x in outputs[key])
            mine = f"onmt_cont {name}, translate.py"
            over_mine = f"{loop[(mine, beam)] / loop[key]:.2f}x" if name else ""
            over_anchor = f"{loop[(anchor, beam)] / loop[key]:.2f}x" if (anchor, beam) in loop else "n/a"
            same = sum(a == b for a, b in zip(outputs[key], outputs[(mine, beam)], strict=True)) if name else None
            print(
                f"| {label} | {n / loop[key]:.1f} | {words / loop[key]:.0f} | {n / whole[key]:.1f} | {over_mine} | "
                f"{over_anchor} | {tokenized_bleu(outputs[key], refs)[0]:.2f} | "
                f"{'' if same is None else f'{same} / {n}'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
