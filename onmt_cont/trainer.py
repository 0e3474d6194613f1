"""One training step and validation: generator -> loss -> backward, nothing hidden."""

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from onmt_cont import distributed
from onmt_cont.constants import PAD_ID


class NonFiniteLoss(RuntimeError):
    pass


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


class Trainer:
    """``forward``: a :class:`TrainingForward`, possibly wrapped in DistributedDataParallel;
    ``ctx``: the distributed context (one process by default); ``amp``: an autocast dtype or None."""

    def __init__(self, model, loss_fn, optimizer, max_grad_norm=0.0, forward=None, ctx=None, amp=None):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.forward = forward if forward is not None else TrainingForward(model)
        self.ctx = ctx if ctx is not None else distributed.Context()
        self.amp = amp
        device_type = next(model.parameters()).device.type
        self.device_type = device_type
        # fp16 needs loss scaling to keep small gradients from flushing to zero; bf16 does not
        self.scaler = torch.amp.GradScaler(device_type) if amp == torch.float16 else None

    def _forward(self, batch, module=None):
        return (module or self.forward)(batch["src"], batch["src_lengths"], batch["tgt"])

    def train_step(self, batch, step):
        """Forward, mean per-token loss over the global batch, backward, clip, update.
        Returns (loss sum, tokens) of the global batch."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device_type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            output, gold = self._forward(batch)
            loss = self.loss_fn(output, gold).float().sum()
        # one all-reduce gives every rank the global loss (for the NaN check and the log) and
        # the global token count (the normaliser of the gradient)
        counts = [gold.numel(), int(batch["src_lengths"].sum())]
        totals = distributed.all_reduce_sum(torch.cat([loss.detach().view(1), loss.new_tensor(counts)]), self.ctx)
        value, n = totals[0].item(), int(totals[1].item())
        self.last_src_tokens = int(totals[2].item())  # of the global batch, for tokens/s
        if not math.isfinite(value):
            raise NonFiniteLoss(f"step {step}: the training loss is {value}; stopping (no checkpoint written)")
        # DDP averages gradients over ranks: world * local_sum / global_tokens averages to the
        # single-process gradient of the global batch
        scaled = loss * (self.ctx.world / max(n, 1))
        if self.scaler is not None:
            self.scaler.scale(scaled).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            scaled.backward()
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
        if self.scaler is not None:  # fp16: an overflowing step is skipped and the scale lowered
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return value, n
        if not torch.isfinite(norm):
            raise NonFiniteLoss(f"step {step}: the gradient norm is {norm.item()}; stopping (no checkpoint written)")
        self.optimizer.step()
        return value, n

    @torch.no_grad()
    def validate(self, batches):
        """Loss per token, accuracy (softmax: argmax; continuous: nearest neighbour), and for
        continuous models the mean cosine to the target, for softmax models perplexity."""
        self.model.eval()
        gen = self.model.generator
        total, n, correct, cos_sum, nll = 0.0, 0, 0, 0.0, 0.0
        plain = TrainingForward(self.model)  # validation runs outside DDP, identically on every rank
        for batch in batches:
            output, gold = self._forward(batch, plain)
            total += self.loss_fn(output, gold).sum().item()
            n += gold.numel()
            scores = gen.scores(output)
            correct += (scores.argmax(-1) == gold).sum().item()
            if gen.continuous:
                cos_sum += F.cosine_similarity(output.float(), gen.table[gold], dim=-1).sum().item()
            else:  # the loss is not the NLL under label smoothing
                nll -= scores.gather(-1, gold.unsqueeze(-1)).sum().item()
        stats = {"loss": total / max(n, 1), "accuracy": correct / max(n, 1), "tokens": n}
        if gen.continuous:
            stats["cosine"] = cos_sum / max(n, 1)
        else:
            stats["ppl"] = math.exp(min(nll / max(n, 1), 100))
        return stats


class Meter:
    """Loss and tokens/s over the last report window."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.loss, self.tokens, self.src_tokens, self.start = 0.0, 0, 0, time.time()

    def update(self, loss, tokens, src_tokens):
        self.loss += loss
        self.tokens += tokens
        self.src_tokens += src_tokens

    def line(self, step, lr):
        elapsed = max(time.time() - self.start, 1e-9)
        return (f"step {step}: loss {self.loss / max(self.tokens, 1):.4f}; lr {lr:.2e}; "
                f"{self.src_tokens / elapsed:.0f} src tok/s, {self.tokens / elapsed:.0f} tgt tok/s")
