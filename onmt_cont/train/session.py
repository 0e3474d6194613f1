"""A training run (Run): what it holds and its loop over epochs, with validation, model selection
and checkpoints."""

import copy
import gc
import os
import re
from argparse import Namespace
from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel

from onmt_cont import distributed
from onmt_cont.inputters.batching import FINAL_PUNCT, ShardedIterator, collate, make_batches
from onmt_cont.inputters.corpus import shard_examples, shard_paths
from onmt_cont.inputters.vocab import load_vocabs, unigram_log_prior, word_log_frequency
from onmt_cont.models.checkpoint import restore_rng, rng_state, save_checkpoint
from onmt_cont.opts import upgrade
from onmt_cont.train.build import build, load_table
from onmt_cont.train.checks import bleu_validated, check_model_size
from onmt_cont.train.inputs import check_ranks_agree, check_shards
from onmt_cont.train.log import Meter, logger
from onmt_cont.train.optim import learning_rate, set_learning_rate
from onmt_cont.train.step import TrainingForward
from onmt_cont.train.stopping import fresh_stopping, is_better, track_validation
from onmt_cont.train.validate import VALID_SCALARS, ValidBleu
from onmt_cont.utils.atomic import atomic_link
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.signals import signals_deferred


def _ending(batches):
    """The epoch's (shard, batch, batch) items, then its last position once more with None for a batch: the
    signal to take an update with the -accum_count batches gathered since the last one."""
    last = None
    for item in batches:
        yield item
        last = item
    if last is not None:
        yield last[0], last[1], None


