"""The torch device of a -gpu option, shared by train.py and translate.py."""

import argparse

import torch

from onmt_cont.utils.errors import UserError


def gpu_option(text):
    """argparse type of -gpu: a CUDA device id, or a negative one (OpenNMT's ``-gpu -1``) for the CPU."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a CUDA device id (0, 1, ...; -1 for the CPU), got {text!r}"
        ) from None
    return None if value < 0 else value


def resolve_device(gpu):
    """-gpu N -> cuda:N (made the current device), None or N < 0 -> cpu; UserError if there is no such GPU."""
    if gpu is None or gpu < 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError(f"-gpu {gpu}: CUDA is not available on this machine (this PyTorch: {torch.__version__})")
    if gpu >= torch.cuda.device_count():
        raise UserError(f"-gpu {gpu}: only {torch.cuda.device_count()} CUDA device(s)")
    torch.cuda.set_device(gpu)
    return torch.device("cuda", gpu)


def check_device(device):
    """The Python API's ``device`` ("cpu", "cuda", "cuda:N", or a torch.device) -> its string; UserError for
    another kind, or a GPU this machine does not have (not torch's AssertionError, issue 77.19)."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise UserError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(
                f"device {device!r}: CUDA is not available on this machine (this PyTorch: "
                f"{torch.__version__}); use device 'cpu'"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise UserError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif parsed.type != "cpu":
        raise UserError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return str(parsed)
