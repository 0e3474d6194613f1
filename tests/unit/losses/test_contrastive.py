"""Hand-computed values of the contrastive losses (onmt_cont.losses.contrastive) and of their
negative sources (onmt_cont.losses.negatives), on the 5-word table of test_losses::

    e1 = (1, 0, 0), e2 = (0, 1, 0), e3 = (0, 0, 1), e4 = (0.6, 0.8, 0)

Token 0: target e1, ê along e4:  cos(ê, e_j)           = [-, 0.6, 0.8, 0, 1.0]
                                  cos(ê, e_j) − cos(e1, e_j) = [-, (gold), 0.8, 0, 0.4]
so the hardest negative is e2 (hinge 0.5 + 0.8 − 0.6 = 0.7), then e4 (0.9), then e3 (0).
"""

import math
from argparse import Namespace

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.losses import build_loss
from onmt_cont.losses.continuous import max_margin, nll_vmf
from onmt_cont.losses.negatives import parse_sources, table_neighbours

TABLE3 = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
PRED = torch.tensor([[1.2, 1.6, 0.0], [0.1, 0.0, 1.0]])  # token 1: ê = (0.1, 0, 1), |ê| = √1.01
TARGET = torch.tensor([1, 3])
C1 = 0.1 / math.sqrt(1.01)  # cos(ê1, e1)
C3 = 1.0 / math.sqrt(1.01)  # cos(ê1, e3)


def loss_of(name, pred=PRED, target=TARGET, table=TABLE3, **kw):
    base = {
        "loss": name,
        "margin": 0.5,
        "num_negatives": None,
        "negatives": None,
        "num_sampled": 64,
        "ann_candidates": 32,
        "temperature": 0.1,
        "contrastive_weight": 1.0,
        "lambda1": 0.02,
        "lambda2": 0.1,
        "vmf_approx": False,
    }
    return build_loss(Namespace(**{**base, **kw}), table)(pred, target)


