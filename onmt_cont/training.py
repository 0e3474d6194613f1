"""The training session train.py runs: option checks, the data, model, loss and optimiser of
one run (Run), its loop over epochs, validation, checkpoints and -train_from resumption.

bin/train.py only parses the options and calls train(); tests, tools and benchmarks use the
pieces here (check_options, Run, ValidBleu, load_table) directly."""

import gc
import hashlib
import logging
import math
import os
import random
import re
import signal
import sys
import threading
from contextlib import ExitStack, contextmanager, nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel

from onmt_cont import distributed
from onmt_cont.constants import UNK
from onmt_cont.evaluate import tokenized_bleu
from onmt_cont.inputters.batching import FINAL_PUNCT, ShardedIterator, collate, make_batches
from onmt_cont.inputters.corpus import check_shard, read_shard, shard_examples, shard_paths
from onmt_cont.inputters.vocab import load_vocabs, unigram_log_prior, word_log_frequency
from onmt_cont.losses import CONTINUOUS_LOSSES, build_loss
from onmt_cont.losses.contrastive import DEFAULT_NEGATIVES
from onmt_cont.losses.negatives import parse_sources
from onmt_cont.losses.unlikelihood import NGRAM, UNLIKELIHOOD_LOSSES
from onmt_cont.models.checkpoint import (
    find_resumable,
    fresh_stopping,
    inexact_resume,
    is_better,
    load_checkpoint,
    restore_rng,
    resume_problem,
    rng_state,
    save_checkpoint,
    track_validation,
)
from onmt_cont.models.generators import JointGenerator, ReWEGenerator, frozen_count, parameter_count
from onmt_cont.models.model import architecture, build_model
from onmt_cont.models.transformer import check_alignment_layer, check_sizes
from onmt_cont.trainer import Meter, NonFiniteLoss, ParameterAverage, SequenceUnlikelihood, Trainer, TrainingForward
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import remove_bpe
from onmt_cont.utils.amp import avoid_per_shape_attention, require_autocast
from onmt_cont.utils.board import Board
from onmt_cont.utils.device import resolve_device
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import load_checkpoint_data, remove_stale_temps
from onmt_cont.utils.memory import keep_freed_memory
from onmt_cont.utils.numbers import SEED_MAX
from onmt_cont.utils.threads import MAX_REQUEST, apply_threads, refresh_threads
from onmt_cont.utils.locks import prefix_lock
from onmt_cont.utils.writable import check_log_file, check_writable_folder

# Options that define the network; -train_from takes them from the checkpoint. alignment_layer
# holds no parameter but is the model's -replace_unk alignment: a resumed run that dropped it
# would write checkpoints aligning with another layer.
MODEL_OPTS = ("rnn_size", "word_vec_size", "src_word_vec_size", "tgt_word_vec_size", "enc_layers", "dec_layers",
              "brnn", "generator", "loss", "tie_emb", "joint_dim", "rewe_lambda", "rewe_hidden", "encoder_type",
              "decoder_type", "heads", "transformer_ff", "position_encoding", "max_positions", "alignment_layer",
              "word_bias", "sampling_correction", "expected_counts", "train_table", "word_bias_update",
              "layer_norm", "ff_dropout", "share_embeddings", "share_decoder_embeddings", "vmf_form")
# The learning-rate schedule: -train_from keeps the checkpoint's unless the option is given again
# (a resumed noam run must not fall back to a constant rate; a new -learning_rate is allowed).
SCHEDULE_OPTS = ("learning_rate", "decay_method", "warmup_steps", "table_lr_scale")
# Training-data options -train_from keeps in the same way, so a resumed run sees the same sources.
DATA_OPTS = ("drop_final_punct",)
# and the stopping rule's window: the running best it keeps in the checkpoint is a mean over that many scores
STOPPING_OPTS = ("early_stopping_window",)
# the validation numbers -tensorboard writes (those a run has: cosine for continuous models, ppl for softmax)
VALID_SCALARS = ("loss", "cosine", "accuracy", "ppl", "bleu", "unk_share")
logger = logging.getLogger("onmt_cont.train")


class LogFileHandler(logging.FileHandler):
    """-log_file. A failed write (a full disk) prints one line and stops writing the file, where
    logging's own handler prints a traceback for every later line; the log goes on on stdout."""

    def handleError(self, record):
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            return super().handleError(record)
        print(f"warning: cannot write the log file {self.baseFilename}: {exc.strerror or exc}; it is no longer "
              "written (the log goes on on stdout)", file=sys.stderr)
        logger.removeHandler(self)
        try:
            self.close()
        except OSError:
            pass


