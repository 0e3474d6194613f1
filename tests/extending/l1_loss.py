"""-loss l1: the L1 distance between the predicted and the reference word's vector, a continuous loss in one file:
its per-token function, a builder over the options and the target table, and its Loss entry registered."""

from argparse import Namespace
from collections.abc import Callable

from torch import Tensor

from onmt_cont.losses import register_loss
from onmt_cont.losses.spec import Loss


def l1(pred: Tensor, target_vec: Tensor) -> Tensor:
    """‖ê − e(w)‖₁ per token: [N, m], [N, m] -> [N]."""
    return (pred - target_vec).abs().sum(-1)


def build_l1(opt: Namespace, table: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    """The per-token loss of the generator's output [N, m] against the target ids [N]."""
    return lambda output, target: l1(output.float(), table[target])


# decoded by the nearest neighbour in L2 distance, the closest of the existing criteria to L1's
L1 = register_loss(Loss("l1", build_l1, "L1 distance to the target vector", criterion="l2"))
