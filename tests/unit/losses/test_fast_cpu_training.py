"""The CPU training path of the Transformer: the chunked output layer with its label-smoothed cross-entropy
(onmt_cont.losses.linear_ce), the attention written out for training, and what -amp changes."""

import mpmath
import pytest
import torch
import torch.nn.functional as F

from onmt_cont.losses import linear_ce
from onmt_cont.losses.linear_ce import linear_cross_entropy
from onmt_cont.models.transformer_layers import MultiHeadAttention
from onmt_cont.outputs import HiddenLogits, logits_of


def _reference_loss(h, w, b, y, eps):
    """Label-smoothed cross-entropy per row in 50-digit arithmetic (mpmath): the loss of the logits h·wᵀ + b."""
    z = (h.double() @ w.double().t() + (b.double() if b is not None else 0)).tolist()
    out = []
    with mpmath.workdps(50):
        for row, gold in zip(z, y.tolist(), strict=True):
            lse = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row))
            logp = [mpmath.mpf(v) - lse for v in row]
            out.append(float(-(1 - eps) * logp[gold] - eps / len(row) * mpmath.fsum(logp)))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("scale", [0.1, 3.0, 60.0])  # logits from near-uniform to one word at +2,000 above the rest
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.6])
def test_loss_matches_high_precision(monkeypatch, scale, eps):
    monkeypatch.setattr(linear_ce, "CHUNK_ELEMENTS", 7 * 37)  # 7 rows a chunk: 3 chunks, the last one short
    gen = torch.Generator().manual_seed(int(scale * 10) + int(eps * 10))
    h = torch.randn(19, 8, generator=gen) * scale
    w, b = torch.randn(37, 8, generator=gen), torch.randn(37, generator=gen)
    y = torch.randint(0, 37, (19,), generator=gen)
    ours = linear_cross_entropy(h, w, b, y, eps).double()
    ref = _reference_loss(h, w, b, y, eps)
    torch.testing.assert_close(ours, ref, rtol=2e-6, atol=2e-5 * max(1.0, scale))
    assert torch.isfinite(ours).all()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("uniform", [True, False])
def test_gradients_match_pytorch_in_float64(monkeypatch, bias, uniform):
    """The gradients of h, W and b: kept from the forward when every row's gradient is one factor (a training
    step), recomputed chunk by chunk with per-row weights otherwise."""
    monkeypatch.setattr(linear_ce, "CHUNK_ELEMENTS", 5 * 23)
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(17, 6, generator=gen, dtype=torch.float64).float().requires_grad_()
    w = torch.randn(23, 6, generator=gen).requires_grad_()
    b = torch.randn(23, generator=gen).requires_grad_() if bias else None
    y = torch.randint(0, 23, (17,), generator=gen)
    g = torch.full((17,), 0.37) if uniform else torch.rand(17, generator=gen)
    inputs = [h, w] + ([b] if bias else [])
    ours = torch.autograd.grad(linear_cross_entropy(h, w, b, y, 0.1), inputs, g)
    doubles = [t.detach().double().requires_grad_() for t in inputs]
    z = F.linear(doubles[0], doubles[1], doubles[2] if bias else None)
    ref_loss = F.cross_entropy(z, y, reduction="none", label_smoothing=0.1)
    ref = torch.autograd.grad(ref_loss, doubles, g.double())
    for a, r in zip(ours, ref, strict=True):
        torch.testing.assert_close(a.double(), r, rtol=1e-5, atol=1e-6)


