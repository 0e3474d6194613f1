"""Ctrl-C and SIGTERM: a SIGTERM that unwinds like Ctrl-C, and blocks a signal waits for."""

import signal
import threading
from contextlib import contextmanager


class Stopped(KeyboardInterrupt):
    """A SIGTERM turned into an exception (:func:`sigterm_stops`): it unwinds like Ctrl-C, so a file
    being written is removed; ``signum`` says which signal."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_deferred():
    """Ctrl-C and SIGTERM wait until the block has run: a checkpoint being written is finished, then
    the signal is delivered again to the handlers that were in place (the run stops as it would
    have). An exception raised inside torch.save's writer was masked by the error of its half-written
    zip file: a traceback, where one line was due. The main thread only (signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []

    def hold(signum, frame):
        pending.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    for s in dict.fromkeys(pending):
        signal.raise_signal(s)


@contextmanager
def sigterm_stops():
    """Within this block a SIGTERM (kill's default, a batch system's stop) raises :class:`Stopped`,
    which unwinds as Ctrl-C does (Python's default for SIGTERM is to end at once, leaving temporary
    files behind). The main thread only (signals go there); elsewhere a no-op block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
