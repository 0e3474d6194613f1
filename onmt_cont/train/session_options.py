"""train.py's session options: the data and where the model goes, how long and in what batches it trains, the
sequence-level fine-tuning, the devices and precision, validation, checkpoints, resuming and logging, as one
typed configuration (:class:`SessionConfig`) whose fields declare their help, default and range
(:mod:`onmt_cont.config`). The flags are built in :mod:`onmt_cont.train.options`; the checks that combine
options are in :mod:`onmt_cont.train.checks`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from onmt_cont.config import option
from onmt_cont.utils import numbers
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.numbers import SEED_MAX
from onmt_cont.utils.threads import HELP as THREADS_HELP
from onmt_cont.utils.threads import threads_problem


def amp_mode(text: object) -> bool | str:
    """-amp's value: true / false (also on, off, yes, no, 1, 0) or auto."""
    value = str(text).strip().lower()
    if value == "auto":
        return "auto"
    if value in ("true", "on", "yes", "1"):
        return True
    if value in ("false", "off", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected auto, true or false, got {text!r}")


def _seed_problem(value: int) -> str | None:
    return None if 0 <= value <= SEED_MAX else f"must be an integer from 0 to {SEED_MAX}"


def _keep_problem(value: int) -> str | None:
    return None if value == -1 or value >= 1 else "must be -1 (keep every one) or at least 1 (keep the last N)"


def _early_stopping_problem(value: int) -> str | None:
    return None if value >= 0 else "must be 0 (off) or a number of validations"


def _probability_problem(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else "is a probability in [0, 1] (0: off; e.g. 0.05)"


def _weight_problem(value: float) -> str | None:
    return None if value >= 0 else "is a weight: at least 0 (0: off)"


def _seconds_problem(value: float) -> str | None:
    return None if value > 0 else "must be a positive number of seconds"


@dataclass
class SessionConfig:
    """train.py's "Data" and "Logging" flags and the session's share of its "Training" flags, each field with its
    help, default and range, in the order of train.py -h."""

    data: str | None = option(None, help="prefix given to preprocess.py -save_data")
    save_model: str | None = option(None, help="checkpoint prefix: PREFIX_step_N.pt, PREFIX_best.pt, PREFIX_last.pt")
    tgt_emb: str | None = option(
        None,
        help="target embedding table OUT.dec.pt from embeddings_to_torch.py "
        "(unit-normalised and frozen here); required by continuous losses and -tie_emb",
    )
    epochs: int = option(10, type=int, low=1, help="passes over the training data")
    train_steps: int | None = option(None, type=int, low=1, help="stop after this many updates (a cap)")
    batch_size: int = option(64, type=int, low=1, help="sentences, or tokens with -batch_type tokens")
    batch_type: str = option("sents", choices=["sents", "tokens"], help=None)
    drop_final_punct: float = option(
        0.0,
        type=float,
        check=_probability_problem,
        help="with this probability, drawn anew each "
        "epoch, a training pair whose source ends with . ! or ? loses that token, and its target its own "
        "final . ! or ? where it has one, so the model also learns to end a translation whose source has "
        "no final punctuation: a continuous decoder that never learnt it does not stop on such sources. "
        "Meant for test sets that lack it more often than the training data (Multi30k de->en's test_2017). "
        "0 (default): off",
    )
    seq_unlikelihood: float = option(
        0.0,
        type=float,
        check=_weight_problem,
        help="sequence-level unlikelihood (Welleck et "
        "al. 2019): every -seq_unlikelihood_every steps the model also decodes the batch's sources "
        "greedily, and each token of its output that belongs to a repeated -seq_unlikelihood_ngram-gram "
        "adds this weight x -log(1 - p(token)) to the loss; p is a softmax over the whole vocabulary of "
        "the scores greedy search ranks by. Against the loops a model falls into after its own errors, "
        "which token-level training never shows it; for fine-tuning a trained model (-train_from). "
        "-loss ce, nllvmf, nllvmf_nce or infonce. 0 (default): off",
    )
    seq_unlikelihood_ngram: int | None = option(
        None,
        type=int,
        low=1,
        help="-seq_unlikelihood: the n of the repeated n-grams (default 3; Welleck et al.'s 4 is for long texts)",
    )
    seq_unlikelihood_every: int | None = option(
        None,
        type=int,
        low=1,
        help="-seq_unlikelihood: on every K-th "
        "step (default 1: each step; a step with it costs a greedy decode and twice the forward)",
    )
    valid_batch_size: int = option(64, type=int, low=1, help="validation batch size in sentences")
    seed: int = option(
        3435,
        type=numbers.seed,
        check=_seed_problem,
        help="random seed (init, dropout, batch order): 0 to 2^32 - 1",
    )
    gpu: int | None = option(
        None,
        type=gpu_option,
        help="CUDA device id; CPU when absent or negative "
        "(-gpu -1). Under torchrun each process takes the GPU of its LOCAL_RANK",
    )
    threads: int | None = option(None, type=int, check=threads_problem, help=THREADS_HELP)
    dist_timeout: float = option(
        600,
        type=float,
        check=_seconds_problem,
        help="under torchrun: seconds a rank waits in a "
        "collective for the others before it fails (PyTorch's own default is 30 minutes). Every rank "
        "validates and decodes the same validation set, so no rank waits long on another in a healthy "
        "run; raise it for a slow shared disk",
    )
    amp: bool | str = option(
        "auto",
        type=amp_mode,
        nargs="?",
        const=True,
        metavar="auto|true|false",
        help="mixed precision: autocast the forward pass (-amp_dtype); the vMF normaliser and the loss "
        "reductions stay in float32/float64. auto (the default): bfloat16 for a Transformer -loss ce "
        "trained on a CPU with bfloat16 dot products (avx512_bf16 or amx_bf16, not capped by "
        "ONEDNN_MAX_CPU_ISA), about 1.6x faster there at the same learning curve (lab/bench/tiny_step.py), "
        "float32 otherwise; the log says which. -amp alone: true; -amp false: float32",
    )
    amp_dtype: str = option(
        "bf16",
        choices=["bf16", "fp16"],
        help="autocast type of -amp; fp16 (GPU only) adds dynamic loss scaling",
    )
    valid_steps: int = option(
        1000,
        type=int,
        low=0,
        low_note="0: at each epoch's end only",
        help="validate every N steps and at each epoch's end; 0: at each epoch's end only",
    )
    early_stopping: int = option(
        0,
        type=int,
        check=_early_stopping_problem,
        help="stop after N validations without improvement of -valid_metric (see -early_stopping_window)",
    )
    early_stopping_window: int = option(
        1,
        type=int,
        low=1,
        low_note="a number of validations",
        help="-early_stopping counts validations in "
        "which neither the score nor the mean of the last N scores (fewer at the start) beat its best, "
        "so a plateau whose mean still rises does not stop the run, and no run stops sooner than with "
        "1 (each score alone). PREFIX_best.pt follows each score. -train_from keeps the checkpoint's "
        "unless given. lab/tools/stopping_rule.py replays the rule on finished runs' logs",
    )
    valid_metric: str = option(
        "loss",
        choices=["loss", "accuracy", "bleu"],
        help="what PREFIX_best.pt and -early_stopping follow: the validation loss (lower is better), "
        "the teacher-forced accuracy (softmax argmax / nearest neighbour), or BLEU of greedy decoding "
        "of the validation set (translate.py's decoder, no -replace_unk, tokenized BLEU against the "
        "validation target text). Loss and accuracy need not track BLEU for continuous models",
    )
    valid_bleu: bool = option(
        False,
        help="also decode the validation set greedily and log its "
        "BLEU when -valid_metric is loss or accuracy (the log then shows the BLEU curve that "
        "lab/tools/time_to_quality.py reads; PREFIX_best.pt and -early_stopping still follow -valid_metric)",
    )
    valid_remove_bpe: bool = option(
        False,
        help="with -valid_metric bleu (or -valid_bleu) and "
        "a subword-nmt BPE target side: join the pieces ('@@ ') of the output and of the references before "
        "BLEU, so model selection sees word BLEU, as translate.py -remove_bpe scores a test set",
    )
    save_checkpoint_steps: int = option(5000, type=int, low=1, help="write PREFIX_step_N.pt every N steps")
    keep_checkpoint: int = option(
        -1,
        type=int,
        check=_keep_problem,
        help="keep only the last N of PREFIX_step_K.pt, and of "
        "PREFIX_epoch_K.pt (OpenNMT-py's flag); -1: keep every one. PREFIX_best.pt and PREFIX_last.pt stay",
    )
    save_checkpoint_epochs: int | None = option(
        None,
        type=int,
        low=1,
        help="also write PREFIX_epoch_N.pt at the end of every N-th epoch (for convergence curves)",
    )
    train_from: str | None = option(
        None, help="resume from this checkpoint: model, optimiser, step, data position, RNG"
    )
    reset_optim: str = option(
        "none",
        choices=["none", "all", "states", "keep_states"],
        help="with -train_from (OpenNMT-py's flag): none: go on exactly; all: fine-tune: the weights "
        "only, with a new optimiser, learning-rate schedule and data position from step 0 (takes a "
        "release, onmt_cont_release, too); states: a new optimiser state (Adam's moments) at the "
        "checkpoint's step and schedule; keep_states: the optimiser state with this command's "
        "optimiser options (what -train_from does anyway with the options given again)",
    )
    train_from_average: bool = option(
        False,
        help="-train_from a checkpoint of an "
        "-average_decay run: training goes on from its moving average (the parameters it validated and "
        "translates with) instead of its raw parameters, e.g. to fine-tune the averaged model "
        "(-seq_unlikelihood); without -average_decay the new checkpoints hold the fine-tuned parameters",
    )
    resume: str = option(
        "none",
        choices=["none", "auto"],
        help="auto: if -save_model's prefix already has checkpoints of this run (_step_N, _epoch_N, "
        "_last), continue from the one furthest by the step it records (never by file time; as "
        "-train_from would), passing over files that do not load or would not resume exactly (no "
        "optimiser or random states, an average); else start at step 0. A PREFIX_best.pt better than "
        "what the resumed state reached is kept until a validation beats it. The log says what was "
        "found and chosen. For torchrun --max-restarts: a restarted group picks up where it was killed",
    )
    tensorboard: bool = option(
        False,
        help="also write the training and validation scalars "
        "(loss, cosine/nn accuracy or ppl/accuracy, lr, tokens/s, validation BLEU) for TensorBoard",
    )
    tensorboard_log_dir: str = option("runs/onmt", help="where -tensorboard writes its event files")
    report_every: int = option(
        50,
        type=int,
        low=1,
        help="log every N steps: loss, mean cosine to the target "
        "(continuous losses) and tokens/s over those N steps, and the accuracy (nearest neighbour for "
        "continuous losses; softmax: also perplexity) of the logged step's batch, the only batch "
        "scored against the whole vocabulary",
    )
    log_file: str | None = option(None, help="also write the log here")
