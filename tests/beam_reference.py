"""The beam search of onmt_cont before issue 24, one sentence at a time: the reference that the
batched beam search (onmt_cont/translate/search.py) is compared against, word for word."""

import torch

from onmt_cont.constants import BOS_ID, EOS_ID
from onmt_cont.translate.search import BANNED, decode_step, length_penalty


@torch.no_grad()
def sequential_beam_search(model, src, src_lengths, max_lengths, beam_size, penalty="avg", alpha=0.0, banned=BANNED):
    """Beam search, one sentence at a time for clarity (batch of beams inside).

    A hypothesis's score is the sum of its per-step scores (log-probabilities, or the
    continuous generator's scores); finished hypotheses are ranked by score / length_penalty.
    Returns the same structure as :func:`greedy_search`."""
    out_ids, out_attn = [], []
    for b in range(src.size(0)):
        n = int(src_lengths[b])
        ids, attn = _beam_one(model, src[b : b + 1, :n], src_lengths[b : b + 1], int(max_lengths[b]),
                              beam_size, penalty, alpha, banned)
        pad = torch.zeros(attn.size(0), src.size(1) - n, device=attn.device)
        out_ids.append(ids)
        out_attn.append(torch.cat([attn, pad], 1))
    return out_ids, out_attn


def _beam_one(model, src, src_lengths, max_len, k, penalty, alpha, banned):
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    device = src.device
    seqs = [[]]
    attns = [torch.zeros(0, src.size(1), device=device)]
    totals = torch.zeros(1, device=device)
    finished = []  # (normalised score, ids, attn)
    last = torch.full((1,), BOS_ID, dtype=torch.long, device=device)
    for t in range(max_len + 1):
        live = len(seqs)
        scores, attn, state = decode_step(
            model, last, memory_bank.expand(live, -1, -1), src_mask.expand(live, -1), state,
            ban_eos=t == 0 and max_len > 0, banned=banned,
        )
        if t == max_len:  # only </s> may follow
            keep = torch.full_like(scores, float("-inf"))
            keep[:, EOS_ID] = scores[:, EOS_ID]
            scores = keep
        cand = (totals.unsqueeze(1) + scores).view(-1)
        top, idx = cand.topk(min(k, cand.numel()))
        vocab = scores.size(1)
        new_seqs, new_attns, new_totals, parents, words = [], [], [], [], []
        for score, i in zip(top.tolist(), idx.tolist(), strict=True):
            if score == float("-inf"):  # a banned word (or only </s> allowed): neither a hypothesis nor an end
                continue
            parent, word = divmod(i, vocab)
            hyp_attn = torch.cat([attns[parent], attn[parent : parent + 1]], 0)
            if word == EOS_ID:
                n = len(seqs[parent])
                finished.append((score / length_penalty(max(n, 1), penalty, alpha), seqs[parent], hyp_attn[:n]))
                continue
            new_seqs.append(seqs[parent] + [word])
            new_attns.append(hyp_attn)
            new_totals.append(score)
            parents.append(parent)
            words.append(word)
        # Stop once k hypotheses have ended (fairseq's rule; scores of continuous models can
        # be positive, so "no live hypothesis can still win" is not a safe test for them).
        if len(finished) >= k or not new_seqs:
            break
        index = torch.tensor(parents, device=device)
        state = model.decoder.reorder_state(state, index)  # the state's layout is the decoder's business
        seqs, attns = new_seqs, new_attns
        totals = torch.tensor(new_totals, device=device)
        last = torch.tensor(words, device=device)
    if not finished:  # every hypothesis hit the limit without </s>
        finished = [(totals[i].item(), seqs[i], attns[i]) for i in range(len(seqs))]
    _, ids, attn = max(finished, key=lambda f: f[0])
    return ids, attn

