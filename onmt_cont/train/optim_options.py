"""train.py's optimiser options: the optimiser, the learning rate and its schedule, clipping, how the gradient is
normalised and accumulated, and the parameters' moving average, as one typed configuration (:class:`OptimConfig`)
whose fields declare their help, default and range (:mod:`onmt_cont.config`). Their flags are in the "Training"
group, among the session's (:mod:`onmt_cont.train.options`); the learning rate's default, which depends on the
loss and -decay_method, is filled in by :mod:`onmt_cont.train.checks`."""

from __future__ import annotations

from dataclasses import dataclass

from onmt_cont.config import option


@dataclass
class OptimConfig:
    """train.py's optimiser flags, each field with its help, default and range."""

    optim: str = option("adam", choices=["adam", "sgd"], help=None)
    learning_rate: float | None = option(
        None,
        type=float,
        low=0,
        low_open=True,
        help="default: 5e-4 for continuous losses, 2e-4 for ce (the paper's)",
    )
    decay_method: str = option(
        "none",
        choices=["none", "noam", "inverse_sqrt"],
        help="noam: lr = -learning_rate x rnn_size^-0.5 x min(step^-0.5, step x warmup^-1.5) "
        "(Vaswani et al.; -learning_rate is then a factor, OpenNMT's Transformer uses 2); inverse_sqrt: "
        "lr = -learning_rate x min(step / warmup, (warmup / step)^0.5), the same curve with -learning_rate "
        "its peak (fairseq's inverse_sqrt from 0; noam with factor peak x (rnn_size x warmup)^0.5)",
    )
    warmup_steps: int = option(4000, type=int, low=1, help="noam, inverse_sqrt: steps of linear warm-up")
    adam_beta1: float = option(0.9, type=float, low=0.0, high=1.0, high_open=True, help=None)
    adam_beta2: float = option(0.999, type=float, low=0.0, high=1.0, high_open=True, help=None)
    max_grad_norm: float = option(
        5.0, type=float, low=0, low_note="0: no clipping", help="clip the gradient norm (0: off)"
    )
    normalization: str = option(
        "tokens",
        choices=["tokens", "sents"],
        help="the gradient is the "
        "loss summed over the batch divided by its target tokens, or by its sentences (OpenNMT-py's "
        "flag; sents: the vMF paper's code, whose gradients then grow with the sentences' length)",
    )
    accum_count: int = option(
        1,
        type=int,
        low=1,
        help="gradient accumulation (OpenNMT-py's flag): each update "
        "sums the gradients of N consecutive batches, normalised by all their tokens, so it is the update "
        "of one batch N times as large in a 1/N of the memory (exact for ce; in-batch negatives are each "
        "batch's own). An epoch's last update takes the batches that are left",
    )
    average_decay: float = option(
        0.0,
        type=float,
        low=0.0,
        high=1.0,
        low_note="0: off; e.g. 1e-4",
        help="keep an exponential moving average of the "
        "parameters (OpenNMT-py's flag, as in Marian), starting from the parameters after the first "
        "update: every -average_every steps avg = (1 - w) avg + w params, w = 1 - the product of (1 - d_t) "
        "over the steps t since the last update, d_t = max(this, 1 - (t + 1) / (t + 10)), so early on the "
        "average follows the model and its window grows to about a ninth of the steps so far, however "
        "often it is updated. Validation, model_best and every "
        "checkpoint's model are the average; training goes on from the raw parameters (kept in the "
        "checkpoint for -train_from). E.g. 1e-4; 0 (default): off",
    )
    average_every: int = option(1, type=int, low=1, help="-average_decay: update the average every N steps")
