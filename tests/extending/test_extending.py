"""The one-file additions of docs/extending.md, each through its registry: -loss l1 (tests/extending/l1_loss.py)
and -encoder_type bow (tests/extending/bow_encoder.py) train from train.py's command line, and -search
penalised_greedy (tests/extending/repetition_greedy.py) decodes what they trained, from translate.py's command
line and from the Python API.

Each module registers itself when imported; the fixture imports them for one test and takes them out of the
registries afterwards, so the other tests see only the built-in names."""

import importlib
import math
import sys

import pytest

import onmt_cont
from onmt_cont.bin import translate
from onmt_cont.losses import LOSSES
from onmt_cont.models.architecture import ENCODERS
from onmt_cont.translate.strategies import STRATEGIES
from tests.helpers import BATCHES_PER_EPOCH, EMB_DIM, memorisation_data, reported_losses, run_train

EXAMPLES = ("l1_loss", "bow_encoder", "repetition_greedy")


@pytest.fixture
def added():
    """Import the example modules (registering them); unregister them after the test."""
    modules = {name: importlib.import_module(f"tests.extending.{name}") for name in EXAMPLES}
    yield modules
    LOSSES.pop("l1", None)
    ENCODERS.pop("bow", None)
    STRATEGIES.pop("penalised_greedy", None)
    for module in modules.values():
        sys.modules.pop(module.__name__, None)


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data").mkdir()
    return memorisation_data(tmp_path / "data", EMB_DIM)


def test_a_registered_loss_encoder_and_search_train_and_translate(added, data, tmp_path, capsys, monkeypatch):
    from onmt_cont.bin import train

    for main in (train.main, translate.main):
        with pytest.raises(SystemExit):
            main(["-h"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert "l1: L1 distance to the target vector" in help_text and "bow: bag of words" in help_text
    assert "penalised_greedy" in help_text
    epochs = 8
    run = run_train(data, tmp_path / "run", loss="l1", generator="linear", encoder_type="bow", epochs=epochs)
    losses = reported_losses(tmp_path / "run" / "train.log")
    assert len(losses) == epochs and all(math.isfinite(x) for x in losses)
    assert (losses[-1] + losses[-2]) / 2 < losses[0] - 0.05, losses
    assert run.progress["step"] == epochs * BATCHES_PER_EPOCH
    assert type(run.model.encoder).__name__ == "BagOfWordsEncoder" and run.model.generator.continuous

    checkpoint, src = str(tmp_path / "run" / "m_last.pt"), data["src"][:6]
    plain = onmt_cont.load(checkpoint, search="greedy", block_ngram_repeat=0, tokenized=True).translate(src)
    vocab = {w for line in data["tgt"] for w in line.split()}
    assert all(plain) and {w for line in plain for w in line.split()} <= vocab | {"<unk>"}
    # with no penalty the strategy is greedy search; with a prohibitive one no sentence repeats a word
    example = added["repetition_greedy"]
    monkeypatch.setattr(example, "PENALTY", 0.0)
    assert (
        onmt_cont.load(checkpoint, search="penalised_greedy", block_ngram_repeat=0, tokenized=True).translate(src)
        == plain
    )
    monkeypatch.setattr(example, "PENALTY", 1e9)
    (tmp_path / "src.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    translate.main(
        [
            "-model",
            checkpoint,
            "-src",
            str(tmp_path / "src.txt"),
            "-output",
            str(tmp_path / "out.txt"),
            "-search",
            "penalised_greedy",
            "-block_ngram_repeat",
            "0",
        ]
    )
    out = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert len(out) == len(src) and all(out)
    assert all(len(set(line.split())) == len(line.split()) for line in out), out


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["-search", "nowhere"], "-search nowhere: not a decoding strategy; choose auto, greedy, beam, sample"),
        (["-search", "sample"], "-search sample draws each word"),
        (["-search", "greedy", "-beam_size", "5"], "-search greedy keeps one hypothesis"),
        (["-search", "beam", "-random_sampling_topk", "5"], "-search beam does not draw words"),
    ],
)
def test_search_names_what_it_cannot_do(tmp_path, capsys, flags, needle):
    from onmt_cont.translate.config import DecodingConfig
    from onmt_cont.translate.options import decoding_config, parse_options
    from onmt_cont.utils.errors import UserError

    opt = parse_options(["-model", "m.pt", *flags])
    with pytest.raises(UserError, match=needle.replace("-", r"\-").replace(".", r"\.")):
        DecodingConfig.resolved(decoding_config(opt))


def test_after_the_additions_the_registries_hold_the_built_ins_only():
    assert "l1" not in LOSSES and "bow" not in ENCODERS and "penalised_greedy" not in STRATEGIES
    assert list(STRATEGIES) == ["greedy", "beam", "sample"]
