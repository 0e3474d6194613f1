"""Generators turn decoder states into the model's output and into word scores.

All share one interface, so the trainer and the decoders need no special cases:

- ``forward(dec_out, gold=None)``: the output the loss is computed on (logits, or a predicted
  vector ê). ``gold`` [N], the reference ids of the N positions of ``dec_out`` [N, hidden], is
  given when training and validating and is None when decoding; most generators ignore it. The
  joint generator samples its training softmax's candidates around it (:class:`SampledLogits`)
  and the ReWE generator adds its head's prediction (:class:`ReWEOutput`).
- ``scores(output)``: a score per target word, higher is better; greedy decoding takes the
  top-1 and beam search the top-k. For a continuous generator that is nearest-neighbour
  search against the unit-length target table.
"""

import math

import torch
from torch import Tensor, nn

from onmt_cont.models.continuous import (  # noqa: F401  (every generator is importable from here)
    ContinuousGenerator,
    normalize_table,
    table_hubness,
    with_offsets,
)
from onmt_cont.models.dropout import Dropout
from onmt_cont.models.embeddings import TargetEmbeddings
from onmt_cont.outputs import HiddenLogits, ReWEOutput, SampledLogits, logits_of


class SoftmaxScores(nn.Module):
    """How a generator whose output is logits over the vocabulary decodes (the softmax and the joint ones)."""

    offsets: Tensor | None

    def set_offsets(self, offsets: Tensor | None) -> None:
        """Decode with each word's log-probability plus ``offsets`` [vocab] (translate.py
        -freq_offsets: frequency-bin offsets; None: off)."""
        self.offsets = None if offsets is None else offsets.float().to(next(self.parameters()).device)

    def scores(self, output: Tensor) -> Tensor:
        """Log-probabilities [..., vocab] (plus the offsets, where set)."""
        return with_offsets(torch.log_softmax(output.float(), dim=-1), self.offsets)

    def greedy_scores(self, output: Tensor) -> Tensor:
        """What greedy search takes the argmax of: the logits, whose argmax is the log-softmax's,
        without the [batch, vocab] normalisation at every step."""
        return with_offsets(output.float(), self.offsets)


class SoftmaxGenerator(SoftmaxScores):
    continuous = False
    offsets: Tensor | None

    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, vocab_size)
        self.offsets = None  # [vocab] (decoding only): see set_offsets
        # train.py sets it for -loss ce: with ``gold`` given on the CPU (training and validation) forward returns
        # HiddenLogits, whose loss computes the logits in cache-sized chunks (onmt_cont.losses.linear_ce)
        self.defer_logits = False

    # (ReWEOutput: the ReWE generator's, which subclasses this one)
    def forward(self, dec_out: Tensor, gold: Tensor | None = None) -> Tensor | HiddenLogits | ReWEOutput:
        """dec_out: [..., hidden] -> logits [..., vocab] (or, see ``defer_logits``, :class:`HiddenLogits`)."""
        return self._logits(dec_out, gold)

    def _logits(self, dec_out: Tensor, gold: Tensor | None) -> Tensor | HiddenLogits:
        if self.defer_logits and gold is not None and dec_out.device.type == "cpu":
            return HiddenLogits(dec_out, self.proj.weight, self.proj.bias)
        return self.proj(dec_out)


# The ReWE head's generator is seeded with -seed plus this offset, so that its draws are not the
# ones the global RNG (seeded with -seed) gives the encoder.
REWE_SEED_OFFSET = 104729


class ReWEHead(nn.Module):
    """ReWE(s) = W2·ReLU(W1·s + b1) + b2 (Jauregi Unanue et al. 2019, eq. 5): [..., hidden] -> [..., m].

    Built without drawing from the global RNG (``skip_init``) and initialised from its own
    ``torch.Generator``: uniform in [-init, init], or PyTorch's Linear bound 1/sqrt(fan_in) when
    ``init`` is 0. ``build_model``'s global initialisation skips it (``self_initialised``), so adding
    the head leaves every other parameter's initial value, and the dropout masks, unchanged. No
    dropout inside (its input, the decoder's output, has had the decoder's)."""

    self_initialised = True

    def __init__(self, in_size: int, hidden_size: int, out_size: int, init: float = 0.1, seed: int = 0):
        super().__init__()
        device = torch.empty(0).device  # the default device: the meta device when a size is checked
        self.w1 = nn.utils.skip_init(nn.Linear, in_size, hidden_size, device=device)
        self.w2 = nn.utils.skip_init(nn.Linear, hidden_size, out_size, device=device)
        gen = torch.Generator().manual_seed(seed + REWE_SEED_OFFSET)
        with torch.no_grad():
            for layer in (self.w1, self.w2):
                bound = init or 1.0 / math.sqrt(layer.in_features)
                for p in layer.parameters():
                    p.uniform_(-bound, bound, generator=gen)

    def forward(self, dec_out: Tensor) -> Tensor:
        return self.w2(torch.relu(self.w1(dec_out)))


