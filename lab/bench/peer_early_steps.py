#!/usr/bin/env python
"""Both toolkits' Transformer ce after a few hundred steps, side by side over seeds: the models lab/bench/peer_decode.py
trains (d_model 256, 2+2 layers, 4 heads, FF 1024, dropout 0.1, batches of 64 sentences, Adam beta2 0.998, glorot
initialisation, noam with factor -learning_rate and -warmup_steps warm-up steps, no label smoothing) for -steps steps.

For each seed our train.py and OpenNMT-py's onmt_train run at the same time, one thread each; then each model
decodes the validation set greedily (batches of 64). Per seed and as a mean, it prints the validation perplexity
(teacher-forced, from each toolkit's own validation at the last step), greedy validation BLEU (train.py's tokenized
BLEU, onmt_cont.evaluate.tokenized_bleu, for both), words per output sentence (the reference's in the header) and
the share of outputs that repeat a 3-gram (a loop). -variant NAME="FLAGS" adds a row of our train.py with extra
flags (repeatable; e.g. -variant clip0="-max_grad_norm 0"), -peer_variant NAME="KEY: VALUE; ..." a row of the peer
with extra configuration lines. A rerun skips what exists.

OpenNMT-py is a benchmark-only dependency (lab/bench/peer_decode.py says how it installs beside torch 2.13); without it
this script says so and exits 0.

    python lab/bench/peer_early_steps.py -data runs/tok -src fr -tgt en -out runs/early -seeds 1,2,3
"""

import argparse
import os
import re
import subprocess
import sys

from lab import ROOT
from lab.bench import peerlib
from onmt_cont.evaluate import tokenized_bleu

SIZE = peerlib.SIZE
OURS_PPL = re.compile(r"validation .*?ppl ([0-9.]+)")
PEER_PPL = re.compile(r"Validation perplexity: ([0-9.]+)")


def ours_command(args, seed, extra, prefix):
    return [
        sys.executable,
        "train.py",
        "-data",
        os.path.join(args.out, "ours_data"),
        "-save_model",
        prefix,
        "-encoder_type",
        "transformer",
        "-decoder_type",
        "transformer",
        "-rnn_size",
        str(SIZE["d"]),
        "-word_vec_size",
        str(SIZE["d"]),
        "-layers",
        str(SIZE["layers"]),
        "-heads",
        str(SIZE["heads"]),
        "-transformer_ff",
        str(SIZE["ff"]),
        "-dropout",
        "0.1",
        "-loss",
        "ce",
        "-batch_size",
        "64",
        "-train_steps",
        str(args.steps),
        "-decay_method",
        "noam",
        "-learning_rate",
        str(args.learning_rate),
        "-warmup_steps",
        str(args.warmup_steps),
        "-adam_beta2",
        "0.998",
        "-param_init",
        "0",
        "-param_init_glorot",
        "-save_checkpoint_steps",
        str(args.steps),
        "-valid_steps",
        str(args.steps),
        "-seed",
        str(seed),
        "-threads",
        "1",
    ] + extra.split()


def peer_config(args, seed, extra, prefix):
    d, lines = args.data, [x.strip() for x in extra.split(";") if x.strip()]
    return (
        "\n".join(
            [
                f"save_data: {args.out}/peer_data",
                f"src_vocab: {args.out}/peer.vocab.src",
                f"tgt_vocab: {args.out}/peer.vocab.tgt",
                "overwrite: true",
                "data:",
                "  corpus_1:",
                f"    path_src: {d}/train.{args.src}",
                f"    path_tgt: {d}/train.{args.tgt}",
                "  valid:",
                f"    path_src: {d}/val.{args.src}",
                f"    path_tgt: {d}/val.{args.tgt}",
                f"save_model: {prefix}",
                f"save_checkpoint_steps: {args.steps}",
                f"train_steps: {args.steps}",
                f"valid_steps: {args.steps}",
                "report_every: 50",
                f"seed: {seed}",
                "encoder_type: transformer",
                "decoder_type: transformer",
                "position_encoding: true",
                f"layers: {SIZE['layers']}",
                f"hidden_size: {SIZE['d']}",
                f"word_vec_size: {SIZE['d']}",
                f"heads: {SIZE['heads']}",
                f"transformer_ff: {SIZE['ff']}",
                "dropout: [0.1]",
                "attention_dropout: [0.1]",
                "batch_type: sents",
                "batch_size: 64",
                "optim: adam",
                "adam_beta2: 0.998",
                "decay_method: noam",
                f"learning_rate: {args.learning_rate}",
                f"warmup_steps: {args.warmup_steps}",
                "param_init: 0",
                "param_init_glorot: true",
            ]
            + lines
        )
        + "\n"
    )


