"""Decoding speed side by side with OpenNMT-py: the same Transformer size trained the
same number of steps on the same data in both toolkits, then both translate the same sentences
with one thread and batches of -batch_size sentences, each timed as a whole process (start-up
included) and alternating between the toolkits; the fastest of -reps runs counts. Prints
sentences/s, words/s and the ratio onmt_cont / OpenNMT-py, and the start-up time (1 sentence).

OpenNMT-py is a benchmark-only dependency, never in requirements.txt; without it this script
says so and exits 0. It installs beside torch 2.13 with

    pip install --no-deps opennmt-py==3.5.1
    pip install configargparse pyonmttok fasttext-wheel spacy pyahocorasick rapidfuzz

    python lab/bench/peer_decode.py -data runs/word_choice_fr-en/tok -out /tmp/peer

With -theirs and -ours the models are given instead of trained (converged checkpoints: an OpenNMT-py one from
lab/bench/peer_time_to_quality.py, any number of ours, each NAME=CHECKPOINT), and every row is also given net of
start-up: the seconds of the 1-sentence run taken off, and the translation loop alone, timed inside each process
(lab/bench/decode_timer.py; wall clock and CPU seconds). The loop is the steadier measure: the difference of two
whole-process runs carries both runs' start-up noise (OpenNMT-py's start-up alone varied 5.8-10.5 s on a
loaded machine):

    python lab/bench/peer_decode.py -data runs/word_choice_en-de/tok -src en -tgt de -out /tmp/peer_dec \
        -theirs runs/peer_en-de/peer_step_3178.pt -ours ce=runs/word_choice_en-de/t_ce_d01_avg.s1/model_best.pt \
        -ours continuous=runs/word_choice_en-de/t_nce_both_avg_d00_lr1.s1/model_best.pt
"""

import argparse
import json
import os
import subprocess
import sys
import time

from lab import ROOT
from lab.bench import peerlib
from onmt_cont.utils import memory

SIZE = peerlib.SIZE


def run(cmd, env, log):
    with open(log, "a", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"error: {' '.join(cmd[:3])} ... failed (exit {proc.returncode}); see {log}")
    return seconds


