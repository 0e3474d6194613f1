"""Length-bucketed batches, reproducible from (seed, epoch) so training can resume mid-epoch."""

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TypedDict

import numpy as np
import torch

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from onmt_cont.inputters.corpus import Example, load_shard


class Batch(TypedDict):
    """What :func:`collate` returns."""

    src: torch.Tensor  # [batch, src_len] long, padded with PAD_ID
    src_lengths: torch.Tensor  # [batch] long, on the CPU
    tgt: torch.Tensor  # [batch, tgt_len + 2] long: <s> y </s>, padded
    size: int  # batch


def make_batches(
    examples: Sequence[Example], batch_size: int, batch_type: str = "sents", generator: torch.Generator | None = None
) -> list[list[int]]:
    """Group examples of similar length; ``examples``: list of (src, tgt) 1-D tensors.

    Returns a list of index lists. With ``batch_type='tokens'`` a batch holds at most
    ``batch_size`` padded tokens (max of source and target side, <s>/</s> included). With a
    ``generator`` the order within equal lengths and the batch order are shuffled."""
    n = len(examples)
    noise = torch.rand(n, generator=generator) if generator is not None else torch.zeros(n)
    keys = sorted(range(n), key=lambda i: (len(examples[i][0]), len(examples[i][1]), float(noise[i])))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i in keys:
        length = max(len(examples[i][0]), len(examples[i][1]) + 2)
        new_max = max(cur_max, length)
        size = new_max * (len(cur) + 1) if batch_type == "tokens" else len(cur) + 1
        if cur and size > batch_size:
            batches.append(cur)
            cur, new_max = [], length
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    if generator is not None:
        order = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in order]
    return batches


def collate(examples: Sequence[Example], indices: Sequence[int], device: str | torch.device = "cpu") -> Batch:
    """-> dict with src [B, S], src_lengths [B], tgt [B, T+2] (<s> y </s>), all padded with PAD_ID."""
    srcs = [examples[i][0] for i in indices]
    tgts = [examples[i][1] for i in indices]
    B = len(indices)
    S = max(len(s) for s in srcs)
    T = max(len(t) for t in tgts) + 2
    src = torch.full((B, S), PAD_ID, dtype=torch.long)
    tgt = torch.full((B, T), PAD_ID, dtype=torch.long)
    for b, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
        src[b, : len(s)] = s
        tgt[b, 0] = BOS_ID
        tgt[b, 1 : len(t) + 1] = t
        tgt[b, len(t) + 1] = EOS_ID
    lengths = torch.tensor([len(s) for s in srcs], dtype=torch.long)
    return {"src": src.to(device), "src_lengths": lengths, "tgt": tgt.to(device), "size": B}


# the source tokens that -drop_final_punct may drop from a sentence's end
FINAL_PUNCT = (".", "!", "?")


def drop_final_punct(
    examples: Sequence[Example], p: float, src_ids: Collection[int], tgt_ids: Collection[int], rng: np.random.Generator
) -> list[Example]:
    """train.py -drop_final_punct: each example whose source ends with one of ``src_ids`` (and
    holds another token) loses that last token with probability ``p``, and its target loses its
    last token too where that is one of ``tgt_ids`` (and not its only one). ``rng``: a numpy
    Generator, one uniform draw per example. Returns a new example list."""
    draws = rng.random(len(examples))
    out = []
    for (src, tgt), u in zip(examples, draws, strict=True):
        if u < p and len(src) > 1 and int(src[-1]) in src_ids:
            src = src[:-1]
            if len(tgt) > 1 and int(tgt[-1]) in tgt_ids:
                tgt = tgt[:-1]
        out.append((src, tgt))
    return out


class ShardedIterator:
    """Epoch-wise iteration over the training shards, one shard in memory at a time.

    The batches of (epoch, shard) are a pure function of the seed, so a position
    ``(epoch, shard_index, batch_index)`` is enough to resume exactly; so are the sources that
    ``drop_p`` > 0 shortens (:func:`drop_final_punct`, a stream of its own per (seed, epoch, shard)),
    drawn before batching, so batches group the lengths the model sees."""

    def __init__(
        self,
        shard_paths: Iterable[str],
        batch_size: int,
        batch_type: str,
        seed: int,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world: int = 1,
        drop_p: float = 0.0,
        punct_ids: tuple[Iterable[int], Iterable[int]] = ((), ()),
    ) -> None:
        self.paths = list(shard_paths)
        self.batch_size = batch_size
        self.batch_type = batch_type
        self.seed = seed
        self.device = device
        self.rank = rank
        self.world = world
        self.drop_p = drop_p
        self.punct_ids = (frozenset(punct_ids[0]), frozenset(punct_ids[1]))  # (source ids, target ids)

    def epoch(self, epoch: int, start_shard: int = 0, start_batch: int = 0) -> Iterator[tuple[int, int, Batch]]:
        """Yield (shard_index, batch_index, batch) from the given position on."""
        gen = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
        shard_order = torch.randperm(len(self.paths), generator=gen).tolist()
        for si in range(start_shard, len(self.paths)):
            examples = load_shard(self.paths[shard_order[si]])
            if self.drop_p > 0:
                rng = np.random.default_rng((self.seed & 0xFFFFFFFF, epoch, si, 0xD20F))
                examples = drop_final_punct(examples, self.drop_p, *self.punct_ids, rng)
            shard_gen = torch.Generator().manual_seed(self.seed * 1000003 + epoch * 7919 + si)
            batches = make_batches(examples, self.batch_size, self.batch_type, shard_gen)
            for bi in range(start_batch if si == start_shard else 0, len(batches)):
                # With several ranks each takes its share of the global batch; a batch too
                # small to give every rank an example is skipped by all of them alike.
                if len(batches[bi]) < self.world:
                    continue
                yield si, bi, collate(examples, batches[bi][self.rank :: self.world], self.device)