def setup_logging(log_file, main=True):
    for h in list(logger.handlers):  # an earlier in-process run's handlers: close its log file
        logger.removeHandler(h)
        if isinstance(h, logging.FileHandler):
            h.close()
    if not main:  # only rank 0 logs
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        return
    logger.setLevel(logging.INFO)
    fmt = logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S")
    handlers = [logging.StreamHandler(sys.stdout)]
    if log_file:
        handlers.append(LogFileHandler(log_file, encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        logger.addHandler(h)


# -num_sampled, -ann_candidates, -num_negatives, -prefix_window: words drawn or compared per batch
# or per token; a step's memory grows with them ([tokens, K] scores), and no vocabulary needs more
MAX_CANDIDATES = 1 << 16
MAX_LAYERS = 1000  # the deepest Transformers trained (DeepNet, 2022) have 1,000 layers


def _check_numbers(opt):
    """Values no combination makes usable: non-finite floats (bin/train.py's parser refuses them
    already; a Namespace built otherwise may hold one), seeds beyond what the generators take,
    negative weights, and counts that would only exhaust the memory."""
    for name, value in sorted(vars(opt).items()):
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"-{name} must be a finite number, got {value}")
    if not 0 <= opt.seed <= SEED_MAX:
        raise UserError(f"-seed must be an integer from 0 to {SEED_MAX}, got {opt.seed}")
    for name, why in (("param_init", "0: PyTorch's init"), ("max_grad_norm", "0: no clipping"), ("margin", ""),
                      ("lambda1", ""), ("lambda2", ""), ("vmf_lambda", "")):
        if getattr(opt, name) < 0:
            raise UserError(f"-{name} must be at least 0{f' ({why})' if why else ''}, got {getattr(opt, name)}")
    for name in ("adam_beta1", "adam_beta2"):
        if not 0.0 <= getattr(opt, name) < 1.0:
            raise UserError(f"-{name} must be in [0, 1), got {getattr(opt, name)}")
    for name in ("enc_layers", "dec_layers"):  # building the model loops over them: bounded before
        if getattr(opt, name) is not None and getattr(opt, name) > MAX_LAYERS:
            raise UserError(f"-{name} must be at most {MAX_LAYERS}, got {getattr(opt, name)}")
    if opt.threads is not None and opt.threads > MAX_REQUEST:  # apply_threads' bound, checked before anything
        raise UserError(f"-threads must be at most {MAX_REQUEST}, got {opt.threads}")
    if not opt.dist_timeout > 0:
        raise UserError(f"-dist_timeout must be a positive number of seconds, got {opt.dist_timeout}")
    for name in ("num_sampled", "ann_candidates", "num_negatives", "prefix_window"):
        if getattr(opt, name) is not None and getattr(opt, name) > MAX_CANDIDATES:
            raise UserError(f"-{name} must be at most {MAX_CANDIDATES} (words per batch or per token; a step's "
                            f"memory grows with it), got {getattr(opt, name)}")


def check_model_size(opt, src_size, tgt_size, table, device):
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
        raise UserError(f"no model of this size can be built (-rnn_size {opt.rnn_size}, -word_vec_size "
                        f"{opt.word_vec_size}, -enc_layers {opt.enc_layers}, -dec_layers {opt.dec_layers}, ...): "
                        f"a size is beyond what a tensor can hold ({str(exc).splitlines()[0][:80]})") from None
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
        raise UserError(f"the model of these options has {trained:,} trained parameters: with their gradients and "
                        f"the optimiser's state {need / 2**30:,.1f} GiB, more than the {have / 2**30:,.1f} GiB of "
                        f"memory of {where} (-rnn_size {opt.rnn_size}, -word_vec_size {opt.word_vec_size}, "
                        f"-enc_layers {opt.enc_layers}, -dec_layers {opt.dec_layers}, ...): choose smaller sizes")


def check_options(opt):
    """The checks argparse cannot make (option combinations, ranges); fills in defaults that
    depend on other options (learning rate, -num_negatives, -negatives)."""
    _check_numbers(opt)
    if opt.early_stopping < 0:
        raise UserError(f"-early_stopping must be 0 (off) or a number of validations, got {opt.early_stopping}")
    if opt.early_stopping_window < 1:
        raise UserError(f"-early_stopping_window must be at least 1 (a number of validations), "
                        f"got {opt.early_stopping_window}")
    if opt.loss in CONTINUOUS_LOSSES and not opt.tgt_emb:
        raise UserError(f"-loss {opt.loss} predicts pretrained target vectors: give -tgt_emb OUT.dec.pt")
    if opt.tie_emb and not opt.tgt_emb:
        raise UserError("-tie_emb uses the pretrained target vectors: give -tgt_emb OUT.dec.pt")
    if opt.loss == "ce" and opt.generator not in ("linear", "joint"):
        raise UserError(f"-loss ce is a softmax loss: -generator {opt.generator} does not fit (use linear or joint)")
    if opt.loss in CONTINUOUS_LOSSES and opt.generator == "joint":
        raise UserError(f"-generator joint is a softmax output layer: use it with -loss ce, not -loss {opt.loss}")
    if opt.generator != "joint":
        for name in ("joint_sample", "joint_dropout"):
            if getattr(opt, name) is not None:
                raise UserError(f"-{name} is only used with -generator joint (got -generator {opt.generator})")
    if opt.rewe_lambda is None and opt.rewe_hidden is not None:
        raise UserError("-rewe_hidden is only used with -rewe_lambda")
    if opt.rewe_lambda is not None:
        if opt.loss != "ce" or opt.generator != "linear":
            raise UserError("-rewe_lambda adds a ReWE head to a softmax model: it needs -loss ce -generator linear "
                            f"(got -loss {opt.loss} -generator {opt.generator})")
        if not opt.tgt_emb:
            raise UserError("-rewe_lambda regresses the pretrained target vectors: give -tgt_emb OUT.dec.pt")
        if not opt.rewe_lambda >= 0:
            raise UserError(f"-rewe_lambda must be at least 0, got {opt.rewe_lambda}")
    if opt.joint_sample is not None and not 0.0 < opt.joint_sample <= 1.0:
        raise UserError(f"-joint_sample must be in (0, 1], got {opt.joint_sample}")
    if opt.joint_dropout is not None and not 0.0 <= opt.joint_dropout < 1.0:
        raise UserError(f"-joint_dropout must be in [0, 1), got {opt.joint_dropout}")
    _check_negatives(opt)
    _check_seq_unlikelihood(opt)
    _check_architecture(opt)
    if opt.valid_remove_bpe and opt.valid_metric != "bleu" and not opt.valid_bleu:
        raise UserError(f"-valid_remove_bpe joins BPE pieces before validation BLEU: it needs -valid_metric bleu "
                        f"or -valid_bleu, not -valid_metric {opt.valid_metric} alone")
    for name in ("batch_size", "valid_batch_size", "rnn_size", "word_vec_size", "src_word_vec_size",
                 "tgt_word_vec_size", "epochs", "report_every",
                 "save_checkpoint_steps", "save_checkpoint_epochs", "train_steps", "joint_dim",
                 "num_negatives", "rewe_hidden", "num_sampled", "ann_candidates", "prefix_window",
                 "seq_unlikelihood_ngram", "seq_unlikelihood_every"):
        if getattr(opt, name) is not None and getattr(opt, name) < 1:
            raise UserError(f"-{name} must be at least 1, got {getattr(opt, name)}")
    if opt.valid_steps < 0:
        raise UserError(f"-valid_steps must be at least 0 (0: at each epoch's end only), got {opt.valid_steps}")
    if not 0.0 <= opt.label_smoothing < 1.0:
        raise UserError(f"-label_smoothing must be in [0, 1), got {opt.label_smoothing}")
    if opt.label_smoothing and opt.loss != "ce":
        raise UserError(f"-label_smoothing smooths the softmax's target distribution: it needs -loss ce, "
                        f"not -loss {opt.loss}")
    if opt.learning_rate is not None and not opt.learning_rate > 0:
        raise UserError(f"-learning_rate must be positive, got {opt.learning_rate}")
    if opt.warmup_steps < 1:
        raise UserError(f"-warmup_steps must be at least 1, got {opt.warmup_steps}")
    if not 0.0 <= opt.average_decay <= 1.0:
        raise UserError(f"-average_decay must be in [0, 1] (0: off; e.g. 1e-4), got {opt.average_decay}")
    if not 0.0 <= opt.drop_final_punct <= 1.0:
        raise UserError(f"-drop_final_punct is a probability in [0, 1] (0: off; e.g. 0.05), got {opt.drop_final_punct}")
    if opt.average_every < 1:
        raise UserError(f"-average_every must be at least 1, got {opt.average_every}")
    if opt.vmf_form != "paper" and opt.loss not in ("nllvmf", "nllvmf_nce"):
        raise UserError(f"-vmf_form {opt.vmf_form} picks the form of the NLLvMF loss: it needs -loss nllvmf or "
                        f"nllvmf_nce, not -loss {opt.loss}")
    if opt.ff_dropout is not None and not 0.0 <= opt.ff_dropout < 1.0:
        raise UserError(f"-ff_dropout must be in [0, 1), got {opt.ff_dropout}")
    if opt.learning_rate is None:
        if opt.decay_method == "inverse_sqrt":
            raise UserError("-decay_method inverse_sqrt needs -learning_rate, its peak (e.g. 0.005)")
        if opt.decay_method == "noam":
            opt.learning_rate = 2.0  # OpenNMT's Transformer factor
        else:
            opt.learning_rate = 5e-4 if opt.loss in CONTINUOUS_LOSSES else 2e-4


def expand_layers(opt, default):
    """-layers N sets -enc_layers and -dec_layers; refused next to either of them."""
    if opt.layers is None:
        return
    given = [f"-{k}" for k in ("enc_layers", "dec_layers") if getattr(opt, k) != default(k)]
    if given:
        raise UserError(f"-layers sets both -enc_layers and -dec_layers: give it or {' / '.join(given)}, not both")
    if opt.layers < 1:
        raise UserError(f"-layers must be at least 1, got {opt.layers}")
    if opt.layers > MAX_LAYERS:
        raise UserError(f"-layers must be at most {MAX_LAYERS}, got {opt.layers}")
    opt.enc_layers = opt.dec_layers = opt.layers
    opt.layers = None  # a resumed run reads -enc_layers / -dec_layers from the checkpoint


def _check_architecture(opt):
    """-encoder_type / -decoder_type and the Transformer's sizes, before anything is built."""
    try:
        enc, dec = architecture(opt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for name in ("enc_layers", "dec_layers"):
        if getattr(opt, name) < 1:
            raise UserError(f"-{name} must be at least 1, got {getattr(opt, name)}")
    if "transformer" in (enc, dec):
        for name in ("heads", "transformer_ff", "max_positions"):
            if getattr(opt, name) < 1:
                raise UserError(f"-{name} must be at least 1, got {getattr(opt, name)}")
        if not 0.0 <= opt.attention_dropout < 1.0:
            raise UserError(f"-attention_dropout must be in [0, 1), got {opt.attention_dropout}")
    sides = (("encoder", enc, "src_word_vec_size"), ("decoder", dec, "tgt_word_vec_size"))
    if opt.alignment_layer is not None and dec != "transformer":
        raise UserError("-alignment_layer picks a Transformer decoder layer's cross-attention: it needs "
                        f"-decoder_type transformer (got -decoder_type {dec})")
    try:
        if "transformer" in (enc, dec):
            check_sizes(opt.rnn_size, opt.heads, [(side, key, getattr(opt, key) or opt.word_vec_size)
                                                  for side, name, key in sides if name == "transformer"])
        check_alignment_layer(opt.alignment_layer, opt.dec_layers)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _bleu_validated(opt):
    """Whether validation decodes: -valid_metric bleu, or -valid_bleu beside another metric."""
    return opt.valid_metric == "bleu" or getattr(opt, "valid_bleu", False)


def learning_rate(opt, step):
    """The learning rate of update ``step`` (1-based): constant, the noam or the inverse_sqrt schedule."""
    if opt.decay_method == "noam":
        return opt.learning_rate * opt.rnn_size ** -0.5 * min(step ** -0.5, step * opt.warmup_steps ** -1.5)
    if opt.decay_method == "inverse_sqrt":
        return opt.learning_rate * min(step / opt.warmup_steps, (opt.warmup_steps / step) ** 0.5)
    return opt.learning_rate


def _check_seq_unlikelihood(opt):
    """-seq_unlikelihood and its two settings; their defaults filled in where it is on."""
    alpha = opt.seq_unlikelihood
    if not (math.isfinite(alpha) and alpha >= 0):
        raise UserError(f"-seq_unlikelihood is a weight: at least 0 (0: off), got {alpha}")
    if alpha == 0:
        for name in ("seq_unlikelihood_ngram", "seq_unlikelihood_every"):
            if getattr(opt, name) is not None:
                raise UserError(f"-{name} sets how -seq_unlikelihood works: give -seq_unlikelihood WEIGHT too")
        return
    if opt.loss not in UNLIKELIHOOD_LOSSES:
        raise UserError(f"-seq_unlikelihood needs a softmax over the vocabulary: -loss "
                        f"{', '.join(UNLIKELIHOOD_LOSSES)}, not -loss {opt.loss}")
    if opt.joint_sample is not None:
        raise UserError("-seq_unlikelihood scores every word: it does not work with -joint_sample")
    if opt.seq_unlikelihood_ngram is None:
        opt.seq_unlikelihood_ngram = NGRAM
    if opt.seq_unlikelihood_every is None:
        opt.seq_unlikelihood_every = 1


def _check_negatives(opt):
    """The contrastive options: refused where the loss does not use them; defaults filled in."""
    contrastive = ("maxmargin", "infonce", "nllvmf_nce")
    if opt.num_negatives is not None and opt.loss not in ("maxmargin", "margin_random"):
        raise UserError(f"-num_negatives is used by -loss maxmargin and margin_random, not -loss {opt.loss}")
    if opt.negatives is not None and opt.loss not in contrastive:
        raise UserError(f"-negatives is used by -loss {', '.join(contrastive)}, not -loss {opt.loss}")
    if opt.loss == "margin_random" and opt.num_negatives is None:
        opt.num_negatives = 5
    if opt.loss == "maxmargin" and opt.num_negatives is None:
        opt.num_negatives = 1
    if opt.loss in contrastive:
        try:
            sources = parse_sources(opt.negatives or DEFAULT_NEGATIVES[opt.loss])
        except ValueError as exc:
            raise UserError(f"-negatives: {exc}") from None
        opt.negatives = ",".join(sources)
    if opt.prefix_window is not None and "prefix" not in (opt.negatives or "").split(","):
        raise UserError("-prefix_window sets how many earlier words -negatives prefix takes: add prefix to "
                        "-negatives (with -loss maxmargin, infonce or nllvmf_nce)")
    if not opt.temperature > 0:
        raise UserError(f"-temperature must be positive, got {opt.temperature}")
    if not opt.contrastive_weight >= 0:
        raise UserError(f"-contrastive_weight must be at least 0, got {opt.contrastive_weight}")
    for name, what in (("word_bias", "changes the logits of"), ("sampling_correction", "changes the logits of"),
                       ("train_table", "trains the target table through the candidates (they keep its words "
                                       "apart) of")):
        if getattr(opt, name) and opt.loss not in ("infonce", "nllvmf_nce"):
            raise UserError(f"-{name} {what} -loss infonce and nllvmf_nce, not -loss {opt.loss}")
    if getattr(opt, "word_bias_update", "dense") == "lazy" and not opt.word_bias:
        raise UserError("-word_bias_update lazy updates the word bias: it needs -word_bias")
    if opt.table_lr_scale != 1 and not opt.train_table:
        raise UserError(f"-table_lr_scale {opt.table_lr_scale} scales the learning rate of a trained target "
                        "table: it needs -train_table")
    if not opt.table_lr_scale > 0:
        raise UserError(f"-table_lr_scale must be positive, got {opt.table_lr_scale}")


def load_table(path, tgt_vocab):
    if not os.path.isfile(path):
        raise UserError(f"-tgt_emb {path}: no such file")
    try:
        table = load_checkpoint_data(path, "a tensor file written by embeddings_to_torch.py")
    except UserError as exc:  # a text, .vec.gz, checkpoint or otherwise unreadable file
        raise UserError(f"-tgt_emb {exc}") from None
    if not isinstance(table, torch.Tensor) or table.dim() != 2 or not table.is_floating_point():
        raise UserError(f"-tgt_emb {path}: expected a float tensor [vocab, dim] written by embeddings_to_torch.py")
    if table.size(0) != len(tgt_vocab):
        raise UserError(f"-tgt_emb {path} has {table.size(0)} rows but the target vocabulary has {len(tgt_vocab)} "
                        "words: run embeddings_to_torch.py with this -data's vocab.pt")
    if not torch.isfinite(table).all():
        raise UserError(f"-tgt_emb {path} holds NaN or inf")
    return table


def check_resumable(ckpt, opt, model, src_vocab, tgt_vocab):
    """Refuse a -train_from checkpoint that does not fit this -data / -tgt_emb, before anything
    is written: load_state_dict would raise a raw size-mismatch error, and a same-size table
    of other vectors would be silently replaced by the checkpoint's."""
    for side, vocab in (("source", src_vocab), ("target", tgt_vocab)):
        saved = ckpt["vocab"]["src" if side == "source" else "tgt"]
        if list(saved) != list(vocab.itos):
            raise UserError(f"{_resumed(opt)} was trained with another {side} vocabulary ({len(saved)} words) than "
                            f"-data {opt.data} ({len(vocab)} words): "
                            + _another_run(opt, "resume with the same -data"))
    own = model.state_dict()
    fixed = {n for n, p in model.named_parameters() if not p.requires_grad} | {n for n, _ in model.named_buffers()}
    for name, tensor in ckpt["model"].items():
        mine = own.get(name)
        if mine is None or not isinstance(tensor, torch.Tensor):
            continue  # load_state_dict reports missing and unexpected keys below
        if mine.shape != tensor.shape:
            what = f"-tgt_emb {opt.tgt_emb}" if name in fixed else "the model built from these options"
            raise UserError(f"{_resumed(opt)}: {name} is {list(tensor.shape)} in the checkpoint but "
                            f"{list(mine.shape)} in {what}: "
                            + _another_run(opt, "resume with the table and options it was trained with"))
        if name in fixed and opt.tgt_emb and mine.is_floating_point() and not torch.equal(mine, tensor.to(mine)):
            raise UserError(f"-tgt_emb {opt.tgt_emb} holds other vectors than the table {_resumed(opt)} was trained "
                            f"with ({name}): " + _another_run(opt, "resume with the same table"))
    try:
        model.load_state_dict(ckpt["model"])
    except (RuntimeError, TypeError) as exc:
        raise UserError(f"{_resumed(opt)} does not fit the model built from these options: "
                        f"{str(exc)[:300]}; "
                        + _another_run(opt, "resume with the options it was trained with")) from None


def make_optimizer(opt, model, fused=None):
    """Adam or SGD over the trainable parameters. A trained target table (-train_table) is a group
    of its own whose "lr_scale" (-table_lr_scale) multiplies every learning rate set on it.

    Adam on the CPU is fused (one kernel over every tensor): PyTorch's default there is a loop over
    the tensors, and the fused step is several times faster, which shows in a small model's update
    on one thread (bench/optimizer_step.py). The result agrees with the loop to float rounding. On a
    GPU PyTorch's default (foreach) stays. ``fused``: True or False forces it either way (the benchmark's comparison);
    None chooses as above."""
    table = getattr(model.generator, "table", None)
    table = table if isinstance(table, torch.nn.Parameter) else None
    params = [p for p in model.parameters() if p.requires_grad and p is not table]
    groups = [{"params": params, "lr_scale": 1.0}]
    if table is not None:
        groups.append({"params": [table], "lr_scale": opt.table_lr_scale})
    for group in groups:
        group["lr"] = opt.learning_rate * group["lr_scale"]
    if opt.optim == "adam":
        if fused is None:
            on_cpu = all(p.device.type == "cpu" for group in groups for p in group["params"])
            impl = {"fused": True} if on_cpu else {}
        else:
            impl = {"fused": True} if fused else {"foreach": False}
        return torch.optim.Adam(groups, lr=opt.learning_rate, betas=(opt.adam_beta1, opt.adam_beta2), **impl)
    return torch.optim.SGD(groups, lr=opt.learning_rate)


def set_learning_rate(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr * group["lr_scale"]


def report_parameters(model):
    emb = model.decoder.embeddings
    logger.info(f"parameters: encoder {parameter_count(model.encoder):,}; decoder "
                f"{parameter_count(model.decoder) - parameter_count(emb):,}")
    logger.info(f"input layer (decoder embeddings): {parameter_count(emb):,} trainable, {frozen_count(emb):,} frozen")
    gen = model.generator
    if isinstance(gen, JointGenerator):
        d_j, d = gen.word_proj.weight.shape
        logger.info(f"output layer (joint generator): {parameter_count(gen):,} trainable = U {d_j}x{d} + b_u {d_j} + "
                    f"V {d_j}x{gen.context_proj.in_features} + b_v {d_j} + b {gen.bias.numel()}; "
                    "E is the decoder's input embeddings (counted above)")
        return
    head = parameter_count(gen.head) if isinstance(gen, ReWEGenerator) else 0
    table = "the embedding table trained (-train_table)" if getattr(gen, "trains_table", False) else \
        f"{frozen_count(gen):,} frozen (embedding table)"
    logger.info(f"output layer (generator): {parameter_count(gen) - head:,} trainable, {table}")
    if isinstance(gen, ReWEGenerator):
        w1, w2 = gen.head.w1, gen.head.w2
        logger.info(f"ReWE head: {head:,} trainable = W1 {w1.out_features}x{w1.in_features} + b1 + "
                    f"W2 {w2.out_features}x{w2.in_features} + b2 (training only; ignored at inference)")


class ValidBleu:
    """BLEU of greedy decoding of the validation shard, with translate.py's Translator (no
    -replace_unk: model selection sees the model's own words). References are the shard's target
    text; shards from an older preprocess.py hold only ids, so the references' unknown words are
    then written as a token no output can match (a pessimistic but consistent score). With
    ``join_bpe`` (-valid_remove_bpe) the subword-nmt pieces of the output and of the references are
    joined first, so the score is over words, as translate.py -remove_bpe scores a test set."""

    def __init__(self, examples, tgt_text, src_vocab, tgt_vocab, batch_size, join_bpe=False):
        self.src_lines = [" ".join(src_vocab.decode(src.tolist())) for src, _ in examples]
        if tgt_text is None:
            logger.warning("the validation shard has no target text (made by an older preprocess.py): BLEU "
                           "references have <unk> where the vocabulary lacks a word; rerun preprocess.py to fix")
            tgt_text = [" ".join(tok if tok != UNK else "<unk-ref>" for tok in tgt_vocab.decode(tgt.tolist()))
                        for _, tgt in examples]
        self.join_bpe = join_bpe
        self.refs = [remove_bpe(line) for line in tgt_text] if join_bpe else tgt_text
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.batch_size = batch_size

    def __call__(self, model, device):
        translator = Translator.from_model(model, self.src_vocab, self.tgt_vocab, False, device)
        with torch.no_grad():
            hyps = translator.translate_lines(self.src_lines, self.batch_size)
        if self.join_bpe:
            hyps = [remove_bpe(line) for line in hyps]
        return {"bleu": tokenized_bleu(hyps, self.refs)[0],
                "unk_share": translator.unk_out / max(translator.words_out, 1)}


class Run:
    """Everything one training run holds, and the loop over epochs."""

    def __init__(self, opt, device, ctx=None):
        self.opt = opt
        self.device = device
        self.ctx = ctx if ctx is not None else distributed.Context()
        self.src_vocab, self.tgt_vocab, vocab_data = load_vocabs(opt.data + ".vocab.pt")
        self.lower = bool(vocab_data.get("lower", False))  # translate.py lowercases input the same way
        self.notes, self.warnings = [], []  # for the log, once it is set up
        self.train_paths = shard_paths(opt.data, "train")
        valid_path = shard_paths(opt.data, "valid")[0]
        valid_data = self._check_shards(self.train_paths, valid_path)
        valid_examples = shard_examples(valid_data)
        self.valid = [collate(valid_examples, b, device)
                      for b in make_batches(valid_examples, opt.valid_batch_size, "sents")]
        valid_text = list(valid_data["tgt_text"]) if valid_data.get("tgt_text") is not None else None
        self.valid_bleu = ValidBleu(valid_examples, valid_text, self.src_vocab, self.tgt_vocab,
                                    opt.valid_batch_size, opt.valid_remove_bpe) if _bleu_validated(opt) else None
        if getattr(opt, "share_embeddings", False) and list(self.src_vocab.itos) != list(self.tgt_vocab.itos):
            raise UserError(f"-share_embeddings needs one vocabulary for both sides, but -data {opt.data} has a "
                            f"source vocabulary of {len(self.src_vocab)} and a target vocabulary of "
                            f"{len(self.tgt_vocab)} words that differ: preprocess with -share_vocab")
        table = load_table(opt.tgt_emb, self.tgt_vocab) if opt.tgt_emb else None
        self._check_ranks_agree(table, valid_path)
        check_model_size(opt, len(self.src_vocab), len(self.tgt_vocab), table, device)
        torch.manual_seed(opt.seed)
        random.seed(opt.seed)
        try:
            self.model = build_model(opt, len(self.src_vocab), len(self.tgt_vocab), table).to(device)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        self.optimizer = make_optimizer(opt, self.model)
        gen_table = getattr(self.model.generator, "table", None)
        forward = TrainingForward(self.model)
        # the unigram and sentence rules read the training counts; batch counts need none
        counted = opt.sampling_correction and opt.expected_counts in ("unigram", "sentence")
        loss_fn = build_loss(opt, gen_table, self._log_prior(device) if counted else None)
        amp = {"bf16": torch.bfloat16, "fp16": torch.float16}[opt.amp_dtype] if opt.amp else None
        if amp is not None:  # before DDP wraps the model and before any log or checkpoint is written
            require_autocast(forward, loss_fn, device, amp)
        # only the Transformer attends through scaled_dot_product_attention
        self.amp_note = avoid_per_shape_attention(device, amp) if "transformer" in architecture(opt) else None
        if self.ctx.distributed:
            # a ReWE head at lambda 0 is left out of the graph: DDP must be told some parameters go unused
            unused = getattr(opt, "rewe_lambda", None) == 0
            forward = distributed.wrap(forward, device, find_unused_parameters=unused)
        seq_ul = SequenceUnlikelihood(opt.seq_unlikelihood, opt.seq_unlikelihood_ngram, opt.seq_unlikelihood_every,
                                      opt.loss, opt.temperature) if opt.seq_unlikelihood else None
        lazy = [self.model.generator.bias] if getattr(opt, "word_bias_update", "dense") == "lazy" else None
        self.trainer = Trainer(self.model, loss_fn, self.optimizer, opt.max_grad_norm,
                               forward, self.ctx, amp, measure_every=opt.report_every, seq_unlikelihood=seq_ul,
                               lazy=lazy, normalization=getattr(opt, "normalization", "tokens"))
        # -average_decay: validation and checkpoints see the average, training the raw parameters
        self.average = ParameterAverage(self.model, opt.average_decay, opt.average_every) if opt.average_decay else None
        # fresh_stopping(): the best score, -early_stopping's count, -early_stopping_window's last N scores
        # and the best mean of N so far
        self.progress = {"step": 0, "epoch": 0, "shard": 0, "batch": 0, **fresh_stopping(),
                         "valid_metric": opt.valid_metric}
        self.board = None  # -tensorboard: train() gives rank 0 one
        self.best_floor = None  # -resume auto: (score, step, path) of a PREFIX_best.pt to keep (kept_best)
        self.last_saved = None  # (path, step) of the newest step, epoch or last checkpoint of this run
        self.best_saved = None  # (path, step) of the PREFIX_best.pt this run wrote last
        self.iterator = ShardedIterator(self.train_paths, opt.batch_size, opt.batch_type, opt.seed, device,
                                        self.ctx.rank, self.ctx.world, opt.drop_final_punct, self._punct_ids())

    def _check_ranks_agree(self, table, valid_path):
        """Under torchrun every rank must read the same inputs: a rank with another table of the same
        shape trained on with 'parameters identical on all ranks: yes' (the frozen table is not
        compared), and one with other shards hung the group until -dist_timeout. The ranks compare
        digests of what they read and stop together, naming the ranks and the inputs that differ."""
        if not self.ctx.distributed:
            return
        def digest(*chunks):
            h = hashlib.sha256()
            for chunk in chunks:
                h.update(chunk if isinstance(chunk, bytes) else str(chunk).encode("utf-8"))
            return h.hexdigest()

        parts = {
            "vocabularies (-data PREFIX.vocab.pt)": digest("\n".join(self.src_vocab.itos), "\0",
                                                         "\n".join(self.tgt_vocab.itos)),
            "training shards (-data PREFIX.train.N.pt: their number and sizes)": digest(
                *[f"{os.path.basename(p)}:{os.path.getsize(p)};" for p in sorted(self.train_paths)]),
            "validation shard (-data PREFIX.valid.0.pt)": digest(os.path.getsize(valid_path)),
            "target table (-tgt_emb)": digest(table.contiguous().numpy().tobytes()) if table is not None else "none",
        }
        differ = distributed.inputs_differ(parts, self.ctx)
        if differ:
            said = "; ".join(f"rank {rank}: {', '.join(names)}" for rank, names in sorted(differ.items()))
            raise UserError(f"torchrun: ranks read other inputs than rank 0 ({said}): every rank must be given the "
                            "same -data and -tgt_emb files (on every node); nothing was written")

    def _check_shards(self, train_paths, valid_path):
        """Every shard's ids index this -data's vocabularies (corpus.check_shard), before training:
        a shard of another vocabulary is refused, not found at the first validation (an index
        error) or never (ids in range: training on the wrong words). -> the validation shard's data."""
        vocab_path = self.opt.data + ".vocab.pt"
        unmarked = []
        for path in train_paths:
            if not check_shard(path, read_shard(path), self.src_vocab, self.tgt_vocab, vocab_path):
                unmarked.append(path)
        valid = read_shard(valid_path)
        if not check_shard(valid_path, valid, self.src_vocab, self.tgt_vocab, vocab_path):
            unmarked.append(valid_path)
        if unmarked:
            more = f" and {len(unmarked) - 1} more" if len(unmarked) > 1 else ""
            self.warnings.append(f"{unmarked[0]}{more} record no vocabulary fingerprint (made by an older "
                                 f"preprocess.py): only their ids' range could be checked against {vocab_path}; "
                                 "rerun preprocess.py to have them checked")
        return valid

    def _punct_ids(self):
        """-drop_final_punct: the ids of . ! ? in the source and the target vocabulary (an error
        where the source vocabulary has none)."""
        if not self.opt.drop_final_punct:
            return (), ()
        src, tgt = ([v.stoi[w] for w in FINAL_PUNCT if w in v.stoi] for v in (self.src_vocab, self.tgt_vocab))
        if not src:
            raise UserError(f"-drop_final_punct: the source vocabulary of {self.opt.data}.vocab.pt has none of "
                            f"{' '.join(FINAL_PUNCT)}, so there is nothing to drop")
        return src, tgt

    def _log_prior(self, device):
        rule = self.opt.expected_counts
        try:
            prior = word_log_frequency if rule == "sentence" else unigram_log_prior
            return prior(self.tgt_vocab).to(device)
        except ValueError as exc:
            raise UserError(f"-sampling_correction -expected_counts {rule}: {self.opt.data}.vocab.pt: {exc}") from None

    def resume(self, ckpt):
        self.model.load_state_dict(ckpt["model"])  # the average, where the checkpoint kept one
        if self.average is not None:
            self.average.load_state_dict(ckpt["model"])
        raw = ckpt.get("train_model")
        if self.opt.train_from_average:  # train() checked that the checkpoint holds an average
            logger.info(f"-train_from_average: training goes on from the moving average of {self.opt.train_from}")
        elif raw is not None:  # the parameters training goes on from
            self.model.load_state_dict(raw, strict=False)
            if self.average is None:
                logger.warning(f"-train_from {self.opt.train_from} was trained with -average_decay; this run keeps "
                               "no average: it goes on from the raw parameters, and its checkpoints hold them")
        if ckpt.get("optim"):
            scales = [group["lr_scale"] for group in self.optimizer.param_groups]
            try:
                self.optimizer.load_state_dict(ckpt["optim"])
            except ValueError as exc:  # e.g. a -train_table checkpoint from before the table had its own group
                raise UserError(f"-train_from {self.opt.train_from}: its optimiser state does not fit this "
                                f"model's parameter groups ({exc}); start a new run") from None
            for group, scale in zip(self.optimizer.param_groups, scales, strict=True):  # this run's -table_lr_scale
                group["lr_scale"] = scale
            set_learning_rate(self.optimizer, self.opt.learning_rate)
        self.progress.update(ckpt["progress"])
        if "best_window" not in ckpt["progress"]:  # written before -early_stopping_window: a window of 1
            self.progress["best_window"] = self.progress["best_score"]
        before = ckpt["opt"].get("early_stopping_window", 1)
        if before != self.opt.early_stopping_window:  # the kept best is a mean over another window: start over
            logger.info(f"-early_stopping_window {self.opt.early_stopping_window} (the checkpoint had {before}): "
                        "early stopping's running best and its count start again")
            self.progress["best_window"], self.progress["bad_validations"] = None, 0
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

    def save(self, name):
        """Rank 0 writes (atomically); the others only wait for it."""
        path = f"{self.opt.save_model}_{name}.pt"
        rng = rng_state(self.device)
        if self.ctx.distributed:  # every rank's own states, so that each resumes exactly
            rng = dict(rng, ranks=distributed.gather_to_main(rng, self.ctx))
        if not self.ctx.is_main:
            distributed.barrier(self.ctx)
            return path
        with signals_deferred():  # a stop waits for the file, and for the record of it
            with self.averaged() as raw:
                save_checkpoint(path, self.model, self.optimizer, self.opt, self.src_vocab, self.tgt_vocab,
                                self.progress, lower=self.lower, scaler=self.trainer.scaler, rng=rng, train_params=raw)
            if name == "best":
                self.best_saved = (path, self.progress["step"])
            else:
                self.last_saved = (path, self.progress["step"])
        distributed.barrier(self.ctx)
        return path

    def averaged(self):
        """-average_decay: the model holds the average inside the block (yields the raw parameters);
        otherwise a no-op block (yields None)."""
        return self.average.swapped() if self.average is not None else nullcontext()

    def validate(self):
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
        extra = (f"cosine {stats['cosine']:.4f}; nn accuracy {stats['accuracy']:.2%}" if "cosine" in stats
                 else f"ppl {stats['ppl']:.2f}; accuracy {stats['accuracy']:.2%}")
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
        if pr.get("valid_metric", "loss") != metric:  # a resumed run that changed -valid_metric
            pr.update(fresh_stopping())
        pr["valid_metric"] = metric
        n = self.opt.early_stopping_window
        if track_validation(pr, stats[metric], higher, n):
            floor = self.best_floor  # the same on every rank, as the score is
            if floor is not None and not is_better(stats[metric], floor[0], higher):
                logger.info(f"new best validation {metric} of this run, but {floor[2]} (step {floor[1]}, "
                            f"{metric} {floor[0]:.4f}, written before the restart) is better: kept")
            else:
                self.best_floor = None
                logger.info(f"new best validation {metric}: wrote {self.save('best')}")
        if n > 1:
            mean = sum(pr["recent_scores"]) / len(pr["recent_scores"])
            logger.info(f"mean {metric} of the last {len(pr['recent_scores'])} validations: {mean:.4f} "
                        f"(best {pr['best_window']:.4f}; {pr['bad_validations']} without improvement)")
        return stats

    def stop_early(self):
        n = self.opt.early_stopping
        return n > 0 and self.progress["bad_validations"] >= n

    def train(self):
        opt, pr = self.opt, self.progress
        meter = Meter(self.model.generator.continuous)
        cap = opt.train_steps
        # stop_early(): resuming a run that stopped early must not take one more step
        while pr["epoch"] < opt.epochs and (cap is None or pr["step"] < cap) and not self.stop_early():
            for si, bi, batch in self.iterator.epoch(pr["epoch"], pr["shard"], pr["batch"]):
                if opt.decay_method != "none":
                    set_learning_rate(self.optimizer, learning_rate(opt, pr["step"] + 1))
                loss, n = self.trainer.train_step(batch, pr["step"] + 1)
                pr["step"] += 1
                if self.average is not None:
                    self.average.update(pr["step"])
                pr["shard"], pr["batch"] = si, bi + 1
                meter.update(loss, n, self.trainer.last_src_tokens, self.trainer.last_stats, pr["step"])
                changed = refresh_threads()  # -threads left to the default: follow other jobs' claims
                if changed:
                    logger.info(f"threads {changed[0]} -> {changed[1]}: other jobs now claim "
                                f"{'more' if changed[1] < changed[0] else 'fewer'} cores (-threads sets a fixed count)")
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
    return (f"it belongs to another run: give this one its own -save_model (or move that run's files away), "
            f"or, to continue that run, {remedy}")


def _take_checkpoint_options(opt, ckpt, default):
    """-train_from / -resume auto: model options left at their default take the checkpoint's, and
    one given otherwise must match it; schedule, data and stopping options left out too."""
    saved = dict(ckpt["opt"])
    if saved.get("sampling_correction") and "expected_counts" not in saved:
        saved["expected_counts"] = "unigram"  # the only rule before -expected_counts existed
    for k in MODEL_OPTS:
        if k in saved:
            given = getattr(opt, k)
            if given != default(k) and given != saved[k]:
                raise UserError(f"-{k} {given} conflicts with {_resumed(opt)} (trained with -{k} {saved[k]}); "
                                + _another_run(opt, f"leave -{k} out to resume"))
            setattr(opt, k, saved[k])
    # left out on resume: the checkpoint's; given: the new value
    for k in SCHEDULE_OPTS + DATA_OPTS + STOPPING_OPTS:
        if k in ckpt["opt"] and getattr(opt, k) == default(k):
            setattr(opt, k, ckpt["opt"][k])


def kept_best(opt, ckpt):
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
        return None, (f"-resume auto: {path} records no validation score: it will be replaced at this run's first "
                      "validation")
    if metric != opt.valid_metric:
        return None, (f"-resume auto: {path} is the best by -valid_metric {metric}, this run follows "
                      f"{opt.valid_metric}: it will be replaced at this run's first validation")
    resumed = ckpt["progress"] if ckpt is not None else {}
    reached = resumed.get("best_score") if resumed.get("valid_metric", "loss") == metric else None
    if reached is not None and not is_better(score, reached, higher=metric != "loss"):
        return None, None  # the resumed state has reached it (the same run's best, or a better one)
    so_far = f"{metric} {reached:.4f}" if reached is not None else "no validation yet"
    return (score, pr.get("step"), path), (
        f"-resume auto: kept {path} (step {pr.get('step')}, validation {metric} {score:.4f}): it is better than what "
        f"the resumed state has reached ({so_far}); it is replaced only by a better validation")


def train(opt, default):
    """Check the parsed options ``opt`` (an argparse namespace of bin/train.py's parser), build the
    run and train it to the end. ``default(name)`` is the parser's default of an option: with
    -train_from, a model option left at its default takes the checkpoint's value, and one given
    otherwise must match it. Returns the finished Run. Ctrl-C, or SIGTERM to a single process,
    ends it with one line saying what was kept, and the exit status 128 + the signal's number."""
    start = Start()
    try:
        with ExitStack() as held:
            ctx, threads = _prepare(opt, default, start, held)
            with distributed.stop_on_sigterm(ctx), stop_on_sigterm_alone(ctx):
                return _train(opt, ctx, threads, start)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM to a single process (Stopped)
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        line = f"stopped by {signal.Signals(signum).name} {start.kept()}"
        if start.logging:
            logger.warning(line)
        else:  # before the log was set up
            print(line, file=sys.stderr)
        raise SystemExit(128 + signum) from None


def _check_save_model(opt):
    if opt.save_model.endswith(("/", os.sep)) or os.path.isdir(opt.save_model):  # would write hidden _last.pt
        raise UserError(f"-save_model {opt.save_model} is a folder: -save_model takes a prefix, such as "
                        f"{os.path.join(opt.save_model, 'model')} (files PREFIX_step_N.pt, PREFIX_best.pt, ...)")
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
        raise UserError(f"-data {opt.data} is a file: -data takes the prefix given to preprocess.py -save_data "
                        "(the files are PREFIX.vocab.pt, PREFIX.train.N.pt, PREFIX.valid.0.pt)")
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
        raise UserError("-train_from_average picks the parameters of the -train_from checkpoint: give -train_from "
                        "(not -resume auto, whose restarts must go on from their own parameters)")
    if opt.train_from:
        ckpt = ckpt or load_checkpoint(opt.train_from)
        problem = resume_problem(ckpt)
        if problem:
            raise UserError(f"-train_from {opt.train_from}: cannot go on from it: {problem}")
        warnings += [f"-train_from {opt.train_from}: {note}" for note in inexact_resume(ckpt)]
        if opt.train_from_average and "train_model" not in ckpt:
            raise UserError(f"-train_from_average: {opt.train_from} holds no moving average (it was trained without "
                            "-average_decay): leave the flag out")
        _take_checkpoint_options(opt, ckpt, default)
    check_options(opt)
    save_dir = _check_save_model(opt)
    if opt.log_file:
        check_log_file(opt.log_file)
    if opt.resume == "auto":
        start.best_floor, note = kept_best(opt, ckpt)
        notes += [note] if note else []
    if opt.amp and opt.amp_dtype == "fp16" and opt.gpu is None:
        raise UserError("-amp -amp_dtype fp16 needs a GPU (-gpu); on CPU use -amp_dtype bf16")
    start.ckpt, start.save_dir = ckpt, save_dir
    if os.environ.get("RANK", "0") == "0":  # two runs on one prefix would interleave their checkpoints
        held.enter_context(prefix_lock(opt.save_model, "-save_model"))
    threads = apply_threads(opt.threads)
    keep_freed_memory()  # a step's big tensors reuse the pages the last step freed (onmt_cont.utils.memory)
    return distributed.init(use_gpu=opt.gpu is not None, timeout_s=opt.dist_timeout), threads


class Stopped(KeyboardInterrupt):
    """SIGTERM to a single train.py: unwinds like Ctrl-C (a checkpoint being written is removed)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_deferred():
    """Ctrl-C and SIGTERM wait until the block has run: a checkpoint being written is finished, then
    the signal is delivered again to the handlers that were in place (the run stops as it would
    have). An exception raised inside torch.save's writer was masked by the error of its half-written
    zip file: a traceback, where one line was due. The main thread only (signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []

    def hold(signum, frame):
        pending.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    for s in dict.fromkeys(pending):
        signal.raise_signal(s)


@contextmanager
def stop_on_sigterm_alone(ctx):
    """A single process (the main thread): SIGTERM raises :class:`Stopped`, so the run ends with a
    line saying what was kept; torchrun's ranks have :func:`distributed.stop_on_sigterm`."""
    if ctx.distributed or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
        best = (f"; {run.best_saved[0]} holds its best validated model (step {run.best_saved[1]})"
                if run.best_saved else "")
        if run.last_saved is None:
            return f"at step {step}, before this run's first checkpoint{best or '; nothing of it was written'}"
        path, at = run.last_saved
        since = f"; the {step - at} step(s) since are lost" if step > at else ""
        return (f"at step {step}; the last checkpoint is {path} (step {at}){since}{best}. To go on: the same "
                f"command with -resume auto, or -train_from {path}")


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
            logger.warning(f"cannot remove the partial checkpoint files of a killed run in {start.save_dir} "
                           f"({(exc.strerror or str(exc)).lower()}); remove the .tmp-* files there yourself")
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
    extra = "".join(f" -{k} {getattr(opt, k)}" for k in ("rewe_lambda", "joint_sample", "negatives", "num_negatives")
                    if getattr(opt, k) is not None)
    enc, dec = architecture(opt)
    tie = "".join(f" -{k}" for k in ("tie_emb", "word_bias", "sampling_correction", "train_table") if getattr(opt, k))
    if opt.train_table and opt.table_lr_scale != 1:
        tie += f" -table_lr_scale {opt.table_lr_scale:g}"
    logger.info(f"model: -encoder_type {enc} -decoder_type {dec} -loss {opt.loss} -generator {opt.generator}"
                f"{tie}{extra}; "
                f"device {device}{f' ({threads} threads)' if device.type == 'cpu' else ''}; lr {opt.learning_rate}")
    report_parameters(run.model)
    if run.amp_note:
        logger.info(run.amp_note)
    if opt.drop_final_punct:
        logger.info(f"training data: -drop_final_punct {opt.drop_final_punct:g}: a pair whose source ends with "
                    f"{' '.join(FINAL_PUNCT)} loses it, and its target its own, with this probability, drawn anew "
                    "each epoch")
    if ctx.distributed:
        logger.info(f"distributed: {ctx.world} processes ({'nccl' if device.type == 'cuda' else 'gloo'}); "
                    f"each takes 1/{ctx.world} of every batch of -batch_size {opt.batch_size}")
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