def test_bfloat16_products_stay_close_and_empty_input_works():
    gen = torch.Generator().manual_seed(4)
    h, w, b = torch.randn(50, 16, generator=gen), torch.randn(300, 16, generator=gen) * 0.3, torch.zeros(300)
    y = torch.randint(0, 300, (50,), generator=gen)
    exact = linear_cross_entropy(h, w, b, y, 0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = linear_cross_entropy(h, w, b, y, 0.1)
    assert low.dtype == torch.float32
    assert (low - exact).abs().max() < 0.05  # logits rounded to bfloat16, as autocast's Linear rounds them
    assert linear_cross_entropy(h[:0], w, b, y[:0], 0.1).shape == (0,)


def test_hidden_logits_give_the_linear_layer_rows():
    h, w, b = torch.randn(5, 4), torch.randn(9, 4), torch.randn(9)
    out = HiddenLogits(h, w, b)
    torch.testing.assert_close(logits_of(out, slice(1, 3)), F.linear(h, w, b)[1:3])
    assert logits_of(F.linear(h, w, b), slice(0, 2)).shape == (2, 9)


@pytest.mark.parametrize("len_k", [1, 9, 15, 16, 23])  # below SHORT_ROWS: the exp2 softmax; from it: PyTorch's
def test_training_attention_matches_sdpa_in_float32_and_bfloat16(len_k):
    """The CPU training path of MultiHeadAttention.attend against SDPA, forward and backward, in float32 and
    under autocast, on both sides of the short-row softmax's crossover."""
    torch.manual_seed(6)
    attn = MultiHeadAttention(32, 4).train()
    x = torch.randn(3, 7, 32)
    k, v = attn.keys_values(torch.randn(3, len_k, 32))
    mask = torch.rand(3, 1, 7, len_k) > 0.3
    mask[..., 0] = True
    q = attn._split(attn.query(x))
    q, k, v = (t.detach().double().float().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    ours = attn._attend_cpu_training(q, k, v, mask)
    torch.testing.assert_close(ours.double(), ref, atol=1e-6, rtol=1e-5)
    g = torch.randn(ours.shape, dtype=torch.float64)
    got = torch.autograd.grad(ours, (q, k, v), g.float())
    want = torch.autograd.grad(ref, (q, k, v), g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.double(), b.double(), atol=1e-5, rtol=1e-4)
    low = attn._attend_cpu_training(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert low.dtype == torch.bfloat16 and (low.float() - ref).abs().max() < 0.05


def test_exp2_softmax_against_mpmath_over_the_reachable_range():
    """models/short_softmax.py's softmax of base-2 scores against mpmath, for scores from -1e4 to 1e4 (and the
    attention's masking bias), and its gradient against float64 autograd of torch.softmax."""
    from onmt_cont.models.short_softmax import LOG2E, exp2_softmax

    gen = torch.Generator().manual_seed(2)
    for spread in (1e-3, 1.0, 30.0, 1e4):
        x = torch.randn(4, 13, generator=gen, dtype=torch.float64) * spread
        x[0, 3] = -0.5 * torch.finfo(torch.float32).max  # a masked key
        x2 = (x * LOG2E).float()
        y = exp2_softmax(x2)
        for row in range(4):
            vals = [mpmath.mpf(float(v)) / mpmath.mpf(LOG2E) for v in x2[row].double()]  # the float32 input, exactly
            top = max(vals)
            den = mpmath.fsum(mpmath.exp(v - top) for v in vals)
            exact = torch.tensor([float(mpmath.exp(v - top) / den) for v in vals], dtype=torch.float64)
            torch.testing.assert_close(y[row].double(), exact, atol=1e-7, rtol=2e-6)
    x = torch.randn(6, 5, 11, generator=gen, dtype=torch.float64) * 3
    x2 = (x * LOG2E).float().requires_grad_()
    g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    (got,) = torch.autograd.grad(exp2_softmax(x2), x2, g.float())
    xd = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.softmax(xd, -1), xd, g)
    torch.testing.assert_close(got.double() * LOG2E, want, atol=1e-6, rtol=1e-5)


def _steps(defer, amp=None, steps=3):
    """The parameters after ``steps`` updates of a small post-norm Transformer ce (label smoothing 0.1), as
    train.py builds and steps it, with the output layer's logits deferred to the loss or not."""
    from lab.bench import benchlib

    opt = benchlib.row_options(
        [
            "-encoder_type",
            "transformer",
            "-decoder_type",
            "transformer",
            "-rnn_size",
            "32",
            "-word_vec_size",
            "32",
            "-heads",
            "4",
            "-transformer_ff",
            "64",
            "-layers",
            "2",
            "-layer_norm",
            "post",
            "-dropout",
            "0.1",
            "-share_decoder_embeddings",
        ],
        ["-loss", "ce", "-label_smoothing", "0.1"],
    )
    trainer = benchlib.build_trainer(opt, 40, 53, torch.device("cpu"), amp=amp)
    gen = trainer.model.generator
    assert gen.defer_logits
    gen.defer_logits = defer
    for step in range(1, steps + 1):
        batch = benchlib.synthetic_batch(6, 40, 53, torch.device("cpu"), seed=step, src_len=7)
        torch.manual_seed(step)  # the same dropout masks on both sides
        benchlib.train_step(trainer, opt, batch, step)
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_deferred_logits_train_as_the_plain_output_layer():
    plain, deferred = _steps(False), _steps(True)
    for name, value in plain.items():
        torch.testing.assert_close(deferred[name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_deferred_logits_under_autocast_stay_near_float32():
    """Under bfloat16 autocast the same three updates land near float32's (Adam's first steps move every
    parameter by about the learning rate, whatever the gradient's size: a sign flip would show)."""
    exact, low = _steps(True), _steps(True, amp=torch.bfloat16)
    for name, value in exact.items():
        assert (low[name] - value).abs().max() < 0.05, name


@pytest.mark.parametrize("sources", [("inbatch", "random", "gold_nn"), ("inbatch", "random"), ("random", "prefix")])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("counts", [None, "unigram", "batch"])  # None: no -sampling_correction
def test_chunked_shared_candidates_match_the_unfused_loss(monkeypatch, sources, bias, counts):
    """nll_vmf_nce with the shared candidates in row chunks (losses/shared_block.py) against the composition of
    candidate_dots, the corrections, the masks and logsumexp it replaces: loss and gradients, with repeated
    gold words, own lists that hold shared words, chunks that end mid-batch."""
    from onmt_cont.losses import contrastive, shared_block
    from onmt_cont.losses.negatives import Negatives

    monkeypatch.setattr(shared_block, "CHUNK_ELEMENTS", 7 * 100)
    gen = torch.Generator().manual_seed(0)
    table = F.normalize(torch.randn(300, 16, generator=gen), dim=-1)
    table[0] = 0
    negatives = Negatives(
        sources,
        table,
        num_sampled=40,
        ann_candidates=5,
        log_prior=torch.log_softmax(torch.randn(300, generator=gen), 0),
        counts=counts or "unigram",
    )
    pred = (torch.randn(90, 16, generator=gen) * 5).requires_grad_()
    word_bias = (torch.randn(300, generator=gen) * 0.3).requires_grad_() if bias else None
    target = torch.randint(1, 300, (90,), generator=gen)
    target[::7] = 2
    inputs = [pred] + ([word_bias] if bias else [])
    got = {}
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(contrastive, "_chunked_parts", lambda *args: None)
        torch.manual_seed(5)  # the same random negatives
        loss = contrastive.nll_vmf_nce(
            pred, target, table, negatives, 1.0, 0.02, 0.1, False, word_bias, counts is not None
        )
        got[fused] = loss.detach(), torch.autograd.grad(loss.sum() * 0.37, inputs)
    torch.testing.assert_close(got[True][0], got[False][0], rtol=1e-6, atol=2e-5)
    for a, b in zip(got[True][1], got[False][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=2e-6)


def test_chunked_shared_candidates_row_with_no_live_word():
    """A token whose every shared candidate is dead (its gold word, padding) gets −inf and a zero gradient."""
    from onmt_cont.losses.shared_block import shared_logsumexp

    vec = torch.randn(3, 4, requires_grad=True)
    words, col = F.normalize(torch.randn(2, 4), dim=-1), torch.zeros(2, requires_grad=True)
    dead = torch.tensor([1, 1]), torch.tensor([0, 1])
    lse = shared_logsumexp(vec, words, col, None, dead)
    assert lse[1] == float("-inf") and torch.isfinite(lse[[0, 2]]).all()
    grad_vec, grad_col = torch.autograd.grad(lse[[0, 2]].sum() + 0 * lse[1].clamp_min(0), [vec, col])
    assert grad_vec[1].abs().max() == 0 and torch.isfinite(grad_col).all()


def test_shared_block_bfloat16_product_is_shifted_near_the_top():
    """Under bf16 autocast the shared block's product runs in bf16 on ê · e − c (``shift`` c: the gold word's
    logit). The contrastive term it feeds, log(e^pos + e^lse) − pos, stays within bf16's hundredths of float64 at
    nllvmf_nce's scale (‖ê‖ = 60, the gold below its best competitors), closer than an unshifted bf16 product;
    without ``shift``, or in float32, the product is float32's and ``shift`` changes nothing."""
    from onmt_cont.losses.shared_block import shared_logsumexp

    gen = torch.Generator().manual_seed(3)
    words = F.normalize(torch.randn(400, 64, generator=gen), dim=-1)
    gold = F.normalize(torch.randn(50, 64, generator=gen), dim=-1)
    noise = F.normalize(torch.randn(50, 64, generator=gen), dim=-1)
    noise = F.normalize(noise - (noise * gold).sum(-1, keepdim=True) * gold, dim=-1)
    vec = 60 * (0.3 * gold + (1 - 0.09) ** 0.5 * noise)
    col = torch.randn(400, generator=gen) * 0.5
    pos = (vec * gold).sum(-1)

    def term(lse):
        return torch.logaddexp(pos.double(), lse.double()) - pos.double()

    exact = term(torch.logsumexp(vec.double() @ words.double().t() + col.double(), 1))
    assert 2 < exact.mean() < 8  # a model still learning: the shared candidates matter

    def run(ref, amp):
        v, c = vec.clone().requires_grad_(), col.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            lse = shared_logsumexp(v, words, c, shift=ref)
        weights = torch.linspace(0.5, 1.5, len(lse))  # as the loss weighs its tokens
        grad, grad_col = torch.autograd.grad((lse * weights).sum(), [v, c])
        run.grad_col = grad_col
        return lse, grad

    plain, plain_grad = run(None, False)
    plain_col = run.grad_col
    shifted, shifted_grad = run(pos, False)
    assert torch.equal(plain, shifted) and torch.equal(plain_grad, shifted_grad)
    assert torch.equal(run.grad_col, plain_col)
    torch.testing.assert_close(term(plain), exact, rtol=0, atol=1e-4)
    unshifted, _ = run(None, True)
    torch.testing.assert_close(unshifted, plain)  # no shift: the float32 product under autocast too
    low, low_grad = run(pos, True)
    err = (term(low) - exact).abs()
    assert err.max() < 0.08 and err.mean() < 0.02
    rel = (low_grad - plain_grad).norm(dim=1) / plain_grad.norm(dim=1)
    assert rel.max() < 0.03 and rel.mean() < 0.01
    # the column's gradient Σ_i g_i p_ij, a bf16 product of bf16 p: within bf16's rounding of float32's
    assert (run.grad_col - plain_col).norm() / plain_col.norm() < 0.01
    v16 = (vec.bfloat16() @ words.bfloat16().t()).double() + col.double()  # the same product, unshifted
    assert err.mean() < (term(torch.logsumexp(v16, 1)) - exact).abs().mean()
