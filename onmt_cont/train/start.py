"""train(): from bin/train.py's parsed options to a finished run: the checks before anything is
built, the checkpoint to go on from, the -save_model lock, the log, and how a stop is reported."""

import os
import re
import signal
import sys
from argparse import Namespace
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from typing import Any

from onmt_cont import distributed
from onmt_cont.inputters.batching import FINAL_PUNCT
from onmt_cont.models.architecture import architecture
from onmt_cont.models.checkpoint import (
    find_resumable,
    inexact_resume,
    load_checkpoint,
    resume_problem,
)
from onmt_cont.train.checks import check_options, expand_layers, ineffective_options
from onmt_cont.train.log import logger, report_parameters, setup_logging, to_log_file
from onmt_cont.train.resume import check_resumable, kept_best, take_checkpoint_options
from onmt_cont.train.session import Run
from onmt_cont.train.step import NonFiniteLoss
from onmt_cont.utils.atomic import remove_stale_temps
from onmt_cont.utils.board import Board
from onmt_cont.utils.device import resolve_device
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.locks import prefix_lock
from onmt_cont.utils.memory import keep_freed_memory
from onmt_cont.utils.signals import Stopped, sigterm_stops
from onmt_cont.utils.threads import apply_threads
from onmt_cont.utils.writable import check_log_file, check_writable_folder


def train(opt: Namespace, default: Callable[[str], Any]) -> "Run":
    """Check the parsed options ``opt`` (an argparse namespace of bin/train.py's parser), build the
    run and train it to the end. ``default(name)`` is the parser's default of an option: with
    -train_from, a model option left at its default takes the checkpoint's value, and one given
    otherwise must match it. Returns the finished Run. Ctrl-C, or SIGTERM to a single process,
    ends it with one line saying what was kept, and the exit status 128 + the signal's number."""
    start = Start()
    try:
        with ExitStack() as held:
            ctx, threads = _prepare(opt, default, start, held)
            # a single process stops on SIGTERM with a line saying what was kept; torchrun's ranks together
            alone = nullcontext() if ctx.distributed else sigterm_stops()
            with distributed.stop_on_sigterm(ctx), alone:
                return _train(opt, ctx, threads, start)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM to a single process (Stopped)
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        line = f"stopped by {signal.Signals(signum).name} {start.kept()}"
        if start.logging:
            logger.warning(line)
        else:  # before the log was set up
            print(line, file=sys.stderr)
        raise SystemExit(128 + signum) from None
    except UserError as exc:  # the console shows it (cli_main); -log_file must say why the run stopped too
        if start.logging:
            to_log_file(f"error: {exc}")
        raise
    except Exception as exc:
        if start.logging:
            to_log_file(
                f"stopped by an unexpected error: {type(exc).__name__}: {str(exc)[:500]} (the traceback "
                "is on standard error)"
            )
        raise


def _check_save_model(opt):
    if opt.save_model.endswith(("/", os.sep)) or os.path.isdir(opt.save_model):  # would write hidden _last.pt
        raise UserError(
            f"-save_model {opt.save_model} is a folder: -save_model takes a prefix, such as "
            f"{os.path.join(opt.save_model, 'model')} (files PREFIX_step_N.pt, PREFIX_best.pt, ...)"
        )
    save_dir = os.path.dirname(os.path.abspath(opt.save_model))
    if not os.path.isdir(save_dir):
        raise UserError(f"-save_model {opt.save_model}: directory {save_dir} does not exist")
    check_writable_folder(save_dir, f"-save_model {opt.save_model}", os.path.basename(opt.save_model) + "_probe")
    return save_dir


