"""train.py's checks that argparse cannot make: the ranges its options' fields declare (:mod:`onmt_cont.config`),
option combinations, the model's size, and the defaults that depend on other options."""

import math
import os
from argparse import Namespace
from collections.abc import Callable
from typing import Any

import torch

from onmt_cont.config import check_ranges
from onmt_cont.losses import LOSSES
from onmt_cont.losses.negatives import parse_sources
from onmt_cont.losses.options import LossConfig
from onmt_cont.losses.unlikelihood import NGRAM
from onmt_cont.models.architecture import DECODERS, ENCODERS, architecture
from onmt_cont.models.model import build_model, generator_kind
from onmt_cont.models.options import ModelConfig
from onmt_cont.train.optim_options import OptimConfig
from onmt_cont.train.session_options import SessionConfig
from onmt_cont.utils.errors import UserError


def _check_numbers(opt):
    """Values no combination makes usable: non-finite floats (bin/train.py's parser refuses them
    already; a Namespace built otherwise may hold one), and values outside the ranges or checks that the
    fields of the model's, the loss's, the optimiser's and the session's configurations declare (seeds
    beyond what the generators take, -threads beyond apply_threads' bound, negative weights, ...)."""
    for name, value in sorted(vars(opt).items()):
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"-{name} must be a finite number, got {value}")
    for config in (ModelConfig, LossConfig, OptimConfig, SessionConfig):
        check_ranges(vars(opt), config)


def check_model_size(
    opt: Namespace, src_size: int, tgt_size: int, table: torch.Tensor | None, device: torch.device
) -> None:
    """Refuse a model whose parameters, their gradients and the optimiser's state would not fit in
    the memory of ``device``, before any of it is allocated: the model is built on PyTorch's meta
    device (shapes, no storage), so -rnn_size 100000 is an error at once, not an allocation that
    fails after minutes or takes the machine's memory. Sizes beyond what a tensor can have are
    refused the same way."""
    try:
        with torch.device("meta"):
            model = build_model(opt, src_size, tgt_size, table)
    except ValueError as exc:  # a wrong combination: build_model says which
        raise UserError(str(exc)) from None
    except (RuntimeError, TypeError, OverflowError, MemoryError) as exc:
        raise UserError(
            f"no model of this size can be built (-rnn_size {opt.rnn_size}, -word_vec_size "
            f"{opt.word_vec_size}, -enc_layers {opt.enc_layers}, -dec_layers {opt.dec_layers}, ...): "
            f"a size is beyond what a tensor can hold ({str(exc).splitlines()[0][:80]})"
        ) from None
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    per_param = 16 if opt.optim == "adam" else 8  # float32 value and gradient, Adam's two moments
    need = trained * per_param + frozen * 4
    if device.type == "cuda":
        have, where = torch.cuda.get_device_properties(device).total_memory, f"GPU {device}"
    else:
        try:
            have, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine"
        except (ValueError, OSError, AttributeError):  # no sysconf: no limit known
            return
    if need > have:
        raise UserError(
            f"the model of these options has {trained:,} trained parameters: with their gradients and "
            f"the optimiser's state {need / 2**30:,.1f} GiB, more than the {have / 2**30:,.1f} GiB of "
            f"memory of {where} (-rnn_size {opt.rnn_size}, -word_vec_size {opt.word_vec_size}, "
            f"-enc_layers {opt.enc_layers}, -dec_layers {opt.dec_layers}, ...): choose smaller sizes"
        )


