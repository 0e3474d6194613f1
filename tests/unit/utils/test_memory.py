"""onmt_cont.utils.memory: translate.py keeps freed memory, so that beam steps stop faulting in fresh pages."""

import json
import os
import subprocess
import sys

import pytest

from onmt_cont.utils import memory
from tests.helpers import ROOT

# Beam search on a random Transformer over 10,000 words, its sentences leaving the batch at different steps (as in a
# real decode, the [rows, 10,000] scores shrink step by step and grow again at the next batch). Prints the page
# faults of batches 4-9 (the first three grow the heap).
PATTERN = """
import json, resource, sys, torch
torch.set_num_threads(1)
from onmt_cont.bin import train
from onmt_cont.models.model import build_model
from onmt_cont.translate.beam import beam_search
from onmt_cont.utils.memory import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
opt = train.build_parser().parse_args(["-loss", "ce", "-encoder_type", "transformer", "-decoder_type", "transformer",
    "-rnn_size", "32", "-word_vec_size", "32", "-layers", "1", "-heads", "2", "-transformer_ff", "64"])
torch.manual_seed(0)
model = build_model(opt, 50, 10000).eval()
src, lengths, limits = torch.randint(4, 50, (64, 10)), torch.full((64,), 10), torch.arange(64) % 16 + 2
for _ in range(3):
    beam_search(model, src, lengths, limits, 5, need_attn=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    beam_search(model, src, lengths, limits, 5, need_attn=False)
print(json.dumps({"kept": kept, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def faults(mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, cwd=ROOT, env=env, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_kept_memory_stops_the_page_faults_of_repeated_beam_steps():
    default, kept = faults("default"), faults("keep")
    if not kept["kept"]:
        pytest.skip("no glibc mallopt here")
    if default["faults"] < 1000:
        pytest.skip(f"this C library's default already reuses the pages ({default['faults']} faults)")
    # here: 6,000-12,000 faults a batch by default, at most a few once the thresholds are raised on an idle
    # machine; under load (other jobs taking the cores and the page cache) the kept run was seen at 1/13 of the
    # default's (3,133 against 42,048), so the bound is 1/8: still an order of magnitude, not an idle machine's
    assert kept["faults"] <= default["faults"] / 8, (default, kept)


def test_a_threshold_the_environment_sets_is_left_as_it_is(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert memory.keep_freed_memory() is False


def test_the_switch_leaves_glibc_as_it_is(monkeypatch):
    """ONMT_CONT_KEEP_FREED_MEMORY=0: no mallopt call at all."""
    calls = []

    class Mallopt:  # takes argtypes and restype as ctypes' function does
        def __call__(self, *args):
            calls.append(args)
            return 1

    class Libc:
        mallopt = Mallopt()

    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: Libc())
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("ONMT_CONT_KEEP_FREED_MEMORY", "0")
    assert memory.keep_freed_memory() is False and calls == []
    monkeypatch.setenv("ONMT_CONT_KEEP_FREED_MEMORY", "1")
    assert memory.keep_freed_memory() is True
    assert calls == [(memory.M_MMAP_THRESHOLD, memory.MMAP_THRESHOLD), (memory.M_TRIM_THRESHOLD, memory.TRIM_THRESHOLD)]


def test_translate_keeps_freed_memory(monkeypatch, tmp_path):
    """translate.py raises the thresholds before it loads the model (here it stops at the missing model)."""
    from onmt_cont.bin import translate

    called = []
    monkeypatch.setattr(translate, "keep_freed_memory", lambda: called.append(True))
    src = tmp_path / "src.txt"
    src.write_text("un chat .\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        translate.main(["-model", str(tmp_path / "missing.pt"), "-src", str(src), "-output", str(tmp_path / "o.txt")])
    assert called == [True]


def test_train_keeps_freed_memory(monkeypatch, tmp_path):
    """train.py raises the thresholds once its options are checked, before the model is built."""
    from onmt_cont.train import start as training
    from tests.helpers import EMB_DIM, memorisation_data, run_train

    called = []
    monkeypatch.setattr(training, "keep_freed_memory", lambda: called.append(True))
    run_train(memorisation_data(tmp_path, EMB_DIM), tmp_path / "run", train_steps=1)
    assert called == [True]
