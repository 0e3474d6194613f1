"""What the speed benchmarks share: model sizes, synthetic tables and batches, devices, timing.

Everything goes through the toolkit's own code (``train.py``'s option parser and checks,
``build_model``, ``build_loss``, ``Trainer``), so a benchmark row is exactly what
``train.py`` with the same options would run, minus the data files: the target table is
random unit vectors and the batches are random word ids of realistic lengths.
"""

import argparse
import contextlib
import io
import math
import os
import resource
import sys
import time

import torch

from onmt_cont.bin import train as train_cli
from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from onmt_cont.losses import build_loss
from onmt_cont.models.architecture import architecture
from onmt_cont.models.generators import frozen_count, parameter_count
from onmt_cont.models.model import build_model
from onmt_cont.train.build import build
from onmt_cont.train.checks import check_options, expand_layers
from onmt_cont.train.optim import learning_rate, make_optimizer, set_learning_rate
from onmt_cont.train.step import Trainer
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.device import resolve_device as device_of_gpu
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.threads import add_threads_arg, apply_threads

# Encoder and decoder options per size; every row adds only its generator and loss options.
# "paper": Kumar & Tsvetkov (2019), section 4 and Table 7 (a 1-layer bidirectional encoder, a
# 2-layer decoder of 1024 units, input embeddings of 512); "small": what a 2-core CPU trains.
SIZES = {
    "paper": ["-rnn_size", "1024", "-word_vec_size", "512", "-enc_layers", "1", "-dec_layers", "2", "-brnn"],
    "small": ["-rnn_size", "256", "-word_vec_size", "128", "-enc_layers", "1", "-dec_layers", "2", "-brnn"],
    # The Transformer at the small LSTM's width (d_model = its rnn_size 256) and decoder depth: 2+2
    # pre-norm layers, 4 heads of 64, feed-forward 1024 (4 d_model, as Vaswani et al.), and the
    # settings the recipes train a Transformer with (noam, Glorot), which cost nothing per update.
    "transformer": [
        "-encoder_type",
        "transformer",
        "-decoder_type",
        "transformer",
        "-rnn_size",
        "256",
        "-word_vec_size",
        "256",
        "-heads",
        "4",
        "-transformer_ff",
        "1024",
        "-enc_layers",
        "2",
        "-dec_layers",
        "2",
        "-decay_method",
        "noam",
        "-param_init",
        "0",
        "-param_init_glorot",
    ],
}
EMB_DIM = 300  # m, the pretrained target vectors' size (the paper's)
SRC_VOCAB = 50_000  # the paper's source vocabulary (Table 7); only the target vocabulary varies
SRC_LEN = 20  # about the mean length of an IWSLT TED sentence, in words
# Spread (sd, words) of the target lengths within one batch. make_batches sorts by source and then
# target length and cuts runs of consecutive sentences, so a batch's targets differ by a word or two.
# The decoder runs over the padded length and the generator over the real tokens, so a wider spread
# (-tgt_len_sd) adds decoder work that every row shares.
TGT_LEN_SD = 0.6


def add_setup_args(p):
    """The flags :func:`setup` reads: -threads (train.py's and translate.py's definition) and -gpu."""
    add_threads_arg(p)
    p.add_argument("-gpu", type=gpu_option, default=None, help="CUDA device id; CPU when absent or negative")


def setup(args, script):
    """The common start of a benchmark: thread count (as train.py's -threads: by default the idle
    cores) and device. Sets ``args.threads`` to the count in use; returns the device, or exits with
    ``SCRIPT: message``."""
    try:
        args.threads = apply_threads(args.threads)
        return resolve_device(args.gpu)
    except UserError as exc:
        sys.exit(f"{script}: {exc}")


def resolve_device(gpu):
    """``None`` -> CPU; an id -> that CUDA device (a UserError when CUDA is not there)."""
    return device_of_gpu(gpu)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    """Wall-clock seconds of ``fn()``, with the device's queue drained before and after."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def build_trainer(opt, src_vocab, tgt_vocab, device, table=None, amp=None, fused=None, seed=1):
    """The Trainer (model seeded with ``seed``, optimiser, loss) train.py builds from ``opt``, on ``device``,
    through train.py's own builder (onmt_cont.train.build); ``table``: the synthetic target table where the
    row needs one; ``amp``: the autocast dtype or None; ``fused``: make_optimizer's choice of Adam."""
    opt = argparse.Namespace(**{**vars(opt), "seed": seed})
    prior = synthetic_prior(opt, tgt_vocab, device)
    return build(opt, src_vocab, tgt_vocab, table, device, log_prior=prior, amp=amp, fused=fused).trainer


def train_step(trainer, opt, batch, step):
    """One update as train.py takes it, at update ``step``'s learning rate (noam's warm-up included).
    Calling ``trainer.train_step`` alone keeps the optimiser's rate, a noam row's peak factor (e.g.
    2.0): Adam at that rate diverges on random batches within a few updates, and on a GPU the
    gradient can overflow to inf."""
    set_learning_rate(trainer.optimizer, learning_rate(opt, step))
    return trainer.train_step(batch, step)


