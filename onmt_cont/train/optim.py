"""The optimiser, the learning-rate schedule and lazily updated parameters."""

from argparse import Namespace

import torch


def learning_rate(opt: Namespace, step: int) -> float:
    """The learning rate of update ``step`` (1-based): constant, the noam or the inverse_sqrt schedule."""
    if opt.decay_method == "noam":
        return opt.learning_rate * opt.rnn_size**-0.5 * min(step**-0.5, step * opt.warmup_steps**-1.5)
    if opt.decay_method == "inverse_sqrt":
        return opt.learning_rate * min(step / opt.warmup_steps, (opt.warmup_steps / step) ** 0.5)
    return opt.learning_rate


def make_optimizer(opt: Namespace, model: torch.nn.Module, fused: bool | None = None) -> torch.optim.Optimizer:
    """Adam or SGD over the trainable parameters. A trained target table (-train_table) is a group
    of its own whose "lr_scale" (-table_lr_scale) multiplies every learning rate set on it.

    Adam on the CPU is fused (one kernel over every tensor): PyTorch's default there is a loop over
    the tensors, and the fused step is several times faster, which shows in a small model's update
    on one thread (lab/bench/optimizer_step.py). The result agrees with the loop to float rounding. On a
    GPU PyTorch's default (foreach) stays. ``fused``: True or False forces it either way (the benchmark's comparison);
    None chooses as above."""
    table = getattr(model.generator, "table", None)
    table = table if isinstance(table, torch.nn.Parameter) else None
    params = [p for p in model.parameters() if p.requires_grad and p is not table]
    groups = [{"params": params, "lr_scale": 1.0}]
    if table is not None:
        groups.append({"params": [table], "lr_scale": opt.table_lr_scale})
    for group in groups:
        group["lr"] = opt.learning_rate * group["lr_scale"]
    if opt.optim == "adam":
        if fused is None:
            on_cpu = all(p.device.type == "cpu" for group in groups for p in group["params"])
            impl = {"fused": True} if on_cpu else {}
        else:
            impl = {"fused": True} if fused else {"foreach": False}
        return torch.optim.Adam(groups, lr=opt.learning_rate, betas=(opt.adam_beta1, opt.adam_beta2), **impl)
    return torch.optim.SGD(groups, lr=opt.learning_rate)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every parameter group's rate: ``lr`` times the group's lr_scale."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group["lr_scale"]


class LazyEntries:
    """A parameter updated lazily (TensorFlow's LazyAdam): the entries whose gradient is exactly zero this step
    (a word bias's words that were no candidate) keep their value and their optimiser state, instead of moving
    on their momentum and decaying it for many steps after their last gradient. :meth:`keep` before the
    optimiser's step, :meth:`restore` after it; the copies are of those entries only."""

    STATE = ("exp_avg", "exp_avg_sq", "momentum_buffer")

    def __init__(self, optimizer, param):
        self.optimizer, self.param = optimizer, param

    @torch.no_grad()
    def keep(self):
        grad = self.param.grad
        if grad is None:
            return None
        idle = grad == 0
        state = self.optimizer.state.get(self.param, {})
        return idle, self.param[idle].clone(), {k: state[k][idle].clone() for k in self.STATE if k in state}

    @torch.no_grad()
    def restore(self, kept):
        if kept is None:
            return
        idle, value, saved = kept
        self.param[idle] = value
        state = self.optimizer.state.get(self.param, {})
        for k, v in saved.items():
            state[k][idle] = v
