"""Shared test settings."""

import torch

# The tests train tiny models: one intra-op thread avoids oversubscribing a 2-core CI machine
# (PyTorch's default of one thread per core made tiny models ~100x slower under load).
torch.set_num_threads(1)
