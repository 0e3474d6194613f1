"""Shared test settings."""

import os

import torch

# The tests train tiny models: one intra-op thread avoids oversubscribing a 2-core CI machine
# (PyTorch's default of one thread per core made tiny models ~100x slower under load).
torch.set_num_threads(1)
# train.py and translate.py (-threads' default) and the scripts the tests start honour it
os.environ["OMP_NUM_THREADS"] = "1"
