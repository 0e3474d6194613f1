"""Forward + backward time of the contrastive losses (infonce, nllvmf_nce) on real target batches,
scoring each shared candidate once (the toolkit: losses.contrastive.unique_shared, logit + log of
its count) against scoring every repeat of the in-batch list. Both are timed in
alternating order in one run on the same batches and the same random draws; the ratio is the
median of one over the median of the other. Also prints how many shared candidates a batch has
and how many different words they are.

    python lab/bench/contrastive_loss.py -data runs/wc_win2_de-en/data -tgt_emb runs/wc_win2_de-en/emb.dec.pt
    python lab/bench/contrastive_loss.py -data data/sample/de-en -tgt_emb ... -loss infonce -batch_size 32
"""

import argparse
import statistics
import time
from argparse import Namespace
from unittest import mock

import torch

from onmt_cont.inputters.batching import collate, make_batches
from onmt_cont.inputters.corpus import load_shard, shard_paths
from onmt_cont.inputters.vocab import load_vocabs, unigram_log_prior
from onmt_cont.losses import build_loss, contrastive
from onmt_cont.outputs import BiasedVector
from onmt_cont.train.build import load_table
from onmt_cont.utils.errors import cli_main


def target_batches(prefix, batch_size, count, seed):
    """The flattened target tokens (y </s>, no padding) of ``count`` shuffled training batches."""
    examples = load_shard(shard_paths(prefix, "train")[0])
    batches = make_batches(examples, batch_size, generator=torch.Generator().manual_seed(seed))[:count]
    out = []
    for idx in batches:
        tgt = collate(examples, idx)["tgt"][:, 1:]
        out.append(tgt[tgt > 0])
    return out


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-data", required=True, help="preprocess.py's -save_data prefix")
    p.add_argument("-tgt_emb", required=True, help="embeddings_to_torch.py's .dec.pt table")
    p.add_argument("-loss", default="nllvmf_nce", choices=["nllvmf_nce", "infonce"])
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-batches", type=int, default=12)
    p.add_argument("-reps", type=int, default=3, help="passes over the batches, both ways each")
    p.add_argument("-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, tgt_vocab, _ = load_vocabs(args.data + ".vocab.pt")
    table = torch.nn.functional.normalize(load_table(args.tgt_emb, tgt_vocab).float(), dim=-1)
    table[0] = 0
    opt = Namespace(
        loss=args.loss,
        negatives=None,
        num_sampled=64,
        ann_candidates=32,
        temperature=0.05,
        contrastive_weight=0.1,
        lambda1=0.02,
        lambda2=0.1,
        vmf_approx=False,
        sampling_correction=True,
    )
    loss_fn = build_loss(opt, table, unigram_log_prior(tgt_vocab))
    batches = target_batches(args.data, args.batch_size, args.batches, 1)
    gen = torch.Generator().manual_seed(0)
    preds = [torch.randn(len(t), table.size(1), generator=gen) * 3 for t in batches]
    bias = torch.zeros(table.size(0), requires_grad=True)

    def one(i):
        torch.manual_seed(i)
        pred = preds[i].clone().requires_grad_(True)
        loss_fn(BiasedVector(pred, bias), batches[i]).sum().backward()

    def every(shared, n_per_token):  # the list as drawn, repeats included
        return shared, None

    sizes = []  # (listed, different words) of each scored list, the random draws included
    unique_shared = contrastive.unique_shared  # the toolkit's, before mock.patch replaces it

    def once(shared, n_per_token):
        words, offsets = unique_shared(shared, n_per_token)
        sizes.append((shared.numel(), words.numel()))
        return words, offsets

    times = {"once": [], "every repeat": []}
    for rep in range(args.reps):
        for i in range(len(batches)):
            order = ["once", "every repeat"] if (rep + i) % 2 else ["every repeat", "once"]
            for name in order:
                scoring = every if name != "once" else once
                with mock.patch.object(contrastive, "unique_shared", scoring):
                    start = time.perf_counter()
                    one(i)
                    times[name].append(time.perf_counter() - start)
    tokens = statistics.mean(len(t) for t in batches)
    listed, words = (statistics.mean(s[k] for s in sizes) for k in range(2))
    print(
        f"{args.loss}, -sampling_correction -word_bias, inbatch,random,gold_nn (64 draws, 32 neighbours); "
        f"{len(batches)} batches of {args.batch_size} sentences, {tokens:.0f} target tokens on average; "
        f"{args.threads} thread(s), median of {len(times['once'])}"
    )
    print(f"shared candidates per batch: {listed:.0f} listed, {words:.0f} different words ({words / listed:.0%})")
    once, old = (statistics.median(times[k]) for k in ("once", "every repeat"))
    print(
        f"forward + backward: each word once {once * 1000:.1f} ms, every repeat {old * 1000:.1f} ms, "
        f"ratio {once / old:.2f}"
    )


if __name__ == "__main__":
    main()
