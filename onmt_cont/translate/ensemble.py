"""Ensembles (translate.py -model A.pt B.pt ...): several models of one vocabulary decode as one. At each
step every member scores the words as a distribution, and the ensemble's score is the mean of their
log-probabilities (OpenNMT-py's rule): a softmax member's log-softmax, a continuous member's beam
distribution log softmax(score / τ) (ContinuousGenerator.set_beam_scale), each with its own offsets,
prior and blocking rules. Greedy search takes the argmax of the mean; beam search ranks by it. The
attention kept for -replace_unk and -report_align is the members' mean.

:class:`Ensemble` has the parts the searches use (encode, decoder with reorder_state, generator with
step_scores), over a list per member."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from onmt_cont.models.generators import ContinuousGenerator
from onmt_cont.models.model import NMTModel
from onmt_cont.translate.search import DecoderState


class _PerMember(list[Tensor]):
    """A value per member (memory banks, decoder outputs) with the operations the searches apply."""

    def index_select(self, dim: int, index: Tensor) -> _PerMember:
        return _PerMember(t.index_select(dim, index) for t in self)

    def __getitem__(self, key):  # list's overloads, plus dec_out[:, 0] per member
        if isinstance(key, tuple):  # dec_out[:, 0]
            return _PerMember(t[key] for t in self)
        return list.__getitem__(self, key)


class _Decoder:
    def __init__(self, models: list[NMTModel]) -> None:
        self.models = models

    def __call__(
        self,
        ids: Tensor,
        memory: Sequence[Tensor],
        src_mask: Tensor,
        state: Sequence[DecoderState],
        need_attn: bool = True,
    ) -> tuple[_PerMember, Tensor | None, list[DecoderState]]:
        outs, attns, states = _PerMember(), [], []
        for model, mem, st in zip(self.models, memory, state, strict=True):
            out, attn, st = model.decoder(ids, mem, src_mask, st, need_attn=need_attn)
            outs.append(out)
            attns.append(attn)
            states.append(st)
        kept = [a for a in attns if a is not None]
        return outs, (torch.stack(kept).mean(0) if kept else None), states

    def reorder_state(self, state: Sequence[DecoderState], index: Tensor, memory: bool = True) -> list[DecoderState]:
        return [m.decoder.reorder_state(s, index, memory=memory) for m, s in zip(self.models, state, strict=True)]


class _Generator:
    continuous = False  # the ensemble's scores are log-probabilities, as a softmax model's

    def __init__(self, models: list[NMTModel]) -> None:
        self.models = models

    def step_scores(self, dec_out: Sequence[Tensor], greedy: bool = False) -> Tensor:
        logps = []
        for model, out in zip(self.models, dec_out, strict=True):
            gen = model.generator
            if isinstance(gen, ContinuousGenerator):  # its beam distribution
                logps.append(gen.step_scores(out, greedy=False).float())
            else:
                logps.append(gen.scores(gen(out)).float())
        return torch.stack(logps).mean(0)


class Ensemble:
    """The members' models (one vocabulary, one source side), searched as one model."""

    def __init__(self, models: Sequence[NMTModel]) -> None:
        self.models = list(models)
        self.decoder = _Decoder(self.models)
        self.generator = _Generator(self.models)

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[_PerMember, Tensor, list[DecoderState]]:
        """-> each member's memory bank, the source mask (the first member's: one source side), each one's
        decoder state."""
        memories, states, src_mask = _PerMember(), [], None
        for model in self.models:
            memory, mask, state = model.encode(src, src_lengths)
            memories.append(memory)
            states.append(state)
            src_mask = mask if src_mask is None else src_mask
        assert src_mask is not None  # an ensemble has members
        return memories, src_mask, states
