"""-normaliser_estimate leave_one_out: the sampled softmax's value with a gradient in which each
negative's weight is divided by the normaliser without that word's own sampled terms (their expected
value instead); by hand, by brute force, by Monte Carlo against the full softmax, and in train.py."""

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.losses.contrastive import (
    _corrected_cross_entropy,
    _word_sums,
    candidate_cross_entropy,
    leave_one_out_cross_entropy,
    unique_shared,
)
from onmt_cont.losses.negatives import Negatives, candidate_dots, candidate_ids
from tests.test_train import fails, run_train
from tests.test_word_choice import WC


def test_word_sums_brute_force():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5, (4, 9), generator=gen)
    values = torch.rand(4, 9, generator=gen, dtype=torch.float64)
    got = _word_sums(values, ids)
    for i in range(4):
        for k in range(9):
            assert got[i, k].item() == pytest.approx(values[i][ids[i] == ids[i, k]].sum().item(), rel=1e-12)


def test_value_and_gradient_by_hand():
    """Two tokens; token 0 has word 7 twice among its candidates (in-batch and its own list), token 1
    a masked column. Value: the sampled softmax's. Gradient on negative k of word j:
    t_k / (Ẑ − Σ_{columns of j} t + exp(s_j)), t_k = exp(s_j − log E_k + log n_k); on the gold logit
    minus the sum of those."""
    pos = torch.tensor([1.0, 0.5], dtype=torch.float64, requires_grad=True)
    raw = torch.tensor([[2.0, 0.3, 2.0, -1.0], [0.7, 0.2, 1.5, 0.0]], dtype=torch.float64, requires_grad=True)
    counts = torch.tensor([[-1.2, 0.4, 0.9, 0.0], [-0.3, 0.1, 2.0, 0.5]], dtype=torch.float64)
    mask = torch.tensor([[False, False, False, False], [False, False, False, True]])
    ids = torch.tensor([[7, 8, 7, 9], [7, 8, 5, 9]])
    loss = leave_one_out_cross_entropy(pos, raw, counts, mask, ids)
    want = candidate_cross_entropy(pos, raw - counts, mask)
    torch.testing.assert_close(loss, want.detach())
    loss.sum().backward()
    for i in range(2):
        t = [0.0 if mask[i, k] else (raw[i, k] - counts[i, k]).exp().item() for k in range(4)]
        z = pos[i].exp().item() + sum(t)
        weights = []
        for k in range(4):
            same = sum(t[c] for c in range(4) if ids[i, c] == ids[i, k])
            weights.append(0.0 if mask[i, k] else t[k] / (z - same + raw[i, k].exp().item()))
            assert raw.grad[i, k].item() == pytest.approx(weights[-1], rel=1e-9), (i, k)
        assert pos.grad[i].item() == pytest.approx(-sum(weights), rel=1e-9)


def test_shared_is_the_loss_gradient():
    """The default estimate is the loss's own gradient: softmax weights, unchanged."""
    pos = torch.tensor([0.2], dtype=torch.float64, requires_grad=True)
    dots = torch.tensor([[1.0, -0.5, 0.3]], dtype=torch.float64, requires_grad=True)
    neg = Negatives(("random",), F.normalize(torch.randn(10, 4), dim=-1), num_sampled=2)
    shared = torch.tensor([2, 3, 4])
    loss = _corrected_cross_entropy(pos, dots, torch.tensor([1]), neg, shared, None, None, True, "shared")
    loss.sum().backward()
    logits = torch.cat([pos.detach(), (dots.detach() - torch.tensor(2 / 9).log()).squeeze(0)])
    torch.testing.assert_close(dots.grad[0], logits.softmax(0)[1:])


def full_and_sampled_push(estimate, draws=3000):
    """One token over a vocabulary of 40 words: one wrong word (5) is almost as likely as the gold (4)
    and the rest (pointing away from the prediction) are unlikely, so that the normaliser without
    word 5's terms hardly varies between draws. Negatives: 4 uniform random draws, corrected by E = 4/39. The mean weight
    on word 5's bias over the draws, and the full softmax's p(5)."""
    vocab, m = 40, 8
    gen = torch.Generator().manual_seed(3)
    table = F.normalize(torch.randn(vocab, m, generator=gen), dim=-1)
    table[0] = 0
    table[6:] = F.normalize(table[6:] - 2 * table[4], dim=-1)
    table[5] = F.normalize(table[4] + 0.3 * table[5], dim=0)
    pred = (8.0 * table[4]).unsqueeze(0)
    target = torch.tensor([4])
    logits = (pred @ table.t()).double()
    logits[0, 0] = float("-inf")
    p5 = logits.softmax(1)[0, 5].item()
    neg = Negatives(("random",), table, num_sampled=4)
    torch.manual_seed(0)
    total = 0.0
    for _ in range(draws):
        shared, per_token = neg(None, target)
        shared, repeats = unique_shared(shared, 0)
        dots = candidate_dots(pred, table, shared, per_token).double().requires_grad_()
        pos = logits[0, 4].reshape(1)
        loss = _corrected_cross_entropy(pos, dots, target, neg, shared, per_token, repeats, True, estimate)
        weight, = torch.autograd.grad(loss.sum(), dots)
        ids = candidate_ids(torch.arange(dots.size(1)).expand_as(dots), shared, per_token)
        total += weight[ids == 5].sum().item()
    return total / draws, p5


def test_leave_one_out_pushes_a_rarely_drawn_word_as_the_full_softmax():
    """A word drawn with weight 1/E = 9.75 dominates the sampled normaliser whenever it is drawn, so
    the loss's own gradient pushes it down far less than the full softmax does; leaving its own term
    out of the normaliser gives the full softmax's push within Monte Carlo error. (What the estimate
    leaves is the rest of the normaliser's own variance: E[1/X] > 1/E[X]; it is small here by design.)"""
    loo, p5 = full_and_sampled_push("leave_one_out")
    shared, _ = full_and_sampled_push("shared")
    assert p5 > 0.2
    assert loo / p5 == pytest.approx(1.0, abs=0.1), (loo, p5)
    assert shared / p5 < 0.6, (shared, p5)


def test_train_with_leave_one_out(wc_data, tmp_path, capsys):
    """train.py trains with it, keeps it in the checkpoint, and refuses it without the correction."""
    from tests.test_train import argv
    from onmt_cont.models.checkpoint import load_checkpoint

    run_train(wc_data, tmp_path / "a", loss="nllvmf_nce", word_bias=True, sampling_correction=True,
              expected_counts="sentence", normaliser_estimate="leave_one_out", **{**WC, "train_steps": "4"})
    assert load_checkpoint(str(tmp_path / "a" / "m_last.pt"))["opt"]["normaliser_estimate"] == "leave_one_out"
    (tmp_path / "b").mkdir()
    fails(capsys, argv(wc_data, tmp_path / "b", loss="nllvmf_nce", normaliser_estimate="leave_one_out", **WC),
          "-normaliser_estimate leave_one_out", "needs -sampling_correction")
    assert not list((tmp_path / "b").iterdir())
