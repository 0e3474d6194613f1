"""Greedy search and random sampling over any generator, and what every search shares (output lengths,
n-gram blocking, one decoding step, the length penalty; beam search is beam.py's): each step takes
``generator.scores`` (log-probs for softmax models, nearest-neighbour scores against the embedding table for
continuous ones)."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

import torch
from torch import Tensor

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID

# Never produced: padding and <s>. (<unk> can be produced, and -replace_unk fixes it afterwards,
# unless translate.py -ban_unk_token adds it: BANNED_WITH_UNK.)
BANNED = (PAD_ID, BOS_ID)
BANNED_WITH_UNK = (PAD_ID, BOS_ID, UNK_ID)


MAX_LENGTH_RATIO = 2.0  # translate.py -max_length_ratio's default
# No output is longer, whatever -max_length_ratio says: ten times the longest training target that
# preprocess.py keeps by default (-tgt_seq_length 100), and the learned position table's default
# size (-max_positions). A search runs at most this many steps per sentence.
MAX_OUTPUT_LENGTH = 1024

# What the searches carry between steps and never look into: the memory bank [batch, src_len, hidden] (an
# ensemble's: one per member) and the decoder's state (models/architecture.py's State, or one per member).
Memory = Any
DecoderState = Any
# A finished hypothesis: (score / length penalty, ids, attention [len, src_len] on the CPU or None).
Hypothesis = tuple[float, list[int], Tensor | None]


class SearchModel(Protocol):
    """What the searches read of a model: an NMTModel, or an :class:`~onmt_cont.translate.ensemble.Ensemble`.
    ``decoder(ids [batch, 1], memory_bank, src_mask, state, need_attn=)`` -> (outputs, attention, state) and
    ``decoder.reorder_state(state, index, memory=)``; ``generator``: ``step_scores``, or ``scores`` (and
    ``greedy_scores``) over its output."""

    @property
    def decoder(self) -> Any: ...

    @property
    def generator(self) -> Any: ...

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Memory, Tensor, DecoderState]: ...


def length_limits(src_lengths: Tensor, max_length: int | None = None, ratio: float = MAX_LENGTH_RATIO) -> Tensor:
    """The longest output of each source [B]: translate.py -max_length, else -max_length_ratio ×
    its length + 10; never more than MAX_OUTPUT_LENGTH."""
    if max_length is not None:
        return torch.full_like(src_lengths, min(max_length, MAX_OUTPUT_LENGTH))
    # clamped as floats: a huge ratio would overflow the integer conversion
    return (src_lengths.double() * ratio + 10).clamp(max=MAX_OUTPUT_LENGTH).long()


def blocked_words(seq: Sequence[int], n: int, ignore: AbstractSet[int] = frozenset()) -> set[int]:
    """The words that, appended to ``seq``, would repeat one of its n-grams (translate.py
    -block_ngram_repeat, OpenNMT-py's flag): the words that followed each earlier occurrence of
    ``seq``'s last n − 1 words. n = 1: every word of ``seq``; n = 0: none. An n-gram holding a word of
    ``ignore`` (-ignore_when_blocking, e.g. punctuation) is never blocked, as OpenNMT-py's."""
    if n <= 0 or len(seq) < n - 1:
        return set()
    suffix = list(seq[len(seq) - n + 1 :]) if n > 1 else []
    if ignore and any(w in ignore for w in suffix):
        return set()
    return {seq[i + n - 1] for i in range(len(seq) - n + 1) if seq[i : i + n - 1] == suffix} - ignore


def block_repeats(
    scores: Tensor, prefixes: Sequence[Sequence[int]], n: int, ignore: AbstractSet[int] = frozenset()
) -> Tensor:
    """Scores [rows, vocab] with -inf where a row's word would repeat an n-gram of its prefix."""
    for r, seq in enumerate(prefixes):
        words = blocked_words(seq, n, ignore)
        if words:
            scores[r, list(words)] = float("-inf")
    return scores


def decode_step(
    model: SearchModel,
    last_ids: Tensor,
    memory_bank: Memory,
    src_mask: Tensor,
    state: DecoderState,
    ban_eos: bool = False,
    banned: Sequence[int] = BANNED,
    greedy: bool = False,
    need_attn: bool = True,
    clean: bool = True,
) -> tuple[Tensor, Tensor | None, DecoderState]:
    """One decoder step. last_ids: [batch] -> scores [batch, vocab], attn [batch, src_len] (None
    without ``need_attn``: a Transformer then skips its attention weights), state.

    ``banned``: ids never produced. ``ban_eos`` at the first step: a non-empty source never gets
    an empty translation. ``greedy``: only the argmax of the scores is used, so a softmax
    generator may give its logits (``greedy_scores``) instead of log-probabilities. ``clean``
    False: NaN scores are left for the caller to map to -inf (beam search does it once, after
    adding the hypotheses' totals)."""
    dec_out, attn, state = model.decoder(last_ids.unsqueeze(1), memory_bank, src_mask, state, need_attn=need_attn)
    gen = model.generator
    if hasattr(gen, "step_scores"):  # continuous: the table folded into the last layer
        scores = gen.step_scores(dec_out[:, 0], greedy)
    else:
        score = gen.greedy_scores if greedy and hasattr(gen, "greedy_scores") else gen.scores
        scores = score(gen(dec_out[:, 0]))
    if clean:
        # a NaN score (a diverged model) is no candidate: search must neither pick it nor rank by it
        # (in place, one pass: a tenth of the time of masked_fill(isnan) on a [64, 10K] step)
        torch.nan_to_num_(scores, nan=float("-inf"), posinf=float("inf"), neginf=float("-inf"))
    scores[:, list(banned) + ([EOS_ID] if ban_eos else [])] = float("-inf")
    return scores, (attn[:, 0] if need_attn and attn is not None else None), state


class Sampler:
    """Random sampling instead of the argmax (translate.py -random_sampling_topk/-topp/-temp, OpenNMT-py's
    names): each step draws the next word from the model's distribution over the words (a softmax model's
    log-probabilities; a continuous model's beam distribution, softmax(score / τ), see
    ContinuousGenerator.set_beam_scale), divided by ``temp``, restricted to the ``topk`` most likely words
    (-1 or 0: all) and to the smallest set whose probability reaches ``topp`` (0 or 1: all), from a generator
    seeded with ``seed``: the same seed, batches and device give the same draws."""

    def __init__(self, topk: int = -1, topp: float = 0.0, temp: float = 1.0, seed: int = 0) -> None:
        self.topk, self.topp, self.temp = topk, topp, temp
        self.seed = seed
        self._gen: dict[torch.device, torch.Generator] = {}  # one per device, seeded when first used

    def pick(self, scores: Tensor) -> Tensor:
        """scores [batch, vocab] (log-probabilities, -inf for banned words) -> drawn ids [batch]; a row with no
        candidate draws </s>."""
        device = scores.device
        gen = self._gen.get(device)
        if gen is None:
            gen = self._gen[device] = torch.Generator(device=device).manual_seed(self.seed)
        logits = scores.float() / self.temp
        if self.topk > 0 and self.topk < logits.size(-1):
            kth = logits.topk(self.topk, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if 0 < self.topp < 1:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(-1)
            before = probs.cumsum(-1) - probs  # the mass of the more likely words
            drop = (before >= self.topp).scatter(-1, order, before >= self.topp)
            logits = logits.masked_fill(drop, float("-inf"))
        dead = torch.isinf(logits).all(-1) | torch.isnan(logits).any(-1)
        probs = torch.where(dead.unsqueeze(1), torch.ones_like(logits), logits.softmax(-1).nan_to_num(0.0))
        drawn = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        return torch.where(dead, torch.full_like(drawn, EOS_ID), drawn)


@torch.no_grad()
def greedy_search(
    model: SearchModel,
    src: Tensor,
    src_lengths: Tensor,
    max_lengths: Tensor,
    banned: Sequence[int] = BANNED,
    check_every: int | None = None,
    block_ngram_repeat: int = 0,
    need_attn: bool = True,
    sampler: Sampler | None = None,
    prefix: Sequence[Sequence[int]] | None = None,
    min_length: int = 0,
    ignore_when_blocking: AbstractSet[int] = frozenset(),
    totals_out: list[float] | None = None,
) -> tuple[list[list[int]], list[Tensor | None]]:
    """Batched greedy decoding; the chosen word's embedding feeds the next step.

    src: [batch, src_len]; max_lengths: [batch] longest output (without </s>); banned: ids never
    produced. Finished sentences leave the batch: every ``check_every`` steps the rows that have
    produced </s> are dropped from the decoder state, the memory bank and the mask (each decoder's
    ``reorder_state`` selects its own state: LSTM h/c and input feed, the Transformer's key/value
    caches). Looking at which rows ended is the only host synchronisation of a step, so on a GPU
    it happens every 8 steps (default), on the CPU, where it costs nothing, at every step.
    ``block_ngram_repeat`` n > 0: a word that would repeat an n-gram of its sentence's output is
    not chosen (:func:`blocked_words`; it reads the outputs on the host at every step); a sentence
    whose every word is blocked ends. ``need_attn`` False: no attention is kept (translate.py
    without -replace_unk reads none), and each sentence's attention is None. ``sampler``: a
    :class:`Sampler` draws each word instead of the argmax. ``prefix``: per sentence, the ids its output
    starts with (translate.py -tgt_prefix): forced, then decoding goes on from them; they are part of
    the output. ``min_length``: no sentence ends before that many words (translate.py -min_length; its length
    limit still ends it). ``totals_out``: a list that receives each sentence's score, the sum of its words' and
    </s>'s scores (with a ``sampler``, their log-probabilities: the draws of -n_best are ranked by it).
    Returns (list of id lists without </s>, list of attention tensors [len, src_len] on the CPU)."""
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    batch, device = src.size(0), src.device
    check_every = check_every or (1 if device.type == "cpu" else 8)
    max_lengths = torch.as_tensor(max_lengths, device=device)
    limit = int(max_lengths.max()) if batch else 0
    out = torch.full((batch, max(limit, 1)), PAD_ID, dtype=torch.long, device=device)
    out_attn = torch.zeros(batch, max(limit, 1), src.size(1), device=device) if need_attn else None
    rows = torch.arange(batch, device=device)  # the batch row of each live row
    last = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    steps = 0
    totals = torch.zeros(batch, device=device) if totals_out is not None else None
    # each sentence's words so far
    prefixes: list[list[int]] | None = [[] for _ in range(batch)] if block_ngram_repeat else None
    forced: Tensor | None = None
    forced_len: Tensor | None = None
    if prefix is not None and any(prefix):  # [batch, longest prefix] of forced ids, and each one's length
        forced_len = torch.tensor([len(p) for p in prefix], device=device)
        forced = torch.full((batch, int(forced_len.max())), PAD_ID, dtype=torch.long, device=device)
        for b, p in enumerate(prefix):
            forced[b, : len(p)] = torch.tensor(p, dtype=torch.long)
        max_lengths = torch.maximum(max_lengths, forced_len)
        limit = max(limit, int(forced_len.max()))
        out = torch.full((batch, max(limit, 1)), PAD_ID, dtype=torch.long, device=device)
        out_attn = torch.zeros(batch, max(limit, 1), src.size(1), device=device) if need_attn else None
    for t in range(limit):  # a sentence still going at the limit ends there
        scores, attn, state = decode_step(
            model,
            last,
            memory_bank,
            src_mask,
            state,
            ban_eos=t < max(min_length, 1),
            banned=banned,
            greedy=sampler is None,
            need_attn=need_attn,
        )
        rows_now: list[int] = rows.tolist() if prefixes is not None else []
        if prefixes is not None:
            scores = block_repeats(scores, [prefixes[b] for b in rows_now], block_ngram_repeat, ignore_when_blocking)
        if sampler is not None:
            last = sampler.pick(scores)
        else:
            best = scores.max(-1)  # a row with no candidate (every score -inf) ends its sentence
            last = torch.where(best.values == float("-inf"), torch.full_like(best.indices, EOS_ID), best.indices)
        # -tgt_prefix: the prefix's word while it lasts
        if forced is not None and forced_len is not None and t < forced.size(1):
            last = torch.where(forced_len[rows] > t, forced[rows, t], last)
        if prefixes is not None:
            for b, w in zip(rows_now, last.tolist(), strict=True):
                prefixes[b].append(w)
        last = torch.where(max_lengths <= t, torch.full_like(last, EOS_ID), last)
        if totals is not None:  # a forced word (prefix, </s> at the limit) the model rules out adds 0, as beam's
            chosen = torch.nan_to_num(scores.gather(1, last.unsqueeze(1)).squeeze(1).float(), nan=0.0, neginf=0.0)
            totals[rows] += chosen.masked_fill(done, 0.0)
        out[rows, t] = last.masked_fill(done, PAD_ID)
        if out_attn is not None:  # need_attn
            assert attn is not None  # decode_step keeps it under need_attn
            out_attn[rows, t] = attn
        done |= last == EOS_ID
        steps = t + 1
        if steps % check_every == 0 and t + 1 < limit:
            live = (~done).nonzero().squeeze(1)  # the step's one synchronisation
            if live.numel() == 0:
                break
            if live.numel() < done.numel():
                rows, last, done, max_lengths = rows[live], last[live], done[live], max_lengths[live]
                memory_bank, src_mask = memory_bank.index_select(0, live), src_mask.index_select(0, live)
                state = model.decoder.reorder_state(state, live)
    ids = out[:, :steps].tolist()
    if totals is not None and totals_out is not None:
        totals_out.extend(totals.tolist())
    if out_attn is not None:  # need_attn
        out_attn = out_attn.cpu()  # -replace_unk reads it word by word: one copy, not one per <unk>
    out_ids: list[list[int]] = []
    attns: list[Tensor | None] = []
    for b in range(batch):
        seq = ids[b]
        n = seq.index(EOS_ID) if EOS_ID in seq else len([x for x in seq if x != PAD_ID])
        out_ids.append(seq[:n])
        attns.append(out_attn[b, :n] if out_attn is not None else None)
    return out_ids, attns


def sample_search(
    model: SearchModel,
    src: Tensor,
    src_lengths: Tensor,
    max_lengths: Tensor,
    sampler: Sampler,
    draws: int,
    penalty: str = "avg",
    alpha: float = 0.0,
    banned: Sequence[int] = BANNED,
    block_ngram_repeat: int = 0,
    need_attn: bool = True,
    nbest_out: list[list[Hypothesis]] | None = None,
    n_best: int = 1,
    prefix: Sequence[Sequence[int]] | None = None,
    min_length: int = 0,
    ignore_when_blocking: AbstractSet[int] = frozenset(),
) -> tuple[list[list[int]], list[Tensor | None]]:
    """Random sampling (:class:`Sampler`): ``draws`` samples of each sentence (translate.py -beam_size under
    sampling, OpenNMT-py's meaning), ranked by log-probability / length penalty; the best is the output, and
    ``nbest_out`` (a list, or None) receives the ``n_best`` best as :func:`beam_search` gives them. One draw
    without ``nbest_out`` is :func:`greedy_search` with the sampler."""
    k = draws
    if k > 1:  # each sentence k times in a row
        rows = torch.arange(src.size(0), device=src.device).repeat_interleave(k)
        src, src_lengths, max_lengths = src[rows], src_lengths[rows], torch.as_tensor(max_lengths)[rows]
        prefix = None if prefix is None else [p for p in prefix for _ in range(k)]
    totals: list[float] | None = [] if k > 1 or nbest_out is not None else None
    ids, attns = greedy_search(
        model,
        src,
        src_lengths,
        max_lengths,
        banned,
        block_ngram_repeat=block_ngram_repeat,
        need_attn=need_attn,
        sampler=sampler,
        prefix=prefix,
        min_length=min_length,
        ignore_when_blocking=ignore_when_blocking,
        totals_out=totals,
    )
    if totals is None:
        return ids, attns
    out_ids: list[list[int]] = []
    out_attns: list[Tensor | None] = []
    for b in range(0, len(ids), k):
        ranked: list[Hypothesis] = [
            (totals[j] / length_penalty(max(len(ids[j]), 1), penalty, alpha), ids[j], attns[j]) for j in range(b, b + k)
        ]
        ranked.sort(key=lambda d: d[0], reverse=True)  # stable: ties keep the order of the draws
        out_ids.append(ranked[0][1])
        out_attns.append(ranked[0][2])
        if nbest_out is not None:
            nbest_out.append(ranked[:n_best])
    return out_ids, out_attns


def length_penalty(length: int, kind: str, alpha: float) -> float:
    """OpenNMT's normalisers: ``avg`` divides by the length, ``wu`` by ((5+|Y|)/6)^alpha."""
    if kind == "avg":
        return float(length)
    if kind == "wu":
        return ((5.0 + length) / 6.0) ** alpha
    return 1.0
