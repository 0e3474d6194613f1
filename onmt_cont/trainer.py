"""One training step and validation: generator -> loss -> backward, nothing hidden."""

import math
import time

import torch
import torch.nn.functional as F

from onmt_cont.constants import PAD_ID


class NonFiniteLoss(RuntimeError):
    pass


class Trainer:
    def __init__(self, model, loss_fn, optimizer, max_grad_norm=0.0):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm

    def _forward(self, batch):
        """-> the generator's output over the non-padding positions (for N positions: [N, d], or
        what that generator's loss takes), and their targets [N]."""
        tgt = batch["tgt"]
        dec_out, _ = self.model(batch["src"], batch["src_lengths"], tgt[:, :-1])
        gold = tgt[:, 1:]
        mask = gold != PAD_ID
        gold = gold[mask]
        return self.model.generator(dec_out[mask], gold), gold

    def train_step(self, batch, step):
        """Forward, mean per-token loss, backward, clip, update. Returns (loss sum, tokens)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        output, gold = self._forward(batch)
        losses = self.loss_fn(output, gold)
        loss = losses.sum()
        n = gold.numel()
        value = loss.item()
        if not math.isfinite(value):
            raise NonFiniteLoss(f"step {step}: the training loss is {value}; stopping (no checkpoint written)")
        (loss / n).backward()
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
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
        for batch in batches:
            output, gold = self._forward(batch)
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
