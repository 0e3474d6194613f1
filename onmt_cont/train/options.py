"""train.py's options: the parser, grouped as OpenNMT-py groups them, every flag but -config and -save_config built
from a component's typed configuration (:mod:`onmt_cont.config`): the model's and the loss's groups from
:mod:`onmt_cont.models.options` and :mod:`onmt_cont.losses.options`, "Data", "Training" and "Logging" from the
session's (:mod:`onmt_cont.train.session_options`) and the optimiser's (:mod:`onmt_cont.train.optim_options`).
Each field declares its range; the checks that combine options are in :mod:`onmt_cont.train.checks`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import fields

from onmt_cont import opts
from onmt_cont.config import add_flags
from onmt_cont.losses.options import LossConfig, add_loss_options
from onmt_cont.models.options import ModelConfig, add_model_options
from onmt_cont.train.optim_options import OptimConfig
from onmt_cont.train.session_options import SessionConfig
from onmt_cont.utils import numbers

# The configurations whose fields are train.py's flags, the model's and the loss's first
CONFIGS: tuple[type, ...] = (ModelConfig, LossConfig, OptimConfig, SessionConfig)

# The "Training" group's flags in train.py -h's order, the session's and the optimiser's interleaved as they were
# declared by hand (OpenNMT-py's order)
TRAINING = (
    *("epochs", "train_steps", "batch_size", "batch_type", "accum_count", "drop_final_punct"),
    *("seq_unlikelihood", "seq_unlikelihood_ngram", "seq_unlikelihood_every", "valid_batch_size"),
    *("optim", "learning_rate", "decay_method", "warmup_steps", "adam_beta1", "adam_beta2", "max_grad_norm"),
    *("normalization", "average_decay", "average_every", "seed", "gpu", "threads", "dist_timeout", "amp"),
    *("amp_dtype", "valid_steps", "early_stopping", "early_stopping_window", "valid_metric", "valid_bleu"),
    *("valid_remove_bpe", "save_checkpoint_steps", "keep_checkpoint", "save_checkpoint_epochs", "train_from"),
    *("reset_optim", "train_from_average", "resume"),
)


def _add_group(p: argparse.ArgumentParser, title: str, names: Sequence[str]) -> argparse._ArgumentGroup:
    """The group ``title`` with these flags, in this order, each from the field of its name in the session's or
    the optimiser's configuration."""
    group = p.add_argument_group(title)
    optim = {f.name for f in fields(OptimConfig)}
    for name in names:
        add_flags(group, OptimConfig if name in optim else SessionConfig, [name])
    return group


def build_parser() -> argparse.ArgumentParser:
    """train.py's parser: -config, then the groups Data, Model, Loss, Training and Logging."""
    p = opts.new_parser("Train an NMT model with a softmax or continuous (embedding-prediction) output layer.")
    _add_group(p, "Data", ["data", "save_model", "tgt_emb"])
    add_model_options(p)
    add_loss_options(p)
    _add_group(p, "Training", TRAINING)
    g = _add_group(p, "Logging", ["tensorboard", "tensorboard_log_dir", "report_every", "log_file"])
    g.add_argument("-save_config", help="write the effective options to this YAML file and exit")
    for action in p._actions:  # every float option: nan, inf and a non-zero value that rounds to 0 are refused
        if action.type is float:
            action.type = numbers.finite_float
    return p