def train_both(args, env, log):
    src, tgt = (os.path.join(args.data, f"train.{lang}") for lang in (args.src, args.tgt))
    vsrc, vtgt = (os.path.join(args.data, f"val.{lang}") for lang in (args.src, args.tgt))
    out = args.out
    ours = os.path.join(out, f"ours_step_{args.steps}.pt")
    if not os.path.exists(ours):
        run(
            [
                sys.executable,
                "preprocess.py",
                "-train_src",
                src,
                "-train_tgt",
                tgt,
                "-valid_src",
                vsrc,
                "-valid_tgt",
                vtgt,
                "-save_data",
                os.path.join(out, "ours_data"),
            ],
            env,
            log,
        )
        run(
            [
                sys.executable,
                "train.py",
                "-data",
                os.path.join(out, "ours_data"),
                "-save_model",
                os.path.join(out, "ours"),
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
                "2",
                "-warmup_steps",
                "100",
                "-adam_beta2",
                "0.998",
                "-param_init",
                "0",
                "-param_init_glorot",
                "-save_checkpoint_steps",
                str(args.steps),
                "-valid_steps",
                "100000",
                "-threads",
                "1",
            ],
            env,
            log,
        )
    theirs = os.path.join(out, f"onmt_step_{args.steps}.pt")
    if not os.path.exists(theirs):
        config = os.path.join(out, "onmt.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"""save_data: {out}/onmt_data
src_vocab: {out}/onmt.vocab.src
tgt_vocab: {out}/onmt.vocab.tgt
overwrite: true
data:
  corpus_1:
    path_src: {src}
    path_tgt: {tgt}
  valid:
    path_src: {vsrc}
    path_tgt: {vtgt}
save_model: {out}/onmt
save_checkpoint_steps: {args.steps}
train_steps: {args.steps}
valid_steps: 100000
encoder_type: transformer
decoder_type: transformer
position_encoding: true
layers: {SIZE["layers"]}
hidden_size: {SIZE["d"]}
word_vec_size: {SIZE["d"]}
heads: {SIZE["heads"]}
transformer_ff: {SIZE["ff"]}
dropout: [0.1]
batch_type: sents
batch_size: 64
optim: adam
adam_beta2: 0.998
decay_method: noam
learning_rate: 2
warmup_steps: 100
param_init: 0
param_init_glorot: true
""")
        run(["onmt_build_vocab", "-config", config, "-n_sample", "-1"], env, log)
        run(["onmt_train", "-config", config], env, log)
    return ours, theirs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    peerlib.add_data_args(
        p, "folder of tokenized train/val/test_2016_flickr files", "work folder (models, outputs, log)"
    )
    p.add_argument("-steps", type=int, default=300)
    p.add_argument("-test", default="test_2016_flickr")
    p.add_argument("-beam_sentences", type=int, default=300, help="sentences of the beam-5 rows")
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-reps", type=int, default=2)
    p.add_argument(
        "-fixed_length",
        type=int,
        default=0,
        help="N > 0: both toolkits put out N words per sentence "
        "(-max_length N; OpenNMT-py also -min_length N), so that both do the same number of steps "
        "whatever their models' </s> habits (models of 300 steps differ in how soon they end)",
    )
    p.add_argument("-rows", default="startup,greedy,beam", help="which rows to time")
    p.add_argument("-theirs", default=None, help="an OpenNMT-py checkpoint to time instead of training one")
    p.add_argument(
        "-ours",
        action="append",
        default=[],
        metavar="NAME=CHECKPOINT",
        help="with -theirs: one of our checkpoints to time (repeatable)",
    )
    p.add_argument(
        "-peer_kept_memory",
        action="store_true",
        help="with -theirs: also time OpenNMT-py with glibc's "
        "malloc thresholds raised as translate.py raises its own (onmt_cont/utils/memory.py; through "
        "MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_), a row of its own",
    )
    args = p.parse_args(argv)
    if bool(args.theirs) != bool(args.ours):
        p.error("-theirs and -ours go together")
    try:
        given = dict(x.split("=", 1) for x in args.ours)
    except ValueError:
        p.error(f"-ours takes NAME=CHECKPOINT, got {args.ours}")
    if not peerlib.installed():
        return 0
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "peer.log")
    env = peerlib.ENV
    if args.theirs:
        return compare_given(args, env, log, given)
    ours, theirs = train_both(args, env, log)
    lines, inputs = write_inputs(args)

    fixed = ["-max_length", str(args.fixed_length)] if args.fixed_length else []

    def cmd(tool, src, beam, output):
        if tool == "onmt_cont":
            return [
                sys.executable,
                "translate.py",
                "-model",
                ours,
                "-src",
                src,
                "-output",
                output,
                "-beam_size",
                str(beam),
                "-batch_size",
                str(args.batch_size),
                "-threads",
                "1",
                *fixed,
            ]
        return [
            "onmt_translate",
            "-model",
            theirs,
            "-src",
            src,
            "-output",
            output,
            "-beam_size",
            str(beam),
            "-batch_size",
            str(args.batch_size),
            "-batch_type",
            "sents",
            *fixed,
            *(["-min_length", str(args.fixed_length)] if args.fixed_length else []),
        ]

    rows = [
        ("start-up (1 sentence)", "one", 1),
        (f"greedy, {len(lines)} sentences", "all", 1),
        (f"beam 5, {args.beam_sentences} sentences", "beam", 5),
    ]
    rows = [r for r, key in zip(rows, ("startup", "greedy", "beam"), strict=True) if key in args.rows.split(",")]
    print(
        f"Transformer d_model {SIZE['d']}, {SIZE['layers']}+{SIZE['layers']} layers, {args.steps} steps; "
        f"1 thread, batches of {args.batch_size}; the fastest of {args.reps} whole-process runs"
        + (f"; every output {args.fixed_length} words" if args.fixed_length else "")
    )
    print("| | OpenNMT-py | onmt_cont | onmt_cont / OpenNMT-py |")
    print("| --- | ---: | ---: | ---: |")
    for label, which, beam in rows:
        best, words = {}, {}
        for _ in range(args.reps):
            for tool in ("OpenNMT-py", "onmt_cont"):
                output = os.path.join(args.out, f"out_{tool}_{which}_{beam}.txt")
                seconds = run(cmd(tool, inputs[which], beam, output), env, log)
                best[tool] = min(best.get(tool, seconds), seconds)
                with open(output, encoding="utf-8") as f:
                    words[tool] = sum(len(x.split()) for x in f)
        n = 1 if which == "one" else (len(lines) if which == "all" else args.beam_sentences)
        if which == "one":
            print(
                f"| {label} | {best['OpenNMT-py']:.1f} s | {best['onmt_cont']:.1f} s | "
                f"{best['OpenNMT-py'] / best['onmt_cont']:.2f}x faster |"
            )
        else:
            rate = {t: n / best[t] for t in best}
            wps = {t: words[t] / best[t] for t in best}
            print(
                f"| {label} | {rate['OpenNMT-py']:.1f} sent/s, {wps['OpenNMT-py']:.0f} words/s | "
                f"{rate['onmt_cont']:.1f} sent/s, {wps['onmt_cont']:.0f} words/s | "
                f"{rate['onmt_cont'] / rate['OpenNMT-py']:.2f}x |"
            )
        sys.stdout.flush()
    return 0


def write_inputs(args):
    """The test sentences, and the inputs of the rows: all of them, -beam_sentences, one -> (lines, {name: path})."""
    with open(os.path.join(args.data, f"{args.test}.{args.src}"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    inputs = {}
    for name, n in (("all", len(lines)), ("beam", args.beam_sentences), ("one", 1)):
        inputs[name] = os.path.join(args.out, f"input_{name}.txt")
        with open(inputs[name], "w", encoding="utf-8") as f:
            f.write("\n".join(lines[:n]) + "\n")
    return lines, inputs


def compare_given(args, env, log, ours):
    """Time -theirs against each of -ours: whole process, net of start-up, and the translation loop alone (timed
    inside the process by lab/bench/decode_timer.py, wall clock and CPU), alternating, the best of -reps."""
    lines, inputs = write_inputs(args)
    kept = "OpenNMT-py_kept"  # its file names' part; its row: "OpenNMT-py, freed memory kept"
    tools = {"OpenNMT-py": args.theirs, **({kept: args.theirs} if args.peer_kept_memory else {}), **ours}
    timer = os.path.join(ROOT, "lab", "bench", "decode_timer.py")
    envs = {
        kept: dict(
            env, MALLOC_MMAP_THRESHOLD_=str(memory.MMAP_THRESHOLD), MALLOC_TRIM_THRESHOLD_=str(memory.TRIM_THRESHOLD)
        )
    }

    def cmd(tool, src, beam, output, times):
        if tool.startswith("OpenNMT-py"):
            return [
                sys.executable,
                timer,
                times,
                "opennmt-py",
                "-model",
                args.theirs,
                "-src",
                src,
                "-output",
                output,
                "-beam_size",
                str(beam),
                "-batch_size",
                str(args.batch_size),
                "-batch_type",
                "sents",
            ]
        return [
            sys.executable,
            timer,
            times,
            "onmt_cont",
            "translate.py",
            "-model",
            tools[tool],
            "-src",
            src,
            "-output",
            output,
            "-beam_size",
            str(beam),
            "-batch_size",
            str(args.batch_size),
            "-threads",
            "1",
        ]

    best, words, loop = {}, {}, {}
    runs = [("one", 1), ("all", 1), ("beam", 5)]
    for _ in range(args.reps):
        for which, beam in runs:
            for tool in tools:
                output = os.path.join(args.out, f"out_{tool}_{which}_{beam}.txt")
                times = os.path.join(args.out, f"times_{tool}_{which}_{beam}.json")
                seconds = run(cmd(tool, inputs[which], beam, output, times), envs.get(tool, env), log)
                key = (tool, which)
                best[key] = min(best.get(key, seconds), seconds)
                with open(times, encoding="utf-8") as f:
                    timed = json.load(f)
                old = loop.get(key, (float("inf"), float("inf")))
                loop[key] = (min(old[0], timed["wall"]), min(old[1], timed["cpu"]))
                with open(output, encoding="utf-8") as f:
                    words[key] = sum(len(x.split()) for x in f)
    print(
        f"{args.test}.{args.src}: {len(lines)} sentences greedy, {args.beam_sentences} beam 5; 1 thread, batches "
        f"of {args.batch_size}; the fastest of {args.reps} runs, alternating. whole: the process; net: minus the "
        "1-sentence run; loop: the translation loop timed inside the process (wall clock / CPU seconds)"
    )
    for which, n, label in (("all", len(lines), "greedy"), ("beam", args.beam_sentences, "beam 5")):
        print(f"\n{label}, {n} sentences:\n")
        print(
            "| toolkit, model | start-up (1 sentence) | sent/s, whole | sent/s, net | sent/s, loop (wall) | "
            "sent/s, loop (CPU) | words/sent | over OpenNMT-py: net / loop wall / loop CPU |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        rates = {}
        for tool in tools:
            start, whole = best[(tool, "one")], best[(tool, which)]
            rest = whole - start  # not positive: too few sentences to tell
            rates[tool] = (n / rest if rest > 0 else None, n / loop[(tool, which)][0], n / loop[(tool, which)][1])
        for tool in tools:
            ratio = " / ".join(
                "n/a" if None in (mine, theirs) else f"{mine / theirs:.2f}x"
                for mine, theirs in zip(rates[tool], rates["OpenNMT-py"], strict=True)
            )
            net = "n/a" if rates[tool][0] is None else f"{rates[tool][0]:.1f}"
            name = {"OpenNMT-py": tool, kept: "OpenNMT-py, freed memory kept"}.get(tool, f"onmt_cont, {tool}")
            print(
                f"| {name} | {best[(tool, 'one')]:.2f} s | {n / best[(tool, which)]:.1f} | {net} | "
                f"{rates[tool][1]:.1f} | {rates[tool][2]:.1f} | {words[(tool, which)] / n:.1f} | {ratio} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
