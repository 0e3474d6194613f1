"""train.py with PyTorch's cuDNN attention backend switched off (the bf16_no_cudnn_sdpa mode, end to end)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
torch.backends.cuda.enable_cudnn_sdp(False)
from onmt_cont.bin.train import main  # noqa: E402

sys.argv = ["train.py"] + sys.argv[1:]
main()
