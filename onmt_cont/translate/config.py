"""One decoding configuration and one way to build a translator from it.

translate.py, :func:`onmt_cont.load` (and so the server) fill a :class:`DecodingConfig` from their flags or
keywords and call :func:`build_translator`, so that every entry point checks, defaults and sets up decoding
the same way, whichever engine (the checkpoint's torch search or a CTranslate2 export) decodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from onmt_cont.translate.calibration import load_offsets
from onmt_cont.translate.checks import check_decoding_options, sampling_on, search_defaults
from onmt_cont.translate.ct2 import Ct2Translator, check_engine_options, read_record, resolve_engine
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import read_lexicon
from onmt_cont.utils.errors import UserError

# translate.py's flags that the configuration (and the Python API) names otherwise
FLAG_NAMES = {"ban_unk_token": "ban_unk", "lookup_dict": "lexicon"}


@dataclass
class DecodingConfig:
    """What a translator decodes with: translate.py's decoding flags under the Python API's names (translate.py's
    help says what each does). None where a default depends on other options: :meth:`resolved` fills them."""

    beam_size: int | None = None  # None: DEFAULT_BEAM (at least n_best); 1 under sampling (the draws)
    block_ngram_repeat: int | None = None  # None: DEFAULT_BLOCK
    max_length: int | None = None
    max_length_ratio: float = 2.0
    min_length: int = 0
    length_penalty: str = "avg"
    alpha: float = 0.0
    coverage_penalty: str = "none"
    beta: float = 0.0
    ignore_when_blocking: Sequence[str] = ()
    ban_unk: bool = False
    replace_unk: bool = False
    lexicon: str | None = None  # a build_lexicon.py file (-lookup_dict)
    alignment_layer: int | str | None = None
    n_best: int = 1
    with_score: bool = False
    report_align: bool = False
    attn_debug: bool = False
    random_sampling_topk: int = 0
    random_sampling_topp: float = 0.0
    random_sampling_temp: float = 1.0
    seed: int = 0
    decode_prior: float | None = None  # None: 0, or the β a -freq_offsets file was fitted under
    decode_prior_cap: int = 0
    csls: int = 0
    freq_offsets: str | None = None  # a tools/calibrate_offsets.py file
    beam_temperature: float = 1.0
    tgt_emb_extend: str | None = None
    tgt_emb_extend_vocab: str | None = None
    ann: dict | None = None  # FaissIndex's arguments (kind, nlist, nprobe, hnsw_m, ef_search); None: exact search
    engine: str | None = None  # "torch" or "ctranslate2"; None: read from the model
    extra: dict = field(default_factory=dict, repr=False)  # nothing yet: a place for an engine's own options

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "extra"]

    def resolved(self) -> DecodingConfig:
        """A copy with the search defaults filled in and the checks that need no model passed (UserError)."""
        sampling = sampling_on(self.random_sampling_topk, self.random_sampling_topp)
        beam, block = search_defaults(self.beam_size, self.block_ngram_repeat, sampling, self.n_best)
        config = dataclasses.replace(self, beam_size=beam, block_ngram_repeat=block)
        check_decoding_options(beam, config.max_length, config.max_length_ratio, config.alpha,
                               config.decode_prior or 0.0, config.decode_prior_cap, config.csls, block,
                               ann=config.ann, length_penalty=config.length_penalty)
        if config.lexicon and not config.replace_unk:
            raise UserError("-lookup_dict is only used with -replace_unk")
        if config.tgt_emb_extend_vocab and not config.tgt_emb_extend:
            raise UserError("-tgt_emb_extend_vocab is only used with -tgt_emb_extend")
        if config.freq_offsets and config.decode_prior_cap:
            raise UserError("-freq_offsets: tools/calibrate_offsets.py fits them under the plain -decode_prior, not "
                            "under -decode_prior_cap")
        return config


def build_translator(config: DecodingConfig, models: Sequence[str], device: str = "cpu", threads: int = 1,
                     log: Callable[[str], None] | None = None) -> Translator:
    """The translator of ``models`` (one checkpoint or export; several checkpoints: an ensemble) under ``config``:
    the one constructor path of translate.py, onmt_cont.load() and the server. ``threads``: CTranslate2's."""
    config = config.resolved()
    models = list(models)
    engine = resolve_engine(config.engine, models[0])
    lexicon = read_lexicon(config.lexicon) if config.lexicon else None  # read once, shared by an ensemble
    offsets = offsets_model = None
    decode_prior = config.decode_prior
    if config.freq_offsets:
        offsets, fitted, offsets_model = load_offsets(config.freq_offsets, with_model=True)
        if decode_prior is not None and decode_prior != fitted:
            raise UserError(f"-freq_offsets {config.freq_offsets} was fitted under -decode_prior {fitted:g}, but this "
                            f"run has -decode_prior {decode_prior:g}: give -decode_prior {fitted:g}, or leave it out")
        decode_prior = fitted
    decode_prior = decode_prior or 0.0
    if engine == "ctranslate2":
        if len(models) > 1:
            raise UserError("-engine ctranslate2 decodes one exported model; an ensemble needs the checkpoints "
                            "(-engine torch)")
        given = {**dataclasses.asdict(config), "decode_prior": decode_prior}
        check_engine_options(given, read_record(models[0])[0])
        translator = Ct2Translator(models[0], device, beam_size=config.beam_size, max_length=config.max_length,
                                   max_length_ratio=config.max_length_ratio, length_penalty=config.length_penalty,
                                   alpha=config.alpha, replace_unk=config.replace_unk, lexicon=lexicon,
                                   ban_unk=config.ban_unk, block_ngram_repeat=config.block_ngram_repeat,
                                   threads=threads)
        if log:
            log(f"{models[0]}: decoding with CTranslate2 ({translator.record.get('quantization')} weights)")
    else:
        def member(path, first):
            return Translator(path, device, beam_size=config.beam_size, max_length=config.max_length,
                              max_length_ratio=config.max_length_ratio, length_penalty=config.length_penalty,
                              alpha=config.alpha, replace_unk=config.replace_unk, lexicon=lexicon,
                              tgt_emb_extend=config.tgt_emb_extend if first else None,
                              tgt_emb_extend_vocab=config.tgt_emb_extend_vocab if first else None, ann=config.ann,
                              ban_unk=config.ban_unk, alignment_layer=config.alignment_layer,
                              decode_prior=decode_prior, csls=config.csls,
                              block_ngram_repeat=config.block_ngram_repeat, decode_prior_cap=config.decode_prior_cap,
                              freq_offsets=offsets if first else None, beam_temperature=config.beam_temperature)

        translator = member(models[0], True)
        if config.freq_offsets:
            translator.check_offsets_model(config.freq_offsets, offsets_model)
        if len(models) > 1:  # the other members, with the same decoding options (each keeps its own prior)
            translator.set_ensemble([member(path, False) for path in models[1:]], models)
            if log:
                log(f"an ensemble of {len(models)} models: the mean of their log-probabilities at each step")
    translator.set_min_length(config.min_length)
    translator.set_ignore_when_blocking(config.ignore_when_blocking)
    translator.set_n_best(config.n_best)
    translator.set_with_score(config.with_score)
    translator.set_sampling(config.random_sampling_topk, config.random_sampling_topp, config.random_sampling_temp,
                            config.seed)
    translator.set_coverage_penalty(config.coverage_penalty, config.beta)
    translator.report_align, translator.attn_debug = bool(config.report_align), bool(config.attn_debug)
    return translator