def random_table(vocab=40, m=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    table = F.normalize(torch.randn(vocab, m, generator=gen), dim=-1)
    table[0] = 0
    return table, gen


# --- maxmargin ------------------------------------------------------------------------------------


def test_maxmargin_exact_k1_is_the_reference():
    table, gen = random_table()
    pred = torch.randn(30, 8, generator=gen)
    target = torch.randint(1, 40, (30,), generator=gen)
    torch.testing.assert_close(
        loss_of("maxmargin", pred, target, table, negatives="exact"), max_margin(pred, target, table, 0.5)
    )


@pytest.mark.parametrize("k,want0", [(1, 0.7), (2, (0.7 + 0.9) / 2), (3, (0.7 + 0.9 + 0.0) / 3), (9, 1.6 / 3)])
def test_maxmargin_k_hardest_mean(k, want0):
    """The k hardest by the criterion, their hinges averaged; k past the 3 negatives takes all 3."""
    got = loss_of("maxmargin", negatives="exact", num_negatives=k)
    torch.testing.assert_close(got[0], torch.tensor(want0))
    assert got[1] == 0  # token 1 is inside the margin against every word


def test_maxmargin_inbatch_negatives():
    """The batch's targets are e1 and e3: token 0 has only e3 (its own e1 is masked), token 1 only
    e1; with k = 3 each averages over the one it has. Margin 2 keeps both hinges open."""
    got = loss_of("maxmargin", negatives="inbatch", num_negatives=3, margin=2.0)
    torch.testing.assert_close(got, torch.tensor([2.0 + 0.0 - 0.6, 2.0 + C1 - C3]))


def test_maxmargin_gold_neighbours():
    """One neighbour of the gold word: e1's nearest other word is e4 (0.6), so token 0 gets the
    hinge of e4 (0.9), not exact's e2 (0.7). Token 1 (gold e2, whose neighbour is e4 at 0.8):
    0.5 + cos(ê1, e4) − cos(ê1, e2) = 0.5 + 0.06/√1.01."""
    got = loss_of("maxmargin", target=torch.tensor([1, 2]), negatives="gold_nn", ann_candidates=1)
    torch.testing.assert_close(got, torch.tensor([0.9, 0.5 + 0.06 / math.sqrt(1.01)]))


@pytest.mark.parametrize("k,want0", [(1, 0.9), (2, 0.7)])
def test_maxmargin_prediction_neighbours_are_rescored(k, want0):
    """ê0's nearest words are e4 (1.0) then e2 (0.8): with one candidate the negative is e4; with
    two the criterion picks e2 among them, which is exact's choice."""
    got = loss_of("maxmargin", negatives="ann", ann_candidates=k)
    torch.testing.assert_close(got[0], torch.tensor(want0))


def test_maxmargin_random_draws_are_rescored():
    """64 uniform draws from 4 words hold all of them (seeded): the hardest is exact's."""
    torch.manual_seed(0)
    torch.testing.assert_close(loss_of("maxmargin", negatives="random"), loss_of("maxmargin", negatives="exact"))
    torch.manual_seed(0)
    few = loss_of("maxmargin", negatives="random", num_sampled=1)  # one word for both tokens
    assert min(abs(few[0].item() - v) for v in (0.7, 0.9, 0.0)) < 1e-6  # e2, e4, e3 or the (masked) gold


def test_no_gradient_reaches_the_table_or_the_choice():
    table = TABLE3.clone().requires_grad_(False)
    pred = PRED.clone().requires_grad_(True)
    for neg in ("exact", "gold_nn", "ann", "inbatch,random"):
        pred.grad = None
        loss_of("maxmargin", pred, TARGET, table, negatives=neg).sum().backward()
        assert table.grad is None and torch.isfinite(pred.grad).all()
        assert pred.grad[1].abs().sum() == 0  # inside the margin: no gradient


# --- infonce and nllvmf_nce -------------------------------------------------------------------------


@pytest.mark.parametrize("tau", [0.1, 1.0])
def test_infonce_exact_by_hand(tau):
    """Token 0: −log e^{0.6/τ} / (e^{0.6/τ} + e^{0.8/τ} + e^{0/τ} + e^{1/τ}); padding is no word."""
    got = loss_of("infonce", negatives="exact", temperature=tau)
    want0 = math.log(sum(math.exp(c / tau) for c in (0.6, 0.8, 0.0, 1.0))) - 0.6 / tau
    want1 = math.log(sum(math.exp(c / tau) for c in (C1, 0.0, C3, 0.6 * C1))) - C3 / tau
    torch.testing.assert_close(got, torch.tensor([want0, want1]))


def test_infonce_exact_is_a_cosine_softmax_over_the_table():
    table, gen = random_table()
    pred = torch.randn(30, 8, generator=gen)
    target = torch.randint(1, 40, (30,), generator=gen)
    logits = F.normalize(pred, dim=-1) @ table.t() / 0.1
    logits[:, 0] = float("-inf")
    torch.testing.assert_close(
        loss_of("infonce", pred, target, table, negatives="exact"), F.cross_entropy(logits, target, reduction="none")
    )


def test_infonce_inbatch_repeats_count():
    """Targets e1, e1, e3: each e1 token's only negative is e3 (its twin is the gold word); the e3
    token sees e1 twice (in-batch negatives follow the data's frequencies)."""
    pred = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    got = loss_of("infonce", pred, torch.tensor([1, 1, 3]), negatives="inbatch", temperature=1.0)
    a = math.log(math.e + 1.0) - 1.0  # gold cos 1, negative cos 0
    b = math.log(math.e + 2.0) - 1.0
    torch.testing.assert_close(got, torch.tensor([a, a, b]))


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_nllvmf_nce(weight):
    """NLLvMF plus weight · (logsumexp of êᵀe_j over {w} ∪ negatives − êᵀe(w)), unscaled logits."""
    got = loss_of("nllvmf_nce", negatives="exact", contrastive_weight=weight)
    vmf = nll_vmf(PRED, TABLE3[TARGET], 0.02, 0.1)
    dots = PRED @ TABLE3[1:].t()
    contrast = torch.logsumexp(dots, 1) - dots.gather(1, (TARGET - 1).unsqueeze(1)).squeeze(1)
    torch.testing.assert_close(got, vmf + weight * contrast)
    # token 0 by hand: êᵀe_j = [1.2, 1.6, 0, 2.0], gold 1.2
    want0 = math.log(math.exp(1.2) + math.exp(1.6) + 1.0 + math.exp(2.0)) - 1.2
    torch.testing.assert_close(contrast[0], torch.tensor(want0))


def test_prefix_words_by_hand():
    """Two sentences 5 6 </s> and 7 5 8 </s>, one after the other as TrainingForward flattens
    them: each token's earlier words of its own sentence, nearest first; none across </s>."""
    from onmt_cont.losses.negatives import prefix_words

    got = prefix_words(torch.tensor([5, 6, 3, 7, 5, 8, 3]), 2)
    want = torch.tensor([[-1, -1], [5, -1], [6, 5], [-1, -1], [7, -1], [5, 7], [8, 5]])
    assert torch.equal(got, want)
    assert torch.equal(prefix_words(torch.tensor([9, 3]), 4), torch.tensor([[-1] * 4, [9, -1, -1, -1]]))


def test_infonce_prefix_negatives_by_hand():
    """One sentence e1 e4 e1 (ids 1, 4, 1; no </s>, so no second sentence): token 1 (gold e4) has e1 as its only
    negative; token 2 (gold e1) has e4 and e1, and e1 is its own gold word, so only e4 counts;
    token 0 has none: the loss of a lone gold word, 0."""
    pred = torch.tensor([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [1.0, 0.0, 0.0]])
    got = loss_of("infonce", pred, torch.tensor([1, 4, 1]), negatives="prefix", temperature=1.0)
    want = torch.tensor(
        [0.0, math.log(math.exp(1.0) + math.exp(0.6)) - 1.0, math.log(math.exp(1.0) + math.exp(0.6)) - 1.0]
    )
    torch.testing.assert_close(got, want)
    # a window of 1: token 2 sees only e4 (the word right before it), the same loss
    torch.testing.assert_close(
        loss_of("infonce", pred, torch.tensor([1, 4, 1]), negatives="prefix", temperature=1.0, prefix_window=1), want
    )


def test_prefix_negatives_push_the_prediction_off_earlier_words():
    """nllvmf_nce with prefix negatives: a prediction that points at a word written earlier in the
    sentence (not the gold word) costs more than with the default sources alone, and the gradient
    turns it away from that word."""
    table, gen = random_table()
    target = torch.tensor([5, 9, 3, 7, 5, 8, 3])
    pred = (3 * table[target]).clone()
    pred[5] = 3 * table[5]  # token 5 (gold 8) points at word 5, written two tokens before
    plain = loss_of("nllvmf_nce", pred, target, table, negatives="inbatch")
    pred_prefix = pred.clone().requires_grad_()
    with_prefix = loss_of("nllvmf_nce", pred_prefix, target, table, negatives="inbatch,prefix")
    assert with_prefix[5] > plain[5]
    with_prefix.sum().backward()
    assert (pred_prefix.grad[5] * table[5]).sum() > 0  # descent lowers ê·e(5)


@pytest.mark.parametrize("loss", ["infonce", "nllvmf_nce", "maxmargin"])
def test_negatives_logits_stay_float32_under_bf16_autocast(loss):
    """Under -amp the per-token negatives' logits are computed in float32, as the gold one: the loss under
    CPU bf16 autocast equals the float32 loss (in bf16 the products would be off by ~1e-2 relative,
    0.2 at nllvmf_nce's logit scale of 67 here). nllvmf_nce's shared candidates go through
    losses/shared_block.py, whose bf16 product is shifted by the gold logit: within 0.2% here, where the
    predictions are random and the gold word far from the top (test_fast_cpu_training.py measures it)."""
    table, gen = random_table(300, 32)
    pred = 67 * F.normalize(torch.randn(40, 32, generator=gen), dim=-1)  # κ = 67
    target = torch.randint(1, 300, (40,), generator=gen)
    kw = {"negatives": "exact"} if loss != "maxmargin" else {"num_negatives": 5}
    want = loss_of(loss, pred, target, table, **kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        from onmt_cont.losses.token_dots import candidate_dots

        assert candidate_dots(pred, table, torch.arange(1, 300), None).dtype == torch.float32
        got = loss_of(loss, pred, target, table, **kw)
    assert got.dtype == torch.float32
    tol = 2e-3 if loss == "nllvmf_nce" else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=1e-5)


# --- the negative sources ---------------------------------------------------------------------------


def test_table_neighbours_exact_and_faiss():
    """Exact below EXACT_UP_TO rows; the faiss IVF index (forced here) finds nearly the same."""
    table, _ = random_table(3000, 32)
    exact = table_neighbours(table, 8)
    assert (exact[0] == -1).all() and (exact[1:, 0] == torch.arange(1, 3000)).all()  # each row's nearest: itself
    want = (table[1:] @ table[1:].t()).topk(9, dim=1).indices + 1
    assert torch.equal(exact[1:], want)
    pytest.importorskip("faiss", reason="faiss-cpu is not installed (the approximate neighbours need it)")
    approx = table_neighbours(table, 8, exact_up_to=0)
    recall = (approx[1:, :, None] == exact[1:, None, :]).any(-1).float().mean().item()
    assert recall > 0.95


def test_exact_search_chunks_are_sized_by_memory(monkeypatch):
    """The chunk of an exact all-rows search holds at most EXACT_SEARCH_BYTES / 3 of products at
    any vocabulary size (a fixed 4,096 rows was 4.9 GB at 300K words), and chunking changes no
    result: table_neighbours and CSLS's table_hubness agree with one-chunk searches."""
    from onmt_cont.losses import negatives
    from onmt_cont.models.generators import table_hubness

    for vocab in (10, 50_000, 300_000, 5_000_000):
        rows = negatives.search_chunk_rows(vocab)
        assert rows >= 1 and (rows == 1 or rows * vocab * 4 <= negatives.EXACT_SEARCH_BYTES / 3)
    assert negatives.search_chunk_rows(300_000) == 298  # [298, 300K] float32: 358 MB
    table, _ = random_table(500, 16)
    whole, hub = table_neighbours(table, 5), table_hubness(table, 5, chunk=500)
    monkeypatch.setattr(negatives, "EXACT_SEARCH_BYTES", 12 * 500 * 7)  # 7 rows a chunk
    assert negatives.search_chunk_rows(500) == 7
    assert torch.equal(table_neighbours(table, 5), whole)
    torch.testing.assert_close(table_hubness(table, 5), hub)


@pytest.mark.parametrize("text", ["", "exact,inbatch", "gold_nn,gold_nn", "hard", "exact,prefix"])
def test_parse_sources_refuses(text):
    with pytest.raises(ValueError):
        parse_sources(text)


@pytest.mark.parametrize("table_grad", [False, True])
def test_candidate_dots_per_token_matches_gathering(table_grad):
    """The per-token products and both gradients (a trained table's included, repeated ids summed)
    equal those of gathering the rows and multiplying, in float64; gradcheck agrees."""
    from onmt_cont.losses.token_dots import _TokenDots, candidate_dots

    gen = torch.Generator().manual_seed(5)
    vec = torch.randn(6, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    table = torch.randn(9, 4, dtype=torch.float64, generator=gen, requires_grad=table_grad)
    ids = torch.tensor([[1, 2, 2], [3, 0, 8], [8, 8, 8], [4, 5, 6], [1, 1, 7], [2, 3, -1]])
    weight = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    got = candidate_dots(vec, table, None, ids)
    want = torch.einsum("nm,ncm->nc", vec, table[ids.clamp_min(0)])
    torch.testing.assert_close(got, want.float())
    inputs = (vec, table) if table_grad else (vec,)
    mine = torch.autograd.grad((_TokenDots.apply(vec, table, ids.clamp_min(0)) * weight).sum(), inputs)
    ref = torch.autograd.grad((want * weight).sum(), inputs)
    for a, b in zip(mine, ref, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda v, t: _TokenDots.apply(v, t, ids.clamp_min(0)), (vec, table))


def test_candidate_dots_per_token_matches_gathering_in_float32():
    """float32 at the size of a de->en batch's gold_nn candidates (300-d, a token's words repeated):
    the products and the prediction's gradient are those of gathering the rows, to float rounding."""
    from onmt_cont.losses.token_dots import _TokenDots

    gen = torch.Generator().manual_seed(2)
    table = F.normalize(torch.randn(500, 300, generator=gen), dim=-1)
    ids = torch.randint(1, 500, (70, 33), generator=gen)
    ids[0], ids[1, ::2] = 7, 0  # every candidate one word; -1s read at 0 among others
    vec = (torch.randn(70, 300, generator=gen) * 20).requires_grad_()  # nllvmf_nce's ‖ê‖ grows to about 67
    weight = torch.randn(70, 33, generator=gen)
    want = torch.einsum("nm,ncm->nc", vec, table[ids])
    got = _TokenDots.apply(vec, table, ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(
        *(torch.autograd.grad((out * weight).sum(), vec)[0] for out in (got, want)), rtol=1e-5, atol=1e-5
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_candidate_dots_per_token_on_a_gpu_match_the_cpu():
    """A GPU gathers the rows; the CPU takes the sampled product and the embedding bag: the two agree
    (products, the prediction's and a trained table's gradients), repeated and -1 ids included."""
    from onmt_cont.losses.token_dots import _TokenDots

    gen = torch.Generator().manual_seed(4)
    table = F.normalize(torch.randn(300, 64, generator=gen), dim=-1)
    ids = torch.randint(0, 300, (50, 9), generator=gen)
    ids[3] = 5
    vec = torch.randn(50, 64, generator=gen) * 20
    weight = torch.randn(50, 9, generator=gen)
    results = []
    for device in ("cpu", "cuda"):
        v, t = vec.to(device).requires_grad_(), table.to(device).requires_grad_()
        out = _TokenDots.apply(v, t, ids.to(device))
        results.append([x.cpu() for x in (out, *torch.autograd.grad((out * weight.to(device)).sum(), (v, t)))])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_candidate_dots_per_token_builds_a_valid_csr_pattern():
    """The sampled product reads a CSR matrix whose invariants torch does not check at that speed:
    each row's columns sorted and distinct. The pattern of candidates that repeat words (and of
    rows whose candidates outnumber the vocabulary) passes torch's own check, and reading its
    values back gives every candidate its word."""
    from onmt_cont.losses.token_dots import _csr_pattern

    ids = torch.tensor([[4, 1, 4, 0, 0], [2, 2, 2, 2, 2], [3, 1, 0, 2, 4]])
    pattern, distinct, order = _csr_pattern(ids, 5)
    with torch.sparse.check_sparse_tensor_invariants():
        torch.sparse_csr_tensor(pattern.crow_indices(), pattern.col_indices(), pattern.values(), pattern.shape)
    words = pattern.col_indices()[distinct].view(ids.shape)
    assert torch.equal(torch.empty_like(ids).scatter_(1, order, words), ids)


def test_candidate_dots_per_token_of_a_batch_without_tokens():
    """A batch without target tokens, or tokens without candidates: empty products, and gradients
    of the prediction's and the table's shapes that are zero."""
    from onmt_cont.losses.token_dots import _TokenDots

    table = torch.randn(200, 40, requires_grad=True)
    for vec, ids in (
        (torch.zeros(0, 40, requires_grad=True), torch.zeros(0, 7, dtype=torch.long)),
        (torch.ones(3, 40, requires_grad=True), torch.zeros(3, 0, dtype=torch.long)),
    ):
        out = _TokenDots.apply(vec, table, ids)
        grad_vec, grad_table = torch.autograd.grad(out.sum(), (vec, table))
        assert out.shape == ids.shape and grad_vec.shape == vec.shape and not grad_vec.any()
        assert grad_table.shape == table.shape and not grad_table.to_dense().any()


@pytest.mark.parametrize("name", ["infonce", "nllvmf_nce"])
@pytest.mark.parametrize("correct", [False, True])
@pytest.mark.parametrize("biased", [False, True])
def test_repeated_candidates_are_scored_once(monkeypatch, name, correct, biased):
    """Scoring each shared candidate once with logit + log(its count) gives the loss and the
    gradients (prediction, bias) of scoring every repeat: on a batch whose targets repeat (the
    in-batch list) and whose random draws repeat them too."""
    from onmt_cont.losses import contrastive
    from onmt_cont.outputs import BiasedVector

    table, gen = random_table(vocab=30, m=6, seed=4)
    target = torch.tensor([3, 3, 3, 9, 17, 9, 3, 5, 5, 3])
    pred = torch.randn(10, 6, generator=gen, requires_grad=True)
    bias = (torch.randn(30, generator=gen) * 0.3).requires_grad_(biased)
    prior = torch.log_softmax(torch.randn(30, generator=gen), 0)
    opt = Namespace(
        loss=name,
        negatives="inbatch,random,gold_nn",
        num_sampled=40,
        ann_candidates=4,
        temperature=0.2,
        contrastive_weight=1.0,
        lambda1=0.02,
        lambda2=0.1,
        vmf_approx=False,
        sampling_correction=correct,
    )

    def run():
        torch.manual_seed(7)  # the same random draws (40 of 29 words: repeats) for both
        out = BiasedVector(pred, bias) if biased else pred
        loss = build_loss(opt, table, prior)(out, target)
        inputs = (pred, bias) if biased else (pred,)
        return loss, torch.autograd.grad(loss.sum(), inputs)

    (loss, grads) = run()
    seen = []
    real = contrastive.unique_shared
    monkeypatch.setattr(contrastive, "unique_shared", lambda shared, c: seen.append(real(shared, c)) or (shared, None))
    (want, want_grads) = run()
    assert seen and seen[0][0].numel() < 10 + 40  # there were repeats to merge
    torch.testing.assert_close(loss, want)
    for a, b in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(a, b)
