"""Softmax-side losses."""

import torch.nn.functional as F


def cross_entropy(logits, target, label_smoothing=0.0):
    """logits: [N, vocab]; target: [N] -> [N] per-token cross-entropy."""
    return F.cross_entropy(logits.float(), target, reduction="none", label_smoothing=label_smoothing)


def build_ce(opt, table=None):
    smoothing = opt.label_smoothing
    return lambda output, target: cross_entropy(output, target, smoothing)
