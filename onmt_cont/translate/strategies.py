"""Decoding strategies by name: translate.py -search (DecodingConfig.search), one registry for the built-in
ones and those another module adds (docs/extending.md).

A strategy is a function of the translator (its model and decoding options: ``translator.search_model``,
``beam_size``, ``banned``, ``block_ngram_repeat``, ...) and a :class:`Request` (one batch of sources) that
returns each sentence's output ids (without ``</s>``) and attention ([length, src_len] on the CPU, or None).
``auto``, the default, picks a built-in one from the other options, as translate.py always has: sampling under
-random_sampling_topk/-topp, beam search with -beam_size above 1, else greedy search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from onmt_cont.translate.beam import beam_search
from onmt_cont.translate.search import greedy_search, sample_search

AUTO = "auto"


@dataclass(frozen=True)
class Request:
    """One batch to decode: ``src`` [batch, src_len] ids, their lengths, each sentence's longest output,
    whether to keep the attention, ``nbest_out`` (a list that receives each sentence's hypotheses as
    (score, ids, attention), best first, where -n_best or -with_score read them; else None) and ``prefix``
    (-tgt_prefix: per sentence, the ids its output starts with; or None)."""

    src: Tensor
    src_lengths: Tensor
    max_lengths: Tensor
    need_attn: bool
    nbest_out: list | None = None
    prefix: list[list[int]] | None = None


Search = Callable[[Any, Request], tuple[list[list[int]], list[Tensor | None]]]


@dataclass(frozen=True)
class Strategy:
    """A name -search takes, its help line and its search. ``built_in``: one the CTranslate2 engine decodes
    too (an added strategy runs on the checkpoint engine only)."""

    name: str
    summary: str
    search: Search
    built_in: bool = False


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, summary: str, built_in: bool = False) -> Callable[[Search], Search]:
    """Function decorator: -search ``name`` decodes with this search. A taken name is refused."""

    def add(search: Search) -> Search:
        if name in STRATEGIES or name == AUTO:
            raise ValueError(f"a decoding strategy is already registered as {name!r}")
        STRATEGIES[name] = Strategy(name, summary, search, built_in)
        return search

    return add


def pick(name: str, sampling: bool, beam_size: int) -> str:
    """The strategy -search ``name`` decodes with: ``auto``'s choice from the other options, else ``name``."""
    if name != AUTO:
        return name
    return "sample" if sampling else "beam" if beam_size > 1 else "greedy"


@register_strategy("greedy", "the best word at each step (with -n_best/-with_score: beam search of one)", True)
def greedy(t: Any, r: Request) -> tuple[list[list[int]], list[Tensor | None]]:
    if r.nbest_out is not None:  # scores and hypotheses come from beam search's bookkeeping, with the same words
        return beam(t, r)
    return greedy_search(
        t.search_model,
        r.src,
        r.src_lengths,
        r.max_lengths,
        t.banned,
        block_ngram_repeat=t.block_ngram_repeat,
        need_attn=r.need_attn,
        prefix=r.prefix,
        min_length=t.min_length,
        ignore_when_blocking=t.ignore_when_blocking,
    )


@register_strategy("beam", "beam search of -beam_size hypotheses", True)
def beam(t: Any, r: Request) -> tuple[list[list[int]], list[Tensor | None]]:
    return beam_search(
        t.search_model,
        r.src,
        r.src_lengths,
        r.max_lengths,
        t.beam_size,
        t.length_penalty,
        t.alpha,
        t.banned,
        t.block_ngram_repeat,
        need_attn=r.need_attn,
        nbest_out=r.nbest_out,
        n_best=t.n_best,
        prefix=r.prefix,
        min_length=t.min_length,
        ignore_when_blocking=t.ignore_when_blocking,
        coverage=t.coverage,
    )


@register_strategy("sample", "random sampling (-random_sampling_topk/-topp/-temp), -beam_size draws", True)
def sample(t: Any, r: Request) -> tuple[list[list[int]], list[Tensor | None]]:
    return sample_search(
        t.search_model,
        r.src,
        r.src_lengths,
        r.max_lengths,
        t.sampler,
        t.beam_size,
        t.length_penalty,
        t.alpha,
        t.banned,
        t.block_ngram_repeat,
        r.need_attn,
        r.nbest_out,
        t.n_best,
        r.prefix,
        t.min_length,
        t.ignore_when_blocking,
    )
