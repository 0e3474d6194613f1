"""Translate from Python: load a checkpoint once, translate lists of sentences.

    import onmt_cont

    model = onmt_cont.load("run/model_best.pt")                  # tokenized text in and out
    model.translate(["un chien court dans l' herbe ."])           # ['a dog runs in the grass .']

    model = onmt_cont.load("run/model_best.pt", src_lang="fr", tgt_lang="en")   # raw text in and out
    model.translate(["Un chien court dans l'herbe."])             # ['A dog runs in the grass.']

Decoding options are translate.py's, as keyword arguments (docs/usage.md, "From Python").
"""

import dataclasses
import difflib
import functools
import inspect
import os
import threading
import warnings

import torch

from onmt_cont.text.pipeline import TextPipeline
from onmt_cont.text.record import checked_codes, checked_spm
from onmt_cont.text.subwords import CodesText
from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.report import reference_mismatch
from onmt_cont.translate.unk import remove_bpe
from onmt_cont.utils.device import check_device
from onmt_cont.utils.errors import UserError, UserTypeError, UserValueError


def _python_errors(func):
    """The API's UserErrors are also ValueErrors (TypeErrors where an argument's type is wrong), so that callers
    can catch what Python code raises; the message is the one translate.py prints."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            if isinstance(exc, (ValueError, TypeError)):
                raise
            raise UserValueError(str(exc)) from None

    return wrapper


class Model:
    """A trained model ready to translate; see :func:`load` for the arguments."""

    def __init__(
        self,
        checkpoint,
        *,
        src_lang=None,
        tgt_lang=None,
        bpe_codes=None,
        device="cpu",
        remove_target_bpe=False,
        batch_size=32,
        tokenized=False,
        src_spm=None,
        tgt_spm=None,
        ensemble=(),
        **decoding,
    ):
        self._closed, self.input_warning = False, None  # input_warning: raw text given to a model of tokens
        checkpoint = _path_arg("checkpoint", checkpoint)
        self._name = os.path.basename(os.path.normpath(checkpoint))
        for name, value in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
            if value is not None and not isinstance(value, str):
                raise UserTypeError(f"onmt_cont.load(): {name} takes a language code such as 'fr', got {value!r}")
        bpe_codes = _path_arg("bpe_codes", bpe_codes, optional=True)
        for name in ("lexicon", "freq_offsets"):
            decoding[name] = _path_arg(name, decoding.get(name), optional=True)
        src_spm, tgt_spm = _path_arg("src_spm", src_spm, optional=True), _path_arg("tgt_spm", tgt_spm, optional=True)
        if isinstance(ensemble, (str, os.PathLike)):
            ensemble = [ensemble]
        ensemble = [_path_arg("ensemble", path) for path in ensemble]
        device = check_device(device)
        decoding.setdefault("replace_unk", decoding["lexicon"] is not None)  # a lexicon is given to be used
        _check_names(decoding)
        beam_size = decoding.get("beam_size")
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1
            for n in ([] if beam_size is None else [beam_size]) + [batch_size]
        ):
            raise UserError(
                f"beam_size and batch_size must be whole numbers, at least 1, got {beam_size!r} and {batch_size!r}"
            )
        if decoding.get("engine") not in (None, "torch", "ctranslate2"):
            raise UserError(f"onmt_cont.load(): engine must be 'torch' or 'ctranslate2', got {decoding['engine']!r}")
        # translate.py's constructor path: the same defaults, checks and set-up
        self.translator = build_translator(
            DecodingConfig(**decoding), [checkpoint, *ensemble], device, threads=torch.get_num_threads()
        )
        record, lower = self.translator.text_record, True
        if record is not None:
            lower = bool(record.get("lower", True))
            if not (tokenized or src_lang or tgt_lang or bpe_codes or src_spm):  # the checkpoint says what it reads
                src_lang, tgt_lang = record.get("src_lang"), record.get("tgt_lang")
                codes = checked_codes(record, checkpoint)
                bpe_codes = CodesText(codes) if codes else None
                src_spm = checked_spm(record, "src", checkpoint)
            if not tokenized and tgt_spm is None:
                tgt_spm = checked_spm(record, "tgt", checkpoint)
        self.text = TextPipeline(src_lang, tgt_lang, bpe_codes, lower=lower, src_spm=src_spm, tgt_spm=tgt_spm)
        try:
            self.text.check_fits(self.translator.src_vocab, self.translator.tgt_vocab)
        except UserError:
            self.text.close()
            raise
        self.remove_target_bpe, self.batch_size = remove_target_bpe, batch_size
        self._lock = threading.Lock()  # one translation at a time: the translator keeps per-call state

    @_python_errors
    def translate(self, sentences, n_best=None, with_score=False, beam_size=None, tgt_prefix=None, report_align=False):
        """A list of source sentences (strings) -> their translations (strings), in order. An empty
        sentence gives an empty string; one that holds a line break is a UserError. Safe to call from
        several threads: calls take turns (the decoder itself uses torch's threads).

        ``n_best`` N (at most the beam size) or ``with_score``: each sentence gives instead a list of
        its N (default 1) best hypotheses as (translation, score), best first: translate.py's -n_best
        and -with_score. ``beam_size``: this call's beam instead of the model's (1: greedy). ``tgt_prefix``: per
        sentence, the start its translation is forced to (the model's tokens, as translate.py -tgt_prefix;
        None or "" for none). ``report_align``: each translation comes with its word alignment (translate.py
        -report_align's "S-T ..." over the model's tokens): (translation, alignment), or with ``n_best`` /
        ``with_score`` (translation, score, alignment)."""
        if isinstance(sentences, str):
            raise TypeError("translate() takes a list of sentences; wrap a single one in a list")
        for name, value in (("with_score", with_score), ("report_align", report_align)):
            if not isinstance(value, bool):
                raise UserTypeError(f"translate(): {name} takes True or False, got {value!r}")
        if n_best is not None and (isinstance(n_best, bool) or not isinstance(n_best, int)):
            raise UserTypeError(f"translate(): n_best takes a whole number of hypotheses, got {n_best!r}")
        if beam_size is not None and (isinstance(beam_size, bool) or not isinstance(beam_size, int)):
            raise UserTypeError(f"translate(): beam_size takes a whole number, got {beam_size!r}")
        if tgt_prefix is not None:
            if (
                isinstance(tgt_prefix, str)
                or len(tgt_prefix) != len(sentences)
                or not all(p is None or isinstance(p, str) for p in tgt_prefix)
            ):
                raise UserTypeError("translate(): tgt_prefix takes one string (or None) per sentence")
            tgt_prefix = [p or "" for p in tgt_prefix]
        if self._closed:
            raise UserError("translate(): this model was closed (close() or the end of its with block); load it again")
        scored = n_best is not None or with_score
        if self.input_warning is None and not self.text.reads_raw_text:  # raw text to a model of tokens: say so once
            why = reference_mismatch(
                [s for s in sentences if isinstance(s, str)],
                self.translator.lower,
                False,
                scored="read",
                hint_raw="load the model with src_lang (and bpe_codes) to read "
                "raw text, or tokenize it as the training data was",
            )
            if why:
                self.input_warning = f"onmt_cont.load({self._name}): the input {why}"
                warnings.warn(self.input_warning, stacklevel=3)
        with self._lock:
            lines = [self.text.encode(s) for s in sentences]  # without src_lang or bpe_codes: the line, stripped
            nbest = [] if scored else None
            align = [] if report_align and not scored else None
            nbest_align = [] if report_align and scored else None
            beam, reporting = self.translator.beam_size, self.translator.report_align
            try:
                if beam_size is not None:
                    self._set_beam(beam_size)
                if scored:
                    self.translator.set_n_best(n_best)
                    self.translator.set_with_score(True)
                self.translator.report_align = report_align
                with torch.no_grad():
                    outputs = self.translator.translate_lines(
                        lines,
                        self.batch_size,
                        lower=self.translator.lower,
                        nbest=nbest,
                        prefixes=tgt_prefix,
                        align=align,
                        nbest_align=nbest_align,
                    )
            finally:
                self.translator.beam_size, self.translator.report_align = beam, reporting
                self.translator.set_n_best(None)
                self.translator.set_with_score(False)

            def words(line):  # a subword target's pieces joined: SentencePiece's, or subword-nmt's
                line = self.text.join_pieces(line)
                return remove_bpe(line) if self.remove_target_bpe else line

            if nbest is not None and nbest_align is not None:
                return [
                    [(self.text.decode(words(h)), score, a) for (h, score), a in zip(hyps, aligns, strict=True)]
                    for hyps, aligns in zip(nbest, nbest_align, strict=True)
                ]
            if nbest is not None:
                return [[(self.text.decode(words(h)), score) for h, score in hyps] for hyps in nbest]
            if align is not None:
                return [(self.text.decode(words(o)), a) for o, a in zip(outputs, align, strict=True)]
            return [self.text.decode(words(o)) for o in outputs]

    def _set_beam(self, beam_size):
        """This call's beam: translate.py's checks, and none of what was fitted or built for the model's own."""
        t = self.translator
        if not 1 <= beam_size <= len(t.tgt_vocab):
            raise UserError(
                f"translate(): beam_size must be from 1 to the target vocabulary's {len(t.tgt_vocab)}, got {beam_size}"
            )
        if beam_size != t.beam_size and t.beam_fixed:
            raise UserError(
                "translate(): beam_size cannot change per call with -freq_offsets (fitted under one "
                "search) or an ANN index (built for one beam): load the model with it"
            )
        if beam_size < 2 and t.coverage[0] != "none":
            raise UserError(
                f"translate(): beam_size {beam_size}: -coverage_penalty re-ranks the finished hypotheses "
                "of beam search, 2 or more"
            )
        t.beam_size = beam_size

    def close(self):
        """Stop the Moses processes of raw-text models (also done at exit); translate() is refused after it."""
        self._closed = True
        self.text.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# translate.py's flag names that the API spells otherwise: both are accepted
FLAG_NAMES = {
    "src_bpe_codes": "bpe_codes",
    "lookup_dict": "lexicon",
    "ban_unk_token": "ban_unk",
    "remove_bpe": "remove_target_bpe",
}
# load()'s decoding keywords: DecodingConfig's fields (translate.py's flags of the same names), less those
# translate() takes per call (n_best, with_score, report_align) and those of translate.py alone
DECODING = [
    name for name in DecodingConfig.names() if name not in ("n_best", "with_score", "report_align", "attn_debug", "ann")
]
_DEFAULTS = {
    **{f.name: f.default for f in dataclasses.fields(DecodingConfig)},
    **{n: p.default for n, p in inspect.signature(Model.__init__).parameters.items()},
}


def _path_arg(name, value, optional=False):
    """A path keyword (a string or a pathlib.Path) -> its string; UserError for anything else."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise UserTypeError(f"onmt_cont.load(): {name} takes a file's path, got {value!r}")
    return value


def _check_names(decoding):
    """A keyword load() does not know: a UserError naming load() and the closest names, not a TypeError from
    inside the configuration."""
    for name in decoding:
        if name not in DECODING:
            known = sorted(
                set(inspect.signature(Model.__init__).parameters) - {"self", "checkpoint", "decoding"}
                | set(DECODING)
                | set(FLAG_NAMES)
                | {"gpu"}
            )
            close = difflib.get_close_matches(name, known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise UserError(f"onmt_cont.load(): unknown option {name!r}{hint}; it takes: {', '.join(known)}")


@_python_errors
def load(checkpoint, **options):
    """Load ``checkpoint`` (a train.py ``.pt`` file) for translation -> :class:`Model`.

    Text: ``src_lang`` (the input is raw text in this language: Moses-tokenized and lowercased,
    as the recipes' training data), ``bpe_codes`` (subword-nmt codes of the model's source side),
    ``tgt_lang`` (write running text: Moses-detokenized, first letter upper case),
    ``remove_target_bpe`` (join a subword target's pieces), ``src_spm`` / ``tgt_spm`` (SentencePiece
    models of the source and the target, instead of ``bpe_codes`` / ``remove_target_bpe``). A
    checkpoint whose data was made with preprocess.py -src_lang/-tgt_lang/-src_bpe_codes/-src_spm/-tgt_spm
    reads and writes raw text as recorded when none of these is given; ``tokenized=True`` reads and
    writes its tokens instead.
    Decoding: ``beam_size`` (1: greedy), ``lexicon`` (a build_lexicon.py file: replace ``<unk>``
    through the attention), ``freq_offsets`` (a tools/calibrate_offsets.py file),
    ``device`` ("cpu", "cuda:0"), ``batch_size``, ``ensemble`` (more checkpoints of the same vocabulary,
    decoded with this one as an ensemble: translate.py -model A B), ``random_sampling_topk`` /
    ``random_sampling_topp`` / ``random_sampling_temp`` / ``seed`` (sampling, as translate.py's flags; then
    ``beam_size`` is the number of draws of each sentence), ``coverage_penalty`` / ``beta``, ``min_length``,
    ``ignore_when_blocking``, and translate.py's other decoding options by their names in
    :class:`~onmt_cont.translate.config.DecodingConfig` (``max_length_ratio``, ``block_ngram_repeat``,
    ``length_penalty``, ``alpha``, ``ban_unk``, ``decode_prior``...), set up as translate.py sets them up.
    translate.py's own spellings work too: ``src_bpe_codes``, ``lookup_dict``, ``ban_unk_token``,
    ``remove_bpe``, ``gpu``, ``replace_unk``. An unknown name is a UserError naming load().
    ``checkpoint`` may also be a directory onmt_cont_convert wrote: it is then decoded by CTranslate2
    (``engine`` "ctranslate2"; "torch" for a checkpoint; default: read from ``checkpoint``), with the decoding
    options fixed at conversion (decode_prior, beam_temperature, alignment_layer)."""
    for flag, name in FLAG_NAMES.items():  # translate.py's spelling
        if flag in options:
            if name in options:
                raise UserError(f"onmt_cont.load(): {flag} and {name} are one option: give one of them")
            options[name] = options.pop(flag)
    if "gpu" in options:  # translate.py's -gpu N
        gpu = options.pop("gpu")
        if "device" in options:
            raise UserError("onmt_cont.load(): gpu and device are one option: give one of them")
        if isinstance(gpu, bool) or not (gpu is None or isinstance(gpu, int)):
            raise UserTypeError(
                f"onmt_cont.load(): gpu takes a CUDA device id (0, 1, ...; -1 or None for the CPU), got {gpu!r}"
            )
        options["device"] = "cpu" if gpu is None or gpu < 0 else f"cuda:{gpu}"  # OpenNMT-py's gpu -1: the CPU
    for name, value in options.items():  # a flag of translate.py's: True or False, not a truthy string (issue 77)
        if isinstance(_DEFAULTS.get(name), bool) and not isinstance(value, bool):
            raise UserTypeError(f"onmt_cont.load(): {name} takes True or False, got {value!r}")
    return Model(checkpoint, **options)
