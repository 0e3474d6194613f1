"""train.py -tensorboard: scalars to TensorBoard event files, through torch.utils.tensorboard
(the tensorboard package). Rank 0 writes; the other ranks hold no Board."""

import os

from onmt_cont.utils.errors import UserError


class Board:
    """Scalars under ``log_dir`` as "train/NAME" and "valid/NAME" against the training step."""

    def __init__(self, log_dir):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise UserError(f"-tensorboard needs the tensorboard package ({exc}): pip install tensorboard") from None
        try:
            os.makedirs(log_dir, exist_ok=True)
        except OSError as exc:
            raise UserError(f"-tensorboard_log_dir {log_dir}: cannot create it ({exc.strerror})") from None
        self.writer = SummaryWriter(log_dir, flush_secs=10)

    def add(self, group, values, step):
        for name, value in values.items():
            self.writer.add_scalar(f"{group}/{name}", float(value), step)

    def flush(self):
        self.writer.flush()

    def close(self):
        self.writer.close()
