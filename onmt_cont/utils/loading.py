"""Loading what onmt_cont saved with ``torch.save`` (checkpoints, vocabularies, tables): plain data
only, and a file that is not one is a :class:`UserError` that says why."""

import os
import pickle
import zipfile

import torch

from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import check_regular_file


def load_checkpoint_data(path, what="a file written by onmt_cont"):
    """``torch.load`` with ``weights_only=True``: our files hold plain data only, and a file that
    holds anything else (a pickled object whose unpickling would run code) is refused unread.
    Any failure is a :class:`UserError` "PATH: not WHAT (why)"."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, not {what}")
    check_regular_file(path, what)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    except Exception as exc:  # torch.load's errors vary with what the file holds
        raise UserError(f"{path}: not {what} ({_why_unloadable(path, exc)})") from None


def _why_unloadable(path, exc):
    if os.path.getsize(path) == 0:
        return "empty file"
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"PK\x03\x04":
            return "truncated or corrupt torch.save file: its zip directory is missing"
        return "not a torch.save file"
    if isinstance(exc, pickle.UnpicklingError):
        return (
            "it holds Python objects other than tensors and plain data; refused without unpickling them, "
            "since unpickling can run code"
        )
    return f"corrupt torch.save file: {type(exc).__name__}"
