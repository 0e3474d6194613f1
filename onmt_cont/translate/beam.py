"""Beam search over any generator (:func:`beam_search`): hypotheses of each sentence extended by their best
words, finished ones ranked by score / length penalty minus -coverage_penalty's penalty of their attention."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import torch
from torch import Tensor

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from onmt_cont.translate.search import (
    BANNED,
    Hypothesis,
    SearchModel,
    block_repeats,
    decode_step,
    length_penalty,
)

COVERAGE_PENALTIES = ("none", "wu", "summary")  # -coverage_penalty's choices (OpenNMT-py's)


def coverage_penalty(attn: Tensor | None, kind: str, beta: float) -> float:
    """What -coverage_penalty takes from a finished hypothesis's score / length penalty (OpenNMT-py's
    re-ranking): ``attn`` [output words, source words] its attention over its own source, summed per source
    word into the coverage c_j; ``wu`` (Wu et al. 2016): beta x -sum_j log min(c_j, 1), a source word
    attended to less than once costs; ``summary``: beta x (sum_j max(c_j, 1) - source words), one attended to
    more than once costs. A source word never attended to counts as c_j = the smallest float32 (a large,
    finite cost: log 0 would leave every such hypothesis at -inf, unranked)."""
    if kind == "none" or not beta or attn is None:
        return 0.0
    cov = attn.float().sum(0)
    if kind == "wu":
        return beta * float(-cov.clamp(min=torch.finfo(torch.float32).tiny, max=1.0).log().sum())
    return beta * float(cov.clamp(min=1.0).sum() - cov.numel())


@torch.no_grad()
def beam_search(
    model: SearchModel,
    src: Tensor,
    src_lengths: Tensor,
    max_lengths: Tensor,
    beam_size: int,
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
    coverage: tuple[str, float] = ("none", 0.0),
) -> tuple[list[list[int]], list[Tensor | None]]:
    """Beam search over a batch of sentences, each with its own beam of ``beam_size`` rows.

    A hypothesis's score is the sum of its per-step scores (log-probabilities, or the
    continuous generator's scores); finished hypotheses are ranked by score / length_penalty.
    Each sentence keeps the k best of its beams' expansions at every step; an expansion by
    </s> finishes a hypothesis instead of continuing it, and a sentence is done once k of its
    hypotheses have finished (fairseq's rule: the scores of continuous models can be positive, so
    "no live hypothesis can still win" is no safe test) or none is left, and at its length limit
    whatever the scores are (NaN or infinite totals included: only </s> is taken there, and the
    hypotheses end even without one). Done sentences leave
    the batch, and the rows of the others are reordered in one selection of the decoder state (of the
    state that follows the hypotheses alone while no sentence leaves: the source's part is the same
    for every row of a sentence). ``need_attn`` False: no attention is kept (each sentence's is None).
    ``block_ngram_repeat`` n > 0: no hypothesis is extended by a word that would repeat one of its
    n-grams (:func:`blocked_words`).
    Returns the same structure as :func:`greedy_search` (attention on the CPU). ``nbest_out``: a list
    that receives, per sentence, its ``n_best`` best finished hypotheses, best first, as
    (score / length penalty, ids, attention) (beam 1 is greedy search with the scores). ``prefix``: per sentence,
    the ids every hypothesis starts with (translate.py -tgt_prefix): forced with the model's scores (0 where a
    banned or blocked word scores -inf), the beam widening from their end; they are part of the output.
    ``min_length``: no hypothesis ends before that many words (its length limit still ends it). ``coverage``:
    (-coverage_penalty, -beta): each finished hypothesis's :func:`coverage_penalty` over its output words'
    attention is taken from its score (the attention is then kept whatever ``need_attn`` says, and returned only
    where it asks)."""
    device, batch, k = src.device, src.size(0), beam_size
    cov_kind, beta = coverage
    cov_on = cov_kind != "none" and beta != 0
    keep_attn, need_attn = need_attn, need_attn or cov_on
    src_len = src_lengths.tolist()
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    width = 1  # rows per sentence: one (<s>) at the first step, then k; row i*width + j is beam j
    max_len = [int(x) for x in torch.as_tensor(max_lengths).tolist()]
    if prefix is not None:  # a sentence runs at least as long as its prefix
        max_len = [max(n, len(p)) for n, p in zip(max_len, prefix, strict=True)]
    live = list(range(batch))  # the sentences still in the batch, in row order
    seqs: dict[int, list[list[int]]] = {b: [[]] for b in live}  # each sentence's live hypotheses (at most k)
    # each live hypothesis's attention rows, a list of [src_len] views of the steps' CPU tensors (stacked
    # once a hypothesis ends: concatenating at every step copied the whole history of every hypothesis);
    # empty without need_attn
    hyp_attn: dict[int, list[list[Tensor]]] = {b: [[]] for b in live}
    totals = torch.zeros(batch, 1, device=device)
    finished: dict[int, list[Hypothesis]] = {b: [] for b in live}  # (normalised score, ids, attn)
    last = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    t = 0
    while live:
        scores, attn, state = decode_step(
            model, last, memory_bank, src_mask, state, banned=banned, need_attn=need_attn, clean=False
        )
        vocab = scores.size(1)
        scores = scores.view(len(live), width, vocab)
        for i, b in enumerate(live):
            if block_ngram_repeat:
                block_repeats(scores[i], seqs[b], block_ngram_repeat, ignore_when_blocking)
            if t < max(min_length, 1) and t < max_len[b]:  # a non-empty source never gets an empty translation
                scores[i, :, EOS_ID] = float("-inf")
            if t == max_len[b]:  # only </s> may follow
                eos = scores[i, :, EOS_ID].clone()
                scores[i] = float("-inf")
                scores[i, :, EOS_ID] = eos
            if prefix is not None and t < len(prefix[b]):  # -tgt_prefix: only the prefix's word
                word = prefix[b][t]
                kept = torch.nan_to_num(scores[i, :, word], nan=0.0, neginf=0.0)
                scores[i] = float("-inf")
                scores[i, :, word] = kept
        cand = scores.add_(totals.unsqueeze(2)).view(len(live), -1)  # in place: the step's scores are its own
        # NaN scores and inf + (-inf): no candidate (in place, one pass; decode_step left NaN here)
        torch.nan_to_num_(cand, nan=float("-inf"), posinf=float("inf"), neginf=float("-inf"))
        best = cand.topk(min(k, cand.size(1)), dim=1)
        top, idx = best.values.tolist(), best.indices.tolist()  # the step's one synchronisation
        step_attn_rows = None  # [live, width, src_len] on the CPU
        if need_attn:
            assert attn is not None  # decode_step keeps it under need_attn
            step_attn_rows = attn.view(len(live), width, -1).cpu()
        next_live: list[int] = []
        select: list[int] = []  # the rows the next step continues
        new_totals: list[list[float]] = []
        words: list[int] = []
        for i, b in enumerate(live):
            new_seqs: list[list[int]] = []
            new_attns: list[list[Tensor]] = []
            parents: list[int] = []
            new_scores: list[float] = []
            new_words: list[int] = []
            at_limit = t >= max_len[b]
            for score, c in zip(top[i], idx[i], strict=True):
                if score == float("-inf"):  # a banned word (or only </s> allowed): no hypothesis, no end
                    continue
                parent, word = divmod(c, vocab)
                if at_limit and word != EOS_ID:  # NaN scores are not -inf: the limit must not rest on them
                    continue
                step_attn = hyp_attn[b][parent] + [step_attn_rows[i, parent]] if step_attn_rows is not None else []
                if word == EOS_ID:
                    n = len(seqs[b][parent])
                    rows = _stack_rows(step_attn[:n], src.size(1)) if need_attn else None
                    # cov_on keeps the attention: rows is not None there
                    cov = (
                        coverage_penalty(rows[:, : src_len[b]], cov_kind, beta) if cov_on and rows is not None else 0.0
                    )
                    finished[b].append((score / length_penalty(max(n, 1), penalty, alpha) - cov, seqs[b][parent], rows))
                    continue
                new_seqs.append(seqs[b][parent] + [word])
                new_attns.append(step_attn)
                parents.append(parent)
                new_scores.append(score)
                new_words.append(word)
            if len(finished[b]) >= k or not new_seqs or at_limit:
                if not finished[b]:  # every hypothesis hit the limit without </s>
                    for j in range(len(seqs[b])):
                        rows = _stack_rows(hyp_attn[b][j], src.size(1)) if need_attn else None
                        cov = (
                            coverage_penalty(rows[:, : src_len[b]], cov_kind, beta)
                            if cov_on and rows is not None
                            else 0.0
                        )
                        finished[b].append((totals[i, j].item() - cov, seqs[b][j], rows))
                continue
            seqs[b], hyp_attn[b] = new_seqs, new_attns
            pad = k - len(parents)  # fewer than k live: the spare rows copy beam 0 at score -inf
            select += [i * width + p for p in parents + [parents[0]] * pad]
            new_totals.append(new_scores + [float("-inf")] * pad)
            words += new_words + [PAD_ID] * pad
            next_live.append(b)
        # the same sentences in the same rows: the source's part of every row stays as it is
        same = next_live == live and width == k
        live, t, width = next_live, t + 1, k
        if not live:
            break
        index = torch.tensor(select, device=device)
        state = model.decoder.reorder_state(state, index, memory=not same)
        if not same:
            memory_bank, src_mask = memory_bank.index_select(0, index), src_mask.index_select(0, index)
        totals = torch.tensor(new_totals, device=device)
        last = torch.tensor(words, device=device)
    out_ids: list[list[int]] = []
    out_attn: list[Tensor | None] = []
    for b in range(batch):
        ranked = sorted(finished[b], key=lambda f: f[0], reverse=True)  # stable: ties keep their order
        if not keep_attn:  # kept for -coverage_penalty alone
            ranked = [(score, ids, None) for score, ids, _ in ranked]
        _, ids, best_attn = ranked[0]
        out_ids.append(ids)
        out_attn.append(best_attn)
        if nbest_out is not None:
            nbest_out.append(ranked[:n_best])
    return out_ids, out_attn


def _stack_rows(rows: list[Tensor], src_len: int) -> Tensor:
    """A hypothesis's attention rows (a list of [src_len] tensors) -> [len, src_len]."""
    return torch.stack(rows) if rows else torch.zeros(0, src_len)
