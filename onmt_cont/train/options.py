"""train.py's options: the parser, grouped as OpenNMT-py groups them; the model's and the loss's groups are
built from their components' typed configurations (:mod:`onmt_cont.models.options`,
:mod:`onmt_cont.losses.options`), which declare those fields' ranges. What the parser cannot check (the other
ranges, combinations) is in :mod:`onmt_cont.train.checks`."""

import argparse

from onmt_cont import opts
from onmt_cont.losses.options import add_loss_options
from onmt_cont.models.options import add_model_options
from onmt_cont.utils import numbers
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.threads import add_threads_arg


def amp_mode(text):
    """-amp's value: true / false (also on, off, yes, no, 1, 0) or auto."""
    value = str(text).strip().lower()
    if value == "auto":
        return "auto"
    if value in ("true", "on", "yes", "1"):
        return True
    if value in ("false", "off", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected auto, true or false, got {text!r}")


def build_parser():
    p = opts.new_parser("Train an NMT model with a softmax or continuous (embedding-prediction) output layer.")
    g = p.add_argument_group("Data")
    g.add_argument("-data", help="prefix given to preprocess.py -save_data")
    g.add_argument("-save_model", help="checkpoint prefix: PREFIX_step_N.pt, PREFIX_best.pt, PREFIX_last.pt")
    g.add_argument(
        "-tgt_emb",
        help="target embedding table OUT.dec.pt from embeddings_to_torch.py "
        "(unit-normalised and frozen here); required by continuous losses and -tie_emb",
    )
    add_model_options(p)
    add_loss_options(p)
    g = p.add_argument_group("Training")
    g.add_argument("-epochs", type=int, default=10, help="passes over the training data")
    g.add_argument("-train_steps", type=int, default=None, help="stop after this many updates (a cap)")
    g.add_argument("-batch_size", type=int, default=64, help="sentences, or tokens with -batch_type tokens")
    g.add_argument("-batch_type", choices=["sents", "tokens"], default="sents")
    g.add_argument(
        "-accum_count",
        type=int,
        default=1,
        help="gradient accumulation (OpenNMT-py's flag): each update "
        "sums the gradients of N consecutive batches, normalised by all their tokens, so it is the update "
        "of one batch N times as large in a 1/N of the memory (exact for ce; in-batch negatives are each "
        "batch's own). An epoch's last update takes the batches that are left",
    )
    g.add_argument(
        "-drop_final_punct",
        type=float,
        default=0.0,
        help="with this probability, drawn anew each "
        "epoch, a training pair whose source ends with . ! or ? loses that token, and its target its own "
        "final . ! or ? where it has one, so the model also learns to end a translation whose source has "
        "no final punctuation: a continuous decoder that never learnt it does not stop on such sources. "
        "Meant for test sets that lack it more often than the training data (Multi30k de->en's test_2017). "
        "0 (default): off",
    )
    g.add_argument(
        "-seq_unlikelihood",
        type=float,
        default=0.0,
        help="sequence-level unlikelihood (Welleck et "
        "al. 2019): every -seq_unlikelihood_every steps the model also decodes the batch's sources "
        "greedily, and each token of its output that belongs to a repeated -seq_unlikelihood_ngram-gram "
        "adds this weight x -log(1 - p(token)) to the loss; p is a softmax over the whole vocabulary of "
        "the scores greedy search ranks by. Against the loops a model falls into after its own errors, "
        "which token-level training never shows it; for fine-tuning a trained model (-train_from). "
        "-loss ce, nllvmf, nllvmf_nce or infonce. 0 (default): off",
    )
    g.add_argument(
        "-seq_unlikelihood_ngram",
        type=int,
        default=None,
        help="-seq_unlikelihood: the n of the repeated n-grams (default 3; Welleck et al.'s 4 is for long texts)",
    )
    g.add_argument(
        "-seq_unlikelihood_every",
        type=int,
        default=None,
        help="-seq_unlikelihood: on every K-th "
        "step (default 1: each step; a step with it costs a greedy decode and twice the forward)",
    )
    g.add_argument("-valid_batch_size", type=int, default=64, help="validation batch size in sentences")
    g.add_argument("-optim", choices=["adam", "sgd"], default="adam")
    g.add_argument(
        "-learning_rate",
        type=float,
        default=None,
        help="default: 5e-4 for continuous losses, 2e-4 for ce (the paper's)",
    )
    g.add_argument(
        "-decay_method",
        choices=["none", "noam", "inverse_sqrt"],
        default="none",
        help="noam: lr = -learning_rate x rnn_size^-0.5 x min(step^-0.5, step x warmup^-1.5) "
        "(Vaswani et al.; -learning_rate is then a factor, OpenNMT's Transformer uses 2); inverse_sqrt: "
        "lr = -learning_rate x min(step / warmup, (warmup / step)^0.5), the same curve with -learning_rate "
        "its peak (fairseq's inverse_sqrt from 0; noam with factor peak x (rnn_size x warmup)^0.5)",
    )
    g.add_argument("-warmup_steps", type=int, default=4000, help="noam, inverse_sqrt: steps of linear warm-up")
    g.add_argument("-adam_beta1", type=float, default=0.9)
    g.add_argument("-adam_beta2", type=float, default=0.999)
    g.add_argument("-max_grad_norm", type=float, default=5.0, help="clip the gradient norm (0: off)")
    g.add_argument(
        "-normalization",
        choices=["tokens", "sents"],
        default="tokens",
        help="the gradient is the "
        "loss summed over the batch divided by its target tokens, or by its sentences (OpenNMT-py's "
        "flag; sents: the vMF paper's code, whose gradients then grow with the sentences' length)",
    )
    g.add_argument(
        "-average_decay",
        type=float,
        default=0.0,
        help="keep an exponential moving average of the "
        "parameters (OpenNMT-py's flag, as in Marian), starting from the parameters after the first "
        "update: every -average_every steps avg = (1 - w) avg + w params, w = 1 - the product of (1 - d_t) "
        "over the steps t since the last update, d_t = max(this, 1 - (t + 1) / (t + 10)), so early on the "
        "average follows the model and its window grows to about a ninth of the steps so far, however "
        "often it is updated. Validation, model_best and every "
        "checkpoint's model are the average; training goes on from the raw parameters (kept in the "
        "checkpoint for -train_from). E.g. 1e-4; 0 (default): off",
    )
    g.add_argument("-average_every", type=int, default=1, help="-average_decay: update the average every N steps")
    g.add_argument(
        "-seed", type=numbers.seed, default=3435, help="random seed (init, dropout, batch order): 0 to 2^32 - 1"
    )
    g.add_argument(
        "-gpu",
        type=gpu_option,
        default=None,
        help="CUDA device id; CPU when absent or negative "
        "(-gpu -1). Under torchrun each process takes the GPU of its LOCAL_RANK",
    )
    add_threads_arg(g)
    g.add_argument(
        "-dist_timeout",
        type=float,
        default=600,
        help="under torchrun: seconds a rank waits in a "
        "collective for the others before it fails (PyTorch's own default is 30 minutes). Every rank "
        "validates and decodes the same validation set, so no rank waits long on another in a healthy "
        "run; raise it for a slow shared disk",
    )
    g.add_argument(
        "-amp",
        type=amp_mode,
        nargs="?",
        const=True,
        default="auto",
        metavar="auto|true|false",
        help="mixed precision: autocast the forward pass (-amp_dtype); the vMF normaliser and the loss "
        "reductions stay in float32/float64. auto (the default): bfloat16 for a Transformer -loss ce "
        "trained on a CPU with bfloat16 dot products (avx512_bf16 or amx_bf16, not capped by "
        "ONEDNN_MAX_CPU_ISA), about 1.6x faster there at the same learning curve (lab/bench/tiny_step.py), "
        "float32 otherwise; the log says which. -amp alone: true; -amp false: float32",
    )
    g.add_argument(
        "-amp_dtype",
        choices=["bf16", "fp16"],
        default="bf16",
        help="autocast type of -amp; fp16 (GPU only) adds dynamic loss scaling",
    )
    g.add_argument(
        "-valid_steps",
        type=int,
        default=1000,
        help="validate every N steps and at each epoch's end; 0: at each epoch's end only",
    )
    g.add_argument(
        "-early_stopping",
        type=int,
        default=0,
        help="stop after N validations without improvement of -valid_metric (see -early_stopping_window)",
    )
    g.add_argument(
        "-early_stopping_window",
        type=int,
        default=1,
        help="-early_stopping counts validations in "
        "which neither the score nor the mean of the last N scores (fewer at the start) beat its best, "
        "so a plateau whose mean still rises does not stop the run, and no run stops sooner than with "
        "1 (each score alone). PREFIX_best.pt follows each score. -train_from keeps the checkpoint's "
        "unless given. lab/tools/stopping_rule.py replays the rule on finished runs' logs",
    )
    g.add_argument(
        "-valid_metric",
        choices=["loss", "accuracy", "bleu"],
        default="loss",
        help="what PREFIX_best.pt and -early_stopping follow: the validation loss (lower is better), "
        "the teacher-forced accuracy (softmax argmax / nearest neighbour), or BLEU of greedy decoding "
        "of the validation set (translate.py's decoder, no -replace_unk, tokenized BLEU against the "
        "validation target text). Loss and accuracy need not track BLEU for continuous models",
    )
    g.add_argument(
        "-valid_bleu",
        action="store_true",
        help="also decode the validation set greedily and log its "
        "BLEU when -valid_metric is loss or accuracy (the log then shows the BLEU curve that "
        "lab/tools/time_to_quality.py reads; PREFIX_best.pt and -early_stopping still follow -valid_metric)",
    )
    g.add_argument(
        "-valid_remove_bpe",
        action="store_true",
        help="with -valid_metric bleu (or -valid_bleu) and "
        "a subword-nmt BPE target side: join the pieces ('@@ ') of the output and of the references before "
        "BLEU, so model selection sees word BLEU, as translate.py -remove_bpe scores a test set",
    )
    g.add_argument("-save_checkpoint_steps", type=int, default=5000, help="write PREFIX_step_N.pt every N steps")
    g.add_argument(
        "-keep_checkpoint",
        type=int,
        default=-1,
        help="keep only the last N of PREFIX_step_K.pt, and of "
        "PREFIX_epoch_K.pt (OpenNMT-py's flag); -1: keep every one. PREFIX_best.pt and PREFIX_last.pt stay",
    )
    g.add_argument(
        "-save_checkpoint_epochs",
        type=int,
        default=None,
        help="also write PREFIX_epoch_N.pt at the end of every N-th epoch (for convergence curves)",
    )
    g.add_argument("-train_from", help="resume from this checkpoint: model, optimiser, step, data position, RNG")
    g.add_argument(
        "-reset_optim",
        choices=["none", "all", "states", "keep_states"],
        default="none",
        help="with -train_from (OpenNMT-py's flag): none: go on exactly; all: fine-tune: the weights "
        "only, with a new optimiser, learning-rate schedule and data position from step 0 (takes a "
        "release, onmt_cont_release, too); states: a new optimiser state (Adam's moments) at the "
        "checkpoint's step and schedule; keep_states: the optimiser state with this command's "
        "optimiser options (what -train_from does anyway with the options given again)",
    )
    g.add_argument(
        "-train_from_average",
        action="store_true",
        help="-train_from a checkpoint of an "
        "-average_decay run: training goes on from its moving average (the parameters it validated and "
        "translates with) instead of its raw parameters, e.g. to fine-tune the averaged model "
        "(-seq_unlikelihood); without -average_decay the new checkpoints hold the fine-tuned parameters",
    )
    g.add_argument(
        "-resume",
        choices=["none", "auto"],
        default="none",
        help="auto: if -save_model's prefix already has checkpoints of this run (_step_N, _epoch_N, "
        "_last), continue from the one furthest by the step it records (never by file time; as "
        "-train_from would), passing over files that do not load or would not resume exactly (no "
        "optimiser or random states, an average); else start at step 0. A PREFIX_best.pt better than "
        "what the resumed state reached is kept until a validation beats it. The log says what was "
        "found and chosen. For torchrun --max-restarts: a restarted group picks up where it was killed",
    )
    g = p.add_argument_group("Logging")
    g.add_argument(
        "-tensorboard",
        action="store_true",
        help="also write the training and validation scalars "
        "(loss, cosine/nn accuracy or ppl/accuracy, lr, tokens/s, validation BLEU) for TensorBoard",
    )
    g.add_argument("-tensorboard_log_dir", default="runs/onmt", help="where -tensorboard writes its event files")
    g.add_argument(
        "-report_every",
        type=int,
        default=50,
        help="log every N steps: loss, mean cosine to the target "
        "(continuous losses) and tokens/s over those N steps, and the accuracy (nearest neighbour for "
        "continuous losses; softmax: also perplexity) of the logged step's batch, the only batch "
        "scored against the whole vocabulary",
    )
    g.add_argument("-log_file", help="also write the log here")
    g.add_argument("-save_config", help="write the effective options to this YAML file and exit")
    for action in p._actions:  # every float option: nan, inf and a non-zero value that rounds to 0 are refused
        if action.type is float:
            action.type = numbers.finite_float
    return p
