"""Sequence-level unlikelihood (Welleck et al. 2019, §5.2; train.py -seq_unlikelihood): the model
decodes a batch greedily, and every token of its output that belongs to a repeated n-gram gets the
loss −log(1 − p(token | its own prefix)).

Token-level training never shows the model its own loops: they start after its own errors (a
continuous Transformer can repeat a rare word, "is be be be be"). Here the model is trained on
its own decodes, and only the repeated tokens are pushed down.

p(w) is a softmax over the whole vocabulary of the scores greedy search takes the argmax of, with
the scale the training loss gives them:

- ``ce``: the logits;
- ``nllvmf``, ``nllvmf_nce``: êᵀe(w) (+ b_w with -word_bias): the vMF density renormalised over
  the vocabulary, the same softmax nllvmf_nce trains over its candidates;
- ``infonce``: (cos(ê, e(w)) + b_w)/τ.

Padding and <s>, which greedy search never produces, are left out of the softmax. The cost is one
[flagged tokens, vocab] product, and flagged tokens are few.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from onmt_cont.losses import LOSSES
from onmt_cont.outputs import BiasedVector, HiddenLogits, ReWEOutput, logits_of, prediction

# -seq_unlikelihood_ngram's default: repeated 3-grams are common in a greedy model's loops and rare in
# the references; 2-grams would also push down correct repeats, 4-grams would see fewer loops.
NGRAM = 3
LOG_HALF = math.log(0.5)

# what a generator's forward returns (onmt_cont.outputs)
Output = Tensor | BiasedVector | ReWEOutput | HiddenLogits


class WordScorer(Protocol):
    """What :func:`word_logits` reads of a generator (models/generators.py; the losses do not import the models)."""

    continuous: bool  # a continuous generator: ``table`` [V, m] is the unit-length target table
    table: Tensor


def repeated_ngrams(seqs: Sequence[Sequence[int]], n: int) -> list[list[bool]]:
    """Which tokens of each id list of ``seqs`` belong to an n-gram that already occurred earlier in
    the same list (overlaps count: 'be be be' holds the 2-gram 'be be' twice). Returns a list of
    lists of bools, one per token."""
    out = []
    for seq in seqs:
        flags = [False] * len(seq)
        seen: set[tuple[int, ...]] = set()
        for i in range(len(seq) - n + 1):
            gram = tuple(seq[i : i + n])
            if gram in seen:
                flags[i : i + n] = [True] * n
            seen.add(gram)
        out.append(flags)
    return out


def word_logits(gen: WordScorer, output: Output, loss: str, temperature: float = 1.0) -> Tensor:
    """The training-time softmax logits [N, vocab] (with gradients) of a generator's ``output`` for
    N positions (what its forward returned for them), per the module docstring; ``loss``: the -loss
    name, whose ``vocab_logits`` says which softmax (onmt_cont.losses.spec)."""
    cosine = LOSSES[loss].vocab_logits == "cosine"
    if not gen.continuous:
        logits = logits_of(output.logits if isinstance(output, ReWEOutput) else output).float()
    else:
        vec = prediction(output).float()
        if cosine:
            vec = F.normalize(vec, dim=-1, eps=1e-8)
        logits = vec @ gen.table.float().t()
        bias = output.bias if isinstance(output, BiasedVector) else None
        if bias is not None:
            logits = logits + bias.float()
        if cosine:
            logits = logits / temperature
    return logits.index_fill(-1, torch.tensor([PAD_ID, BOS_ID], device=logits.device), float("-inf"))


def unlikelihood(logits: Tensor, words: Tensor) -> Tensor:
    """−log(1 − p(words)) [N] under softmax(``logits`` [N, vocab]), accurate over the whole range
    (log1mexp, Mächler 2012): for p < 1/2, −log1p(−p); above, logsumexp(all) − logsumexp(all but
    the word), where 1 − softmax would round to 0 (a word ahead by 50 in logit costs 50, not
    infinity) and the first form's cancellation would lose every digit of a small p."""
    logp = torch.log_softmax(logits, 1).gather(1, words.unsqueeze(1)).squeeze(1)
    small = -torch.log1p(-logp.clamp_max(LOG_HALF).exp())  # clamped: no NaN gradient through where
    others = logits.scatter(1, words.unsqueeze(1), float("-inf"))
    large = torch.logsumexp(logits, 1) - torch.logsumexp(others, 1)
    return torch.where(logp < LOG_HALF, small, large)


