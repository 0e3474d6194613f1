"""One training step and validation: generator -> loss -> backward, nothing hidden."""

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from onmt_cont import distributed
from onmt_cont.constants import PAD_ID
from onmt_cont.outputs import HiddenLogits, ReWEOutput, SampledLogits, logits_of, prediction
from onmt_cont.train.optim import LazyEntries
from onmt_cont.translate.search import greedy_search, length_limits


class NonFiniteLoss(RuntimeError):
    pass


# batch_stats' sums, in this order: positions; positions scored against the vocabulary; of those,
# correct top-1 words; sum of cos(ê, e(gold)) (continuous models); sum of −log p(gold) (softmax);
# positions whose softmax covered only sampled candidates (-joint_sample in training); with
# -seq_unlikelihood, the tokens of the model's own greedy decodes, those of them in a repeated n-gram,
# and the sum of their −log(1 − p) (SequenceUnlikelihood).
STATS = ("tokens", "scored", "correct", "cosine", "nll", "sampled", "ul_decoded", "ul_flagged", "ul_loss")


# Scores are computed this many [rows, vocab] elements at a time (64 MB of float32), so that a
# large batch against a 50K-word table does not allocate a [tokens, vocab] matrix at once.
SCORE_CHUNK = 1 << 24


def _logits(output):
    """What the generator scores: a softmax's logits, or a continuous generator's prediction ê
    (its scores add the word bias themselves)."""
    return output.logits if isinstance(output, ReWEOutput) else prediction(output)


