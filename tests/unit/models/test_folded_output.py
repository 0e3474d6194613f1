"""Decoding folds the embedding table into a continuous generator's last layer
(ContinuousGenerator.step_scores): êᵀe(w) = xᵀ(Wᵀe(w)) + bᵀe(w), an [n, d] x [d, V] product per step
instead of [n, m] x [m, V]. Its scores must be :meth:`scores`' to float rounding, under every
criterion and word term, and follow the table and the layer when they change."""

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.models.generators import ContinuousGenerator
from tests.helpers import WC, run_train, translator


def unit_table(vocab=40, dim=10, seed=0):
    table = F.normalize(torch.randn(vocab, dim, generator=torch.Generator().manual_seed(seed)), dim=-1)
    table[0] = 0
    return table


def plain(gen, dec_out, greedy):
    out = gen(dec_out)
    return gen.greedy_scores(out) if greedy else gen.scores(out)


@pytest.mark.parametrize("csls", [0, 3])
@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("nonlinear", [False, True])
@pytest.mark.parametrize("criterion", ContinuousGenerator.CRITERIA)
def test_folded_scores_are_the_plain_ones(criterion, nonlinear, greedy, csls):
    """Without CSLS the vmf scores fold the word terms and the beam's scale in as well."""
    torch.manual_seed(0)
    gen = ContinuousGenerator(6, unit_table(), nonlinear=nonlinear, criterion=criterion, word_bias=True).eval()
    with torch.no_grad():
        gen.bias.copy_(torch.linspace(-1, 1, 40))
    gen.set_prior(torch.log_softmax(torch.randn(40), 0), 0.3)
    gen.set_csls(csls)
    gen.set_beam_scale(None if greedy else 0.7)
    dec_out = 2 * torch.randn(7, 6)
    with torch.no_grad():
        got, want = gen.step_scores(dec_out, greedy), plain(gen, dec_out, greedy)
    assert gen._folded is not None and gen._folded[0].shape == (40, 6)  # the fold was used
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.argmax(-1), want.argmax(-1)) and got[:, 0].eq(float("-inf")).all()
    assert (gen._folded_words is not None) == (criterion == "vmf" and csls == 0)


def test_word_fold_follows_the_bias_the_prior_and_the_scale():
    gen = ContinuousGenerator(6, unit_table(), criterion="vmf", word_bias=True).eval()
    dec_out = torch.randn(5, 6)
    with torch.no_grad():
        for step in range(4):
            if step == 1:
                gen.bias.add_(torch.linspace(-2, 2, 40))  # trained (or loaded) in place
            elif step == 2:
                gen.set_prior(torch.log_softmax(torch.randn(40), 0), -0.5)
            elif step == 3:
                gen.set_beam_scale(0.5)
            for greedy in (True, False):
                got = gen.step_scores(dec_out, greedy)
                torch.testing.assert_close(got, plain(gen, dec_out, greedy), rtol=1e-5, atol=1e-5)


def test_fold_follows_the_table_and_the_layer():
    gen = ContinuousGenerator(6, unit_table(), criterion="vmf").eval()
    dec_out = torch.randn(5, 6)
    with torch.no_grad():
        gen.step_scores(dec_out, True)
        gen.proj.weight.mul_(-1)  # changed in place: refolded
        torch.testing.assert_close(gen.step_scores(dec_out, True), plain(gen, dec_out, True), rtol=1e-5, atol=1e-5)
        gen.set_table(unit_table(55, seed=3))  # another vocabulary (open-vocabulary decoding)
        got = gen.step_scores(dec_out, True)
    assert got.shape == (5, 55)
    torch.testing.assert_close(got, plain(gen, dec_out, True), rtol=1e-5, atol=1e-5)


def test_no_fold_where_it_gains_nothing_or_in_training():
    wide = ContinuousGenerator(12, unit_table(), criterion="vmf").eval()  # d 12 >= m 10: the plain product
    with torch.no_grad():
        wide.step_scores(torch.randn(3, 12), True)
    assert wide._folded is None
    narrow = ContinuousGenerator(6, unit_table(), criterion="vmf").train()
    narrow.step_scores(torch.randn(3, 6), True)
    assert narrow._folded is None


@pytest.fixture(scope="module")
def narrow_model(wc_data, tmp_path_factory):
    """nllvmf_nce with a word bias, decoder size 8 under a 16-d table: decoding folds."""
    out = tmp_path_factory.mktemp("narrow")
    run_train(wc_data, out, loss="nllvmf_nce", word_bias=True, **{**WC, "rnn_size": "8", "epochs": "3"})
    return str(out / "m_last.pt")


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_unchanged(narrow_model, wc_data, beam, monkeypatch):
    """A trained model translates its corpus the same with the fold as without it."""
    lines = wc_data["src"]
    tr = translator(narrow_model, beam_size=beam)
    folded = tr.translate_lines(lines)
    assert tr.model.generator._folded is not None
    monkeypatch.setattr(ContinuousGenerator, "step_scores", lambda self, d, greedy=False: plain(self, d, greedy))
    assert translator(narrow_model, beam_size=beam).translate_lines(lines) == folded