def _losses_with(field):
    """The -loss names whose Loss has ``field`` set, for messages: 'a, b and c'."""
    names = [name for name, spec in LOSSES.items() if getattr(spec, field)]
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_options(opt: Namespace) -> None:
    """The checks argparse cannot make (option combinations, ranges); fills in defaults that
    depend on other options (learning rate, -num_negatives, -negatives)."""
    _check_numbers(opt)
    spec = LOSSES[opt.loss]
    if spec.continuous and not opt.tgt_emb:
        raise UserError(f"-loss {opt.loss} predicts pretrained target vectors: give -tgt_emb OUT.dec.pt")
    if opt.tie_emb and not opt.tgt_emb:
        raise UserError("-tie_emb uses the pretrained target vectors: give -tgt_emb OUT.dec.pt")
    try:
        generator_kind(opt)  # -loss, -generator and -rewe_lambda fit together
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if opt.generator != "joint":
        for name in ("joint_sample", "joint_dropout"):
            if getattr(opt, name) is not None:
                raise UserError(f"-{name} is only used with -generator joint (got -generator {opt.generator})")
    if opt.rewe_lambda is None and opt.rewe_hidden is not None:
        raise UserError("-rewe_hidden is only used with -rewe_lambda")
    if opt.rewe_lambda is not None:
        if not opt.tgt_emb:
            raise UserError("-rewe_lambda regresses the pretrained target vectors: give -tgt_emb OUT.dec.pt")
    _check_negatives(opt)
    _check_seq_unlikelihood(opt)
    _check_architecture(opt)
    if opt.valid_remove_bpe and opt.valid_metric != "bleu" and not opt.valid_bleu:
        raise UserError(
            f"-valid_remove_bpe joins BPE pieces before validation BLEU: it needs -valid_metric bleu "
            f"or -valid_bleu, not -valid_metric {opt.valid_metric} alone"
        )
    if opt.accum_count > 1 and opt.seq_unlikelihood:
        raise UserError("-seq_unlikelihood decodes each step's batch: it takes one batch a step (-accum_count 1)")
    if opt.label_smoothing and spec.continuous:
        raise UserError(
            f"-label_smoothing smooths the softmax's target distribution: it needs -loss ce, not -loss {opt.loss}"
        )
    if opt.vmf_form != "paper" and not spec.vmf:
        raise UserError(
            f"-vmf_form {opt.vmf_form} picks the form of the NLLvMF loss: it needs -loss "
            f"{_losses_with('vmf')}, not -loss {opt.loss}"
        )
    if opt.learning_rate is None:
        if opt.decay_method == "inverse_sqrt":
            raise UserError("-decay_method inverse_sqrt needs -learning_rate, its peak (e.g. 0.005)")
        if opt.decay_method == "noam":
            opt.learning_rate = 2.0  # OpenNMT's Transformer factor
        else:
            opt.learning_rate = 5e-4 if spec.continuous else 2e-4


def expand_layers(opt: Namespace, default: Callable[[str], Any]) -> None:
    """-layers N sets -enc_layers and -dec_layers; refused next to either of them."""
    if opt.layers is None:
        return
    given = [f"-{k}" for k in ("enc_layers", "dec_layers") if getattr(opt, k) != default(k)]
    if given:
        raise UserError(f"-layers sets both -enc_layers and -dec_layers: give it or {' / '.join(given)}, not both")
    check_ranges(vars(opt), ModelConfig, ["layers"])
    opt.enc_layers = opt.dec_layers = opt.layers
    opt.layers = None  # a resumed run reads -enc_layers / -dec_layers from the checkpoint


