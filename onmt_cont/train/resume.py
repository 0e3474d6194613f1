"""-train_from and -resume auto: which options a checkpoint fixes, whether it fits this run, and
the PREFIX_best.pt a restarted run keeps."""

import math
import os
from argparse import Namespace
from collections.abc import Callable
from typing import Any

import torch

from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.checkpoint import load_checkpoint
from onmt_cont.train.stopping import is_better
from onmt_cont.utils.errors import UserError

# Options that define the network; -train_from takes them from the checkpoint. alignment_layer
# holds no parameter but is the model's -replace_unk alignment: a resumed run that dropped it
# would write checkpoints aligning with another layer.
MODEL_OPTS = (
    "rnn_size",
    "word_vec_size",
    "src_word_vec_size",
    "tgt_word_vec_size",
    "enc_layers",
    "dec_layers",
    "brnn",
    "generator",
    "loss",
    "tie_emb",
    "joint_dim",
    "rewe_lambda",
    "rewe_hidden",
    "encoder_type",
    "decoder_type",
    "heads",
    "transformer_ff",
    "position_encoding",
    "max_positions",
    "alignment_layer",
    "word_bias",
    "sampling_correction",
    "expected_counts",
    "train_table",
    "word_bias_update",
    "layer_norm",
    "ff_dropout",
    "share_embeddings",
    "share_decoder_embeddings",
    "vmf_form",
)


# The learning-rate schedule: -train_from keeps the checkpoint's unless the option is given again
# (a resumed noam run must not fall back to a constant rate; a new -learning_rate is allowed).
SCHEDULE_OPTS = ("learning_rate", "decay_method", "warmup_steps", "table_lr_scale")


# Training-data options -train_from keeps in the same way, so a resumed run sees the same sources.
DATA_OPTS = ("drop_final_punct",)


# and the stopping rule's window: the running best it keeps in the checkpoint is a mean over that many scores
STOPPING_OPTS = ("early_stopping_window",)


def check_resumable(ckpt: dict, opt: Namespace, model: torch.nn.Module, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
    """Refuse a -train_from checkpoint that does not fit this -data / -tgt_emb, before anything
    is written: load_state_dict would raise a raw size-mismatch error, and a same-size table
    of other vectors would be silently replaced by the checkpoint's."""
    for side, vocab in (("source", src_vocab), ("target", tgt_vocab)):
        saved = ckpt["vocab"]["src" if side == "source" else "tgt"]
        if list(saved) != list(vocab.itos):
            raise UserError(
                f"{_resumed(opt)} was trained with another {side} vocabulary ({len(saved)} words) than "
                f"-data {opt.data} ({len(vocab)} words): " + _another_run(opt, "resume with the same -data")
            )
    own = model.state_dict()
    fixed = {n for n, p in model.named_parameters() if not p.requires_grad} | {n for n, _ in model.named_buffers()}
    for name, tensor in ckpt["model"].items():
        mine = own.get(name)
        if mine is None or not isinstance(tensor, torch.Tensor):
            continue  # load_state_dict reports missing and unexpected keys below
        if mine.shape != tensor.shape:
            what = f"-tgt_emb {opt.tgt_emb}" if name in fixed else "the model built from these options"
            raise UserError(
                f"{_resumed(opt)}: {name} is {list(tensor.shape)} in the checkpoint but "
                f"{list(mine.shape)} in {what}: "
                + _another_run(opt, "resume with the table and options it was trained with")
            )
        if name in fixed and opt.tgt_emb and mine.is_floating_point() and not torch.equal(mine, tensor.to(mine)):
            raise UserError(
                f"-tgt_emb {opt.tgt_emb} holds other vectors than the table {_resumed(opt)} was trained "
                f"with ({name}): " + _another_run(opt, "resume with the same table")
            )
    try:
        model.load_state_dict(ckpt["model"])
    except (RuntimeError, TypeError) as exc:
        raise UserError(
            f"{_resumed(opt)} does not fit the model built from these options: "
            f"{str(exc)[:300]}; " + _another_run(opt, "resume with the options it was trained with")
        ) from None


def _resumed(opt):
    """How messages name the checkpoint a run goes on from."""
    if opt.resume == "auto":
        return f"the checkpoint {opt.train_from} found by -resume auto under -save_model {opt.save_model}"
    return f"-train_from {opt.train_from}"


def _another_run(opt, remedy):
    """The advice when the resumed checkpoint does not fit: ``remedy`` for -train_from; with
    -resume auto the checkpoint is most likely another run's, and going on from it is not the fix."""
    if opt.resume != "auto":
        return remedy
    return (
        f"it belongs to another run: give this one its own -save_model (or move that run's files away), "
        f"or, to continue that run, {remedy}"
    )


def take_checkpoint_options(opt: Namespace, ckpt: dict, default: Callable[[str], Any]) -> None:
    """-train_from / -resume auto: model options left at their default take the checkpoint's, and
    one given otherwise must match it; schedule, data and stopping options left out too."""
    saved = dict(ckpt["opt"])
    if saved.get("sampling_correction") and "expected_counts" not in saved:
        saved["expected_counts"] = "unigram"  # the only rule before -expected_counts existed
    for k in MODEL_OPTS:
        if k in saved:
            given = getattr(opt, k)
            if given != default(k) and given != saved[k]:
                raise UserError(
                    f"-{k} {given} conflicts with {_resumed(opt)} (trained with -{k} {saved[k]}); "
                    + _another_run(opt, f"leave -{k} out to resume")
                )
            setattr(opt, k, saved[k])
    # left out on resume: the checkpoint's; given: the new value
    for k in SCHEDULE_OPTS + DATA_OPTS + STOPPING_OPTS:
        if k in ckpt["opt"] and getattr(opt, k) == default(k):
            setattr(opt, k, ckpt["opt"][k])


def kept_best(opt: Namespace, ckpt: dict | None) -> tuple[tuple | None, str | None]:
    """-resume auto: the run's PREFIX_best.pt, when it is better than the best that the resumed
    progress (``ckpt``'s, or none at step 0) records, is kept until a validation beats it, so that
    a run killed before its next step checkpoint does not replace it with a worse model.
    -> ((score, step, path) or None, a line for the log or None)."""
    path = f"{opt.save_model}_best.pt"
    if not os.path.exists(path):
        return None, None
    try:
        best = load_checkpoint(path)
    except UserError as exc:
        return None, f"-resume auto: {exc}: it will be replaced at this run's first validation"
    pr = best.get("progress") if isinstance(best.get("progress"), dict) else {}
    score, metric = pr.get("best_score"), pr.get("valid_metric", "loss")
    if not isinstance(score, (int, float)) or not math.isfinite(score):
        return None, (
            f"-resume auto: {path} records no validation score: it will be replaced at this run's first validation"
        )
    if metric != opt.valid_metric:
        return None, (
            f"-resume auto: {path} is the best by -valid_metric {metric}, this run follows "
            f"{opt.valid_metric}: it will be replaced at this run's first validation"
        )
    resumed = ckpt["progress"] if ckpt is not None else {}
    reached = resumed.get("best_score") if resumed.get("valid_metric", "loss") == metric else None
    if reached is not None and not is_better(score, reached, higher=metric != "loss"):
        return None, None  # the resumed state has reached it (the same run's best, or a better one)
    so_far = f"{metric} {reached:.4f}" if reached is not None else "no validation yet"
    return (score, pr.get("step"), path), (
        f"-resume auto: kept {path} (step {pr.get('step')}, validation {metric} {score:.4f}): it is better than what "
        f"the resumed state has reached ({so_far}); it is replaced only by a better validation"
    )
