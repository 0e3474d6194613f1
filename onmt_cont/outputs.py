"""What a generator's forward hands the loss and the trainer when it is not a plain tensor.

These types live below both models/ (which builds them) and losses/ (which reads them), so the
losses need no import from the models: the dependency runs models -> outputs <- losses."""

from typing import NamedTuple

import torch


class SampledLogits(NamedTuple):
    """A softmax over a subset of the vocabulary (joint generator, ``-joint_sample``)."""

    logits: torch.Tensor  # [N, K]: the scores of the candidate words only
    candidates: torch.Tensor  # [K]: their ids, sorted ascending, every gold id among them


class ReWEOutput(NamedTuple):
    """A softmax model's logits and its ReWE head's predicted embedding (training and validation)."""

    logits: torch.Tensor  # [N, vocab]
    embedding: torch.Tensor  # [N, m]
