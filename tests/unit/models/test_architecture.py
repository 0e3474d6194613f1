"""The architecture interface (models/architecture.py): the registries build what -encoder_type and
-decoder_type name, each class says what it reads of the options, and checkpoints keep loading."""

import argparse

import pytest

from onmt_cont.bin import train
from onmt_cont.constants import SPECIALS
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.architecture import DECODERS, ENCODERS, Decoder, Encoder, register_encoder
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from onmt_cont.models.model import build_model
from onmt_cont.train.checks import ineffective_options
from onmt_cont.utils.errors import UserError

SMALL = ["-loss", "ce", "-rnn_size", "8", "-word_vec_size", "4", "-enc_layers", "1"]


def test_every_built_in_architecture_implements_the_interface():
    assert set(ENCODERS) == {"rnn", "brnn", "transformer"} and set(DECODERS) == {"rnn", "transformer"}
    assert all(issubclass(c, Encoder) and c.summary for c in ENCODERS.values())
    assert all(issubclass(c, Decoder) and c.summary for c in DECODERS.values())


def test_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered as 'rnn'"):
        register_encoder("rnn")(ENCODERS["transformer"])


@pytest.mark.parametrize("flags", [["-encoder_type", "brnn"], ["-brnn"], ["-encoder_type", "brnn", "-brnn"]])
def test_brnn_is_bidirectional_however_it_is_asked_for(flags):
    """-encoder_type brnn alone trained a one-directional LSTM up to 0.2.0, though its help said 'same as -brnn'."""
    opt = train.build_parser().parse_args(SMALL + flags)
    assert build_model(opt, 11, 13).encoder.bidirectional


def test_a_one_directional_brnn_checkpoint_of_0_2_0_still_loads(tmp_path):
    opt = train.build_parser().parse_args(SMALL + ["-encoder_type", "rnn"])
    model = build_model(opt, len(SPECIALS) + 3, len(SPECIALS) + 2)
    old = argparse.Namespace(**{**vars(opt), "encoder_type": "brnn"})  # what 0.2.0 stored for -encoder_type brnn
    src, tgt = Vocab([*SPECIALS, "a", "b", "c"]), Vocab([*SPECIALS, "x", "y"])
    save_checkpoint(str(tmp_path / "m.pt"), model, None, old, src, tgt, {"step": 1})
    loaded, *_ = model_from_checkpoint(load_checkpoint(str(tmp_path / "m.pt")))
    assert not loaded.encoder.bidirectional
    bi = build_model(argparse.Namespace(**{**vars(opt), "encoder_type": "brnn"}), len(src), len(tgt))
    save_checkpoint(str(tmp_path / "bi.pt"), bi, None, old, src, tgt, {"step": 1})
    assert model_from_checkpoint(load_checkpoint(str(tmp_path / "bi.pt")))[0].encoder.bidirectional


def test_options_an_architecture_does_not_read_are_named():
    parser = train.build_parser()
    opt = parser.parse_args(SMALL + ["-heads", "2", "-layer_norm", "post"])
    lines = ineffective_options(opt, parser.get_default)
    assert "-heads does nothing without a transformer side (-encoder_type/-decoder_type transformer)" in lines
    assert any(line.startswith("-layer_norm does nothing") for line in lines)
    opt = parser.parse_args([*SMALL, "-heads", "2", "-encoder_type", "transformer", "-word_vec_size", "8"])
    assert not any("-heads" in line for line in ineffective_options(opt, parser.get_default))


def test_alignment_layer_needs_a_decoder_that_reads_it(capsys):
    with pytest.raises((SystemExit, UserError)):
        train.main([*SMALL, "-data", "nowhere", "-save_model", "m", "-alignment_layer", "0"])
    assert "-alignment_layer picks a decoder layer's cross-attention: it needs -decoder_type transformer" in (
        capsys.readouterr().err
    )


def test_building_a_model_registers_every_built_in_architecture():
    """models/model.py imports the modules that register them: a process that imports only it has them all."""
    import subprocess
    import sys

    code = "from onmt_cont.models.model import DECODERS, ENCODERS; print(sorted(ENCODERS), sorted(DECODERS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['brnn', 'rnn', 'transformer'] ['rnn', 'transformer']"
