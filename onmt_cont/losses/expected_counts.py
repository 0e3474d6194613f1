"""The sampling correction's expected counts (``-sampling_correction``, ``-expected_counts``): how many
times, in expectation, the negative sources put a word among a token's candidates. :class:`ExpectedCounts`
is the part of :class:`~onmt_cont.losses.negatives.Negatives` that computes them from its sources."""

import torch
from torch import Tensor

from onmt_cont.constants import EOS_ID
from onmt_cont.losses.token_dots import sorted_runs

# -expected_counts: the in-batch source's expected counts (Negatives.log_expected_counts)
EXPECTED_COUNTS = ("unigram", "batch", "sentence")


class ExpectedCounts:
    """log E of a batch's candidates, for :class:`~onmt_cont.losses.negatives.Negatives`, whose
    ``sources``, ``table``, ``num_sampled``, ``counts`` and ``unigram`` it reads."""

    sources: tuple[str, ...]
    table: Tensor  # [V, m]
    num_sampled: int
    counts: str
    unigram: Tensor | None  # [V]

    def log_expected_counts(self, target: Tensor, shared: Tensor | None, per_token: Tensor | None) -> Tensor:
        """log E_i(j) [N, S + C]: for each candidate j of token i, how many times the sources put j among
        token i's candidates, in expectation given the batch (-sampling_correction). A contrastive logit
        minus log E is the correction of a sampled softmax for its proposal (Bengio & Senécal 2008; Yi et
        al. 2019, the balance heuristic over the mixture of sources).

        ``counts="unigram"`` (the default, the rule of the results' continuous rows): ``inbatch`` puts j
        among the candidates N · p_train(j) times, p_train the add-one smoothed training unigram, as if
        the batch's targets were independent draws from it; ``random`` -num_sampled / (V − 1); ``exact``
        1; the per-token ``gold_nn``/``ann`` lists 1 for each time j is in token i's list. The batch's
        targets are no independent draws (the token's own sentence is always in its batch, a batch of B
        sentences holds exactly B </s>, smoothing lifts the rare words), so this estimate of the
        normaliser is biased.
        ``counts="batch"``: ``inbatch`` puts j among token i's candidates exactly as often as j stands
        in the batch outside token i's own position, c(j) (that position holds the gold word, which is
        masked). With E_i(j) = c(j) + the other terms, the expected value over the random draws of
        Σ over the candidates of exp(logit_j) / E_i(j) is Σ_{j ≠ gold} exp(logit_j) exactly: the
        normaliser's estimate is unbiased on the batch as it is. The loss divides by that estimate, so
        the gradient is still not the full softmax's (lab/bench/correction_push.py measures the rules).
        ``counts="sentence"``: unbiased over how batches are formed, given the token: its own sentence is
        always in the batch and counted exactly, the batch's </s> exactly, the other sentences' words as
        draws from the training word frequencies (:meth:`_sentence_expected`).
        Padding and −1 ids get log 0 = −inf (they are masked)."""
        n = target.numel()
        base = self._base(target)
        if "inbatch" in self.sources and self.counts == "sentence":
            return self._sentence_expected(target, shared, per_token, base)
        log_base = torch.log(base)
        parts = []
        if shared is not None:  # the same for every token, but where a shared word is also in its own list
            parts.append(_shared_expected(log_base, base, shared, per_token, n))
        if per_token is not None:
            parts.append(torch.log(base[per_token.clamp_min(0)] + _own_counts(per_token) * (per_token > 0)).float())
        return torch.cat(parts, 1)

    def _base(self, target: Tensor) -> Tensor:
        """E(j) [V] float64 from the sources that treat every token alike: random, exact, and in-batch under the
        unigram and batch rules (the sentence rule's in-batch term is its own: :meth:`_sentence_expected`)."""
        vocab, n = self.table.size(0), target.numel()
        base = torch.zeros(vocab, dtype=torch.float64, device=target.device)
        if "random" in self.sources:
            base[1:] += self.num_sampled / (vocab - 1)
        if "exact" in self.sources:
            base[1:] += 1.0
        if "inbatch" in self.sources and self.counts != "sentence":
            if self.counts == "batch":
                base += torch.bincount(target, minlength=vocab).to(base.dtype)
            elif self.unigram is None:
                raise ValueError("in-batch negatives need the training unigram distribution (log_prior)")
            else:
                base += n * self.unigram
        base[0] = 0.0
        return base

    def log_expected_parts(
        self, target: Tensor, words: Tensor, per_token: Tensor | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor] | None, Tensor | None] | None:
        """:meth:`log_expected_counts` in parts, for distinct shared ``words`` [U] under the unigram and batch rules:
        (log E of each shared word [U], the pairs (rows, cols, log E) whose token's own list holds that word too
        (or None), log E of the per-token candidates [N, C] (or None)); float32. None under the sentence rule."""
        if "inbatch" in self.sources and self.counts == "sentence":
            return None
        base = self._base(target)
        col = torch.log(base[words]).float()
        hits = own = None
        if per_token is not None:
            where, times = _hits(words, per_token, base.size(0))
            rows, cols = where // words.numel(), where % words.numel()
            hits = rows, cols, torch.log(base[words[cols]] + times).float()
            own = torch.log(base[per_token.clamp_min(0)] + _own_counts(per_token) * (per_token > 0)).float()
        return col, hits, own

    def _sentence_expected(
        self, target: Tensor, shared: Tensor | None, per_token: Tensor | None, base: Tensor
    ) -> Tensor:
        """log E_i(j) under counts="sentence": the batch is token i's own sentence plus other sentences
        drawn from the corpus. In-batch, j is among token i's candidates as often as it stands in the own
        sentence outside position i, s_i(j), plus, in the other sentences, exactly once per sentence for
        </s> (a batch holds one per sentence) and K_i · q(j) times for a word, K_i the other sentences'
        words (not </s>) and q(j) its frequency among the training words (``log_prior`` holds log q);
        ``base`` [V] holds the random term already; the per-token terms are counted as the other rules do."""
        if self.unigram is None:
            raise ValueError("-expected_counts sentence needs the training word frequencies (log_prior)")
        n = target.numel()
        own, length, own_eos = own_sentence_words(target)
        eos_total = int((target == EOS_ID).sum())
        other_eos = (eos_total - own_eos).double()  # [N]: </s> of the other sentences
        other_words = (n - length - other_eos).clamp_min(0)  # [N]: K_i
        freq = self.unigram.clone()
        freq[0] = 0.0
        freq[EOS_ID] = 0.0
        lists = own if per_token is None else torch.cat([per_token, own], 1)  # each entry adds 1 to its word

        parts = []
        if shared is not None:  # E [N, U] of the distinct shared words: a broadcast sum, then the hits
            words, inverse = torch.unique(shared, return_inverse=True)
            got = (other_words.unsqueeze(1) * freq[words] + base[words]).float()
            got += (words == EOS_ID).float() * other_eos.float().unsqueeze(1)
            where, times = _hits(words, lists, base.size(0))
            got.view(-1).index_add_(0, where, times.to(got.dtype))
            got = torch.log(got)
            same = words.numel() == shared.numel() and torch.equal(words, shared)
            parts.append(got if same else got[:, inverse])
        if per_token is not None:
            ids = per_token.clamp_min(0)
            got = other_words.unsqueeze(1) * freq[ids] + base[ids]
            got += (ids == EOS_ID) * other_eos.unsqueeze(1)
            got += _own_counts(lists)[:, : per_token.size(1)]  # in its own lists (itself included) and sentence
            parts.append(torch.log(torch.where(per_token > 0, got, torch.zeros_like(got))).float())
        return torch.cat(parts, 1)