def max_rss_mb():
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row_options(size, row_args, gpu=None):
    """train.py's options for a benchmark row: parsed and checked by train.py's own code. ``size``:
    a name of SIZES, or the encoder/decoder options themselves (a list).

    Raises UserError when this checkout's train.py does not know an option or refuses the
    combination (a loss or generator not implemented yet)."""
    argv = (SIZES[size] if isinstance(size, str) else list(size)) + list(row_args) + ["-tgt_emb", "<synthetic>"]
    if gpu is not None:
        argv += ["-gpu", str(gpu)]
    parser = train_cli.build_parser()
    with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage text: the UserError says it all
        opt = parser.parse_args(argv)
    expand_layers(opt, parser.get_default)  # -layers N, as train.py reads it
    check_options(opt)  # the defaults train.py fills in (learning rate) and its refusals
    return opt


def describe(size):
    """One line naming a size's encoder and decoder, for the tables' titles."""
    opt = row_options(size, ["-loss", "ce"])
    enc, dec = architecture(opt)
    if "transformer" in (enc, dec):
        return (
            f"{enc} encoder, {dec} decoder: d_model {opt.rnn_size}, {opt.heads} heads, "
            f"feed-forward {opt.transformer_ff}, {opt.enc_layers}+{opt.dec_layers} layers"
        )
    return (
        f"rnn {opt.rnn_size}, emb {opt.word_vec_size}, {opt.dec_layers}-layer decoder, "
        f"{'bi-LSTM' if enc == 'brnn' else 'LSTM'} encoder"
    )


def needs_table(opt, tgt_vocab):
    """Whether this model keeps the pretrained target table (continuous losses, -tie_emb, ReWE):
    build_model refuses to build such a model without one, before it allocates anything."""
    try:
        with torch.device("meta"):
            build_model(opt, 8, tgt_vocab, None)
    except ValueError:
        return True
    return False


def synthetic_table(vocab, device="cpu", seed=0):
    """[vocab, m] random directions (build_model normalises them); the padding row zero."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(vocab, EMB_DIM, generator=gen)
    table[PAD_ID] = 0
    return table.to(device)


def synthetic_prior(opt, vocab, device="cpu"):
    """The training unigram log-distribution -sampling_correction needs (None for other rows): the
    synthetic targets' own, uniform over the words (padding −inf)."""
    if not getattr(opt, "sampling_correction", False):
        return None
    prior = torch.full((vocab,), -math.log(vocab - 1), device=device)
    prior[PAD_ID] = float("-inf")
    return prior


def synthetic_batch(batch_size, src_vocab, tgt_vocab, device, seed=0, src_len=SRC_LEN, tgt_len_sd=TGT_LEN_SD):
    """A batch like one of make_batches': every source ``src_len`` words long and the targets about
    as long (normal, sd ``tgt_len_sd``, rounded, clipped to [3, 2·src_len]), random word ids.

    Returns collate's dict: src [B, S], src_lengths [B], tgt [B, T+2] (<s> y </s>, padded)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = (torch.randn(batch_size, generator=gen) * tgt_len_sd + src_len).round().long().clamp(3, 2 * src_len)
    src = torch.randint(4, src_vocab, (batch_size, src_len), generator=gen)
    tgt = torch.full((batch_size, int(lengths.max()) + 2), PAD_ID, dtype=torch.long)
    for b, n in enumerate(lengths.tolist()):
        tgt[b, 0] = BOS_ID
        tgt[b, 1 : n + 1] = torch.randint(4, tgt_vocab, (n,), generator=gen)
        tgt[b, n + 1] = EOS_ID
    return {
        "src": src.to(device),
        "src_lengths": torch.full((batch_size,), src_len, dtype=torch.long),
        "tgt": tgt.to(device),
        "size": batch_size,
    }


def target_tokens(batch):
    """Tokens the loss is computed on (the words and </s>)."""
    return int((batch["tgt"][:, 1:] != PAD_ID).sum())


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def alternating_ms(fns, reps, call, skip=2):
    """{name: median milliseconds of call(fn)} over reps turns that run every fn of the dict fns, the
    order reversed every other turn so that none always runs on a warm cache; the first skip turns
    are left out."""
    times = {name: [] for name in fns}
    for rep in range(reps):
        for name, fn in fns.items() if rep % 2 else reversed(fns.items()):
            start = time.perf_counter()
            call(fn)
            times[name].append(time.perf_counter() - start)
    return {name: median(t[skip:]) * 1000 for name, t in times.items()}


def machine_line(device):
    """One line naming the machine, for the logs and docs/benchmarks.md."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem = f", {int(f.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    where = (
        f"{torch.cuda.get_device_name(device)}"
        if device.type == "cuda"
        else f"CPU, {torch.get_num_threads()} thread(s)"
    )
    return (
        f"{where}; host {os.cpu_count()} cores ({cpu}){mem}; torch {torch.__version__}; "
        f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f} at start"
    )


__all__ = [
    "SIZES",
    "EMB_DIM",
    "SRC_VOCAB",
    "Trainer",
    "UserError",
    "build_loss",
    "build_model",
    "frozen_count",
    "parameter_count",
    "train_cli",
    "check_options",
    "expand_layers",
    "make_optimizer",
]