def _prepare(opt, default, start, held):
    """train()'s checks before anything is built: the options, the checkpoint to go on from (into
    ``start``), the output folders, then the lock on -save_model (entered into the ExitStack
    ``held``; rank 0 takes it, under torchrun the group's writer). -> (the distributed context, the
    thread count)."""
    missing = [f"-{k}" for k in ("data", "save_model") if not getattr(opt, k)]
    if missing:
        raise UserError(f"missing required option(s): {' '.join(missing)}")
    if os.path.isfile(opt.data):  # e.g. a checkpoint or PREFIX.vocab.pt
        raise UserError(
            f"-data {opt.data} is a file: -data takes the prefix given to preprocess.py -save_data "
            "(the files are PREFIX.vocab.pt, PREFIX.train.N.pt, PREFIX.valid.0.pt)"
        )
    expand_layers(opt, default)
    if opt.alignment_layer == "mean":  # the default spelled out: the same model option as leaving it out
        opt.alignment_layer = None
    ckpt, notes, warnings = None, start.notes, start.warnings
    if opt.resume == "auto":
        if opt.train_from:
            raise UserError("-resume auto picks the checkpoint itself: leave out -train_from, or -resume")
        opt.train_from, ckpt, found = find_resumable(opt.save_model)  # loaded once, here
        notes += found
        if not opt.train_from:
            notes.append(f"-resume auto: no checkpoint of {opt.save_model} to go on from: starting at step 0")
    if opt.train_from_average and (not opt.train_from or opt.resume == "auto"):
        raise UserError(
            "-train_from_average picks the parameters of the -train_from checkpoint: give -train_from "
            "(not -resume auto, whose restarts must go on from their own parameters)"
        )
    reset = opt.reset_optim
    if reset != "none" and (not opt.train_from or opt.resume == "auto"):
        raise UserError(
            f"-reset_optim {reset} applies to the -train_from checkpoint: give -train_from (not -resume "
            "auto: a restarted run goes on from its own checkpoints, which must not be reset again)"
        )
    if opt.train_from:
        ckpt = ckpt or load_checkpoint(opt.train_from)
        problem = resume_problem(ckpt, fine_tune=reset == "all")
        if problem:
            hint = "; to fine-tune its weights, add -reset_optim all" if ckpt.get("release") else ""
            raise UserError(f"-train_from {opt.train_from}: cannot go on from it: {problem}{hint}")
        if reset == "all":
            notes.append(
                f"-reset_optim all: fine-tuning the weights of {opt.train_from}: a new optimiser, "
                "learning-rate schedule and data position, from step 0"
            )
        else:
            warnings += [f"-train_from {opt.train_from}: {note}" for note in inexact_resume(ckpt)]
        if opt.train_from_average and "train_model" not in ckpt:
            raise UserError(
                f"-train_from_average: {opt.train_from} holds no moving average (it was trained without "
                "-average_decay): leave the flag out"
            )
        take_checkpoint_options(opt, ckpt, default)
    check_options(opt)
    warnings += ineffective_options(opt, default)
    save_dir = _check_save_model(opt)
    if opt.log_file:
        check_log_file(opt.log_file)
    if opt.resume == "auto":
        start.best_floor, note = kept_best(opt, ckpt)
        notes += [note] if note else []
    if opt.amp is True and opt.amp_dtype == "fp16" and opt.gpu is None:
        raise UserError("-amp -amp_dtype fp16 needs a GPU (-gpu); on CPU use -amp_dtype bf16")
    start.ckpt, start.save_dir = ckpt, save_dir
    if os.environ.get("RANK", "0") == "0":  # two runs on one prefix would interleave their checkpoints
        held.enter_context(prefix_lock(opt.save_model, "-save_model"))
    threads = apply_threads(opt.threads)
    keep_freed_memory()  # a step's big tensors reuse the pages the last step freed (onmt_cont.utils.memory)
    return distributed.init(use_gpu=opt.gpu is not None, timeout_s=opt.dist_timeout), threads


class Start:
    """What train() found before the run is built: the checkpoint to go on from, the lines to log
    about it, the PREFIX_best.pt to keep (kept_best), and, once training, what is on disk."""

    def __init__(self):
        self.ckpt, self.notes, self.warnings = None, [], []
        self.best_floor, self.save_dir = None, None
        self.run = None
        self.logging = False  # the log is set up (its lines go to -log_file too)

    def kept(self):
        """What an interrupted run leaves: its last checkpoint (and step), its best."""
        run = self.run
        if run is None:
            return "before training started; nothing was written"
        step = run.progress["step"]
        best = (
            f"; {run.best_saved[0]} holds its best validated model (step {run.best_saved[1]})" if run.best_saved else ""
        )
        if run.last_saved is None:
            return f"at step {step}, before this run's first checkpoint{best or '; nothing of it was written'}"
        path, at = run.last_saved
        since = f"; the {step - at} step(s) since are lost" if step > at else ""
        return (
            f"at step {step}; the last checkpoint is {path} (step {at}){since}{best}. To go on: the same "
            f"command with -resume auto, or -train_from {path}"
        )


