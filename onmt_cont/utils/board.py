"""train.py -tensorboard: scalars to a TensorBoard event file (the tensorboard package's record
format). Rank 0 writes; the other ranks hold no Board.

TensorBoard only observes the run: a folder that cannot be created or written, or a disk that
fills up, gives one warning and the Board stops writing; training goes on (as with -log_file).
The events are written in the training thread, not in a writer thread as torch's
SummaryWriter does, so a failed write is seen where it can be handled, not as a traceback from
a thread and again at the next call."""

import itertools
import os
import socket
import sys
import time

from onmt_cont.utils.errors import UserError

_FILES = itertools.count()  # two Boards of one process in one second get two files


def _print_warning(text):
    print(text, file=sys.stderr)


class Board:
    """Scalars under ``log_dir`` as "train/NAME" and "valid/NAME" against the training step.
    ``warn``: how the one warning is given (train.py: its log)."""

    def __init__(self, log_dir, warn=_print_warning):
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.record_writer import RecordWriter
        except ImportError as exc:
            raise UserError(f"-tensorboard needs the tensorboard package ({exc}): pip install tensorboard") from None
        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.log_dir, self.warn = log_dir, warn
        self.file = self.writer = None
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_FILES)}"
        try:
            os.makedirs(log_dir, exist_ok=True)
            self.file = open(os.path.join(log_dir, name), "wb")  # noqa: SIM115 (closed by close())
            self.writer = RecordWriter(self.file)
            self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
            self.file.flush()
        except OSError as exc:
            self._stop(exc)

    def _write(self, event):
        self.writer.write(event.SerializeToString())

    def _stop(self, exc):
        """One warning; no further writes."""
        self.warn(
            f"warning: -tensorboard_log_dir {self.log_dir}: cannot write ({(exc.strerror or str(exc)).lower()}); "
            "the TensorBoard scalars are no longer written (training goes on)"
        )
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
        self.file = self.writer = None

    def add(self, group, values, step):
        if self.writer is None:
            return
        value = [
            self.summary_pb2.Summary.Value(tag=f"{group}/{name}", simple_value=float(v)) for name, v in values.items()
        ]
        try:
            self._write(
                self.event_pb2.Event(wall_time=time.time(), step=step, summary=self.summary_pb2.Summary(value=value))
            )
            self.file.flush()  # a report or a validation: seldom enough to go to disk at once
        except OSError as exc:
            self._stop(exc)

    def flush(self):
        if self.file is None:
            return
        try:
            self.file.flush()
        except OSError as exc:
            self._stop(exc)

    def close(self):
        if self.file is None:
            return
        try:
            self.file.close()
        except OSError as exc:
            self.file = None  # closed anyway
            self._stop(exc)
        self.file = self.writer = None
