"""What both engines' translators share (:class:`Translator` over a checkpoint, :class:`Ct2Translator` over a
CTranslate2 export): one constructor path from a model, its vocabularies and a :class:`DecodingConfig`, the
options that any search reads, and :meth:`BaseTranslator.translate_lines`, which batches sentences by length and
keeps their order. An engine supplies ``_setup`` (its model's own checks and set-up) and ``translate_batch``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from onmt_cont.constants import UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.translate.beam import COVERAGE_PENALTIES
from onmt_cont.translate.checks import MAX_BETA, check_number, sampling_on
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.search import BANNED, BANNED_WITH_UNK, MAX_OUTPUT_LENGTH, Sampler, length_limits
from onmt_cont.utils.errors import UserError

MAX_SEED = 2**32 - 1  # -seed: CTranslate2's random seed is an unsigned 32-bit integer; one rule for both engines


class BaseTranslator:
    """A translator of ``model`` (a torch model, or CTranslate2's translator) under ``config``: the options
    every search reads are set here, once, with their checks, after the engine's own ``_setup``.
    ``lower``: the training data was lowercased; ``lexicon``: -lookup_dict's table, read once
    (:func:`~onmt_cont.translate.unk.read_lexicon`); ``text_record``: the raw text the data was made from
    (preprocess.py), checked."""

    def __init__(
        self,
        model: Any,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        config: DecodingConfig,
        *,
        lower: bool = False,
        lexicon: dict[str, str] | None = None,
        text_record: dict[str, Any] | None = None,
    ) -> None:
        config = config.resolved()  # the defaults filled in, the checks that need no model passed
        assert config.beam_size is not None and config.block_ngram_repeat is not None  # resolved() set them
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.train_vocab, self.n_train_words = tgt_vocab, len(tgt_vocab)  # before -tgt_emb_extend adds words
        self.lower, self.lexicon, self.text_record = lower, lexicon, text_record
        self.beam_size: int = config.beam_size
        self.max_length, self.max_length_ratio = config.max_length, config.max_length_ratio
        self.length_penalty, self.alpha = config.length_penalty, config.alpha
        self.replace_unk, self.ban_unk = config.replace_unk, config.ban_unk
        self.block_ngram_repeat: int = config.block_ngram_repeat
        self.search: str = config.search  # translate/strategies.py: auto picks from the options below
        self.banned = BANNED_WITH_UNK if config.ban_unk else BANNED
        self.beam_fixed = False  # whether the beam may not change per call (the API's translate(beam_size=))
        self.n_best, self._with_score = 1, False  # set_n_best, set_with_score
        self.sampler: Sampler | None = None  # set_sampling
        self.coverage: tuple[str, float] = ("none", 0.0)  # set_coverage_penalty
        self.ignore_when_blocking: frozenset[int] = frozenset()  # set_ignore_when_blocking
        # the last batch's records: the outputs before -replace_unk, their alignments, and with -n_best each
        # sentence's hypotheses as (words, score) and their alignments
        self.last_raw: list[list[str]] = []
        self.last_align: list[str] | None = None
        self.last_nbest: list[list[tuple[list[str], float]]] | None = None
        self.last_nbest_align: list[list[str]] | None = None
        self.words_out = self.unk_out = 0  # words decoded so far, and how many were <unk> (before replacement)
        self._setup(config)
        self.set_min_length(config.min_length)
        self.set_ignore_when_blocking(config.ignore_when_blocking)
        self.set_n_best(config.n_best)
        self.set_with_score(config.with_score)
        self.set_sampling(
            config.random_sampling_topk, config.random_sampling_topp, config.random_sampling_temp, config.seed
        )
        self.set_coverage_penalty(config.coverage_penalty, config.beta)
        self.report_align = bool(config.report_align)  # each output's word alignment
        self.attn_debug = bool(config.attn_debug)  # keep every output's attention for translate_lines(attn=...)

    def _setup(self, config: DecodingConfig) -> None:
        """The engine's own checks and set-up of its model under ``config``."""
        raise NotImplementedError

    def _check_beam_size(self) -> None:
        """Each step keeps beam_size rows: more than the target words is no search."""
        if self.beam_size > len(self.tgt_vocab):
            raise UserError(
                f"-beam_size {self.beam_size} is larger than the target vocabulary "
                f"({len(self.tgt_vocab)} words): give at most that"
            )

    def translate_batch(
        self,
        token_lists: Sequence[Sequence[str]],
        attention: bool | None = None,
        prefixes: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[list[str]], list[Tensor | None]]:
        """token_lists: non-empty source sentences (lists of tokens) -> (outputs, attentions).
        ``attention``: whether to keep each output word's attention over the source (None: only
        where -replace_unk, -report_align or -attn_debug read it). ``prefixes``: per sentence, the target
        words its output starts with (-tgt_prefix). Sets ``last_raw`` (the outputs before -replace_unk),
        ``last_align``, ``last_nbest`` and ``last_nbest_align``."""
        raise NotImplementedError

    def set_n_best(self, n: int | None) -> None:
        """Keep the ``n`` best hypotheses of each sentence with their scores (translate.py -n_best,
        -with_score): beam search's finished hypotheses, ranked by score / length penalty; n may not
        exceed the beam (greedy search is beam 1 here, which outputs the same words with their score).
        ``n`` None or 1: the 1-best alone."""
        n = 1 if n is None else n
        if not 1 <= n <= self.beam_size:
            raise UserError(
                f"-n_best {n}: must be from 1 to -beam_size ({self.beam_size}): a beam keeps that many hypotheses"
            )
        self.n_best = n

    def set_with_score(self, on: bool) -> None:
        """Give each translation its score (translate.py -with_score): decoding goes through beam
        search (beam 1 for greedy, the same words), whose scores are log-probabilities."""
        self._with_score = bool(on)

    @property
    def scored(self) -> bool:
        """Whether decoding keeps each sentence's hypotheses and scores (-n_best above 1 or -with_score)."""
        return self.n_best > 1 or self._with_score

    def set_ignore_when_blocking(self, words: Sequence[str]) -> None:
        """-ignore_when_blocking (OpenNMT-py's): n-grams holding one of these target words are never blocked by
        -block_ngram_repeat (e.g. punctuation, which may repeat). A word outside the vocabulary is a UserError."""
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise UserError(f"-ignore_when_blocking takes target words, got {words!r}")
        unknown = [w for w in words if self.tgt_vocab.index(w) == UNK_ID]
        if unknown:
            raise UserError(f"-ignore_when_blocking: {', '.join(unknown[:5])}: not in the model's target vocabulary")
        self.ignore_when_blocking = frozenset(self.tgt_vocab.index(w) for w in words)

    def set_min_length(self, n: int) -> None:
        """No output shorter than ``n`` words unless its length limit comes first (translate.py -min_length,
        OpenNMT-py's; 0: off)."""
        check_number(
            "min_length",
            n,
            0,
            MAX_OUTPUT_LENGTH,
            integer=True,
            expected=f"a whole number from 0 (off) to {MAX_OUTPUT_LENGTH}",
        )
        self.min_length = n

    def set_coverage_penalty(self, kind: str = "none", beta: float = 0.0) -> None:
        """-coverage_penalty wu|summary with -beta (OpenNMT-py's): beam search ranks its finished hypotheses by
        score / length penalty minus beta x the penalty of their attention's coverage of the source
        (:func:`~onmt_cont.translate.beam.coverage_penalty`). Needs beam search and a non-zero beta."""
        if kind not in COVERAGE_PENALTIES:
            raise UserError(f"-coverage_penalty must be one of {', '.join(COVERAGE_PENALTIES)}, got {kind!r}")
        check_number("beta", beta, -MAX_BETA, MAX_BETA, expected=f"a finite number within ±{MAX_BETA:g} (GNMT: 0.2)")
        if kind == "none" and beta:
            raise UserError(f"-beta {beta:g} weighs -coverage_penalty: give -coverage_penalty wu or summary too")
        if kind != "none" and not beta:
            raise UserError(
                f"-coverage_penalty {kind} is weighed by -beta, 0 here (OpenNMT-py's default, which "
                "turns it off): give -beta (GNMT: 0.2)"
            )
        if kind != "none" and (self.beam_size < 2 or self.sampler is not None):
            raise UserError(
                f"-coverage_penalty {kind} re-ranks the finished hypotheses of beam search: give "
                "-beam_size 2 or more, and no random sampling"
            )
        self.coverage = (kind, float(beta))

    def set_sampling(self, topk: int = 0, topp: float = 0.0, temp: float = 1.0, seed: int = 0) -> None:
        """Random sampling instead of search (translate.py -random_sampling_topk/-topp/-temp/-seed, as
        OpenNMT-py names them): on when ``topk`` is -1 (the whole distribution) or above 1, or ``topp`` is
        in (0, 1); ``topk`` 0 or 1 with ``topp`` 0 is the argmax (off). With sampling, -beam_size K draws K
        samples of each sentence (OpenNMT-py's meaning), ranked by their log-probability / length penalty: the
        output is the best, -n_best keeps the best N with their scores."""
        if not (isinstance(topk, int) and -1 <= topk) or not (0.0 <= topp <= 1.0) or not (0.0 < temp <= 100.0):
            raise UserError(
                f"-random_sampling_topk must be -1 (all words), 0 (off) or a count, -random_sampling_topp "
                f"in [0, 1] and -random_sampling_temp in (0, 100]; got {topk}, {topp}, {temp}"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or not -1 <= seed <= MAX_SEED:
            raise UserError(
                f"-seed must be a whole number from 0 to {MAX_SEED} (-1: a new one each run, as "
                f"OpenNMT-py's), got {seed!r}"
            )
        if seed == -1:
            seed = int.from_bytes(os.urandom(4), "little")
        on = sampling_on(topk, topp)
        if on and self.coverage[0] != "none":
            raise UserError(
                "-coverage_penalty re-ranks the finished hypotheses of beam search; random sampling has "
                "none: leave one out"
            )
        self.sampler = Sampler(topk, topp, temp, seed) if on else None

    def output_limit(self, source_length: int) -> int:
        """The longest output of a source of ``source_length`` tokens (search.length_limits)."""
        return int(length_limits(torch.tensor([source_length]), self.max_length, self.max_length_ratio)[0])

    def _limit_note(self) -> str:
        return ""

    def translate_lines(
        self,
        lines: Sequence[str],
        batch_size: int = 32,
        lower: bool = False,
        on_batch: Callable[[int], None] | None = None,
        raw: list[str] | None = None,
        batch_type: str = "sents",
        nbest: list[list[tuple[str, float]]] | None = None,
        prefixes: Sequence[str] | None = None,
        align: list[str] | None = None,
        attn: list[Tensor | None] | None = None,
        first_line: int = 1,
        nbest_align: list[list[str]] | None = None,
    ) -> list[str]:
        """Translate sentences (strings); an empty line gives an empty line. Order is kept.
        ``on_batch(n)``: called with the number of lines done (a progress bar's update);
        ``raw``: a list that receives the outputs before ``<unk>`` replacement, in the same order
        (translate.py scores them too, so the lexicon's share of BLEU is visible);
        ``nbest``: a list that receives, per line, its hypotheses as (text, score), best first (see
        :meth:`set_n_best` and :meth:`set_with_score`; an empty line: one empty hypothesis, score 0);
        ``prefixes``: per line, the target text its translation starts with (tokens, as the model writes);
        ``align``: a list that receives, per line, its word alignment "SRC-TGT ..." (-report_align);
        ``attn``: a list that receives, per line, its attention [output len, source len] (None for an empty
        line; -attn_debug). ``first_line``: the number of ``lines[0]`` in its file, for messages.
        ``nbest_align``: a list that receives, per line, the alignment of each of its ``nbest`` hypotheses."""
        token_lists = [(line.lower() if lower else line).split() for line in lines]
        if prefixes is not None:  # one rule for both engines (issue 77.15): a prefix must fit the output's limit
            for i, (tokens, prefix) in enumerate(zip(token_lists, prefixes, strict=True)):
                n_words, limit = len(prefix.split()), self.output_limit(len(tokens))
                if n_words > limit:
                    raise UserError(
                        f"-tgt_prefix, line {first_line + i}: a prefix of {n_words} words is longer than "
                        f"this line's output may be ({limit}: -max_length, else -max_length_ratio × the "
                        f"source's length + 10, at most {MAX_OUTPUT_LENGTH}{self._limit_note()}): shorten "
                        "the line or raise the limit"
                    )
        order = sorted((i for i, t in enumerate(token_lists) if t), key=lambda i: len(token_lists[i]))
        results = [""] * len(lines)
        raw_results = [""] * len(lines)
        nbest_results = [[("", 0.0)] for _ in lines]
        align_results = [""] * len(lines)
        nbest_align_results = [[""] for _ in lines]
        attn_results: list[Tensor | None] = [None] * len(lines)
        if on_batch:
            on_batch(len(lines) - len(order))  # the empty lines are done
        for chunk in length_batches(order, [len(t) for t in token_lists], batch_size, batch_type):
            forced = None if prefixes is None else [prefixes[i].split() for i in chunk]
            outputs, attns = self.translate_batch([token_lists[i] for i in chunk], prefixes=forced)
            for k, (i, words, own) in enumerate(zip(chunk, outputs, self.last_raw, strict=True)):
                results[i] = " ".join(words)
                if raw is not None:
                    raw_results[i] = " ".join(own)
                weights = attns[k]
                if attn is not None and weights is not None:
                    attn_results[i] = weights[:, : len(token_lists[i])]
                if align is not None and self.last_align is not None:
                    align_results[i] = self.last_align[k]
                if nbest is not None and self.last_nbest is not None:
                    nbest_results[i] = [(" ".join(w), score) for w, score in self.last_nbest[k]]
                if nbest_align is not None and self.last_nbest_align is not None:
                    nbest_align_results[i] = self.last_nbest_align[k]
            if on_batch:
                on_batch(len(chunk))
        if raw is not None:
            raw.extend(raw_results)
        if nbest is not None:
            nbest.extend(nbest_results)
        if align is not None:
            align.extend(align_results)
        if nbest_align is not None:
            nbest_align.extend(nbest_align_results)
        if attn is not None:
            attn.extend(attn_results)
        return results


def length_batches(
    order: list[int], lengths: Sequence[int], batch_size: int, batch_type: str = "sents"
) -> list[list[int]]:
    """Consecutive batches of ``order`` (sentence indices sorted by length): ``batch_size``
    sentences each, or (``tokens``) as many as keep the longest length times the count within
    ``batch_size`` (at least one sentence, however long)."""
    if batch_type == "sents":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        if current and grown * (len(current) + 1) > batch_size:
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        longest = grown
    if current:
        batches.append(current)
    return batches
