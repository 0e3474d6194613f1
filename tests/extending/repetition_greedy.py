"""-search penalised_greedy: greedy search that lowers the score of every word the sentence has already put out
by a fixed amount (a repetition penalty, as Keskar et al. 2019's CTRL applies one), a decoding strategy in one
file: a function of the translator and the batch, registered under the name -search takes."""

from typing import Any

import torch
from torch import Tensor

from onmt_cont.constants import BOS_ID, EOS_ID
from onmt_cont.translate.search import decode_step
from onmt_cont.translate.strategies import Request, register_strategy

PENALTY = 1.0  # subtracted from a repeated word's score: log-probabilities, cosines or vMF scores alike


@register_strategy("penalised_greedy", "greedy search, each word already put out scored PENALTY lower")
@torch.no_grad()
def penalised_greedy(t: Any, r: Request) -> tuple[list[list[int]], list[Tensor | None]]:
    model = t.search_model
    memory_bank, src_mask, state = model.encode(r.src, r.src_lengths)
    batch = r.src.size(0)
    last = torch.full((batch,), BOS_ID, dtype=torch.long, device=r.src.device)
    out: list[list[int]] = [[] for _ in range(batch)]
    attns: list[list[Tensor]] = [[] for _ in range(batch)]
    done = [False] * batch
    for step in range(int(r.max_lengths.max()) if batch else 0):
        scores, attn, state = decode_step(
            model, last, memory_bank, src_mask, state, ban_eos=step == 0, banned=t.banned, need_attn=r.need_attn
        )
        for b, words in enumerate(out):
            if words:
                scores[b, words] -= PENALTY
        last = scores.argmax(-1)
        for b, word in enumerate(last.tolist()):
            if done[b] or word == EOS_ID or len(out[b]) >= int(r.max_lengths[b]):
                done[b] = True
                continue
            out[b].append(word)
            if r.need_attn:
                attns[b].append(attn[b].cpu())
        if all(done):
            break
    return out, [torch.stack(a) if r.need_attn and a else None for a in attns]
