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

    logits: "torch.Tensor | HiddenLogits"  # [N, vocab], or deferred like the softmax's (SoftmaxGenerator.defer_logits)
    embedding: torch.Tensor  # [N, m]


class HiddenLogits(NamedTuple):
    """A softmax's logits not yet computed (training and validation on the CPU, -loss ce): the decoder's
    states and the output layer, for :func:`onmt_cont.losses.linear_ce.linear_cross_entropy`, which never
    holds the [N, vocab] matrix. :func:`logits_of` computes rows of it where they are needed."""

    hidden: torch.Tensor  # [N, hidden]
    weight: torch.Tensor  # [vocab, hidden]
    bias: torch.Tensor | None  # [vocab]


def logits_of(output, rows=slice(None)):
    """The logits at ``rows`` of a softmax's output: a tensor, or :class:`HiddenLogits` computed for those rows."""
    if isinstance(output, HiddenLogits):
        return torch.nn.functional.linear(output.hidden[rows], output.weight, output.bias)
    return output[rows]


class BiasedVector(NamedTuple):
    """A continuous generator's prediction ê and its learned per-word bias b (-word_bias), for
    the contrastive losses, whose logits of a candidate word j become score(ê, e_j) + b_j."""

    vector: torch.Tensor  # [N, m]
    bias: torch.Tensor  # [vocab]: the generator's parameter (only the candidates' entries get a gradient)


def prediction(output):
    """The predicted vector of a continuous generator's output (a tensor or :class:`BiasedVector`)."""
    return output.vector if isinstance(output, BiasedVector) else output