def _train(opt, ctx, threads, start):
    """train()'s second half, on a rank of the process group ``ctx``: build the run, log what it is, train."""
    ckpt = start.ckpt
    device = resolve_device(ctx.local_rank if ctx.distributed and opt.gpu is not None else opt.gpu)
    run = Run(opt, device, ctx)  # reads and checks every input: a failure leaves no log file behind
    if ckpt is not None:
        check_resumable(ckpt, opt, run.model, run.src_vocab, run.tgt_vocab)
    try:
        setup_logging(opt.log_file if ctx.is_main else None, ctx.is_main)
    except OSError as exc:
        raise UserError(f"-log_file {opt.log_file}: cannot write it ({(exc.strerror or str(exc)).lower()})") from None
    start.run, start.logging = run, True
    # each run's first line: a log that a resumed or retrained run appends to shows where each run began
    where = f"from {opt.train_from} at step {ckpt['progress']['step']}" if ckpt is not None else "from step 0"
    logger.info(f"train.py started (PID {os.getpid()}), {where}")
    run.best_floor = start.best_floor
    if ctx.is_main:
        try:
            stale = remove_stale_temps(start.save_dir, os.path.basename(opt.save_model) + "_")
        except OSError as exc:
            logger.warning(
                f"cannot remove the partial checkpoint files of a killed run in {start.save_dir} "
                f"({(exc.strerror or str(exc)).lower()}); remove the .tmp-* files there yourself"
            )
            stale = []
        if stale:
            logger.info(f"removed {len(stale)} partial checkpoint file(s) of a killed run: {', '.join(stale)}")
    if opt.tensorboard and ctx.is_main:
        run.board = Board(opt.tensorboard_log_dir, warn=logger.warning)
        if run.board.writer is not None:  # else it has said why not
            logger.info(f"-tensorboard: event files in {opt.tensorboard_log_dir}")
    for line in start.notes + run.notes:
        logger.info(line)
    for line in start.warnings + run.warnings:
        logger.warning(f"warning: {line}")
    if ckpt is not None:
        run.resume(ckpt)
    extra = "".join(
        f" -{k} {getattr(opt, k)}"
        for k in ("rewe_lambda", "joint_sample", "negatives", "num_negatives")
        if getattr(opt, k) is not None
    )
    enc, dec = architecture(opt)
    tie = "".join(f" -{k}" for k in ("tie_emb", "word_bias", "sampling_correction", "train_table") if getattr(opt, k))
    if opt.train_table and opt.table_lr_scale != 1:
        tie += f" -table_lr_scale {opt.table_lr_scale:g}"
    logger.info(
        f"model: -encoder_type {enc} -decoder_type {dec} -loss {opt.loss} -generator {opt.generator}"
        f"{tie}{extra}; "
        f"device {device}{f' ({threads} threads)' if device.type == 'cpu' else ''}; lr {opt.learning_rate}"
    )
    report_parameters(run.model)
    if run.amp_note:
        logger.info(run.amp_note)
    if opt.drop_final_punct:
        logger.info(
            f"training data: -drop_final_punct {opt.drop_final_punct:g}: a pair whose source ends with "
            f"{' '.join(FINAL_PUNCT)} loses it, and its target its own, with this probability, drawn anew "
            "each epoch"
        )
    if ctx.distributed:
        logger.info(
            f"distributed: {ctx.world} processes ({'nccl' if device.type == 'cuda' else 'gloo'}); "
            f"each takes 1/{ctx.world} of every batch of -batch_size {opt.batch_size}"
        )
    failed = True
    try:
        run.train()
        failed = False
    except NonFiniteLoss as exc:
        raise UserError(str(exc)) from None
    except RuntimeError as exc:
        if ctx.distributed and distributed.peer_failed(exc):
            # another rank ended (its error: line is above) and this one's collective broke: one
            # line, not a traceback per rank
            why = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).splitlines()[0])[:100]  # without gloo's [file:line]
            raise UserError(f"rank {ctx.rank}: stopped, another rank ended ({why})") from None
        raise
    finally:
        if run.board is not None:
            run.board.close()
        if not failed:
            run.release_distributed()
        distributed.cleanup(ctx, failed=failed)
    return run