def _check_architecture(opt):
    """-encoder_type / -decoder_type and what each side reads of the options (its check_opt), before anything
    is built."""
    try:
        enc, dec = architecture(opt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if opt.alignment_layer is not None and "alignment_layer" not in DECODERS[dec].reads:
        readers = " or ".join(name for name, cls in DECODERS.items() if "alignment_layer" in cls.reads)
        raise UserError(
            "-alignment_layer picks a decoder layer's cross-attention: it needs "
            f"-decoder_type {readers} (got -decoder_type {dec})"
        )
    try:
        ENCODERS[enc].check_opt(opt)
        DECODERS[dec].check_opt(opt)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def bleu_validated(opt):
    """Whether validation decodes: -valid_metric bleu, or -valid_bleu beside another metric."""
    return opt.valid_metric == "bleu" or opt.valid_bleu


def _check_seq_unlikelihood(opt):
    """-seq_unlikelihood and its two settings (their ranges on their fields, checked before): refused without it,
    their defaults filled in where it is on."""
    if opt.seq_unlikelihood == 0:
        for name in ("seq_unlikelihood_ngram", "seq_unlikelihood_every"):
            if getattr(opt, name) is not None:
                raise UserError(f"-{name} sets how -seq_unlikelihood works: give -seq_unlikelihood WEIGHT too")
        return
    if LOSSES[opt.loss].vocab_logits is None:
        raise UserError(
            f"-seq_unlikelihood needs a softmax over the vocabulary: -loss "
            f"{_losses_with('vocab_logits')}, not -loss {opt.loss}"
        )
    if opt.joint_sample is not None:
        raise UserError("-seq_unlikelihood scores every word: it does not work with -joint_sample")
    if opt.seq_unlikelihood_ngram is None:
        opt.seq_unlikelihood_ngram = NGRAM
    if opt.seq_unlikelihood_every is None:
        opt.seq_unlikelihood_every = 1


def _check_negatives(opt):
    """The contrastive options: refused where the loss does not use them; defaults filled in."""
    spec = LOSSES[opt.loss]
    if opt.num_negatives is not None and spec.num_negatives is None:
        raise UserError(f"-num_negatives is used by -loss {_losses_with('num_negatives')}, not -loss {opt.loss}")
    if opt.negatives is not None and spec.negatives is None:
        raise UserError(f"-negatives is used by -loss {_losses_with('negatives')}, not -loss {opt.loss}")
    if spec.num_negatives is not None and opt.num_negatives is None:
        opt.num_negatives = spec.num_negatives
    if spec.negatives is not None:
        try:
            sources = parse_sources(opt.negatives or spec.negatives)
        except ValueError as exc:
            raise UserError(f"-negatives: {exc}") from None
        opt.negatives = ",".join(sources)
    if opt.prefix_window is not None and "prefix" not in (opt.negatives or "").split(","):
        raise UserError(
            "-prefix_window sets how many earlier words -negatives prefix takes: add prefix to "
            f"-negatives (with -loss {_losses_with('negatives')})"
        )
    for name, what in (
        ("word_bias", "changes the logits of"),
        ("sampling_correction", "changes the logits of"),
        ("train_table", "trains the target table through the candidates (they keep its words apart) of"),
    ):
        if getattr(opt, name) and not spec.candidate_logits:
            raise UserError(f"-{name} {what} -loss {_losses_with('candidate_logits')}, not -loss {opt.loss}")
    if opt.word_bias_update == "lazy" and not opt.word_bias:
        raise UserError("-word_bias_update lazy updates the word bias: it needs -word_bias")
    if opt.table_lr_scale != 1 and not opt.train_table:
        raise UserError(
            f"-table_lr_scale {opt.table_lr_scale} scales the learning rate of a trained target "
            "table: it needs -train_table"
        )


# -negatives sources and the options that size them
SOURCE_OPTIONS = {"num_sampled": ("random",), "ann_candidates": ("gold_nn", "ann")}


def ineffective_options(opt: Namespace, default: Callable[[str], Any]) -> list[str]:
    """The options given (not at their default) that the chosen model and loss never read, one line
    each for the log: train.py warns instead of training as if they had an effect."""
    given = [name for name, value in vars(opt).items() if value is not None and value != default(name)]
    spec, lines = LOSSES[opt.loss], []
    read_by_some = frozenset().union(*(s.reads for s in LOSSES.values()))
    for name in given:
        if name in read_by_some and name not in spec.reads:
            readers = [n for n, s in LOSSES.items() if name in s.reads]
            lines.append(f"-{name} does nothing for -loss {opt.loss} (it is read by -loss {', '.join(readers)})")
    sides = architecture(opt)
    reads = ENCODERS[sides[0]].reads | DECODERS[sides[1]].reads
    for name in given:
        readers = sorted({n for table in (ENCODERS, DECODERS) for n, cls in table.items() if name in cls.reads})
        if readers and name not in reads:
            kinds = " or ".join(readers)
            lines.append(f"-{name} does nothing without a {kinds} side (-encoder_type/-decoder_type {kinds})")
    sources = (opt.negatives or "").split(",")
    for name, needs in SOURCE_OPTIONS.items():
        if name in given and not any(source in sources for source in needs):
            lines.append(
                f"-{name} sizes the -negatives source(s) {' / '.join(needs)}, which this run does not use "
                f"(-negatives {opt.negatives or 'none'})"
            )
    if "expected_counts" in given and not opt.sampling_correction:
        lines.append("-expected_counts picks -sampling_correction's rule: without that flag it does nothing")
    if "rewe_loss" in given and opt.rewe_lambda is None:
        lines.append("-rewe_loss picks the ReWE head's loss: without -rewe_lambda it does nothing")
    return lines
