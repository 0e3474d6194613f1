#!/usr/bin/env python
"""Accuracy@k of a model's next-word predictions on a test set with teacher forcing (syn-margin Table 2).

    python lab/tools/accuracy_at_k.py -model runs/x/model_best.pt -src test.fr -tgt test.en [-k 1 2 5 10]

The decoder reads the reference prefix (<s> y_1 ... y_{t-1}); at each target position (the words and
the final </s>) the model scores every target word: softmax models by their logits, continuous
models by their decoding criterion (`model.generator.scores`: cosine, vMF's êᵀe(w) + log C_m(‖ê‖),
or −Euclidean distance), i.e. the ranking of nearest neighbours that greedy decoding uses. The
gold word's rank is 1 + the number of words scoring strictly higher; accuracy@k is the fraction of
positions with rank ≤ k. Reference words outside the target vocabulary are <unk> positions:
counted in "all", left out of "known".
"""

import argparse
import json
import sys

import torch

from onmt_cont.constants import PAD_ID, UNK_ID
from onmt_cont.inputters.batching import collate
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.threads import apply_threads


def gold_ranks(model, batch):
    """-> ranks [N] (1 = best) of the gold next words at the non-padding target positions, and gold ids [N]."""
    tgt_in, gold = batch["tgt"][:, :-1], batch["tgt"][:, 1:]
    dec_out, _ = model(batch["src"], batch["src_lengths"], tgt_in)
    mask = gold.ne(PAD_ID)
    scores = model.generator.scores(model.generator(dec_out[mask])).float()
    g = gold[mask]
    gold_score = scores.gather(1, g.unsqueeze(1))
    return (scores > gold_score).sum(1) + 1, g


def accuracy_at_k(model, src_vocab, tgt_vocab, src_lines, tgt_lines, ks=(1, 2, 5, 10), batch_size=64, lower=False):
    examples = []
    for s, t in zip(src_lines, tgt_lines, strict=True):
        s, t = (s.lower(), t.lower()) if lower else (s, t)
        if s.split():
            examples.append(
                (torch.tensor(src_vocab.encode(s.split())), torch.tensor(tgt_vocab.encode(t.split()), dtype=torch.long))
            )
    if not examples:
        raise UserError("no non-empty source line to score")
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    ranks, golds = [], []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            r, g = gold_ranks(model, collate(examples, order[start : start + batch_size]))
            ranks.append(r)
            golds.append(g)
    ranks, golds = torch.cat(ranks), torch.cat(golds)
    known = golds.ne(UNK_ID)
    out = {"positions": int(ranks.numel()), "unk_positions": int((~known).sum())}
    for k in ks:
        out[f"acc@{k}"] = float((ranks <= k).float().mean())
        out[f"known_acc@{k}"] = float((ranks[known] <= k).float().mean()) if known.any() else 0.0
    return out


def read(path):
    return [line for _, line in read_lines(path)]


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-model", required=True, help="checkpoint written by train.py")
    p.add_argument("-src", required=True, help="tokenized source")
    p.add_argument("-tgt", required=True, help="tokenized reference")
    p.add_argument("-k", type=int, nargs="+", default=[1, 2, 5, 10])
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-threads", type=int, default=2, help="torch threads (0: PyTorch's default)")
    args = p.parse_args(argv)
    if min(args.k) < 1 or args.batch_size < 1:
        raise UserError(
            f"-k and -batch_size must be at least 1, got -k {' '.join(map(str, args.k))} -batch_size {args.batch_size}"
        )
    apply_threads(args.threads)
    data = load_checkpoint(args.model)
    model, opt, src_vocab, tgt_vocab = model_from_checkpoint(data)
    src, tgt = read(args.src), read(args.tgt)
    if len(src) != len(tgt):
        raise UserError(f"{args.src} has {len(src)} lines but {args.tgt} has {len(tgt)}: one reference per source line")
    res = accuracy_at_k(
        model, src_vocab, tgt_vocab, src, tgt, args.k, args.batch_size, lower=bool(data["vocab"].get("lower", False))
    )
    res = {"model": args.model, "loss": opt.loss, "generator": opt.generator, **res}
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
