#!/usr/bin/env python
"""How a model's word scores spread over the frequency bins, with the reference prefix given
(teacher forcing): per bin of training counts, the reference tokens, the argmax's tokens and the
expected tokens under the softmax of the scores over the whole vocabulary, each over the
reference's.

    python lab/tools/score_calibration.py -model RUN/model_best.pt -data RUN/../data
    python lab/tools/score_calibration.py -model RUN/model_best.pt -data RUN/../data -refit_epochs 1

The scores are what greedy search ranks by (a continuous model: êᵀe(w) + b_w under vmf, cos +
b_w under cosine, divided by -temperature for infonce, as its loss; a softmax model: its logits).
A softmax trained with cross-entropy has expected ≈ reference in every bin on its training data.

-refit_epochs N (continuous models with -word_bias): fit the bias b alone, model frozen with its
training dropout, by the full-softmax cross-entropy over the training shards (Adam,
-refit_learning_rate), then report again. It tests whether the contrastive bias is merely
mis-estimated: the refit brings expected ≈ reference, and shows what that does to the argmax
(lab/log.md, "5c, continued (9)"). Nothing is written unless -output is given (a checkpoint
with the refitted bias, written atomically).
"""

import argparse
import time

import torch

from onmt_cont.constants import PAD_ID
from onmt_cont.inputters.batching import collate
from onmt_cont.inputters.corpus import data_files, load_shard, shard_paths
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.translate.calibration import FREQ_BINS, word_bins
from onmt_cont.utils import numbers
from onmt_cont.utils.atomic import atomic_torch_save
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.threads import add_threads_arg, apply_threads


class Scorer:
    """The model's scores over the whole vocabulary for the reference positions of a batch."""

    def __init__(self, model, opt):
        self.model, self.gen = model, model.generator
        self.continuous = getattr(self.gen, "continuous", False)
        self.tau = opt.temperature if opt.loss == "infonce" else 1.0

    def features(self, batch, train):
        """-> (the generator's output over the non-padding positions, their gold ids), no gradient."""
        self.model.train(train)
        with torch.no_grad():
            dec, _ = self.model(batch["src"], batch["src_lengths"], batch["tgt"][:, :-1])
            gold = batch["tgt"][:, 1:]
            mask = gold != PAD_ID
            return self.gen(dec[mask]), gold[mask]

    def logits(self, out, bias=None):
        """Scores [N, V] (padding −inf); ``bias``: this word bias instead of the generator's."""
        with torch.no_grad():
            scores = self.gen.greedy_scores(out).float()
            if bias is not None:
                scores = scores - self.gen.bias.detach().float()
        if bias is not None:
            scores = scores + bias
        scores = scores / self.tau
        return scores.masked_fill(torch.arange(scores.size(-1)) == PAD_ID, float("-inf"))


def batches(examples, size, generator=None):
    """Batches of ``size`` examples, in order (or shuffled by ``generator``)."""
    order = torch.randperm(len(examples), generator=generator).tolist() if generator else list(range(len(examples)))
    for i in range(0, len(order), size):
        yield collate(examples, order[i : i + size])


def report(name, scorer, examples, bins, batch_size, bias=None):
    n = len(FREQ_BINS)
    ref, top, mass = torch.zeros(n), torch.zeros(n), torch.zeros(n)
    nll, tokens = 0.0, 0
    onehot = torch.nn.functional.one_hot(bins.clamp_min(0), n).float() * (bins >= 0).float()[:, None]  # [V, n]
    for batch in batches(examples, batch_size):
        out, gold = scorer.features(batch, train=False)
        with torch.no_grad():
            logp = torch.log_softmax(scorer.logits(out, bias), -1)
            nll -= logp.gather(1, gold[:, None]).sum().item()
            tokens += gold.numel()
            ref += onehot[gold].sum(0)
            top += onehot[logp.argmax(-1)].sum(0)
            mass += (logp.exp() @ onehot).sum(0)
    ratio = lambda x: " ".join(f"{v:6.2f}" for v in (x / ref.clamp_min(1)).tolist())  # noqa: E731
    print(f"{name}: NLL {nll / tokens:.3f} per token")
    print(f"  reference tokens {' '.join(f'{int(v):6d}' for v in ref.tolist())}")
    print(f"  argmax / ref     {ratio(top)}")
    print(f"  expected / ref   {ratio(mass)}", flush=True)


