"""Generators turn decoder states into the model's output and into word scores.

All share one interface, so the trainer and the decoders need no special cases:

- ``forward(dec_out)``: the output the loss is computed on (logits, or a predicted vector ê);
- ``scores(output)``: a score per target word, higher is better; greedy decoding takes the
  top-1 and beam search the top-k. For a continuous generator that is nearest-neighbour
  search against the unit-length target table.
"""


import torch
import torch.nn.functional as F
from torch import nn

from onmt_cont.constants import PAD_ID
from onmt_cont.vmf import log_cmk


class SoftmaxGenerator(nn.Module):
    continuous = False

    def __init__(self, hidden_size, vocab_size):
        super().__init__()
        self.proj = nn.Linear(hidden_size, vocab_size)

    def forward(self, dec_out):
        """dec_out: [..., hidden] -> logits [..., vocab]."""
        return self.proj(dec_out)

    def scores(self, output):
        """Log-probabilities [..., vocab]."""
        return torch.log_softmax(output.float(), dim=-1)


class ContinuousGenerator(nn.Module):
    """Predicts a vector ê of the target embedding size m (``linear``: one layer; ``nonlinear``:
    Linear-ReLU-Linear) and scores words against the frozen unit-length table.

    ``criterion`` follows the training loss:

    - ``vmf``: the log vMF density log C_m(‖ê‖) + êᵀe(w) (argmax: the largest êᵀe(w));
    - ``cosine``: cos(ê, e(w));
    - ``l2``: −‖ê − e(w)‖².

    With a unit-length table all three pick the same nearest neighbour (never the zero padding
    row); they differ as beam scores.
    """

    continuous = True
    CRITERIA = ("vmf", "cosine", "l2")

    def __init__(self, hidden_size, table, nonlinear=False, criterion="cosine"):
        super().__init__()
        if criterion not in self.CRITERIA:
            raise ValueError(f"criterion must be one of {self.CRITERIA}, got {criterion!r}")
        m = table.size(1)
        if nonlinear:
            self.proj = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, m))
        else:
            self.proj = nn.Linear(hidden_size, m)
        self.register_buffer("table", table)  # [vocab, m], unit rows (padding row zero)
        self.criterion = criterion

    def forward(self, dec_out):
        """dec_out: [..., hidden] -> ê [..., m]."""
        return self.proj(dec_out)

    def scores(self, output):
        """output ê: [..., m] -> scores [..., vocab]; padding scores −inf."""
        out = output.float()
        dots = out @ self.table.t()
        if self.criterion == "vmf":
            kappa = out.norm(dim=-1, keepdim=True)
            scores = log_cmk(kappa, self.table.size(1)) + dots
        elif self.criterion == "cosine":
            scores = dots / out.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        else:
            sq = (out * out).sum(-1, keepdim=True)
            scores = -(sq - 2 * dots + (self.table * self.table).sum(-1))
        # The zero padding row is no word, yet it would beat every word under cosine and vMF
        # when all êᵀe(w) < 0, and under l2 when all êᵀe(w) < 1/2.
        scores[..., PAD_ID] = float("-inf")
        return scores


def normalize_table(table):
    """Unit-length rows; an all-zero row (padding) stays zero."""
    return F.normalize(table.float(), dim=-1, eps=1e-12)


def parameter_count(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def frozen_count(module):
    return sum(p.numel() for p in module.parameters() if not p.requires_grad) + sum(
        b.numel() for b in module.buffers()
    )


