"""-average_decay: an exponential moving average of the parameters, which validation and
checkpoints see."""

from contextlib import contextmanager

import torch


class ParameterAverage:
    """An exponential moving average of a model's trainable parameters (-average_decay), with
    OpenNMT-py's schedule: the average starts as the parameters after the first update (as
    OpenNMT-py's does; the random initialisation never enters it), and at step s the new
    parameters weigh d_s = max(decay, 1 − (s + 1)/(s + 10)), so the average weighs recent steps
    more while training is short. Updated every ``every`` steps, the average takes the parameters
    of step s with the weight the ``every`` steps since the last update would have had together,
    1 − ∏(1 − d_t) over t in (s − every, s]: a per-step average that sees only every ``every``-th
    step's parameters, not one whose window would be ``every`` times longer (with OpenNMT-py's
    weight d_s alone, 60 steps at -average_every 30 kept two thirds of the first step's model).

    :meth:`swapped` puts the average into the model for validation and saving and the raw
    parameters back afterwards. Every rank of a distributed run keeps the same average (its
    parameters are the same after each step)."""

    # -train_table's table is left out (kept as trained): an average of unit rows is no unit row,
    # and its rows move only when their words are candidates
    UNAVERAGED = ("generator.table",)

    def __init__(self, model, decay, every=1):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and n not in self.UNAVERAGED]
        self.params = [p for _, p in named]
        self.names = [n for n, _ in named]
        self.decay, self.every = decay, every
        self.average = None  # set by the first update (or by load_state_dict)

    def weight(self, step):
        """d_s, the weight of step ``step``'s parameters in a per-step average."""
        return max(self.decay, 1.0 - (step + 1) / (step + 10))

    def span_weight(self, step):
        """The weight of step ``step``'s parameters when the average is updated every ``every``
        steps: 1 − ∏(1 − d_t) over the steps since the last update (from step 2 on: step 1 is the start)."""
        keep = 1.0
        for t in range(max(step - self.every + 1, 2), step + 1):
            w = self.weight(t)
            if w == self.decay:  # d_t only falls: the decay from here on
                keep *= (1.0 - self.decay) ** (step - t + 1)
                break
            keep *= 1.0 - w
        return 1.0 - keep

    @torch.no_grad()
    def update(self, step):
        if self.average is None:  # the first update: the average starts as these parameters
            self.average = [p.detach().float().clone() for p in self.params]
            return
        if step % self.every:
            return
        w = self.span_weight(step)
        for avg, p in zip(self.average, self.params, strict=True):
            avg.mul_(1.0 - w).add_(p.detach().float(), alpha=w)

    @contextmanager
    def swapped(self):
        """The model holds the average inside the block; yields {name: raw parameter}. Before the
        first update there is no average yet: the model holds its parameters."""
        raw = {n: p.detach().clone() for n, p in zip(self.names, self.params, strict=True)}
        if self.average is None:
            yield raw
            return
        with torch.no_grad():
            for avg, p in zip(self.average, self.params, strict=True):
                p.copy_(avg)
        try:
            yield raw
        finally:
            with torch.no_grad():
                for n, p in zip(self.names, self.params, strict=True):
                    p.copy_(raw[n])

    def load_state_dict(self, state):
        missing = set(self.names) - set(state)
        if missing:
            raise ValueError(f"the checkpoint's average lacks {sorted(missing)[:3]}")
        self.average = [
            state[n].detach().float().clone().to(p.device) for n, p in zip(self.names, self.params, strict=True)
        ]