class ReWEGenerator(SoftmaxGenerator):
    """A softmax generator with a ReWE head that regresses the gold word's pretrained embedding.

    ``forward`` returns :class:`ReWEOutput` when ``gold`` is given (training, validation) and the
    plain logits when decoding: at inference the head is ignored. ``table`` [vocab, m] (unit rows) is
    the regression target, kept as a buffer for the loss."""

    def __init__(
        self, hidden_size: int, vocab_size: int, table: Tensor, head_hidden: int, init: float = 0.1, seed: int = 0
    ):
        super().__init__(hidden_size, vocab_size)
        self.head = ReWEHead(hidden_size, head_hidden, table.size(1), init, seed)
        self.register_buffer("table", table)

    def forward(self, dec_out: Tensor, gold: Tensor | None = None) -> Tensor | HiddenLogits | ReWEOutput:
        logits = self._logits(dec_out, gold)
        return logits if gold is None else ReWEOutput(logits, self.head(dec_out))

    def scores(self, output: Tensor | ReWEOutput) -> Tensor:
        return super().scores(_plain_logits(output))

    def greedy_scores(self, output: Tensor | ReWEOutput) -> Tensor:
        return super().greedy_scores(_plain_logits(output))


def _plain_logits(output: Tensor | ReWEOutput) -> Tensor:
    """The logits of a ReWE generator's output, computed where they were deferred (HiddenLogits)."""
    logits = output.logits if isinstance(output, ReWEOutput) else output
    return logits_of(logits) if isinstance(logits, HiddenLogits) else logits


def sample_candidates(gold: Tensor, vocab_size: int, fraction: float) -> Tensor:
    """The words a sampled softmax is computed over: every distinct id of ``gold`` plus negatives
    drawn uniformly without replacement (global RNG) from the other words, up to
    ceil(fraction·vocab_size) words in all (never fewer than the gold words). Returns sorted ids [K].

    With ``fraction`` 1 every word is a candidate and nothing is drawn."""
    positives = torch.unique(gold)  # sorted
    n_neg = max(0, math.ceil(fraction * vocab_size) - positives.numel())
    if n_neg == 0:
        return positives
    others = torch.ones(vocab_size, dtype=torch.bool, device=gold.device)
    others[positives] = False
    others = others.nonzero().squeeze(1)
    if n_neg < others.numel():
        others = others[torch.randperm(others.numel(), device=gold.device)[:n_neg]]
    return torch.cat([positives, others]).sort().values


class JointGenerator(SoftmaxScores):
    """Pappas et al. (2018)'s structure-aware output layer (eq. 14):

        logits = tanh(U·Eᵀ + b_u)ᵀ · tanh(V·h + b_v) + b

    E [vocab, d] is what the decoder consumes as input embeddings (with -tie_emb the frozen
    pretrained table through its trainable projection), U [d_j, d], V [d_j, hidden], b_u, b_v [d_j]
    and b [vocab] are trained here. Dropout follows both joint-space projections (the paper drops
    after each layer).

    ``sample`` (-joint_sample): in training each call's softmax covers :func:`sample_candidates` of
    its gold words only (:class:`SampledLogits`); validation and decoding use the full softmax."""

    continuous = False

    embeddings: TargetEmbeddings
    offsets: Tensor | None

    def __init__(
        self,
        hidden_size: int,
        embeddings: TargetEmbeddings,
        vocab_size: int,
        joint_dim: int,
        dropout: float = 0.0,
        sample: float | None = None,
    ):
        super().__init__()
        self.word_proj = nn.Linear(embeddings.out_size, joint_dim)  # U, b_u
        self.context_proj = nn.Linear(hidden_size, joint_dim)  # V, b_v
        self.bias = nn.Parameter(torch.zeros(vocab_size))  # b
        self.offsets = None  # [vocab] (decoding only): see SoftmaxGenerator.set_offsets
        self.dropout = Dropout(dropout)
        self.vocab_size = vocab_size
        self.sample = sample
        # E is read from the decoder's embeddings at each call, so it follows their training. Kept
        # out of the registered submodules: their parameters belong to the decoder, and are saved
        # and counted there once.
        self.__dict__["embeddings"] = embeddings
        self._cache = None

    def _words(self, ids=None):
        """g_out(E) = tanh(U·Eᵀ + b_u)ᵀ of ``ids`` [K] (all words when None): [K, d_j], no dropout."""
        return torch.tanh(self.word_proj(self.embeddings.matrix(ids)))

    def train(self, mode: bool = True) -> "JointGenerator":
        # the cache goes at every switch between training and evaluation too: a fused optimiser step (train.py's
        # Adam on the CPU) changes the parameters in place without bumping their _version
        self._cache = None
        return super().train(mode)

    def _all_words(self):
        if self.training or torch.is_grad_enabled():
            return self.dropout(self._words())
        # Decoding and validation: the same at every step until a parameter changes, so computed
        # once per parameter state: load_state_dict and the average's swap (in place) bump a tensor's
        # _version, a move to another device or dtype changes its storage, and train() (every training
        # step) drops the cache, since a fused optimiser step bumps no version.
        tensors = (*self.word_proj.parameters(), *self.embeddings.parameters(), *self.embeddings.buffers())
        key = tuple((id(t), t.data_ptr(), t._version) for t in tensors)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._words())
        return self._cache[1]

    def forward(self, dec_out: Tensor, gold: Tensor | None = None) -> Tensor | SampledLogits:
        """dec_out: [..., hidden] -> logits [..., vocab], or (training with ``sample`` and ``gold``
        [N] for dec_out [N, hidden]) :class:`SampledLogits` over the candidates."""
        context = self.dropout(torch.tanh(self.context_proj(dec_out)))
        if self.training and gold is not None and self.sample is not None:
            candidates = sample_candidates(gold, self.vocab_size, self.sample)
            words = self.dropout(self._words(candidates))
            return SampledLogits(context @ words.t() + self.bias[candidates], candidates)
        return context @ self._all_words().t() + self.bias


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def frozen_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if not p.requires_grad) + sum(b.numel() for b in module.buffers())
