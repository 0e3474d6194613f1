#!/usr/bin/env python
"""Time to quality against OpenNMT-py's own Transformer: its validation BLEU against wall time, beside ours.

Trains OpenNMT-py's Transformer with cross-entropy at our ce row's settings (configs/transformer_softmax.yaml:
d_model 128, 2+2 layers, 4 heads, FF 512, dropout and attention dropout 0.1, label smoothing 0.1, noam with
factor 0.5 and 1,000 warm-up steps, batches of 64 sentences, Adam beta2 0.998, glorot initialisation, moving
average 1e-4; -learning_rate and -dropout override two of them, for a sweep of its own best settings) on one
thread, with a checkpoint at the end of every epoch (train lines / 64 steps). Each checkpoint is then decoded
greedily on the validation set and scored with train.py's tokenized BLEU (onmt_cont.evaluate.tokenized_bleu),
so both toolkits' curves are measured the same way. Seconds count from the first line of OpenNMT-py's output
(train.out) to each "Saving checkpoint" line (model building and data loading included, as
lab/tools/time_to_quality.py counts ours from the first line of train.log). With -ours, our run's train.log (trained
side by side, one thread each) gives our curve, and the table ends with the seconds each needed to reach the
peer's best - 1 and their ratio.

OpenNMT-py is a benchmark-only dependency (see lab/bench/peer_decode.py for how it installs beside torch 2.13);
without it this script says so and exits 0. A rerun skips the training and the decodes already done;
-score_only scores the checkpoints of a run stopped early.

    python lab/bench/peer_time_to_quality.py -data runs/word_choice_fr-en/tok -src fr -tgt en -out runs/peer_fr-en \\
        -epochs 30 -ours runs/word_choice_fr-en/t_nce_both_avg_d00_lr1.s1/train.log
"""

import argparse
import datetime
import glob
import math
import os
import re
import subprocess
import sys

from lab import ROOT, log_path, open_text
from lab.bench import peerlib
from lab.tools.time_to_quality import curve, time_to
from onmt_cont.evaluate import tokenized_bleu

LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ \w+\] (.*)$")
SAVED = re.compile(r"Saving checkpoint .*_step_(\d+)\.pt")


def config_text(args, steps_per_epoch):
    d = args.data
    return f"""save_data: {args.out}/data
src_vocab: {args.out}/vocab.src
tgt_vocab: {args.out}/vocab.tgt
overwrite: true
data:
  corpus_1:
    path_src: {d}/train.{args.src}
    path_tgt: {d}/train.{args.tgt}
save_model: {args.out}/peer
save_checkpoint_steps: {steps_per_epoch}
keep_checkpoint: -1
train_steps: {steps_per_epoch * args.epochs}
valid_steps: 100000000
report_every: 100
seed: {args.seed}
num_workers: 0
encoder_type: transformer
decoder_type: transformer
position_encoding: true
layers: 2
hidden_size: 128
word_vec_size: 128
heads: 4
transformer_ff: 512
dropout: [{args.dropout}]
attention_dropout: [{args.dropout}]
label_smoothing: 0.1
batch_type: sents
batch_size: 64
optim: adam
adam_beta2: 0.998
decay_method: noam
learning_rate: {args.learning_rate}
warmup_steps: 1000
param_init: 0
param_init_glorot: true
average_decay: 0.0001
"""


def run(cmd, env, log, **kw):
    with open(log, "a", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, **kw)
    if proc.returncode:
        sys.exit(f"error: {' '.join(cmd[:3])} ... failed (exit {proc.returncode}); see {log}")


