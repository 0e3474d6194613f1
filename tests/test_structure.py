"""The architecture registries (issue 16, "structure first")."""

import pytest

from onmt_cont.bin import train
from onmt_cont.models import model as model_mod
from onmt_cont.models.decoder import InputFeedRNNDecoder
from onmt_cont.models.encoder import RNNEncoder


@pytest.mark.parametrize("brnn", [False, True])
def test_build_model_takes_the_architecture_from_the_registries(brnn, monkeypatch):
    """build_model constructs what str2enc / str2dec name, not a hard-coded class."""

    class MyEncoder(RNNEncoder):
        pass

    class MyDecoder(InputFeedRNNDecoder):
        pass

    name = "brnn" if brnn else "rnn"
    monkeypatch.setitem(model_mod.str2enc, name, MyEncoder)
    monkeypatch.setitem(model_mod.str2dec, "rnn", MyDecoder)
    args = ["-loss", "ce", "-rnn_size", "8", "-word_vec_size", "4", "-enc_layers", "2"] + (["-brnn"] if brnn else [])
    opt = train.build_parser().parse_args(args)
    model = model_mod.build_model(opt, 11, 13)
    assert type(model.encoder) is MyEncoder and type(model.decoder) is MyDecoder
    assert model.encoder.bidirectional == brnn and model.encoder.num_layers == 2
    assert model.decoder.num_layers == opt.dec_layers and model.decoder.embeddings.out_size == 4
