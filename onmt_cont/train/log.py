"""The training log: stdout and -log_file, the progress lines and the parameter report."""

import logging
import sys
import time

import torch

from onmt_cont.models.generators import JointGenerator, ReWEGenerator, frozen_count, parameter_count
from onmt_cont.train.step import STATS, summarize

logger = logging.getLogger("onmt_cont.train")


class LogFileHandler(logging.FileHandler):
    """-log_file. A failed write (a full disk) prints one line and stops writing the file, where
    logging's own handler prints a traceback for every later line; the log goes on on stdout."""

    def handleError(self, record):
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            return super().handleError(record)
        print(
            f"warning: cannot write the log file {self.baseFilename}: {exc.strerror or exc}; it is no longer "
            "written (the log goes on on stdout)",
            file=sys.stderr,
        )
        logger.removeHandler(self)
        try:
            self.close()
        except OSError:
            pass


def setup_logging(log_file: str | None, main: bool = True) -> None:
    """The "onmt_cont.train" logger: stdout and -log_file on the main rank, nothing on the others."""
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


def to_log_file(line: str) -> None:
    """Write ``line`` to -log_file only (not stdout): why a run stopped, which the console already
    shows on standard error (cli_main's "error: ..." or Python's traceback)."""
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, line, None, None)
    for h in logger.handlers:
        if isinstance(h, logging.FileHandler):
            h.handle(record)


def report_parameters(model: torch.nn.Module) -> None:
    """Log the parameter counts: encoder, decoder, input and output layers."""
    emb = model.decoder.embeddings
    logger.info(
        f"parameters: encoder {parameter_count(model.encoder):,}; decoder "
        f"{parameter_count(model.decoder) - parameter_count(emb):,}"
    )
    logger.info(f"input layer (decoder embeddings): {parameter_count(emb):,} trainable, {frozen_count(emb):,} frozen")
    gen = model.generator
    if isinstance(gen, JointGenerator):
        d_j, d = gen.word_proj.weight.shape
        logger.info(
            f"output layer (joint generator): {parameter_count(gen):,} trainable = U {d_j}x{d} + b_u {d_j} + "
            f"V {d_j}x{gen.context_proj.in_features} + b_v {d_j} + b {gen.bias.numel()}; "
            "E is the decoder's input embeddings (counted above)"
        )
        return
    head = parameter_count(gen.head) if isinstance(gen, ReWEGenerator) else 0
    table = (
        "the embedding table trained (-train_table)"
        if getattr(gen, "trains_table", False)
        else f"{frozen_count(gen):,} frozen (embedding table)"
    )
    logger.info(f"output layer (generator): {parameter_count(gen) - head:,} trainable, {table}")
    if isinstance(gen, ReWEGenerator):
        w1, w2 = gen.head.w1, gen.head.w2
        logger.info(
            f"ReWE head: {head:,} trainable = W1 {w1.out_features}x{w1.in_features} + b1 + "
            f"W2 {w2.out_features}x{w2.in_features} + b2 (training only; ignored at inference)"
        )


class Meter:
    """The training log over the last report window: loss, mean cosine to the target (continuous
    models) and tokens/s over every step of the window; top-1 accuracy (nearest neighbour for
    continuous models) and perplexity (softmax) of the last scored batch (Trainer.measure_every),
    whose step and size the line names."""

    def __init__(self, continuous=False):
        self.continuous = continuous
        self.reset()

    def reset(self):
        self.loss, self.tokens, self.src_tokens, self.start = 0.0, 0, 0, time.time()
        self.sums = torch.zeros(len(STATS), dtype=torch.float64)
        self.scored = None  # (step, sums) of the last scored batch

    def update(self, loss, tokens, src_tokens, stats=None, step=None):
        """``stats``: the step's batch_stats sums (Trainer.last_stats), or None."""
        self.loss += loss
        self.tokens += tokens
        self.src_tokens += src_tokens
        if stats is not None:
            self.sums += stats
            if stats[STATS.index("scored")] > 0:
                self.scored = (step, stats)

    def scalars(self, lr):
        """The window's numbers by name (what the line prints; -tensorboard's training scalars)."""
        elapsed = max(time.time() - self.start, 1e-9)
        out = {"loss": self.loss / max(self.tokens, 1)}
        if self.continuous and self.sums[0] > 0:
            out["cosine"] = summarize(self.sums, True)["cosine"]
        if self.scored is not None:
            s = summarize(self.scored[1], self.continuous)
            out["accuracy"] = s["accuracy"]
            if not self.continuous and not s["sampled"]:
                out["ppl"] = s["ppl"]
        whole = summarize(self.sums, self.continuous)
        if "ul_loss" in whole:  # -seq_unlikelihood's steps of the window
            out.update({k: whole[k] for k in ("ul_flagged_share", "ul_loss")})
        out.update({"lr": lr, "src_tokens_per_s": self.src_tokens / elapsed, "tgt_tokens_per_s": self.tokens / elapsed})
        return out

    def line(self, step, lr):
        v = self.scalars(lr)
        parts = [f"step {step}: loss {v['loss']:.4f}"]
        if "cosine" in v:
            parts.append(f"cosine {v['cosine']:.4f}")
        if self.scored is not None:
            at, sums = self.scored
            s = summarize(sums, self.continuous)
            where = f"on step {at}'s batch ({s['scored']:,} tokens)"
            if self.continuous:
                parts.append(f"nn accuracy {s['accuracy']:.2%} {where}")
            elif s["sampled"]:
                parts.append(f"accuracy among the sampled candidates {s['accuracy']:.2%} {where}")
            else:
                parts.append(f"ppl {s['ppl']:.2f}, accuracy {s['accuracy']:.2%} {where}")
        if "ul_loss" in v:
            parts.append(
                f"own decodes: {v['ul_flagged_share']:.2%} of tokens in a repeated n-gram, -log(1-p) {v['ul_loss']:.3f}"
            )
        parts.append(f"lr {lr:.2e}")
        parts.append(f"{v['src_tokens_per_s']:.0f} src tok/s, {v['tgt_tokens_per_s']:.0f} tgt tok/s")
        return "; ".join(parts)
