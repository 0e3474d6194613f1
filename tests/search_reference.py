"""The searches of onmt_cont before issue 24: greedy search that computes every sentence until
the whole batch has ended, and beam search one sentence at a time. The references that the
current searches (onmt_cont/translate/search.py and beam.py) are compared against, word for word
(tests/unit/models/test_transformer.py), and timed against (lab/bench/search_speed.py).

Independent of the search they check: the decoder step, the words never produced and the length
penalties are written out here again, from the model's own decoder and generator only."""

import torch

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID

# never produced: padding and <s> (translate.py -ban_unk_token adds <unk>)
NEVER = (PAD_ID, BOS_ID)


def step_scores(model, last_ids, memory_bank, src_mask, state, ban_eos, banned):
    """One decoder step from the words ``last_ids`` [rows]: each row's score of every word (the
    generator's log-probabilities, or its nearest-neighbour scores), -inf for the ``banned`` words
    and, with ``ban_eos``, for </s>. -> scores [rows, vocab], attention [rows, src_len], state."""
    dec_out, attn, state = model.decoder(last_ids.unsqueeze(1), memory_bank, src_mask, state)
    scores = model.generator.scores(model.generator(dec_out[:, 0])).clone()
    for word in [*banned, *([EOS_ID] if ban_eos else [])]:
        scores[:, word] = float("-inf")
    return scores, attn[:, 0], state


def normaliser(length, penalty, alpha):
    """What a finished hypothesis's summed score is divided by: its length (``avg``), Wu et al.'s
    ((5 + length) / 6) ** alpha (``wu``), or nothing (``none``)."""
    if penalty == "avg":
        return float(length)
    if penalty == "wu":
        return ((5.0 + length) / 6.0) ** alpha
    if penalty == "none":
        return 1.0
    raise ValueError(f"unknown length penalty {penalty!r}")


def _no_blocking(block_ngram_repeat):
    if block_ngram_repeat:
        raise NotImplementedError("the reference searches have no -block_ngram_repeat")


@torch.no_grad()
def full_batch_greedy_search(model, src, src_lengths, max_lengths, banned=NEVER, block_ngram_repeat=0):
    """Batched greedy decoding; the chosen word's embedding feeds the next step.

    src: [batch, src_len]; max_lengths: [batch] longest output (without </s>); banned: ids never
    produced.
    Returns (list of id lists without </s>, list of attention tensors [len, src_len])."""
    _no_blocking(block_ngram_repeat)
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    batch = src.size(0)
    last = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    ids, attns = [], []
    max_lengths = torch.as_tensor(max_lengths, device=src.device)
    limit = int(max_lengths.max())
    for t in range(limit):  # a sentence still going at the limit ends there
        scores, attn, state = step_scores(model, last, memory_bank, src_mask, state, ban_eos=t == 0, banned=banned)
        last = scores.argmax(-1)
        last = torch.where(max_lengths <= t, torch.full_like(last, EOS_ID), last)
        ids.append(last.masked_fill(done, PAD_ID))
        attns.append(attn)
        done |= last == EOS_ID
        if done.all():
            break
    ids = torch.stack(ids, 1).tolist() if ids else [[] for _ in range(batch)]
    attn_all = torch.stack(attns, 1) if attns else None
    out_ids, out_attn = [], []
    for b in range(batch):
        seq = ids[b]
        n = seq.index(EOS_ID) if EOS_ID in seq else len([x for x in seq if x != PAD_ID])
        out_ids.append(seq[:n])
        out_attn.append(attn_all[b, :n] if attn_all is not None else torch.zeros(0, src.size(1)))
    return out_ids, out_attn


@torch.no_grad()
def sequential_beam_search(
    model,
    src,
    src_lengths,
    max_lengths,
    beam_size,
    penalty="avg",
    alpha=0.0,
    banned=NEVER,
    block_ngram_repeat=0,
    *,
    finished_log=None,
):
    """Beam search, one sentence at a time for clarity (batch of beams inside).

    A hypothesis's score is the sum of its per-step scores (log-probabilities, or the
    continuous generator's scores); finished hypotheses are ranked by score / length_penalty.
    ``finished_log``: a list that gets, per sentence, its finished hypotheses as (summed score,
    length, ids), in the order they finished.
    Returns the same structure as :func:`greedy_search`."""
    _no_blocking(block_ngram_repeat)
    out_ids, out_attn = [], []
    for b in range(src.size(0)):
        n = int(src_lengths[b])
        ids, attn, finished = _beam_one(
            model, src[b : b + 1, :n], src_lengths[b : b + 1], int(max_lengths[b]), beam_size, penalty, alpha, banned
        )
        pad = torch.zeros(attn.size(0), src.size(1) - n, device=attn.device)
        out_ids.append(ids)
        out_attn.append(torch.cat([attn, pad], 1))
        if finished_log is not None:
            finished_log.append(finished)
    return out_ids, out_attn


def _beam_one(model, src, src_lengths, max_len, k, penalty, alpha, banned):
    memory_bank, src_mask, state = model.encode(src, src_lengths)
    device = src.device
    seqs = [[]]
    attns = [torch.zeros(0, src.size(1), device=device)]
    totals = torch.zeros(1, device=device)
    finished = []  # (normalised score, ids, attn)
    log = []  # (summed score, length, ids)
    last = torch.full((1,), BOS_ID, dtype=torch.long, device=device)
    for t in range(max_len + 1):
        live = len(seqs)
        scores, attn, state = step_scores(
            model,
            last,
            memory_bank.expand(live, -1, -1),
            src_mask.expand(live, -1),
            state,
            ban_eos=t == 0 and max_len > 0,
            banned=banned,
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
                finished.append((score / normaliser(max(n, 1), penalty, alpha), seqs[parent], hyp_attn[:n]))
                log.append((score, n, seqs[parent]))
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
    return ids, attn, log
