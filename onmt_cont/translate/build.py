"""One way to build a translator: :func:`build_translator`, the constructor path of translate.py,
:func:`onmt_cont.load` and so the server, whichever engine decodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from onmt_cont.translate.base import BaseTranslator
from onmt_cont.translate.calibration import load_offsets
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.ct2 import Ct2Translator, resolve_engine
from onmt_cont.translate.strategies import STRATEGIES
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import read_lexicon
from onmt_cont.utils.errors import UserError


def build_translator(
    config: DecodingConfig,
    models: Sequence[str],
    device: str = "cpu",
    threads: int = 1,
    log: Callable[[str], None] | None = None,
) -> BaseTranslator:
    """The translator of ``models`` (one checkpoint or export; several checkpoints: an ensemble) under ``config``:
    the one constructor path of translate.py, onmt_cont.load() and the server. ``threads``: CTranslate2's."""
    config = config.resolved()
    models = list(models)
    engine = resolve_engine(config.engine, models[0])
    lexicon = read_lexicon(config.lexicon) if config.lexicon else None  # read once, shared by an ensemble
    offsets = offsets_model = None
    if config.freq_offsets:
        offsets, fitted, offsets_model = load_offsets(config.freq_offsets, with_model=True)
        if config.decode_prior is not None and config.decode_prior != fitted:
            raise UserError(
                f"-freq_offsets {config.freq_offsets} was fitted under -decode_prior {fitted:g}, but this "
                f"run has -decode_prior {config.decode_prior:g}: give -decode_prior {fitted:g}, or leave "
                "it out"
            )
        config = dataclasses.replace(config, decode_prior=fitted)
    config = dataclasses.replace(config, decode_prior=config.decode_prior or 0.0)
    if engine == "ctranslate2":
        if config.search in STRATEGIES and not STRATEGIES[config.search].built_in:
            raise UserError(
                f"-search {config.search}: an added strategy decodes with the checkpoint's own search "
                "(-engine torch), not CTranslate2's"
            )
        if len(models) > 1:
            raise UserError(
                "-engine ctranslate2 decodes one exported model; an ensemble needs the checkpoints (-engine torch)"
            )
        exported = Ct2Translator.from_export(models[0], config, device, threads=threads, lexicon=lexicon)
        if log:
            log(f"{models[0]}: decoding with CTranslate2 ({exported.record.get('quantization')} weights)")
        return exported
    translator = Translator.from_checkpoint(models[0], config, device, lexicon=lexicon, offsets=offsets)
    if config.freq_offsets:
        translator.check_offsets_model(config.freq_offsets, offsets_model)
    if len(models) > 1:  # the other members, with the same decoding options (each keeps its own prior)
        member = dataclasses.replace(config, tgt_emb_extend=None, tgt_emb_extend_vocab=None)
        translator.set_ensemble(
            [Translator.from_checkpoint(path, member, device, lexicon=lexicon) for path in models[1:]], models
        )
        if log:
            log(f"an ensemble of {len(models)} models: the mean of their log-probabilities at each step")
    return translator
