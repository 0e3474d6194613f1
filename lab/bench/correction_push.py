#!/usr/bin/env python
"""How hard the sampled negatives push each frequency bin's word biases, against the full softmax.

For a trained contrastive checkpoint (nllvmf_nce or infonce with -word_bias) and the batches
train.py builds from its data (same shards, batch size, seed and sort), this computes per target
word j the weight the negatives put on j, summed over the batch's tokens: under the full softmax
over the vocabulary, Σ_i p_i(j) for j ≠ gold_i (the part of the gradient of the word bias b_j that
pulls it down); under the sampled softmax with -sampling_correction, Σ_i of the candidate softmax's
weight on j's negative entries. Their quotient per bin of training counts (1, 2-4, 5-9, 10-99,
100-999, 1000+, and </s>) is 1.00 where the correction makes the sampled push unbiased. Each rule of
-expected_counts is measured on the same batches and the same random draws (the sampled weights are the
loss's own gradient on each negative's logit).

With -normaliser full each entry's weight is exp(corrected logit) over the full softmax's normaliser
instead of the candidates': the quotient then measures the expected counts alone (1.00: E is the
mean count), apart from the bias of dividing by a sampled normaliser (a candidate drawn with a large
weight 1/E also enlarges the normaliser it is divided by, so high-variance words are pushed less).

    python lab/bench/correction_push.py -model RUN/model_best.pt -data RUN/data -batches 30

Prints one row per rule; -json writes them too.
"""

import argparse
import json
import sys

import torch

from onmt_cont.constants import EOS_ID, PAD_ID
from onmt_cont.inputters.batching import ShardedIterator
from onmt_cont.inputters.corpus import shard_paths
from onmt_cont.inputters.vocab import unigram_log_prior, word_log_frequency
from onmt_cont.losses.contrastive import (
    _corrected_cross_entropy,
    _corrected_logits,
    _split,
    _with_bias,
    build_negatives,
    unique_shared,
)
from onmt_cont.losses.expected_counts import EXPECTED_COUNTS
from onmt_cont.losses.negatives import candidate_ids, invalid
from onmt_cont.losses.token_dots import candidate_dots
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.train.step import TrainingForward

BINS = ((1, 1), (2, 4), (5, 9), (10, 99), (100, 999), (1000, None))
BIN_NAMES = ("1", "2-4", "5-9", "10-99", "100-999", "1000+", "</s>")


def word_bins(vocab):
    """[V] bin index of each word by training count (6: </s>; -1: specials and unseen words)."""
    counts = torch.tensor(vocab.counts)
    out = torch.full_like(counts, -1)
    for b, (lo, hi) in enumerate(BINS):
        out[(counts >= lo) & ((counts <= hi) if hi is not None else True)] = b
    out[:4] = -1
    out[EOS_ID] = len(BINS)
    return out


