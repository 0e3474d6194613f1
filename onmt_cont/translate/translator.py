"""Translate a file with a trained checkpoint: batches by length, output in input order."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import torch

from onmt_cont.ann import FaissIndex
from onmt_cont.constants import UNK_ID
from onmt_cont.inputters.batching import collate
from onmt_cont.inputters.vocab import capped_log_prior, unigram_log_prior
from onmt_cont.losses import LOSSES
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.text.record import check_text_record
from onmt_cont.translate.calibration import model_record, offset_vector
from onmt_cont.translate.checks import MAX_BETA, check_decoding_options, check_number, sampling_on
from onmt_cont.translate.ensemble import Ensemble
from onmt_cont.translate.open_vocab import extend_model, read_extension
from onmt_cont.translate.search import (
    BANNED,
    BANNED_WITH_UNK,
    COVERAGE_PENALTIES,
    MAX_OUTPUT_LENGTH,
    Sampler,
    beam_search,
    greedy_search,
    length_limits,
    sample_search,
)
from onmt_cont.translate.unk import replace_unk
from onmt_cont.utils.errors import UserError

MAX_SEED = 2**32 - 1  # -seed: CTranslate2's random seed is an unsigned 32-bit integer; one rule for both engines


class Translator:
    def __init__(self, checkpoint_path, device="cpu", beam_size=1, max_length=None, max_length_ratio=2.0,
                 length_penalty="avg", alpha=0.0, replace_unk=False, lexicon=None, tgt_emb_extend=None,
                 tgt_emb_extend_vocab=None, ann=None, ban_unk=False, alignment_layer=None, decode_prior=0.0,
                 csls=0, block_ngram_repeat=0, decode_prior_cap=0, freq_offsets=None, beam_temperature=1.0):
        """``tgt_emb_extend``: open-vocabulary decoding over that table (see open_vocab.py);
        ``ban_unk``: never produce <unk> (translate.py -ban_unk_token);
        ``alignment_layer``: a Transformer decoder's layer whose cross-attention -replace_unk reads
        (None: the checkpoint's choice);
        ``ann``: None (exact search) or a dict of :class:`~onmt_cont.ann.FaissIndex`
        arguments besides the table, built once here over the final table;
        ``decode_prior``: β of score + β · log p_train(w) (continuous models; 0: off);
        ``decode_prior_cap``: the prior flat for words seen at least this often (0: the plain prior);
        ``freq_offsets``: the offset of each frequency bin (translate.py -freq_offsets, fitted by
        tools/calibrate_offsets.py; any model; None: off);
        ``csls``: K of CSLS retrieval (continuous models; 0: off);
        ``block_ngram_repeat``: n > 0, no output repeats an n-gram (any model; 0: off);
        ``beam_temperature``: continuous models under beam search score words by a softmax of their
        scores over the model's own temperature times this (:meth:`set_beam_distribution`)."""
        check_decoding_options(beam_size, max_length, max_length_ratio, alpha, decode_prior, decode_prior_cap, csls,
                               block_ngram_repeat, freq_offsets, ann, length_penalty)
        data = load_checkpoint(checkpoint_path)
        model, _, src_vocab, tgt_vocab = model_from_checkpoint(data, device, checkpoint_path)
        lower = bool(data["vocab"].get("lower", False))  # the training data was lowercased
        # the raw text the data was made from (preprocess.py), checked: the file may have been edited since
        self.text_record = check_text_record(data["vocab"].get("text"), checkpoint_path)
        self._setup(model, src_vocab, tgt_vocab, lower, device, beam_size, max_length, max_length_ratio,
                    length_penalty, alpha, replace_unk, lexicon, tgt_emb_extend, tgt_emb_extend_vocab, ann, ban_unk,
                    alignment_layer, decode_prior, csls, block_ngram_repeat, decode_prior_cap, freq_offsets)
        self.set_beam_distribution(data["opt"], beam_temperature)

    def set_beam_distribution(self, opt, temperature=1.0):
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
            spec = LOSSES.get(opt.get("loss"))  # a loss with -temperature trained at that scale
            base = float(opt.get("temperature") or 0.1) if spec is not None and spec.temperature else 0.1
        gen.set_beam_scale(base * temperature)

    @classmethod
    def from_model(cls, model, src_vocab, tgt_vocab, lower=False, device="cpu", **options):
        """A translator over a model in memory (train.py's -valid_metric bleu), with the same
        decoding code and options as :meth:`__init__`. It puts ``model`` in eval mode."""
        self = cls.__new__(cls)
        defaults = {"beam_size": 1, "max_length": None, "max_length_ratio": 2.0, "length_penalty": "avg",
                    "alpha": 0.0, "replace_unk": False, "lexicon": None, "tgt_emb_extend": None,
                    "tgt_emb_extend_vocab": None, "ann": None, "ban_unk": False, "alignment_layer": None,
                    "decode_prior": 0.0, "csls": 0, "block_ngram_repeat": 0, "decode_prior_cap": 0,
                    "freq_offsets": None}
        temperature = options.pop("beam_temperature", 1.0)
        unknown = set(options) - set(defaults)
        if unknown:
            raise TypeError(f"unknown translator options: {sorted(unknown)}")
        self.text_record = None
        self._setup(model, src_vocab, tgt_vocab, lower, device, **{**defaults, **options})
        self.set_beam_distribution(getattr(model, "train_opt", None), temperature)
        return self

    def _setup(self, model, src_vocab, tgt_vocab, lower, device, beam_size, max_length, max_length_ratio,
               length_penalty, alpha, replace_unk, lexicon, tgt_emb_extend, tgt_emb_extend_vocab, ann, ban_unk,
               alignment_layer=None, decode_prior=0.0, csls=0, block_ngram_repeat=0, decode_prior_cap=0,
               freq_offsets=None):
        check_decoding_options(beam_size, max_length, max_length_ratio, alpha, decode_prior, decode_prior_cap, csls,
                               block_ngram_repeat, freq_offsets, ann, length_penalty)
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.block_ngram_repeat = block_ngram_repeat
        self._init_search_state()
        self.search_model = self.model  # what the searches decode with: the model, or an ensemble (set_ensemble)
        self.train_vocab = tgt_vocab  # before -tgt_emb_extend adds words
        words = len(tgt_vocab)
        if csls > max(words - 2, 0):  # the K nearest other words (padding left out): there are V - 2
            raise UserError(f"-csls {csls}: this model's target vocabulary has {words} words, so a word has at "
                            f"most {max(words - 2, 0)} neighbours; give a smaller K (the paper: 10)")
        if alignment_layer is not None:
            if not hasattr(model.decoder, "set_alignment_layer"):
                raise UserError("-alignment_layer picks a Transformer decoder layer's cross-attention; this model's "
                                "decoder is an LSTM with a single attention")
            try:
                model.decoder.set_alignment_layer(alignment_layer)
            except ValueError as exc:
                raise UserError(str(exc)) from None
        self.n_train_words = len(self.tgt_vocab)
        self._prior_options = (decode_prior, decode_prior_cap)
        if decode_prior or csls or freq_offsets is not None:
            self._word_choice(decode_prior, csls, tgt_emb_extend, decode_prior_cap, freq_offsets)
        if tgt_emb_extend:
            words, vectors = read_extension(tgt_emb_extend, tgt_emb_extend_vocab)
            self.tgt_vocab, _ = extend_model(self.model, self.tgt_vocab, words, vectors)
        self.banned = BANNED_WITH_UNK if ban_unk else BANNED
        if beam_size > len(self.tgt_vocab):  # each step keeps beam_size rows: more than the words is no search
            raise UserError(f"-beam_size {beam_size} is larger than the target vocabulary ({len(self.tgt_vocab)} "
                            "words): give at most that")
        if ann is not None and ann.get("nlist") is not None and ann["nlist"] > len(self.tgt_vocab):
            raise UserError(f"-ann_nlist {ann['nlist']}: more cells than the table has words ({len(self.tgt_vocab)})")
        if ann is not None:
            gen = self.model.generator
            if not getattr(gen, "continuous", False):
                raise UserError("-ann searches the table of a continuous-output model; this model has a softmax")
            # The beam's k plus the specials that search bans (padding, <s>, maybe <unk>), so k words survive.
            gen.set_index(lambda rows: FaissIndex(rows, **ann), beam_size + len(self.banned))
        self.lower = lower
        self.model.eval()
        self.device = device
        self.beam_size = beam_size
        # -freq_offsets were fitted under this beam, and an ANN index was sized for it: the beam stays
        self.beam_fixed = ann is not None or freq_offsets is not None
        self.max_length = max_length
        self.max_length_ratio = max_length_ratio
        self.length_penalty = length_penalty
        self.alpha = alpha
        self.replace_unk = replace_unk
        self.lexicon = lexicon

    def _init_search_state(self):
        """The options the setters change after construction, at their defaults, and the per-call records: one
        place for both engines (Ct2Translator calls it too)."""
        self.n_best, self._with_score, self.last_nbest = 1, False, None  # set_n_best, set_with_score
        self.min_length = 0  # set_min_length
        self.coverage = ("none", 0.0)  # set_coverage_penalty
        self.ignore_when_blocking = frozenset()  # set_ignore_when_blocking
        self.sampler = None  # set_sampling
        self.report_align, self.last_align = False, None  # -report_align: each output's word alignment
        self.attn_debug = False  # -attn_debug: keep every output's attention for translate_lines(attn=...)
        self.words_out = self.unk_out = 0  # words decoded so far, and how many were <unk> (before replacement)

    @property
    def offsets_model(self):
        """What a -freq_offsets file must have been fitted on: this model's kind and training vocabulary,
        and this translator's search."""
        return model_record(self.model.generator, self.train_vocab, self.beam_size)

    def check_offsets_model(self, path, record):
        """Refuse a -freq_offsets file fitted on another model: the :func:`model_record` it holds
        must match this model's kind and target vocabulary. A file written before the record
        existed (``record`` None) is accepted with a warning on stderr."""
        mine = self.offsets_model
        if record is None:
            print(f"warning: -freq_offsets {path} does not say which model it was fitted on (written by an older "
                  "tools/calibrate_offsets.py): make sure it was fitted on this one", file=sys.stderr)
            return
        if record["kind"] != mine["kind"]:
            raise UserError(f"-freq_offsets {path} was fitted on a {record['kind']} model, and this is a "
                            f"{mine['kind']} model: fit offsets on this model with tools/calibrate_offsets.py")
        if record["tgt_vocab_sha256"] != mine["tgt_vocab_sha256"]:
            raise UserError(f"-freq_offsets {path} was fitted on a model with another target vocabulary "
                            f"({record['tgt_words']} words; this model's has {mine['tgt_words']}, or other counts): "
                            "fit offsets on this model with tools/calibrate_offsets.py")
        fitted = record.get("beam_size", 1)
        if fitted != mine["beam_size"]:
            def search(k):
                return "greedy search" if k == 1 else f"beam search (-beam_size {k})"

            raise UserError(f"-freq_offsets {path} was fitted under {search(fitted)}, and this run decodes with "
                            f"{search(mine['beam_size'])}: the offsets calibrate one search's output, not another's; "
                            f"fit them under this one (tools/calibrate_offsets.py -beam_size {mine['beam_size']})")

    def set_freq_offsets(self, offsets: Sequence[float] | None) -> None:
        """Decode from now on with these frequency-bin offsets [bins] (None: none) and the
        -decode_prior this translator was built with (tools/calibrate_offsets.py, round by round)."""
        decode_prior, decode_prior_cap = self._prior_options
        self._word_choice(decode_prior, 0, None, decode_prior_cap, offsets)

    def _word_choice(self, decode_prior, csls, tgt_emb_extend, decode_prior_cap=0, freq_offsets=None):
        """-decode_prior and -csls: continuous models only, over the training vocabulary; -freq_offsets:
        any model (a softmax's log-probabilities plus the offsets)."""
        gen = self.model.generator
        given = " ".join([f"-{k} {v}" for k, v in (("decode_prior", decode_prior), ("csls", csls)) if v]
                         + (["-freq_offsets"] if freq_offsets is not None else []))
        if not getattr(gen, "continuous", False):
            if decode_prior or csls or not hasattr(gen, "set_offsets"):
                raise UserError(f"{given} re-scores a continuous model's nearest-neighbour search; this model has a "
                                "softmax (its output bias already carries a frequency prior)")
            try:  # a softmax model: its log-probabilities plus the offsets (as a baseline)
                gen.set_offsets(offset_vector(self.tgt_vocab, freq_offsets))
            except ValueError as exc:
                raise UserError(f"{given}: this checkpoint's {exc}; or retrain with this version") from None
            return
        if tgt_emb_extend:
            raise UserError(f"{given} does not combine with -tgt_emb_extend: the added words have no training count "
                            "or bias")
        if decode_prior or freq_offsets is not None:
            try:
                log_prior = None
                if decode_prior:
                    log_prior = (capped_log_prior(self.tgt_vocab, decode_prior_cap) if decode_prior_cap
                                 else unigram_log_prior(self.tgt_vocab))
                offsets = None if freq_offsets is None else offset_vector(self.tgt_vocab, freq_offsets)
                gen.set_prior(log_prior, decode_prior, offsets)
            except ValueError as exc:
                raise UserError(f"{given}: this checkpoint's {exc}; or retrain with this version") from None
        if csls:
            gen.set_csls(csls)

    def _max_lengths(self, src_lengths):
        return length_limits(src_lengths, self.max_length, self.max_length_ratio)

    def set_n_best(self, n: int | None) -> None:
        """Keep the ``n`` best hypotheses of each sentence with their scores (translate.py -n_best,
        -with_score): beam search's finished hypotheses, ranked by score / length penalty; n may not
        exceed the beam (greedy search is beam 1 here, which outputs the same words with their score).
        ``n`` None or 1: the 1-best alone."""
        n = 1 if n is None else n
        if not 1 <= n <= self.beam_size:
            raise UserError(f"-n_best {n}: must be from 1 to -beam_size ({self.beam_size}): a beam keeps that many "
                            "hypotheses")
        self.n_best = n

    def set_ensemble(self, others: Sequence[Translator], names: Sequence[str]) -> None:
        """Decode with this model and the models of the Translators ``others`` as one ensemble
        (onmt_cont.translate.ensemble): every member must have this model's vocabularies. ``names``:
        the checkpoints, for messages."""
        for other, name in zip(others, names[1:], strict=True):
            for side, mine, theirs in (("source", self.src_vocab, other.src_vocab),
                                       ("target", self.tgt_vocab, other.tgt_vocab)):
                if list(mine.itos) != list(theirs.itos):
                    raise UserError(f"-model {name}: its {side} vocabulary ({len(theirs)} words) is not that of "
                                    f"{names[0]} ({len(mine)} words): an ensemble's members share one vocabulary")
        self.search_model = Ensemble([self.model] + [o.model for o in others]) if others else self.model

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
        check_number("min_length", n, 0, MAX_OUTPUT_LENGTH, integer=True,
                     expected=f"a whole number from 0 (off) to {MAX_OUTPUT_LENGTH}")
        self.min_length = n

    def set_coverage_penalty(self, kind: str = "none", beta: float = 0.0) -> None:
        """-coverage_penalty wu|summary with -beta (OpenNMT-py's): beam search ranks its finished hypotheses by
        score / length penalty minus beta x the penalty of their attention's coverage of the source
        (:func:`~onmt_cont.translate.search.coverage_penalty`). Needs beam search and a non-zero beta."""
        if kind not in COVERAGE_PENALTIES:
            raise UserError(f"-coverage_penalty must be one of {', '.join(COVERAGE_PENALTIES)}, got {kind!r}")
        check_number("beta", beta, -MAX_BETA, MAX_BETA,
                     expected=f"a finite number within ±{MAX_BETA:g} (GNMT: 0.2)")
        if kind == "none" and beta:
            raise UserError(f"-beta {beta:g} weighs -coverage_penalty: give -coverage_penalty wu or summary too")
        if kind != "none" and not beta:
            raise UserError(f"-coverage_penalty {kind} is weighed by -beta, 0 here (OpenNMT-py's default, which "
                            "turns it off): give -beta (GNMT: 0.2)")
        if kind != "none" and (self.beam_size < 2 or self.sampler is not None):
            raise UserError(f"-coverage_penalty {kind} re-ranks the finished hypotheses of beam search: give "
                            "-beam_size 2 or more, and no random sampling")
        self.coverage = (kind, float(beta))

    def set_sampling(self, topk: int = 0, topp: float = 0.0, temp: float = 1.0, seed: int = 0) -> None:
        """Random sampling instead of search (translate.py -random_sampling_topk/-topp/-temp/-seed, as
        OpenNMT-py names them): on when ``topk`` is -1 (the whole distribution) or above 1, or ``topp`` is
        in (0, 1); ``topk`` 0 or 1 with ``topp`` 0 is the argmax (off). With sampling, -beam_size K draws K
        samples of each sentence (OpenNMT-py's meaning), ranked by their log-probability / length penalty: the
        output is the best, -n_best keeps the best N with their scores."""
        if not (isinstance(topk, int) and -1 <= topk) or not (0.0 <= topp <= 1.0) or not (0.0 < temp <= 100.0):
            raise UserError(f"-random_sampling_topk must be -1 (all words), 0 (off) or a count, -random_sampling_topp "
                            f"in [0, 1] and -random_sampling_temp in (0, 100]; got {topk}, {topp}, {temp}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not -1 <= seed <= MAX_SEED:
            raise UserError(f"-seed must be a whole number from 0 to {MAX_SEED} (-1: a new one each run, as "
                            f"OpenNMT-py's), got {seed!r}")
        if seed == -1:
            seed = int.from_bytes(os.urandom(4), "little")
        on = sampling_on(topk, topp)
        if on and self.coverage[0] != "none":
            raise UserError("-coverage_penalty re-ranks the finished hypotheses of beam search; random sampling has "
                            "none: leave one out")
        self.sampler = Sampler(topk, topp, temp, seed) if on else None

    def translate_batch(self, token_lists: Sequence[Sequence[str]], attention: bool | None = None,
                        prefixes: Sequence[Sequence[str]] | None = None
                        ) -> tuple[list[list[str]], list[torch.Tensor | None]]:
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
        nbest = [] if self.scored else None
        prefix = None
        if prefixes is not None:
            prefix = [self.tgt_vocab.encode(words) for words in prefixes]
        if self.sampler is not None:
            ids, attns = sample_search(self.search_model, batch["src"], batch["src_lengths"], max_lengths,
                                       self.sampler, self.beam_size, self.length_penalty, self.alpha, self.banned,
                                       self.block_ngram_repeat, attention, nbest, self.n_best, prefix,
                                       self.min_length, self.ignore_when_blocking)
        elif self.beam_size > 1 or nbest is not None:
            ids, attns = beam_search(self.search_model, batch["src"], batch["src_lengths"], max_lengths, self.beam_size,
                                     self.length_penalty, self.alpha, self.banned, self.block_ngram_repeat,
                                     need_attn=attention, nbest_out=nbest, n_best=self.n_best, prefix=prefix,
                                     min_length=self.min_length, ignore_when_blocking=self.ignore_when_blocking,
                                     coverage=self.coverage)
        else:
            ids, attns = greedy_search(self.search_model, batch["src"], batch["src_lengths"], max_lengths, self.banned,
                                       block_ngram_repeat=self.block_ngram_repeat, need_attn=attention,
                                       sampler=self.sampler, prefix=prefix, min_length=self.min_length,
                                       ignore_when_blocking=self.ignore_when_blocking)
        outputs, self.last_raw = [], []
        self.last_align = [alignment(attn, len(toks)) for toks, attn in zip(token_lists, attns, strict=True)] \
            if self.report_align else None
        for toks, seq, attn in zip(token_lists, ids, attns, strict=True):
            self.words_out += len(seq)
            self.unk_out += seq.count(UNK_ID)
            self.last_raw.append(self.tgt_vocab.decode(seq))  # the model's own words, before -replace_unk
            outputs.append(self._words(seq, attn, toks))
        # with n_best: each sentence's hypotheses as (words, score), best first (the first is ``outputs``')
        self.last_nbest = None if nbest is None else [
            [(self._words(h_ids, h_attn, toks), score) for score, h_ids, h_attn in hyps]
            for toks, hyps in zip(token_lists, nbest, strict=True)]
        # -report_align with -n_best / -with_score: each hypothesis's own alignment
        self.last_nbest_align = None if nbest is None or not self.report_align else [
            [alignment(h_attn, len(toks)) for _, _, h_attn in hyps]
            for toks, hyps in zip(token_lists, nbest, strict=True)]
        return outputs, attns

    def _words(self, ids, attn, src_tokens):
        """A hypothesis's words, ``<unk>`` replaced through its attention where -replace_unk asks."""
        words = self.tgt_vocab.decode(ids)
        return replace_unk(words, attn, src_tokens, self.lexicon) if self.replace_unk else words

    def output_limit(self, source_length: int) -> int:
        """The longest output of a source of ``source_length`` tokens (search.length_limits)."""
        return int(length_limits(torch.tensor([source_length]), self.max_length, self.max_length_ratio)[0])

    def _limit_note(self):
        return ""

    @property
    def scored(self) -> bool:
        """Whether decoding keeps each sentence's hypotheses and scores (-n_best above 1 or -with_score)."""
        return self.n_best > 1 or self._with_score

    def translate_lines(self, lines, batch_size=32, lower=False, on_batch=None, raw=None, batch_type="sents",
                        nbest=None, prefixes=None, align=None, attn=None, first_line=1, nbest_align=None):
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
                words, limit = len(prefix.split()), self.output_limit(len(tokens))
                if words > limit:
                    raise UserError(f"-tgt_prefix, line {first_line + i}: a prefix of {words} words is longer than "
                                    f"this line's output may be ({limit}: -max_length, else -max_length_ratio × the "
                                    f"source's length + 10, at most {MAX_OUTPUT_LENGTH}{self._limit_note()}): shorten "
                                    "the line or raise the limit")
        order = sorted((i for i, t in enumerate(token_lists) if t), key=lambda i: len(token_lists[i]))
        results = [""] * len(lines)
        raw_results = [""] * len(lines)
        nbest_results = [[("", 0.0)] for _ in lines]
        align_results = [""] * len(lines)
        nbest_align_results = [[""] for _ in lines]
        attn_results = [None] * len(lines)
        if on_batch:
            on_batch(len(lines) - len(order))  # the empty lines are done
        for chunk in length_batches(order, [len(t) for t in token_lists], batch_size, batch_type):
            forced = None if prefixes is None else [prefixes[i].split() for i in chunk]
            outputs, attns = self.translate_batch([token_lists[i] for i in chunk], prefixes=forced)
            for k, (i, words, own) in enumerate(zip(chunk, outputs, self.last_raw, strict=True)):
                results[i] = " ".join(words)
                if raw is not None:
                    raw_results[i] = " ".join(own)
                if attn is not None and attns[k] is not None:
                    attn_results[i] = attns[k][:, : len(token_lists[i])]
                if align is not None and self.last_align is not None:
                    align_results[i] = self.last_align[k]
                if nbest is not None and self.last_nbest is not None:
                    nbest_results[i] = [(" ".join(w), score) for w, score in self.last_nbest[k]]
                if nbest_align is not None and getattr(self, "last_nbest_align", None) is not None:
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

    def set_with_score(self, on: bool) -> None:
        """Give each translation its score (translate.py -with_score): decoding goes through beam
        search (beam 1 for greedy, the same words), whose scores are log-probabilities."""
        self._with_score = bool(on)


def length_batches(order, lengths, batch_size, batch_type="sents"):
    """Consecutive batches of ``order`` (sentence indices sorted by length): ``batch_size``
    sentences each, or (``tokens``) as many as keep the longest length times the count within
    ``batch_size`` (at least one sentence, however long)."""
    if batch_type == "sents":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches, current, longest = [], [], 0
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


def alignment(attn, src_len):
    """A hypothesis's word alignment, OpenNMT-py's -report_align format: "s-t" for each output word t
    (0-based) and the source word s (0-based) its attention weighs most, space-separated."""
    if attn is None or attn.numel() == 0 or src_len == 0:
        return ""
    best = attn[:, :src_len].argmax(-1).tolist()
    return " ".join(f"{s}-{t}" for t, s in enumerate(best))
