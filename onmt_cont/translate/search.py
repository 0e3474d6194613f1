"""Greedy and beam search over any generator: each step takes ``generator.scores`` (log-probs
for softmax models, nearest-neighbour scores against the embedding table for continuous ones)."""

import torch

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID

# Never produced: padding and <s>. (<unk> can be produced, and -replace_unk fixes it afterwards,
# unless translate.py -ban_unk_token adds it: BANNED_WITH_UNK.)
BANNED = (PAD_ID, BOS_ID)
BANNED_WITH_UNK = (PAD_ID, BOS_ID, UNK_ID)


def decode_step(model, last_ids, memory_bank, src_mask, state, ban_eos=False, banned=BANNED):
    """One decoder step. last_ids: [batch] -> scores [batch, vocab], attn [batch, src_len], state.

    ``banned``: ids never produced. ``ban_eos`` at the first step: a non-empty source never gets
    an empty translation."""
    dec_out, attn, state = model.decoder(last_ids.unsqueeze(1), memory_bank, src_mask, state)
    scores = model.generator.scores(model.generator(dec_out[:, 0]))
    scores[:, list(banned) + ([EOS_ID] if ban_eos else [])] = float("-inf")
    return scores, attn[:, 0], state


@torch.no_grad()
def greedy_search(model, src, src_lengths, max_lengths, banned=BANNED, check_every=None):
    """Batched greedy decoding; the chosen word's embedding feeds the next step.

    src: [batch, src_len]; max_lengths: [batch] longest output (without </s>); banned: ids never
    produced. Finished sentences leave the batch: every ``check_every`` steps the rows that have
    produced </s> are dropped from the decoder state, the memory bank and the mask (each decoder's
    ``reorder_state`` selects its own state: LSTM h/c and input feed, the Transformer's key/value
    caches). Looking at which rows ended is the only host synchronisation of a step, so on a GPU
    it happens every 8 steps (default), on the CPU, where it costs nothing, at every step.
    Returns (list of id lists without </s>, list of attention tensors [len, src_len] on the CPU)."""
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    batch, device = src.size(0), src.device
    check_every = check_every or (1 if device.type == "cpu" else 8)
    max_lengths = torch.as_tensor(max_lengths, device=device)
    limit = int(max_lengths.max()) if batch else 0
    out = torch.full((batch, max(limit, 1)), PAD_ID, dtype=torch.long, device=device)
    out_attn = torch.zeros(batch, max(limit, 1), src.size(1), device=device)
    rows = torch.arange(batch, device=device)  # the batch row of each live row
    last = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    steps = 0
    for t in range(limit):  # a sentence still going at the limit ends there
        scores, attn, state = decode_step(model, last, memory_bank, src_mask, state, ban_eos=t == 0, banned=banned)
        last = scores.argmax(-1)
        last = torch.where(max_lengths <= t, torch.full_like(last, EOS_ID), last)
        out[rows, t] = last.masked_fill(done, PAD_ID)
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
    out_attn = out_attn.cpu()  # -replace_unk reads it word by word: one copy, not one per <unk>
    out_ids, attns = [], []
    for b in range(batch):
        seq = ids[b]
        n = seq.index(EOS_ID) if EOS_ID in seq else len([x for x in seq if x != PAD_ID])
        out_ids.append(seq[:n])
        attns.append(out_attn[b, :n])
    return out_ids, attns


def length_penalty(length, kind, alpha):
    """OpenNMT's normalisers: ``avg`` divides by the length, ``wu`` by ((5+|Y|)/6)^alpha."""
    if kind == "avg":
        return float(length)
    if kind == "wu":
        return ((5.0 + length) / 6.0) ** alpha
    return 1.0


@torch.no_grad()
def beam_search(model, src, src_lengths, max_lengths, beam_size, penalty="avg", alpha=0.0, banned=BANNED):
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