def logits_of(loss, pred):
    """The contrastive logits' inputs: nllvmf_nce scores ê itself, infonce its direction."""
    return pred if loss == "nllvmf_nce" else torch.nn.functional.normalize(pred, dim=-1, eps=1e-8)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-model", required=True, help="a contrastive checkpoint (nllvmf_nce or infonce)")
    p.add_argument("-data", required=True, help="the preprocess.py prefix it was trained on")
    p.add_argument("-batches", type=int, default=30, help="training batches to measure")
    p.add_argument("-seed", type=int, default=1, help="the random negatives' draws")
    p.add_argument("-threads", type=int, default=1)
    p.add_argument(
        "-normaliser",
        choices=["sampled", "full"],
        default="sampled",
        help="divide each candidate's weight by the candidates' normaliser (the loss's) or the full "
        "softmax's (the expected counts alone)",
    )
    p.add_argument(
        "-rules",
        nargs="+",
        choices=EXPECTED_COUNTS,
        default=list(EXPECTED_COUNTS),
        help="the -expected_counts rules to measure",
    )
    p.add_argument(
        "-negatives",
        default=None,
        help="measure with these candidate sources instead of the "
        "checkpoint's (e.g. inbatch: which source the bias comes from)",
    )
    p.add_argument(
        "-ann_candidates",
        type=int,
        default=None,
        help="measure with this many gold neighbours per token instead of the checkpoint's",
    )
    p.add_argument(
        "-num_sampled",
        type=int,
        default=None,
        help="measure with this many uniform random negatives per batch instead of the checkpoint's",
    )
    p.add_argument("-json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_checkpoint(args.model)
    model, opt, _, tgt_vocab = model_from_checkpoint(data, "cpu")
    if opt.loss not in ("nllvmf_nce", "infonce"):
        sys.exit(f"error: -model {args.model}: -loss {opt.loss} has no sampled negatives")
    model.eval()
    table = model.generator.table
    tau = 1.0 if opt.loss == "nllvmf_nce" else opt.temperature
    bins = word_bins(tgt_vocab)
    priors = {"unigram": unigram_log_prior(tgt_vocab), "sentence": word_log_frequency(tgt_vocab), "batch": None}
    sources = {"negatives": args.negatives} if args.negatives else {}
    if args.ann_candidates:
        sources["ann_candidates"] = args.ann_candidates
    if args.num_sampled:
        sources["num_sampled"] = args.num_sampled
    rules = {
        r: build_negatives(argparse.Namespace(**{**vars(opt), "expected_counts": r, **sources}), table, priors[r])
        for r in args.rules
    }
    full = torch.zeros(len(tgt_vocab), dtype=torch.float64)
    sampled = {r: torch.zeros(len(tgt_vocab), dtype=torch.float64) for r in rules}
    forward = TrainingForward(model)
    batches = ShardedIterator(shard_paths(args.data, "train"), opt.batch_size, opt.batch_type, opt.seed).epoch(0)
    with torch.no_grad():
        for n, (_, _, batch) in enumerate(batches):
            if n == args.batches:
                break
            out, gold = forward(batch["src"], batch["src_lengths"], batch["tgt"])
            pred, bias = _split(out)
            vec = logits_of(opt.loss, pred)
            bias = torch.zeros(len(tgt_vocab)) if bias is None else bias
            scores = (vec @ table.t() + bias) / tau
            scores[:, PAD_ID] = float("-inf")
            prob = scores.double().softmax(1)
            prob[torch.arange(gold.numel()), gold] = 0  # the gold word's own entry is no negative's push
            full += prob.sum(0)
            for rule, negatives in rules.items():
                torch.manual_seed(args.seed * 1000003 + n)  # the same draws for every rule
                shared, per_token = negatives(torch.nn.functional.normalize(pred, dim=-1), gold)
                shared, repeats = unique_shared(shared, 0 if per_token is None else per_token.size(1))
                pos, dots = (vec * table[gold]).sum(-1), candidate_dots(vec, table, shared, per_token)
                pos, dots = _with_bias(pos, dots, gold, shared, per_token, bias)
                pos, dots = pos / tau, dots / tau
                if args.normaliser == "full":
                    dots = _corrected_logits(dots, gold, negatives, shared, per_token, repeats, True)
                    dots = dots.masked_fill(invalid(gold, shared, per_token), float("-inf")).double()
                    weight = (dots - torch.logsumexp(scores.double(), 1, keepdim=True)).exp()
                else:  # the loss's own gradient on each negative's logit
                    with torch.enable_grad():
                        dots = dots.double().requires_grad_()
                        loss = _corrected_cross_entropy(
                            pos.double(), dots, gold, negatives, shared, per_token, repeats, True
                        )
                        (weight,) = torch.autograd.grad(loss.sum(), dots)
                columns = torch.arange(dots.size(1)).expand_as(dots)
                ids = candidate_ids(columns, shared, per_token).clamp_min(0)
                sampled[rule].index_add_(0, ids.flatten(), weight.detach().flatten())
    rows = {}
    for rule in sampled:
        ratios = []
        for b in range(len(BIN_NAMES)):
            words = bins == b
            ratios.append(round((sampled[rule][words].sum() / full[words].sum()).item(), 3))
        rows[rule] = dict(zip(BIN_NAMES, ratios, strict=True))
    print(
        f"{args.model}: the negatives' push on each bin's word biases over the full softmax's, {n} batches, "
        f"{args.normaliser} normaliser, negatives {args.negatives or opt.negatives}"
    )
    print(f"{'rule':10} " + " ".join(f"{b:>8}" for b in BIN_NAMES))
    for rule, row in rows.items():
        print(f"{rule:10} " + " ".join(f"{v:8.3f}" for v in row.values()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"model": args.model, "batches": n, "normaliser": args.normaliser, "push": rows}, f, indent=1)


if __name__ == "__main__":
    main()
