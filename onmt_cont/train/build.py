"""From options to the parts of a run: the target table, the model, the loss, the optimiser and
the Trainer; train.py's Run and the benchmarks build them the same way."""

import os
import random
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass

import torch

from onmt_cont import distributed
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.losses import build_loss
from onmt_cont.losses.unlikelihood import SequenceUnlikelihood
from onmt_cont.models.architecture import DECODERS, ENCODERS, architecture
from onmt_cont.models.generators import ReWEGenerator, SoftmaxGenerator
from onmt_cont.models.model import build_model
from onmt_cont.opts import upgrade
from onmt_cont.train.average import ParameterAverage
from onmt_cont.train.optim import make_optimizer
from onmt_cont.train.step import Trainer, TrainingForward, greedy_decodes
from onmt_cont.utils.amp import avoid_per_shape_attention, fast_bf16_cpu, require_autocast
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.loading import load_checkpoint_data


def load_table(path: str, tgt_vocab: Vocab) -> torch.Tensor:
    """-tgt_emb: the target table [vocab, dim] embeddings_to_torch.py wrote, checked against the vocabulary."""
    if not os.path.isfile(path):
        raise UserError(f"-tgt_emb {path}: no such file")
    try:
        table = load_checkpoint_data(path, "a tensor file written by embeddings_to_torch.py")
    except UserError as exc:  # a text, .vec.gz, checkpoint or otherwise unreadable file
        raise UserError(f"-tgt_emb {exc}") from None
    if not isinstance(table, torch.Tensor) or table.dim() != 2 or not table.is_floating_point():
        raise UserError(f"-tgt_emb {path}: expected a float tensor [vocab, dim] written by embeddings_to_torch.py")
    if table.size(0) != len(tgt_vocab):
        raise UserError(
            f"-tgt_emb {path} has {table.size(0)} rows but the target vocabulary has {len(tgt_vocab)} "
            "words: run embeddings_to_torch.py with this -data's vocab.pt"
        )
    if not torch.isfinite(table).all():
        raise UserError(f"-tgt_emb {path} holds NaN or inf")
    return table


AUTO_BF16_LOSSES = ("ce", "nllvmf_nce")  # -amp auto's bfloat16: the losses whose curves were measured against fp32


def amp_dtype(opt, device=None):
    """-amp -amp_dtype on ``device`` -> (the autocast dtype or None, a line for the log or None).

    -amp auto picks bfloat16 where it was measured to pay at the same learning curve: a Transformer trained with
    -loss ce or nllvmf_nce (the presets' losses) on a CPU whose bfloat16 products run on bfloat16 instructions
    (lab/bench/tiny_step.py; the first 1,000 updates of both Tiny presets, two seeds a side, in docs/benchmarks.md);
    elsewhere float32, as before."""
    amp = upgrade(opt).amp  # checkpoints' options before -amp auto hold True or False
    if amp != "auto":
        return ({"bf16": torch.bfloat16, "fp16": torch.float16}[opt.amp_dtype] if amp else None), None
    if device is None or device.type != "cpu":
        return None, None
    enc, dec = architecture(opt)
    if (
        not (ENCODERS[enc].auto_bf16 and DECODERS[dec].auto_bf16)
        or opt.loss not in AUTO_BF16_LOSSES
        or opt.amp_dtype != "bf16"
    ):
        return None, None
    fast, why = fast_bf16_cpu()
    if not fast:
        return None, f"-amp auto: float32 ({why}; bfloat16 products would be slower)"
    return torch.bfloat16, (
        f"-amp auto: bfloat16 autocast ({why}); the attention's softmax, the loss and the "
        "optimiser stay in float32. -amp false trains in float32"
    )


def slow_amp_warning(dtype, device):
    """A warning for the log where -amp true's ``dtype`` is bfloat16 on a CPU without bfloat16 dot products, else None.

    oneDNN then converts every bfloat16 product: on an AVX2 CPU the continuous Transformer-Tiny update took 8.1x
    float32's time (lab/results/tiny_step/tiny_step_avx2_amp_true.txt)."""
    if dtype is not torch.bfloat16 or device is None or device.type != "cpu":
        return None
    fast, why = fast_bf16_cpu()
    if fast:
        return None
    return (
        f"-amp true: bfloat16 autocast although {why}: its products are converted, and an update can take 8 times "
        "as long as in float32; -amp auto trains in float32 here"
    )