class Run:
    """Everything one training run holds, and the loop over epochs."""

    def __init__(self, opt: Namespace, device: torch.device, ctx: distributed.Context | None = None):
        self.opt = opt
        self.device = device
        self.ctx = ctx if ctx is not None else distributed.Context()
        self.src_vocab, self.tgt_vocab, vocab_data = load_vocabs(opt.data + ".vocab.pt")
        self.lower = bool(vocab_data.get("lower", False))  # translate.py lowercases input the same way
        self.text = vocab_data.get("text")  # the raw text the data was made from: the checkpoints carry it
        self.notes, self.warnings = [], []  # for the log, once it is set up
        self.train_paths = shard_paths(opt.data, "train")
        valid_path = shard_paths(opt.data, "valid")[0]
        valid_data = check_shards(opt.data, self.train_paths, valid_path, self.src_vocab, self.tgt_vocab, self.warnings)
        valid_examples = shard_examples(valid_data)
        self.valid = [
            collate(valid_examples, b, device) for b in make_batches(valid_examples, opt.valid_batch_size, "sents")
        ]
        valid_text = list(valid_data["tgt_text"]) if valid_data.get("tgt_text") is not None else None
        self.valid_bleu = (
            ValidBleu(
                valid_examples, valid_text, self.src_vocab, self.tgt_vocab, opt.valid_batch_size, opt.valid_remove_bpe
            )
            if bleu_validated(opt)
            else None
        )
        if opt.share_embeddings and list(self.src_vocab.itos) != list(self.tgt_vocab.itos):
            raise UserError(
                f"-share_embeddings needs one vocabulary for both sides, but -data {opt.data} has a "
                f"source vocabulary of {len(self.src_vocab)} and a target vocabulary of "
                f"{len(self.tgt_vocab)} words that differ: preprocess with -share_vocab"
            )
        table = load_table(opt.tgt_emb, self.tgt_vocab) if opt.tgt_emb else None
        check_ranks_agree(self.ctx, self.src_vocab, self.tgt_vocab, self.train_paths, valid_path, table)
        check_model_size(opt, len(self.src_vocab), len(self.tgt_vocab), table, device)
        # the unigram and sentence rules read the training counts; batch counts need none
        counted = opt.sampling_correction and opt.expected_counts in ("unigram", "sentence")
        parts = build(
            opt,
            len(self.src_vocab),
            len(self.tgt_vocab),
            table,
            device,
            self.ctx,
            self._log_prior(device) if counted else None,
        )
        self.model, self.optimizer, self.trainer = parts.model, parts.optimizer, parts.trainer
        self.average, self.amp_note = parts.average, parts.amp_note
        if parts.amp_warning:
            self.warnings.append(parts.amp_warning)
        # fresh_stopping(): the best score, -early_stopping's count, -early_stopping_window's last N scores
        # and the best mean of N so far
        self.progress = {
            "step": 0,
            "epoch": 0,
            "shard": 0,
            "batch": 0,
            **fresh_stopping(),
            "valid_metric": opt.valid_metric,
        }
        self.board = None  # -tensorboard: train() gives rank 0 one
        self.best_floor = None  # -resume auto: (score, step, path) of a PREFIX_best.pt to keep (kept_best)
        self.last_saved = None  # (path, step) of the newest step, epoch or last checkpoint of this run
        self.best_saved = None  # (path, step) of the PREFIX_best.pt this run wrote last
        self._written = None  # (step, progress, path) of the checkpoint written last (save)
        self.iterator = ShardedIterator(
            self.train_paths,
            opt.batch_size,
            opt.batch_type,
            opt.seed,
            device,
            self.ctx.rank,
            self.ctx.world,
            opt.drop_final_punct,
            self._punct_ids(),
        )

    def _punct_ids(self):
        """-drop_final_punct: the ids of . ! ? in the source and the target vocabulary (an error
        where the source vocabulary has none)."""
        if not self.opt.drop_final_punct:
            return (), ()
        src, tgt = ([v.stoi[w] for w in FINAL_PUNCT if w in v.stoi] for v in (self.src_vocab, self.tgt_vocab))
        if not src:
            raise UserError(
                f"-drop_final_punct: the source vocabulary of {self.opt.data}.vocab.pt has none of "
                f"{' '.join(FINAL_PUNCT)}, so there is nothing to drop"
            )
        return src, tgt

    def _log_prior(self, device):
        rule = self.opt.expected_counts
        try:
            prior = word_log_frequency if rule == "sentence" else unigram_log_prior
            return prior(self.tgt_vocab).to(device)
        except ValueError as exc:
            raise UserError(f"-sampling_correction -expected_counts {rule}: {self.opt.data}.vocab.pt: {exc}") from None

    def resume(self, ckpt: dict) -> None:
        self.model.load_state_dict(ckpt["model"])  # the average, where the checkpoint kept one
        if self.average is not None:
            self.average.load_state_dict(ckpt["model"])
        raw = ckpt.get("train_model")
        if self.opt.train_from_average:  # train() checked that the checkpoint holds an average
            logger.info(f"-train_from_average: training goes on from the moving average of {self.opt.train_from}")
        elif raw is not None:  # the parameters training goes on from
            self.model.load_state_dict(raw, strict=False)
            if self.average is None:
                logger.warning(
                    f"-train_from {self.opt.train_from} was trained with -average_decay; this run keeps "
                    "no average: it goes on from the raw parameters, and its checkpoints hold them"
                )
        reset = self.opt.reset_optim
        if reset == "all":  # fine-tuning: the weights alone; the optimiser, schedule and data start anew
            logger.info(f"-reset_optim all: the weights of {self.opt.train_from}; a new optimiser, from step 0")
            return
        if reset == "states":
            logger.info("-reset_optim states: a new optimiser state, at the checkpoint's step and schedule")
        if ckpt.get("optim") and reset != "states":
            scales = [group["lr_scale"] for group in self.optimizer.param_groups]
            try:
                self.optimizer.load_state_dict(ckpt["optim"])
            except ValueError as exc:  # e.g. a -train_table checkpoint from before the table had its own group
                raise UserError(
                    f"-train_from {self.opt.train_from}: its optimiser state does not fit this "
                    f"model's parameter groups ({exc}); start a new run"
                ) from None
            for group, scale in zip(self.optimizer.param_groups, scales, strict=True):  # this run's -table_lr_scale
                group["lr_scale"] = scale
            set_learning_rate(self.optimizer, self.opt.learning_rate)
        self.progress.update(ckpt["progress"])
        if "best_window" not in ckpt["progress"]:  # written before -early_stopping_window: a window of 1
            self.progress["best_window"] = self.progress["best_score"]
        before = upgrade(ckpt["opt"]).early_stopping_window
        if before != self.opt.early_stopping_window:  # the kept best is a mean over another window: start over
            logger.info(
                f"-early_stopping_window {self.opt.early_stopping_window} (the checkpoint had {before}): "
                "early stopping's running best and its count start again"
            )
            self.progress["best_window"], self.progress["bad_validations"] = None, 0
        metric = ckpt["progress"].get("valid_metric", "loss")  # a checkpoint from before the key followed the loss
        if metric != self.opt.valid_metric:  # a count of another metric's validations must not stop this run
            logger.info(
                f"-valid_metric {self.opt.valid_metric} (the checkpoint followed {metric}): "
                "early stopping's best score and its count start again"
            )
            self.progress.update(fresh_stopping(), valid_metric=self.opt.valid_metric)
        if isinstance(ckpt.get("rng"), dict) and "torch" in ckpt["rng"]:  # else train() has warned already
            note = restore_rng(ckpt["rng"], self.device, self.ctx.rank, self.ctx.world)
            if note:
                logger.warning(f"resume is not exact: {note}")
        if self.trainer.scaler is not None and ckpt.get("scaler"):
            self.trainer.scaler.load_state_dict(ckpt["scaler"])
        self.last_saved = (self.opt.train_from, self.progress["step"])
        logger.info(f"resumed from step {self.progress['step']} (epoch {self.progress['epoch'] + 1})")

    def release_distributed(self):
        """Drop the DistributedDataParallel wrapper before the process group goes: its reducer
        can hold gloo work whose tensors would otherwise be freed during interpreter shutdown,
        when gloo's threads can no longer take the GIL (the rank then aborts at exit, -6)."""
        if isinstance(self.trainer.forward, DistributedDataParallel):
            self.trainer.forward = TrainingForward(self.model)
            gc.collect()

    def save(self, name: str) -> str:
        """Rank 0 writes (atomically); the others only wait for it."""
        path = f"{self.opt.save_model}_{name}.pt"
        rng = rng_state(self.device)
        if self.ctx.distributed:  # every rank's own states, so that each resumes exactly
            rng = dict(rng, ranks=distributed.gather_to_main(rng, self.ctx))
        if not self.ctx.is_main:
            distributed.barrier(self.ctx)
            return path
        with signals_deferred():  # a stop waits for the file, and for the record of it
            # the same step and progress as the checkpoint written last (PREFIX_step_N, then _last, and _best
            # at the run's end): the same bytes, so a second name of that file, not a second copy of the model
            last = self._written
            if not (
                last is not None
                and last[0] == self.progress["step"]
                and last[1] == self.progress
                and os.path.isfile(last[2])
                and atomic_link(last[2], path)
            ):
                with self.averaged() as raw:
                    save_checkpoint(
                        path,
                        self.model,
                        self.optimizer,
                        self.opt,
                        self.src_vocab,
                        self.tgt_vocab,
                        self.progress,
                        lower=self.lower,
                        scaler=self.trainer.scaler,
                        rng=rng,
                        train_params=raw,
                        text=self.text,
                    )
            self._written = (self.progress["step"], copy.deepcopy(self.progress), path)
            if name == "best":
                self.best_saved = (path, self.progress["step"])
            else:
                self.last_saved = (path, self.progress["step"])
            kind = name.split("_")[0]
            if kind in ("step", "epoch") and self.opt.keep_checkpoint > 0:
                self._prune(kind, self.opt.keep_checkpoint)
        distributed.barrier(self.ctx)
        return path

    def _prune(self, kind, keep):
        """-keep_checkpoint N: of this prefix's PREFIX_step_K.pt (or PREFIX_epoch_K.pt) keep the N of the highest K.
        PREFIX_best.pt and PREFIX_last.pt are names of their own (a hard link to a removed name keeps its file)."""
        folder = os.path.dirname(os.path.abspath(self.opt.save_model))
        pattern = re.compile(re.escape(os.path.basename(self.opt.save_model)) + rf"_{kind}_(\d+)\.pt")
        found = sorted((int(m.group(1)), name) for name in os.listdir(folder) if (m := pattern.fullmatch(name)))
        for _, name in found[:-keep]:
            try:
                os.remove(os.path.join(folder, name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning(f"-keep_checkpoint: cannot remove {name} ({(exc.strerror or str(exc)).lower()})")

    def averaged(self):
        """-average_decay: the model holds the average inside the block (yields the raw parameters);
        otherwise a no-op block (yields None)."""
        return self.average.swapped() if self.average is not None else nullcontext()

    def validate(self) -> dict:
        # the continuous losses draw candidate words on validation too: from a fixed seed, so that every validation
        # scores against the same draws, and on the side, so that when and how often a run validates
        # (-valid_steps) does not change its training (the random states are put back afterwards)
        saved = rng_state(self.device)
        torch.manual_seed(self.opt.seed)
        try:
            with self.averaged():
                stats = self.trainer.validate(self.valid)
                if self.valid_bleu is not None:
                    stats.update(self.valid_bleu(self.model, self.device))
        finally:
            restore_rng(saved, self.device)
        extra = (
            f"cosine {stats['cosine']:.4f}; nn accuracy {stats['accuracy']:.2%}"
            if "cosine" in stats
            else f"ppl {stats['ppl']:.2f}; accuracy {stats['accuracy']:.2%}"
        )
        if self.valid_bleu is not None:
            extra += f"; greedy BLEU {stats['bleu']:.2f} (<unk> {stats['unk_share']:.1%} of the output)"
        logger.info(f"validation at step {self.progress['step']}: loss {stats['loss']:.4f}; {extra}")
        if self.board is not None:
            self.board.add("valid", {k: v for k, v in stats.items() if k in VALID_SCALARS}, self.progress["step"])
            self.board.flush()
        metric = self.opt.valid_metric
        # rank 0's result decides for all: a rank that judged "new best" alone would enter the
        # save's barrier while the others went on to their next collective, and the group would hang
        stats[metric] = distributed.from_main(stats[metric], self.ctx)
        pr, higher = self.progress, metric != "loss"
        n = self.opt.early_stopping_window
        if track_validation(pr, stats[metric], higher, n):
            floor = self.best_floor  # the same on every rank, as the score is
            if floor is not None and not is_better(stats[metric], floor[0], higher):
                logger.info(
                    f"new best validation {metric} of this run, but {floor[2]} (step {floor[1]}, "
                    f"{metric} {floor[0]:.4f}, written before the restart) is better: kept"
                )
            else:
                self.best_floor = None
                logger.info(f"new best validation {metric}: wrote {self.save('best')}")
        if n > 1:
            mean = sum(pr["recent_scores"]) / len(pr["recent_scores"])
            logger.info(
                f"mean {metric} of the last {len(pr['recent_scores'])} validations: {mean:.4f} "
                f"(best {pr['best_window']:.4f}; {pr['bad_validations']} without improvement)"
            )
        return stats

    def stop_early(self):
        n = self.opt.early_stopping
        return n > 0 and self.progress["bad_validations"] >= n

    def train(self) -> None:
        opt, pr = self.opt, self.progress
        meter = Meter(self.model.generator.continuous)
        cap = opt.train_steps
        accum = opt.accum_count
        # stop_early(): resuming a run that stopped early must not take one more step
        while pr["epoch"] < opt.epochs and (cap is None or pr["step"] < cap) and not self.stop_early():
            group = []
            batches = self.iterator.epoch(pr["epoch"], pr["shard"], pr["batch"])
            for si, bi, batch in _ending(batches) if accum > 1 else batches:
                if batch is not None:  # None: the epoch ended with fewer than -accum_count batches gathered
                    group.append(batch)
                if not group or (batch is not None and len(group) < accum):
                    continue
                if opt.decay_method != "none":
                    set_learning_rate(self.optimizer, learning_rate(opt, pr["step"] + 1))
                loss, n = self.trainer.train_step(group if accum > 1 else group[0], pr["step"] + 1)
                group = []
                pr["step"] += 1
                if self.average is not None:
                    self.average.update(pr["step"])
                pr["shard"], pr["batch"] = si, bi + 1
                meter.update(loss, n, self.trainer.last_src_tokens, self.trainer.last_stats, pr["step"])
                if pr["step"] % opt.report_every == 0:
                    lr = self.optimizer.param_groups[0]["lr"]
                    logger.info(meter.line(pr["step"], lr))
                    if self.board is not None:
                        self.board.add("train", meter.scalars(lr), pr["step"])
                    meter.reset()
                if opt.valid_steps and pr["step"] % opt.valid_steps == 0:
                    self.validate()
                if pr["step"] % opt.save_checkpoint_steps == 0:
                    self.save(f"step_{pr['step']}")
                if (cap is not None and pr["step"] >= cap) or self.stop_early():
                    break
            else:
                pr["epoch"], pr["shard"], pr["batch"] = pr["epoch"] + 1, 0, 0
                logger.info(f"epoch {pr['epoch']} done at step {pr['step']}")
                if not opt.valid_steps or pr["step"] % opt.valid_steps:
                    self.validate()
                if opt.save_checkpoint_epochs and pr["epoch"] % opt.save_checkpoint_epochs == 0:
                    self.save(f"epoch_{pr['epoch']}")
                if self.stop_early():
                    logger.info(f"early stopping: {pr['bad_validations']} validations without improvement")
                    break
                continue
            if self.stop_early():
                logger.info(f"early stopping: {pr['bad_validations']} validations without improvement")
            break
        if pr["step"] % opt.save_checkpoint_steps:
            self.save(f"step_{pr['step']}")
        logger.info(f"finished at step {pr['step']}: wrote {self.save('last')}")
        if self.ctx.distributed:
            same = distributed.parameters_identical(self.model, self.ctx)
            logger.info(f"parameters identical on all {self.ctx.world} ranks: {'yes' if same else 'NO'}")
            if not same:
                raise RuntimeError("ranks ended with different parameters")
