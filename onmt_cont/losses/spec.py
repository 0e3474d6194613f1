"""What a loss is, beyond its formula: one :class:`Loss` per ``-loss`` name, defined beside its
builder in its own file and collected in ``onmt_cont.losses.LOSSES``. The option checks, the model
builder, the decoder and -seq_unlikelihood read these fields instead of lists of names."""

from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

# a built loss: (output, target [N] ids) -> per-token losses [N]. ``output`` is what the generator the loss goes
# with returns: a tensor, or one of onmt_cont.outputs' tuples (SampledLogits, ReWEOutput, HiddenLogits,
# BiasedVector), which each loss takes apart as its generator built it
LossFn = Callable[[Any, Tensor], Tensor]


@dataclass(frozen=True)
class Loss:
    """``build(opt, table[, log_prior])`` returns the per-token loss function (see
    ``onmt_cont.losses``).

    - ``continuous``: the model predicts a vector against the pretrained table (-tgt_emb), through
      a continuous generator; else a softmax over the vocabulary.
    - ``criterion``: the nearest-neighbour score decoding ranks words by (``softmax`` for a
      softmax model; ``cosine``, ``vmf`` or ``l2``).
    - ``vocab_logits``: the softmax over the vocabulary its scores define, which -seq_unlikelihood
      pushes down: ``logits`` (a softmax model's), ``dot`` (êᵀe(w), the vMF density renormalised),
      ``cosine`` (cos(ê, e(w)) / -temperature), or None (a loss that trains no distribution).
    - ``negatives``: the default of -negatives (the sources of its candidates), None where the
      loss draws none and the flag is refused; ``num_negatives`` likewise for -num_negatives.
    - ``candidate_logits``: a softmax over candidates whose logits -word_bias,
      -sampling_correction and -train_table change.
    - ``vmf``: NLLvMF's terms, which -vmf_form picks the form of.
    - ``temperature``: -temperature divides its logits (so it is the beam's scale too).
    - ``reads``: the other loss options its builder reads (-margin, -contrastive_weight, ...); train.py
      warns about one given to a loss that does not read it.
    """

    name: str
    build: Callable[..., LossFn]  # (opt, table[, log_prior])
    summary: str
    continuous: bool = True
    criterion: str = "cosine"
    vocab_logits: str | None = None
    negatives: str | None = None
    num_negatives: int | None = None
    candidate_logits: bool = False
    vmf: bool = False
    temperature: bool = False
    reads: frozenset[str] = frozenset()

    def __call__(self, opt: Namespace, table: Tensor | None, log_prior: Tensor | None = None) -> LossFn:
        return self.build(opt, table) if log_prior is None else self.build(opt, table, log_prior)
