"""onmt_cont_convert's options: the checkpoint, the CTranslate2 directory it becomes, the weights' type and the
decoding options fixed into the export, as one typed configuration (:class:`ExportConfig`) from which the parser's
flags are built (:mod:`onmt_cont.config`). The decoding values are checked by translate.py's rules when
:func:`onmt_cont.export.ct2.convert` builds its translator, as translate.py checks them."""

from __future__ import annotations

from argparse import ArgumentParser
from dataclasses import dataclass, fields

from onmt_cont.config import add_flags, option
from onmt_cont.export.ct2 import QUANTIZATIONS
from onmt_cont.models.transformer import parse_alignment_layer


@dataclass
class ExportConfig:
    """onmt_cont_convert's flags, each field with its help and default."""

    model: str | None = option(
        None, required=True, help="a Transformer checkpoint written by train.py (or its release)"
    )
    output: str | None = option(None, required=True, help="the CTranslate2 model directory to write")
    quantization: str | None = option(
        None,  # None: float32
        choices=QUANTIZATIONS,
        help="store the weights as this type (int8: 8-bit weights, float32 computation on the CPU); default float32",
    )
    decode_prior: float = option(
        0.0,
        type=float,
        help="continuous models: β of score + β · log p_train(w), as translate.py's (default 0)",
    )
    decode_prior_cap: int = option(
        0,
        type=int,
        help="continuous models: the prior flat for words seen at least this often (0: the plain prior)",
    )
    beam_temperature: float = option(
        1.0,
        type=float,
        help="continuous models: beam search's softmax over the scores / (the model's scale × this)",
    )
    alignment_layer: int | str | None = option(
        None,
        type=parse_alignment_layer,
        help="the decoder layer whose attention (every head's mean) -replace_unk reads (default: the last; "
        "CTranslate2 reads one layer, so 'mean' is not possible)",
    )
    force: bool = option(False, help="replace -output if it exists")


def add_export_options(p: ArgumentParser) -> None:
    """Add onmt_cont_convert's flags to its parser ``p`` (no group: -h lists them under "options"), one per
    :class:`ExportConfig` field."""
    add_flags(p, ExportConfig, [f.name for f in fields(ExportConfig)])
