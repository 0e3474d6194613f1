"""The one-file additions of docs/extending.md, each through its registry: -loss l1 (tests/extending/l1_loss.py)
and -encoder_type bow (tests/extending/bow_encoder.py) train from train.py's command line and translate.

Each module registers itself when imported; the fixture imports it for one test and takes it out of the
registries afterwards, so the other tests see only the built-in names."""

import importlib
import math
import sys

import pytest

import onmt_cont
from onmt_cont.losses import LOSSES
from onmt_cont.models.architecture import ENCODERS
from tests.helpers import BATCHES_PER_EPOCH, EMB_DIM, memorisation_data, reported_losses, run_train


@pytest.fixture
def added():
    """Import the example modules (registering them); unregister them after the test."""
    modules = [importlib.import_module(f"tests.extending.{name}") for name in ("l1_loss", "bow_encoder")]
    yield modules
    LOSSES.pop("l1", None)
    ENCODERS.pop("bow", None)
    for module in modules:
        sys.modules.pop(module.__name__, None)


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data").mkdir()
    return memorisation_data(tmp_path / "data", EMB_DIM)


def test_a_registered_loss_and_encoder_train_and_translate(added, data, tmp_path, capsys):
    from onmt_cont.bin import train

    with pytest.raises(SystemExit):
        train.main(["-h"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert "l1: L1 distance to the target vector" in help_text and "bow: bag of words" in help_text
    epochs = 8
    run = run_train(data, tmp_path / "run", loss="l1", generator="linear", encoder_type="bow", epochs=epochs)
    losses = reported_losses(tmp_path / "run" / "train.log")
    assert len(losses) == epochs and all(math.isfinite(x) for x in losses)
    assert (losses[-1] + losses[-2]) / 2 < losses[0] - 0.05, losses
    assert run.progress["step"] == epochs * BATCHES_PER_EPOCH
    assert type(run.model.encoder).__name__ == "BagOfWordsEncoder" and run.model.generator.continuous
    model = onmt_cont.load(str(tmp_path / "run" / "m_last.pt"), beam_size=1, block_ngram_repeat=0, tokenized=True)
    out = model.translate(data["src"][:4])
    assert len(out) == 4 and all(out)
    vocab = {w for line in data["tgt"] for w in line.split()}
    assert {w for line in out for w in line.split()} <= vocab | {"<unk>"}


def test_the_built_in_registries_are_left_as_they_were(added):
    """The fixture's own check: while registered, the names are there (and gone after, in the next test)."""
    assert "l1" in LOSSES and "bow" in ENCODERS


def test_after_the_additions_the_registries_hold_the_built_ins_only():
    assert "l1" not in LOSSES and "bow" not in ENCODERS
