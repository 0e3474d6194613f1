"""Is a process still running? Tells a killed writer's leftovers (temporary files, preprocess.py's
shard folders, named with its PID) from a live writer's."""

import os


def pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (a PID past any real one too)
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