def checkpoint_seconds(log_path):
    """{step: seconds from the log's first line to the line saving that step's checkpoint}."""
    first, out = None, {}
    with open_text(log_path, errors="replace") as f:
        for line in f:
            m = LOG_LINE.match(line)
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
            first = first or t
            saved = SAVED.search(m.group(2))
            if saved:
                out[int(saved.group(1))] = (t - first).total_seconds()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    peerlib.add_data_args(
        p,
        "folder of tokenized train.SRC/TGT and val.SRC/TGT",
        "work folder (config, vocabularies, checkpoints, logs, decodes)",
    )
    p.add_argument("-epochs", type=int, default=30)
    p.add_argument("-learning_rate", type=float, default=0.5, help="noam factor (ours: 0.5)")
    p.add_argument("-dropout", type=float, default=0.1, help="dropout and attention dropout (ours: 0.1)")
    p.add_argument("-seed", type=int, default=1)
    p.add_argument("-ours", default=None, help="our side-by-side run's train.log: its curve and time ratio")
    p.add_argument(
        "-score_only",
        action="store_true",
        help="score the checkpoints -out holds, without training "
        "(a run stopped before -epochs: its curve so far; the peer's best is then the best so far)",
    )
    args = p.parse_args(argv)
    if not peerlib.installed():
        return 0
    os.makedirs(args.out, exist_ok=True)
    env = peerlib.ENV
    with open(os.path.join(args.data, f"train.{args.src}"), encoding="utf-8") as f:
        steps_per_epoch = math.ceil(sum(1 for _ in f) / 64)
    config = os.path.join(args.out, "peer.yaml")
    log = os.path.join(args.out, "commands.log")
    last = os.path.join(args.out, f"peer_step_{steps_per_epoch * args.epochs}.pt")
    if not os.path.exists(last) and not args.score_only:
        with open(config, "w", encoding="utf-8") as f:
            f.write(config_text(args, steps_per_epoch))
        run(["onmt_build_vocab", "-config", config, "-n_sample", "-1"], env, log)
        # its own log, started afresh (a killed run starts again: its seconds would not add up)
        with open(os.path.join(args.out, "train.out"), "w", encoding="utf-8"):
            pass
        run(["onmt_train", "-config", config], env, os.path.join(args.out, "train.out"))
    if not glob.glob(os.path.join(args.out, "peer_step_*.pt")):
        sys.exit(f"error: -out {args.out}: no peer_step_*.pt checkpoint to score")
    seconds = checkpoint_seconds(log_path(os.path.join(args.out, "train.out")))  # or train.out.gz
    with open(os.path.join(args.data, f"val.{args.tgt}"), encoding="utf-8") as f:
        refs = f.read().splitlines()
    peer = []
    for path in sorted(glob.glob(os.path.join(args.out, "peer_step_*.pt")), key=lambda x: int(x.split("_")[-1][:-3])):
        step = int(path.split("_")[-1][:-3])
        output = path[:-3] + f".val.{args.tgt}"
        if not os.path.exists(output):
            run(
                [
                    "onmt_translate",
                    "-model",
                    path,
                    "-src",
                    os.path.join(args.data, f"val.{args.src}"),
                    "-output",
                    output + ".part",
                    "-beam_size",
                    "1",
                    "-batch_size",
                    "64",
                    "-batch_type",
                    "sents",
                ],
                env,
                log,
            )
            os.replace(output + ".part", output)
        with open(output, encoding="utf-8") as f:
            hyps = f.read().splitlines()
        peer.append((step // steps_per_epoch, seconds.get(step), tokenized_bleu(hyps, refs)[0]))
    best = max(b for _, _, b in peer)
    print(
        f"OpenNMT-py Transformer ce, {args.src}->{args.tgt}, learning rate {args.learning_rate}, dropout "
        f"{args.dropout}, seed {args.seed}: greedy validation BLEU (tokenized) at each epoch's checkpoint"
    )
    print("| epoch | seconds | validation BLEU |")
    print("| ---: | ---: | ---: |")
    for epoch, s, b in peer:
        print(f"| {epoch} | {'-' if s is None else f'{s:.0f}'} | {b:.2f}{' (best)' if b == best else ''} |")
    target = best - 1
    peer_s = time_to([(s, b) for _, s, b in peer if s is not None], target)
    print(
        f"\npeer's best {best:.2f}; its best - 1 ({target:.2f}) reached at {peer_s:.0f} s"
        if peer_s is not None
        else f"\npeer's best {best:.2f}"
    )
    if args.ours:
        ours = curve(args.ours)
        ours_s = time_to(ours, target)
        ours_best = max(b for _, b in ours)
        reached = f"{ours_s:.0f} s" if ours_s is not None else "never"
        print(
            f"ours ({args.ours}): best {ours_best:.2f}; the peer's best - 1 reached at {reached}"
            + (f": {ours_s / peer_s:.2f}x the peer's time" if ours_s is not None and peer_s else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