def own_sentence_words(target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """target [N]: sentences one after the other, each ending with </s> (the last may lack it) ->
    (own [N, L]: the words of each token's own sentence, −1 at its own position and past the end; the
    sentence's length [N] and whether it ends with </s> [N], float64)."""
    n = target.numel()
    eos = (target == EOS_ID).long()
    sentence = torch.cumsum(eos, 0) - eos
    lengths = torch.bincount(sentence)
    starts = torch.cumsum(lengths, 0) - lengths
    longest = int(lengths.max()) if n else 0
    offset = torch.arange(longest, device=target.device).unsqueeze(0)
    pos = starts[sentence].unsqueeze(1) + offset
    ok = (offset < lengths[sentence].unsqueeze(1)) & (pos != torch.arange(n, device=target.device).unsqueeze(1))
    own = torch.where(ok, target[pos.clamp_max(max(n - 1, 0))], torch.full_like(pos, -1))
    ends = target[(starts + lengths - 1).clamp_min(0)] == EOS_ID
    return own, lengths[sentence].double(), ends[sentence].double()


def _hits(words: Tensor, lists: Tensor, vocab: int) -> tuple[Tensor, Tensor]:
    """words [U] distinct, lists [N, C] (−1 padded) -> (where, times): the entries of an [N, U] matrix,
    flattened, whose row's list holds that column's word, and how many times. Each list entry is looked
    up in a [V] map of the words' columns: O(V + N·C)."""
    n = lists.size(0)
    column = torch.full((vocab,), -1, dtype=torch.long, device=words.device)
    column[words] = torch.arange(words.numel(), device=words.device)
    found = column[lists.clamp_min(0)]
    hit = (found >= 0) & (lists > 0)
    rows = torch.arange(n, device=found.device).unsqueeze(1).expand_as(found)[hit]
    return torch.unique(rows * words.numel() + found[hit], return_counts=True)


def _shared_expected(log_base: Tensor, base: Tensor, shared: Tensor, per_token: Tensor | None, n: int) -> Tensor:
    """log E [N, S] of the shared candidates: log base(j), or log(base(j) + k) where token i's own
    list holds j k times; float32. Scored on the distinct shared words (the losses pass them
    distinct and sorted already): O(V + N·C + N·S) (:func:`_hits`); ``n``: the tokens."""
    words, inverse = torch.unique(shared, return_inverse=True)
    expected = log_base[words].float().expand(n, -1).clone()
    if per_token is not None:
        where, times = _hits(words, per_token, base.size(0))
        expected.view(-1)[where] = torch.log(base[words[where % words.numel()]] + times).float()
    if words.numel() == shared.numel() and torch.equal(words, shared):
        return expected
    return expected[:, inverse]


def _own_counts(per_token: Tensor) -> Tensor:
    """[N, C]: how many times each entry's id is in its own row (1 for an id found once)."""
    _, order, first = sorted_runs(per_token)
    run = first.flatten().cumsum(0) - 1  # each sorted entry's run of equal ids
    times = torch.bincount(run)[run].view(per_token.shape)
    return torch.empty_like(times).scatter_(1, order, times)