def _rows(output: Output, rows: Tensor | slice) -> Output:
    """A generator output (a tensor, BiasedVector or ReWEOutput over N positions) at ``rows``."""
    if isinstance(output, BiasedVector):
        return BiasedVector(output.vector[rows], output.bias)
    if isinstance(output, ReWEOutput):
        logits = cast(Tensor | HiddenLogits, _rows(output.logits, rows))  # of the kind it was given
        return ReWEOutput(logits, output.embedding[rows])
    if isinstance(output, HiddenLogits):
        return HiddenLogits(output.hidden[rows], output.weight, output.bias)
    return output[rows]


def _pad_to(tgt: Tensor, length: int) -> Tensor:
    return F.pad(tgt, (0, length - tgt.size(1)), value=PAD_ID)


class SequenceUnlikelihood:
    """train.py -seq_unlikelihood (:mod:`onmt_cont.losses.unlikelihood`): on every ``every``-th
    step the model decodes the batch's sources greedily (evaluation mode, no gradient, translate.py's
    default length limit), and the step's forward runs on the batch's targets and those decodes
    together, one batch of twice the sentences, so that a distributed run has one forward per step as
    before. The decodes' tokens in a repeated ``ngram``-gram add ``alpha`` · −log(1 − p) to the loss
    sum, which is normalised by the batch's target tokens like the token-level loss.

    ``search(model, src, src_lengths)`` -> the greedy decodes (lists of ids): the trainer's
    :func:`~onmt_cont.train.step.greedy_decodes`, passed in because greedy search (translate/) sits
    above the losses in the package's layers."""

    def __init__(
        self,
        alpha: float,
        ngram: int,
        every: int,
        loss: str,
        temperature: float = 1.0,
        *,
        search: Callable[[nn.Module, Tensor, Tensor], list[list[int]]],
    ):
        self.alpha, self.ngram, self.every = alpha, ngram, every
        self.loss, self.temperature, self.search = loss, temperature, search

    def applies(self, step: int) -> bool:
        return step % self.every == 0

    @torch.no_grad()
    def decode(self, model: nn.Module, batch: Mapping[str, Any]) -> tuple[dict[str, Any], Tensor, int]:
        """-> (the batch with the decodes as extra sentences: <s> ŷ </s>, flags [B, T2 − 1] of the
        decodes' target positions in a repeated n-gram, the number of decoded tokens)."""
        seqs = self.search(model, batch["src"], batch["src_lengths"])
        flags = repeated_ngrams(seqs, self.ngram)
        width = max(len(q) for q in seqs) + 2
        tgt2 = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
        flag2 = torch.zeros(len(seqs), width - 1, dtype=torch.bool)
        for b, (q, f) in enumerate(zip(seqs, flags, strict=True)):
            tgt2[b, 0] = BOS_ID
            tgt2[b, 1 : len(q) + 1] = torch.tensor(q, dtype=torch.long)
            tgt2[b, len(q) + 1] = EOS_ID
            flag2[b, : len(q)] = torch.tensor(f, dtype=torch.bool)
        tgt1 = batch["tgt"]
        length = max(tgt1.size(1), width)
        joined = {
            **batch,
            "src": torch.cat([batch["src"], batch["src"]]),
            "src_lengths": torch.cat([batch["src_lengths"], batch["src_lengths"]]),
            "tgt": torch.cat([_pad_to(tgt1, length), _pad_to(tgt2.to(tgt1.device), length)]),
        }
        return joined, flag2.to(tgt1.device), sum(len(q) for q in seqs)

    def split(
        self, gen: WordScorer, output: Output, gold: Tensor, tgt: Tensor, flags: Tensor
    ) -> tuple[tuple[Output, Tensor], Tensor, int]:
        """The joined forward's output -> (the batch's own output and gold, the unlikelihood sum
        [] over the flagged tokens of the decodes, their count)."""
        n1 = int((tgt[: tgt.size(0) // 2, 1:] != PAD_ID).sum())
        decoded = tgt[tgt.size(0) // 2 :, 1:]
        flagged = flags[decoded[:, : flags.size(1)] != PAD_ID]  # positions beyond flags' width are padding
        rows = n1 + flagged.nonzero().squeeze(1)
        own = _rows(output, slice(0, n1)), gold[:n1]
        if rows.numel() == 0:
            return own, gold.new_zeros((), dtype=torch.float32), 0
        logits = word_logits(gen, _rows(output, rows), self.loss, self.temperature)
        return own, unlikelihood(logits, gold[rows]).sum(), rows.numel()
