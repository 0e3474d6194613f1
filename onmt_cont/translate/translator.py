"""The checkpoint's engine: a :class:`Translator` decodes with the torch model a train.py checkpoint holds
(greedy, beam search and sampling in search.py, an ensemble in ensemble.py), with the word-choice options
that re-score a continuous model's output layer (-decode_prior, -csls, -freq_offsets), open-vocabulary
decoding (-tgt_emb_extend) and an approximate index (-ann)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from onmt_cont.ann import FaissIndex
from onmt_cont.constants import UNK_ID
from onmt_cont.inputters.batching import collate
from onmt_cont.inputters.vocab import Vocab, capped_log_prior, unigram_log_prior
from onmt_cont.losses import LOSSES
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.models.model import NMTModel
from onmt_cont.text.record import check_text_record
from onmt_cont.translate.base import BaseTranslator
from onmt_cont.translate.calibration import model_record, offset_vector
from onmt_cont.translate.checks import check_decoding_options
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.ensemble import Ensemble
from onmt_cont.translate.open_vocab import extend_model, read_extension
from onmt_cont.translate.report import alignment
from onmt_cont.translate.search import Hypothesis, SearchModel, length_limits
from onmt_cont.translate.strategies import STRATEGIES, Request, pick
from onmt_cont.translate.unk import replace_unk
from onmt_cont.utils.errors import UserError


class Translator(BaseTranslator):
    """A translator over ``model`` (a train.py model, put in eval mode) on ``device``. ``offsets``: the
    -freq_offsets file's offsets [bins], read by the caller (``config.freq_offsets`` names the file), under
    ``config.decode_prior``, the β they were fitted under; ``train_opt``: the checkpoint's options, which say
    the model's own temperature (:meth:`set_beam_distribution`; None: the defaults). ``config.ann``: None
    (exact search) or a dict of :class:`~onmt_cont.ann.FaissIndex` arguments besides the table, built once
    here over the final table; ``config.tgt_emb_extend``: open-vocabulary decoding over that table (see
    open_vocab.py). Other options: :class:`BaseTranslator`."""

    def __init__(
        self,
        model: NMTModel,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        config: DecodingConfig,
        *,
        device: str | torch.device = "cpu",
        lower: bool = False,
        lexicon: dict[str, str] | None = None,
        offsets: Sequence[float] | None = None,
        text_record: dict[str, Any] | None = None,
        train_opt: dict[str, Any] | None = None,
    ) -> None:
        self.device, self._offsets, self._train_opt = device, offsets, train_opt
        super().__init__(model, src_vocab, tgt_vocab, config, lower=lower, lexicon=lexicon, text_record=text_record)

    @classmethod
    def from_checkpoint(
        cls,
        path: str,
        config: DecodingConfig,
        device: str | torch.device = "cpu",
        lexicon: dict[str, str] | None = None,
        offsets: Sequence[float] | None = None,
    ) -> Translator:
        """The translator of the train.py checkpoint ``path``; its options are checked before it is read."""
        config = config.resolved()
        data = load_checkpoint(path)
        model, _, src_vocab, tgt_vocab = model_from_checkpoint(data, device, path)
        # the raw text the data was made from (preprocess.py), checked: the file may have been edited since
        record = check_text_record(data["vocab"].get("text"), path)
        return cls(
            model,
            src_vocab,
            tgt_vocab,
            config,
            device=device,
            lower=bool(data["vocab"].get("lower", False)),  # the training data was lowercased
            lexicon=lexicon,
            offsets=offsets,
            text_record=record,
            train_opt=data["opt"],
        )

    def _setup(self, config: DecodingConfig) -> None:
        model, offsets, ann = self.model, self._offsets, config.ann
        decode_prior, csls = config.decode_prior or 0.0, config.csls
        check_decoding_options(freq_offsets=offsets)
        # what the searches decode with: the model, or an ensemble (set_ensemble)
        self.search_model: SearchModel = model
        n_words = len(self.tgt_vocab)
        if csls > max(n_words - 2, 0):  # the K nearest other words (padding left out): there are V - 2
            raise UserError(
                f"-csls {csls}: this model's target vocabulary has {n_words} words, so a word has at "
                f"most {max(n_words - 2, 0)} neighbours; give a smaller K (the paper: 10)"
            )
        if config.alignment_layer is not None:
            if not hasattr(model.decoder, "set_alignment_layer"):
                raise UserError(
                    "-alignment_layer picks a Transformer decoder layer's cross-attention; this model's "
                    "decoder is an LSTM with a single attention"
                )
            try:
                model.decoder.set_alignment_layer(config.alignment_layer)
            except ValueError as exc:
                raise UserError(str(exc)) from None
        self._prior_options = (decode_prior, config.decode_prior_cap)
        if decode_prior or csls or offsets is not None:
            self._word_choice(decode_prior, csls, config.tgt_emb_extend, config.decode_prior_cap, offsets)
        if config.tgt_emb_extend:
            words, vectors = read_extension(config.tgt_emb_extend, config.tgt_emb_extend_vocab)
            self.tgt_vocab, _ = extend_model(model, self.tgt_vocab, words, vectors)
        self._check_beam_size()
        if ann is not None and ann.get("nlist") is not None and ann["nlist"] > len(self.tgt_vocab):
            raise UserError(f"-ann_nlist {ann['nlist']}: more cells than the table has words ({len(self.tgt_vocab)})")
        if ann is not None:
            gen = model.generator
            if not getattr(gen, "continuous", False):
                raise UserError("-ann searches the table of a continuous-output model; this model has a softmax")
            # The beam's k plus the specials that search bans (padding, <s>, maybe <unk>), so k words survive.
            gen.set_index(lambda rows: FaissIndex(rows, **ann), self.beam_size + len(self.banned))
        model.eval()
        # -freq_offsets were fitted under this beam, and an ANN index was sized for it: the beam stays
        self.beam_fixed = ann is not None or offsets is not None
        self.set_beam_distribution(self._train_opt, config.beam_temperature)

    def set_beam_distribution(self, opt: dict[str, Any] | None, temperature: float = 1.0) -> None:
        """Beam search over a continuous model scores each word by log softmax(score(w) / τ), τ =
        ``temperature`` × the model's own scale: 1 for the vMF and l2 criteria (nllvmf_nce: its
        contrastive distribution exactly), infonce's -temperature for the cosine criterion (its training
        softmax), 0.1 (infonce's default) for the other cosine-criterion losses (cosine, maxmargin,
        syn-margin, margin_random), which train no distribution. ``opt``: the checkpoint's options
        (None: those defaults). Softmax models need none: their scores are log-probabilities."""
        gen = self.model.generator
        if not getattr(gen, "continuous", False):
            return
        if not (0 < temperature <= 100):  # NaN fails too
            raise UserError(f"-beam_temperature must be positive and at most 100, got {temperature}")
        opt = opt or {}
        base = 1.0
        if gen.criterion == "cosine":
            spec = LOSSES.get(opt.get("loss") or "")  # a loss with -temperature trained at that scale
            base = float(opt.get("temperature") or 0.1) if spec is not None and spec.temperature else 0.1
        gen.set_beam_scale(base * temperature)

    @property
    def offsets_model(self) -> dict[str, Any]:
        """What a -freq_offsets file must have been fitted on: this model's kind and training vocabulary,
        and this translator's search."""
        return model_record(self.model.generator, self.train_vocab, self.beam_size)

    def check_offsets_model(self, path: str, record: dict[str, Any] | None) -> None:
        """Refuse a -freq_offsets file fitted on another model: the :func:`model_record` it holds
        must match this model's kind and target vocabulary. A file written before the record
        existed (``record`` None) is accepted with a warning on stderr."""
        mine = self.offsets_model
        if record is None:
            print(
                f"warning: -freq_offsets {path} does not say which model it was fitted on (written by an older "
                "tools/calibrate_offsets.py): make sure it was fitted on this one",
                file=sys.stderr,
            )
            return
        if record["kind"] != mine["kind"]:
            raise UserError(
                f"-freq_offsets {path} was fitted on a {record['kind']} model, and this is a "
                f"{mine['kind']} model: fit offsets on this model with tools/calibrate_offsets.py"
            )
        if record["tgt_vocab_sha256"] != mine["tgt_vocab_sha256"]:
            raise UserError(
                f"-freq_offsets {path} was fitted on a model with another target vocabulary "
                f"({record['tgt_words']} words; this model's has {mine['tgt_words']}, or other counts): "
                "fit offsets on this model with tools/calibrate_offsets.py"
            )
        fitted = record.get("beam_size", 1)
        if fitted != mine["beam_size"]:

            def search(k: int) -> str:
                return "greedy search" if k == 1 else f"beam search (-beam_size {k})"

            raise UserError(
                f"-freq_offsets {path} was fitted under {search(fitted)}, and this run decodes with "
                f"{search(mine['beam_size'])}: the offsets calibrate one search's output, not another's; "
                f"fit them under this one (tools/calibrate_offsets.py -beam_size {mine['beam_size']})"
            )

    def set_freq_offsets(self, offsets: Sequence[float] | None) -> None:
        """Decode from now on with these frequency-bin offsets [bins] (None: none) and the
        -decode_prior this translator was built with (tools/calibrate_offsets.py, round by round)."""
        decode_prior, decode_prior_cap = self._prior_options
        self._word_choice(decode_prior, 0, None, decode_prior_cap, offsets)

    def _word_choice(
        self,
        decode_prior: float,
        csls: int,
        tgt_emb_extend: str | None,
        decode_prior_cap: int = 0,
        freq_offsets: Sequence[float] | None = None,
    ) -> None:
        """-decode_prior and -csls: continuous models only, over the training vocabulary; -freq_offsets:
        any model (a softmax's log-probabilities plus the offsets)."""
        gen = self.model.generator
        given = " ".join(
            [f"-{k} {v}" for k, v in (("decode_prior", decode_prior), ("csls", csls)) if v]
            + (["-freq_offsets"] if freq_offsets is not None else [])
        )
        if not getattr(gen, "continuous", False):
            if decode_prior or csls or not hasattr(gen, "set_offsets"):
                raise UserError(
                    f"{given} re-scores a continuous model's nearest-neighbour search; this model has a "
                    "softmax (its output bias already carries a frequency prior)"
                )
            try:  # a softmax model: its log-probabilities plus the offsets (as a baseline)
                # None (set_freq_offsets(None)): no offsets, as for a continuous model
                gen.set_offsets(None if freq_offsets is None else offset_vector(self.tgt_vocab, freq_offsets))
            except ValueError as exc:
                raise UserError(f"{given}: this checkpoint's {exc}; or retrain with this version") from None
            return
        if tgt_emb_extend:
            raise UserError(
                f"{given} does not combine with -tgt_emb_extend: the added words have no training count or bias"
            )
        if decode_prior or freq_offsets is not None:
            try:
                log_prior = None
                if decode_prior:
                    log_prior = (
                        capped_log_prior(self.tgt_vocab, decode_prior_cap)
                        if decode_prior_cap
                        else unigram_log_prior(self.tgt_vocab)
                    )
                offsets = None if freq_offsets is None else offset_vector(self.tgt_vocab, freq_offsets)
                gen.set_prior(log_prior, decode_prior, offsets)
            except ValueError as exc:
                raise UserError(f"{given}: this checkpoint's {exc}; or retrain with this version") from None
        if csls:
            gen.set_csls(csls)

    def _max_lengths(self, src_lengths: Tensor) -> Tensor:
        return length_limits(src_lengths, self.max_length, self.max_length_ratio)

    def set_ensemble(self, others: Sequence[Translator], names: Sequence[str]) -> None:
        """Decode with this model and the models of the Translators ``others`` as one ensemble
        (onmt_cont.translate.ensemble): every member must have this model's vocabularies. ``names``:
        the checkpoints, for messages."""
        for other, name in zip(others, names[1:], strict=True):
            for side, mine, theirs in (
                ("source", self.src_vocab, other.src_vocab),
                ("target", self.tgt_vocab, other.tgt_vocab),
            ):
                if list(mine.itos) != list(theirs.itos):
                    raise UserError(
                        f"-model {name}: its {side} vocabulary ({len(theirs)} words) is not that of "
                        f"{names[0]} ({len(mine)} words): an ensemble's members share one vocabulary"
                    )
        self.search_model = Ensemble([self.model] + [o.model for o in others]) if others else self.model

    def translate_batch(
        self,
        token_lists: Sequence[Sequence[str]],
        attention: bool | None = None,
        prefixes: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[list[str]], list[Tensor | None]]:
        """token_lists: non-empty source sentences (lists of tokens) -> (outputs, attentions).
        ``attention``: whether to keep each output word's attention over the source (None: only
        where -replace_unk reads it); without it the attentions are None and a Transformer's step
        skips the weights. ``prefixes``: per sentence, the target words its output starts with
        (-tgt_prefix; greedy search and sampling)."""
        if attention is None:  # what -replace_unk, -report_align and -attn_debug read
            attention = self.replace_unk or self.report_align or self.attn_debug
        examples = [(torch.tensor(self.src_vocab.encode(toks)), torch.tensor([UNK_ID])) for toks in token_lists]
        batch = collate(examples, list(range(len(examples))), self.device)
        max_lengths = self._max_lengths(batch["src_lengths"])
        nbest: list[list[Hypothesis]] | None = [] if self.scored else None
        prefix = None
        if prefixes is not None:
            prefix = [self.tgt_vocab.encode(words) for words in prefixes]
        strategy = STRATEGIES[pick(self.search, self.sampler is not None, self.beam_size)]
        ids, attns = strategy.search(
            self, Request(batch["src"], batch["src_lengths"], max_lengths, attention, nbest, prefix)
        )
        outputs: list[list[str]] = []
        self.last_raw = []
        self.last_align = (
            [alignment(attn, len(toks)) for toks, attn in zip(token_lists, attns, strict=True)]
            if self.report_align
            else None
        )
        for toks, seq, attn in zip(token_lists, ids, attns, strict=True):
            self.words_out += len(seq)
            self.unk_out += seq.count(UNK_ID)
            self.last_raw.append(self.tgt_vocab.decode(seq))  # the model's own words, before -replace_unk
            outputs.append(self._words(seq, attn, toks))
        # with n_best: each sentence's hypotheses as (words, score), best first (the first is ``outputs``')
        self.last_nbest = (
            None
            if nbest is None
            else [
                [(self._words(h_ids, h_attn, toks), score) for score, h_ids, h_attn in hyps]
                for toks, hyps in zip(token_lists, nbest, strict=True)
            ]
        )
        # -report_align with -n_best / -with_score: each hypothesis's own alignment
        self.last_nbest_align = (
            None
            if nbest is None or not self.report_align
            else [
                [alignment(h_attn, len(toks)) for _, _, h_attn in hyps]
                for toks, hyps in zip(token_lists, nbest, strict=True)
            ]
        )
        return outputs, attns

    def _words(self, ids: list[int], attn: Tensor | None, src_tokens: Sequence[str]) -> list[str]:
        """A hypothesis's words, ``<unk>`` replaced through its attention where -replace_unk asks."""
        words = self.tgt_vocab.decode(ids)
        return replace_unk(words, attn, src_tokens, self.lexicon) if self.replace_unk else words