@dataclass
class Parts:
    """What :func:`build` makes: the model and what trains it."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable
    trainer: Trainer
    average: ParameterAverage | None  # -average_decay
    amp_note: str | None  # a line for the log about -amp auto's choice and attention under autocast, or None
    amp_warning: str | None = None  # a warning for the log: -amp true's bfloat16 on a CPU that makes it slow


def build(
    opt: Namespace,
    src_size: int,
    tgt_size: int,
    table: torch.Tensor | None,
    device: torch.device,
    ctx: distributed.Context | None = None,
    log_prior: torch.Tensor | None = None,
    amp: torch.dtype | None | str = "opt",
    fused: bool | None = None,
) -> Parts:
    """The model (seeded with -seed), its optimiser, loss and Trainer as train.py builds them from the
    checked options ``opt``. ``table``: the target table [tgt_size, dim] (None where the model keeps
    none); ``log_prior``: log p_train(w) for -sampling_correction's unigram and sentence rules;
    ``ctx``: under torchrun the forward is wrapped in DistributedDataParallel; ``amp``: the autocast
    dtype, by default -amp's; ``fused``: make_optimizer's choice of Adam (None: by device)."""
    ctx = ctx if ctx is not None else distributed.Context()
    opt = upgrade(opt)
    torch.manual_seed(opt.seed)
    random.seed(opt.seed)
    try:
        model = build_model(opt, src_size, tgt_size, table).to(device)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    optimizer = make_optimizer(opt, model, fused=fused)
    forward = TrainingForward(model)
    loss_fn = build_loss(opt, getattr(model.generator, "table", None), log_prior)
    # -loss ce on a softmax (with or without ReWE): the loss computes the logits itself, in chunks
    # (onmt_cont.losses.linear_ce)
    model.generator.defer_logits = type(model.generator) in (SoftmaxGenerator, ReWEGenerator) and opt.loss == "ce"
    amp, auto_note = amp_dtype(opt, device) if amp == "opt" else (amp, None)
    amp_warning = slow_amp_warning(amp, device) if upgrade(opt).amp is True else None
    if amp is not None:  # before DDP wraps the model and before any log or checkpoint is written
        require_autocast(forward, loss_fn, device, amp)
    enc, dec = architecture(opt)
    sdpa = ENCODERS[enc].sdpa or DECODERS[dec].sdpa  # only such a side attends through scaled_dot_product_attention
    amp_note = avoid_per_shape_attention(device, amp) if sdpa else None
    amp_note = "; ".join(n for n in (auto_note, amp_note) if n) or None
    if ctx.distributed:
        # a ReWE head at lambda 0 is left out of the graph: DDP must be told some parameters go unused
        unused = opt.rewe_lambda == 0
        forward = distributed.wrap(forward, device, find_unused_parameters=unused)
    seq_ul = (
        SequenceUnlikelihood(
            opt.seq_unlikelihood,
            opt.seq_unlikelihood_ngram,
            opt.seq_unlikelihood_every,
            opt.loss,
            opt.temperature,
            search=greedy_decodes,
        )
        if opt.seq_unlikelihood
        else None
    )
    lazy = [model.generator.bias] if opt.word_bias_update == "lazy" else None
    trainer = Trainer(
        model,
        loss_fn,
        optimizer,
        opt.max_grad_norm,
        forward,
        ctx,
        amp,
        measure_every=opt.report_every,
        seq_unlikelihood=seq_ul,
        lazy=lazy,
        normalization=opt.normalization,
    )
    # -average_decay: validation and checkpoints see the average, training the raw parameters
    average = ParameterAverage(model, opt.average_decay, opt.average_every) if opt.average_decay else None
    return Parts(model, optimizer, loss_fn, trainer, average, amp_note, amp_warning)
