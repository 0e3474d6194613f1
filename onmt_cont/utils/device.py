"""The torch device of a -gpu option, shared by train.py and translate.py."""

import torch

from onmt_cont.utils.errors import UserError


def resolve_device(gpu):
    """-gpu N -> cuda:N (made the current device), None -> cpu; UserError if there is no such GPU."""
    if gpu is None:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError(f"-gpu {gpu}: CUDA is not available on this machine (this PyTorch: {torch.__version__})")
    if gpu >= torch.cuda.device_count():
        raise UserError(f"-gpu {gpu}: only {torch.cuda.device_count()} CUDA device(s)")
    torch.cuda.set_device(gpu)
    return torch.device("cuda", gpu)
