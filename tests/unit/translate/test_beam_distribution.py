"""Beam search over continuous models scores a distribution over the words (translate.py
-beam_temperature): each step's scores are log-probabilities, with the greedy argmax unchanged, at the
scale each loss trained (nllvmf_nce: its contrastive softmax; infonce: its temperature)."""

import math

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.models.generators import ContinuousGenerator
from onmt_cont.outputs import BiasedVector  # noqa: F401  (the generator's training output)
from onmt_cont.utils.errors import UserError
from tests.helpers import WC, run_train, translator


def unit_table(vocab=12, dim=6, seed=0):
    table = F.normalize(torch.randn(vocab, dim, generator=torch.Generator().manual_seed(seed)), dim=-1)
    table[0] = 0
    return table


@pytest.mark.parametrize("criterion", ContinuousGenerator.CRITERIA)
def test_beam_scores_are_log_probabilities_with_the_greedy_argmax(criterion):
    table = unit_table()
    gen = ContinuousGenerator(4, table, criterion=criterion, word_bias=True)
    with torch.no_grad():
        gen.bias.copy_(torch.linspace(-1, 1, table.size(0)))
    out = 3 * torch.randn(5, table.size(1), generator=torch.Generator().manual_seed(1))
    gen.set_beam_scale(0.5)
    beam = gen.scores(out)
    torch.testing.assert_close(beam.exp().sum(-1), torch.ones(5))
    assert torch.equal(beam.argmax(-1), gen.greedy_scores(out).argmax(-1))
    assert beam[:, 0].eq(float("-inf")).all()  # padding is no word
    if criterion == "vmf":  # nllvmf_nce's contrastive distribution over the whole table
        want = torch.log_softmax((out @ table.t() + gen.bias.detach())[:, 1:] / 0.5, -1)
        torch.testing.assert_close(beam[:, 1:], want)
    with pytest.raises(ValueError, match="positive"):
        gen.set_beam_scale(0.0)


@pytest.fixture(scope="module")
def nce_model(wc_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("nce")
    run_train(wc_data, out, loss="nllvmf_nce", word_bias=True, **{**WC, "epochs": "2"})
    return out / "m_last.pt"


def test_each_loss_beams_at_its_own_scale(nce_model, wc_infonce, wc_ce):
    assert translator(str(nce_model), beam_size=2).model.generator.beam_scale == 1.0
    assert translator(str(nce_model), beam_size=2, beam_temperature=2).model.generator.beam_scale == 2.0
    infonce = translator(str(wc_infonce), beam_size=2).model.generator
    assert infonce.criterion == "cosine" and math.isclose(infonce.beam_scale, 0.1)  # WC's -temperature default
    assert not hasattr(translator(str(wc_ce), beam_size=2).model.generator, "beam_scale")  # a softmax: no change
    for bad in (0.0, -1.0, float("nan"), 1e9):
        with pytest.raises(UserError, match="-beam_temperature"):
            translator(str(nce_model), beam_size=2, beam_temperature=bad)