def refit(scorer, train, epochs, lr, batch_size, seed):
    bias = scorer.gen.bias.detach().float().clone().requires_grad_(True)
    optim = torch.optim.Adam([bias], lr=lr)
    g = torch.Generator().manual_seed(seed)
    start = time.time()
    for epoch in range(epochs):
        for batch in batches(train, batch_size, g):
            out, gold = scorer.features(batch, train=True)
            logits = scorer.logits(out, bias)
            loss = (torch.logsumexp(logits, -1) - logits.gather(1, gold[:, None]).squeeze(1)).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
        print(f"refit epoch {epoch + 1}: {time.time() - start:.0f} s", flush=True)
    return bias.detach()


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-model", required=True, help="checkpoint (train.py)")
    p.add_argument("-data", required=True, help="preprocess.py's -save_data prefix (PREFIX.valid.N.pt, .train.N.pt)")
    p.add_argument("-batch_size", type=int, default=64, help="sentences per batch")
    p.add_argument(
        "-refit_epochs",
        type=int,
        default=0,
        help="refit the word bias by full-softmax cross-entropy over the training shards for this many epochs (0: off)",
    )
    p.add_argument(
        "-refit_learning_rate", type=numbers.finite_float, default=0.05, help="Adam's learning rate for the refit"
    )
    p.add_argument("-seed", type=numbers.seed, default=1, help="the refit's batch order and dropout: 0 to 2^32 - 1")
    p.add_argument("-output", help="with -refit_epochs: write the checkpoint with the refitted bias here")
    add_threads_arg(p)
    args = p.parse_args(argv)
    refuse_output_over_inputs({"-output": args.output}, {"-model": args.model, "-data": data_files(args.data)})
    if not args.refit_learning_rate > 0:  # nan was taken, and a NaN bias refused only when written
        raise UserError(f"-refit_learning_rate must be above 0, got {args.refit_learning_rate}")
    if args.refit_epochs < 0:
        raise UserError(f"-refit_epochs must be at least 0, got {args.refit_epochs}")
    if args.output and not args.refit_epochs:
        raise UserError("-output writes the refitted bias: give -refit_epochs too")
    if args.batch_size < 1:
        raise UserError(f"-batch_size must be at least 1, got {args.batch_size}")
    apply_threads(args.threads)
    torch.manual_seed(args.seed)
    data = load_checkpoint(args.model)
    model, opt, _, tgt_vocab = model_from_checkpoint(data)
    scorer = Scorer(model, opt)
    if args.refit_epochs and not (scorer.continuous and getattr(model.generator, "bias", None) is not None):
        raise UserError(
            "-refit_epochs refits the word bias of a continuous model trained with -word_bias; this model has none"
        )
    try:
        bins = word_bins(tgt_vocab)
    except ValueError as exc:
        raise UserError(f"{args.model}: {exc}") from None
    valid = [ex for path in shard_paths(args.data, "valid") for ex in load_shard(path)]
    print(f"bins {' '.join(f'{n:>6}' for n, _, _ in FREQ_BINS)}")
    report("validation, the model's scores", scorer, valid, bins, args.batch_size)
    if not args.refit_epochs:
        return
    train = [ex for path in shard_paths(args.data, "train") for ex in load_shard(path)]
    bias = refit(scorer, train, args.refit_epochs, args.refit_learning_rate, args.batch_size, args.seed)
    report("validation, refitted bias", scorer, valid, bins, args.batch_size, bias)
    shift = bias - model.generator.bias.detach().float()
    print(
        "mean bias change by bin " + " ".join(f"{shift[bins == k].mean().item():6.2f}" for k in range(len(FREQ_BINS)))
    )
    if args.output:
        data["model"]["generator.bias"] = bias.to(data["model"]["generator.bias"].dtype)
        atomic_torch_save(data, args.output)
        print(f"-> {args.output}")


if __name__ == "__main__":
    main()