def loops(lines):
    """Share of outputs in which some 3-gram occurs twice or more."""

    def loop(words):
        grams = list(zip(words, words[1:], words[2:], strict=False))
        return len(grams) != len(set(grams))

    return sum(loop(x.split()) for x in lines) / max(len(lines), 1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    peerlib.add_data_args(p, "folder of tokenized train/val files", "work folder")
    p.add_argument("-steps", type=int, default=300)
    p.add_argument("-learning_rate", type=float, default=2.0, help="noam factor (both toolkits)")
    p.add_argument("-warmup_steps", type=int, default=100)
    p.add_argument("-seeds", default="1,2,3")
    p.add_argument("-variant", action="append", default=[], metavar='NAME="FLAGS"')
    p.add_argument("-peer_variant", action="append", default=[], metavar='NAME="KEY: VALUE; ..."')
    args = p.parse_args(argv)
    if not peerlib.installed():
        return 0
    os.makedirs(args.out, exist_ok=True)
    env = peerlib.ENV
    val_src, val_tgt = (os.path.join(args.data, f"val.{x}") for x in (args.src, args.tgt))
    with open(val_tgt, encoding="utf-8") as f:
        refs = [x.rstrip("\n") for x in f]
    if not os.path.exists(os.path.join(args.out, "ours_data.vocab.pt")):
        subprocess.run(
            [
                sys.executable,
                "preprocess.py",
                "-train_src",
                os.path.join(args.data, f"train.{args.src}"),
                "-train_tgt",
                os.path.join(args.data, f"train.{args.tgt}"),
                "-valid_src",
                val_src,
                "-valid_tgt",
                val_tgt,
                "-save_data",
                os.path.join(args.out, "ours_data"),
            ],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    rows = [("ours", "ours", "")] + [("ours", *v.split("=", 1)) for v in args.variant]
    rows += [("peer", "OpenNMT-py", "")] + [("peer", *v.split("=", 1)) for v in args.peer_variant]
    results = {name: [] for _, name, _ in rows}
    for seed in [int(s) for s in args.seeds.split(",")]:
        jobs = []
        for kind, name, extra in rows:
            prefix = os.path.join(args.out, f"{name}.s{seed}")
            ckpt = f"{prefix}_step_{args.steps}.pt"
            if os.path.exists(ckpt):
                continue
            log = open(prefix + ".train.log", "w", encoding="utf-8")
            if kind == "ours":
                cmd = ours_command(args, seed, extra, prefix)
            else:
                with open(prefix + ".yaml", "w", encoding="utf-8") as f:
                    f.write(peer_config(args, seed, extra, prefix))
                if not os.path.exists(os.path.join(args.out, "peer.vocab.tgt")):
                    subprocess.run(
                        ["onmt_build_vocab", "-config", prefix + ".yaml", "-n_sample", "-1"],
                        cwd=ROOT,
                        env=env,
                        check=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                cmd = ["onmt_train", "-config", prefix + ".yaml"]
            jobs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
            if len(jobs) == 2:  # two at a time, one thread each
                for proc, f in jobs:
                    proc.wait()
                    f.close()
                jobs = []
        for proc, f in jobs:
            proc.wait()
            f.close()
        for kind, name, _ in rows:
            prefix = os.path.join(args.out, f"{name}.s{seed}")
            ckpt, out = f"{prefix}_step_{args.steps}.pt", prefix + ".val.out"
            if not os.path.exists(ckpt):
                sys.exit(f"error: {name} seed {seed} wrote no {ckpt}; see {prefix}.train.log")
            if not os.path.exists(out):
                cmd = (
                    [sys.executable, "translate.py", "-model", ckpt, "-src", val_src, "-output", out, "-threads", "1"]
                    if kind == "ours"
                    else [
                        "onmt_translate",
                        "-model",
                        ckpt,
                        "-src",
                        val_src,
                        "-output",
                        out,
                        "-batch_size",
                        "64",
                        "-beam_size",
                        "1",
                    ]
                )
                subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out, encoding="utf-8") as f:
                hyps = [x.rstrip("\n") for x in f]
            with open(prefix + ".train.log", encoding="utf-8") as f:
                found = (OURS_PPL if kind == "ours" else PEER_PPL).findall(f.read())
            results[name].append(
                (
                    float(found[-1]) if found else float("nan"),
                    tokenized_bleu(hyps, refs)[0],
                    sum(len(x.split()) for x in hyps) / len(hyps),
                    loops(hyps),
                )
            )
    ref_len = sum(len(x.split()) for x in refs) / len(refs)
    print(
        f"{args.steps} steps, noam factor {args.learning_rate}, warm-up {args.warmup_steps}; validation "
        f"({len(refs)} sentences, reference {ref_len:.1f} words each); per seed and mean"
    )
    print("| row | validation ppl | greedy BLEU | words/sentence | outputs with a repeated 3-gram |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, res in results.items():
        cols = list(zip(*res, strict=True))
        fmt = ("{:.1f}", "{:.2f}", "{:.1f}", "{:.0%}")
        cells = [
            " / ".join(f.format(v) for v in col) + " (" + f.format(sum(col) / len(col)) + ")"
            for f, col in zip(fmt, cols, strict=True)
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