@torch.no_grad()
def batch_stats(gen, output, gold, score=True):
    """Sums (float64 [len(STATS)]) describing the generator's ``output`` for the N positions of ``gold``
    [N]: the mean cosine to the target's vector (continuous generators: a gather and a dot product,
    cheap) and, with ``score``, top-1 accuracy (nearest neighbour for continuous generators) and
    the NLL (softmax generators), which score every word: [N, vocab], computed in row chunks.

    Shared by validation and the training log, so both report the same quantities."""
    sums = torch.zeros(len(STATS), dtype=torch.float64, device=gold.device)
    sums[0] = gold.numel()
    if gen.continuous:
        sums[3] = F.cosine_similarity(prediction(output).float(), gen.table[gold], dim=-1).sum()
    if not score or gold.numel() == 0:
        return sums
    sums[1] = gold.numel()
    if isinstance(output, SampledLogits):  # a softmax over the candidates only: ids via candidates
        logp = torch.log_softmax(output.logits.float(), dim=-1)
        sums[2] = (output.candidates[logp.argmax(-1)] == gold).sum()
        sums[5] = gold.numel()
        return sums
    logits = _logits(output)
    vocab = (
        gen.table.size(0)
        if gen.continuous
        else (logits.weight.size(0) if isinstance(logits, HiddenLogits) else logits.size(-1))
    )
    rows = max(1, SCORE_CHUNK // max(vocab, 1))
    for i in range(0, gold.numel(), rows):
        scores = gen.scores(logits_of(logits, slice(i, i + rows)))  # [rows, vocab]
        g = gold[i : i + rows]
        sums[2] += (scores.argmax(-1) == g).sum()
        if not gen.continuous:  # the loss is not the NLL under label smoothing
            sums[4] -= scores.gather(-1, g.unsqueeze(-1)).double().sum()
    return sums


def summarize(sums, continuous):
    """batch_stats' sums -> {"accuracy", "cosine" or "ppl", "tokens", "scored", "sampled"}."""
    s = dict(zip(STATS, sums.tolist(), strict=True))
    out = {
        "tokens": int(s["tokens"]),
        "scored": int(s["scored"]),
        "sampled": s["sampled"] > 0,
        "accuracy": s["correct"] / max(s["scored"], 1),
    }
    if continuous:
        out["cosine"] = s["cosine"] / max(s["tokens"], 1)
    else:
        out["ppl"] = math.exp(min(s["nll"] / max(s["scored"], 1), 100))
    if s["ul_decoded"] > 0:
        out["ul_flagged_share"] = s["ul_flagged"] / s["ul_decoded"]
        out["ul_loss"] = s["ul_loss"] / max(s["ul_flagged"], 1)
    return out


class TrainingForward(nn.Module):
    """Model -> generator over the non-padding target positions, as one module, so that
    DistributedDataParallel sees every trainable parameter used inside its forward."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src, src_lengths, tgt):
        """tgt: [batch, tgt_len] (<s> y </s>) -> (the generator's output over the N non-padding
        positions: [N, d] or what that generator's loss takes, their targets [N])."""
        dec_out, _ = self.model(src, src_lengths, tgt[:, :-1])
        gold = tgt[:, 1:]
        mask = gold != PAD_ID
        gold = gold[mask]
        return self.model.generator(dec_out[mask], gold), gold


@torch.no_grad()
def greedy_decodes(model, src, src_lengths):
    """The model's greedy decodes of ``src`` for -seq_unlikelihood's
    :class:`~onmt_cont.losses.unlikelihood.SequenceUnlikelihood` (evaluation mode, no gradient, translate.py's
    default length limit): a list of id lists."""
    was_training = model.training
    model.eval()
    try:
        seqs, _ = greedy_search(model, src, src_lengths, length_limits(src_lengths))
    finally:
        model.train(was_training)
    return seqs


class Trainer:
    """``forward``: a :class:`TrainingForward`, possibly wrapped in DistributedDataParallel;
    ``ctx``: the distributed context (one process by default); ``amp``: an autocast dtype or None.
    ``measure_every``: the steps whose batch is also scored against the whole vocabulary for the
    training log's accuracy (train.py: -report_every); 0 never scores (the cosine is always kept).
    ``normalization``: the gradient is that of the loss summed over the global batch's tokens and
    divided by its target tokens (``tokens``) or by its sentences (``sents``, OpenNMT-py's
    -normalization sents, as the vMF paper's code trains: a step's gradient grows with the sentences'
    length)."""

    def __init__(
        self,
        model,
        loss_fn,
        optimizer,
        max_grad_norm=0.0,
        forward=None,
        ctx=None,
        amp=None,
        measure_every=0,
        seq_unlikelihood=None,
        lazy=None,
        normalization="tokens",
    ):
        if normalization not in ("tokens", "sents"):
            raise ValueError(f"normalization must be tokens or sents, got {normalization!r}")
        self.normalization = normalization
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.forward = forward if forward is not None else TrainingForward(model)
        self.ctx = ctx if ctx is not None else distributed.Context()
        self.amp = amp
        self.measure_every = measure_every
        self.seq_ul = seq_unlikelihood  # a SequenceUnlikelihood or None
        self.last_stats = None  # batch_stats of the last step's global batch
        # parameters updated lazily (-word_bias_update lazy): entries without a gradient keep value and Adam state
        self.lazy = [LazyEntries(optimizer, p) for p in (lazy or ())]
        device_type = next(model.parameters()).device.type
        self.device_type = device_type
        # fp16 needs loss scaling to keep small gradients from flushing to zero; bf16 does not
        self.scaler = torch.amp.GradScaler(device_type) if amp == torch.float16 else None

    def _forward(self, batch, module=None):
        return (module or self.forward)(batch["src"], batch["src_lengths"], batch["tgt"])

    def train_step(self, batch, step):
        """Forward, mean per-token loss over the global batch, backward, clip, update.
        Returns (loss sum, tokens) of the global batch; ``last_stats`` holds its batch_stats (scored
        on the steps of ``measure_every`` only: scoring every word costs a [tokens, vocab] product).
        ``batch`` may be a list of batches (-accum_count): their gradients are accumulated, each
        normalised by the whole list's tokens, so the update is the one of the batches joined."""
        if isinstance(batch, list):
            if len(batch) > 1:
                return self._accumulated_step(batch, step)
            batch = batch[0]
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        ul = self.seq_ul if self.seq_ul is not None and self.seq_ul.applies(step) else None
        with torch.autocast(self.device_type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            if ul is None:
                output, gold = self._forward(batch)
            else:
                joined, flags, decoded = ul.decode(self.model, batch)
                output, gold = self._forward(joined)
                (output, gold), ul_sum, flagged = ul.split(self.model.generator, output, gold, joined["tgt"], flags)
            loss = self.loss_fn(output, gold).float().sum()
        score = self.measure_every > 0 and step % self.measure_every == 0  # the same on every rank
        stats = batch_stats(self.model.generator, output, gold, score)
        if ul is not None:
            at = STATS.index("ul_decoded")
            stats[at : at + 2] = torch.tensor([decoded, flagged], dtype=stats.dtype)
            stats[at + 2] = ul_sum.detach().double()
        # one all-reduce gives every rank the global loss (for the NaN check and the log), the
        # global token count (the normaliser of the gradient) and the log's statistics
        counts = loss.new_tensor([gold.numel(), int(batch["src_lengths"].sum()), batch["size"]], dtype=torch.float64)
        totals = distributed.all_reduce_sum(torch.cat([loss.detach().double().view(1), counts, stats]), self.ctx)
        value, n = totals[0].item(), int(totals[1].item())
        self.last_src_tokens = int(totals[2].item())  # of the global batch, for tokens/s
        norm_by = n if self.normalization == "tokens" else int(totals[3].item())
        self.last_stats = totals[4:].cpu()
        if not math.isfinite(value):
            raise NonFiniteLoss(f"step {step}: the training loss is {value}; stopping (no checkpoint written)")
        # DDP averages gradients over ranks: world * local_sum / global_tokens (or sentences) averages
        # to the single-process gradient of the global batch
        scaled = (loss if ul is None else loss + ul.alpha * ul_sum.float()) * (self.ctx.world / max(norm_by, 1))
        if self.scaler is not None:
            self.scaler.scale(scaled).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            scaled.backward()
        self._update(step)
        return value, n

    def _accumulated_step(self, batches, step):
        """train_step over several batches (-accum_count): forward and backward one at a time, the gradients
        summed, each loss divided by the tokens (or sentences) of all of them, known before the first
        forward; under torchrun the gradients are averaged once, after the last backward."""
        if self.seq_ul is not None:
            raise ValueError("-seq_unlikelihood takes one batch a step (no -accum_count)")
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        counts = torch.tensor(
            [[int((b["tgt"][:, 1:] != PAD_ID).sum()), b["size"]] for b in batches], dtype=torch.float64
        ).sum(0)
        counts = distributed.all_reduce_sum(counts.to(batches[0]["tgt"].device), self.ctx)
        norm_by = int(counts[0].item() if self.normalization == "tokens" else counts[1].item())
        score = self.measure_every > 0 and step % self.measure_every == 0
        sums = None
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            synced = last or not hasattr(self.forward, "no_sync")  # DDP: all-reduce on the last backward only
            with contextlib.nullcontext() if synced else self.forward.no_sync():
                with torch.autocast(self.device_type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
                    output, gold = self._forward(batch)
                    loss = self.loss_fn(output, gold).float().sum()
                stats = batch_stats(self.model.generator, output, gold, score)
                part = torch.cat(
                    [
                        loss.detach().double().view(1),
                        loss.new_tensor(
                            [gold.numel(), int(batch["src_lengths"].sum()), batch["size"]], dtype=torch.float64
                        ),
                        stats,
                    ]
                )
                sums = part if sums is None else sums + part
                scaled = loss * (self.ctx.world / max(norm_by, 1))
                if self.scaler is not None:
                    self.scaler.scale(scaled).backward()
                else:
                    scaled.backward()
        totals = distributed.all_reduce_sum(sums, self.ctx)
        value, n = totals[0].item(), int(totals[1].item())
        self.last_src_tokens = int(totals[2].item())
        self.last_stats = totals[4:].cpu()
        if not math.isfinite(value):
            raise NonFiniteLoss(f"step {step}: the training loss is {value}; stopping (no checkpoint written)")
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        self._update(step)
        return value, n

    def _update(self, step):
        """Clip the gradients, take the optimiser's step (lazy entries kept), renormalise a trained table."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
        kept = [lazy.keep() for lazy in self.lazy]
        if self.scaler is not None:  # fp16: an overflowing step is skipped and the scale lowered
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            if not torch.isfinite(norm):
                raise NonFiniteLoss(
                    f"step {step}: the gradient norm is {norm.item()}; stopping (no checkpoint written)"
                )
            self.optimizer.step()
        for lazy, k in zip(self.lazy, kept, strict=True):
            lazy.restore(k)
        self._after_update()

    def _after_update(self):
        after = getattr(self.model.generator, "after_update", None)  # -train_table: unit rows again
        if after is not None:
            after()

    @torch.no_grad()
    def validate(self, batches):
        """Loss per token, accuracy (softmax: argmax; continuous: nearest neighbour), and for
        continuous models the mean cosine to the target, for softmax models perplexity."""
        self.model.eval()
        gen = self.model.generator
        total, sums = 0.0, torch.zeros(len(STATS), dtype=torch.float64)
        plain = TrainingForward(self.model)  # validation runs outside DDP, identically on every rank
        for batch in batches:
            output, gold = self._forward(batch, plain)
            total += self.loss_fn(output, gold).sum().item()
            sums += batch_stats(gen, output, gold).cpu()
        stats = summarize(sums, gen.continuous)
        return {"loss": total / max(stats["tokens"], 1), **stats}
