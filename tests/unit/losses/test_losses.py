"""Hand-computed values for every training loss and for the continuous generators' word scores.

Tiny tensors (2-3 tokens, 3-4 dims) against a 5-word unit table whose row 0 (padding) is zero::

    e1 = (1, 0, 0), e2 = (0, 1, 0), e3 = (0, 0, 1), e4 = (0.6, 0.8, 0)
"""

import math
from argparse import Namespace

import mpmath
import pytest
import torch
import torch.nn.functional as F

from onmt_cont.losses import CONTINUOUS_LOSSES, LOSSES, build_loss, decode_criterion
from onmt_cont.losses.continuous import most_informative_negative
from onmt_cont.losses.softmax import _SmoothedCrossEntropy, cross_entropy
from onmt_cont.models.generators import ContinuousGenerator, SoftmaxGenerator

TABLE3 = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
# The same words in 4 dims, for the vMF tests at m = 4.
TABLE4 = F.pad(TABLE3, (0, 1))


def options(**kw):
    base = {
        "label_smoothing": 0.0,
        "margin": 0.5,
        "lambda1": 0.02,
        "lambda2": 0.1,
        "vmf_approx": False,
        "negatives": None,
        "num_negatives": None,
        "num_sampled": 64,
        "ann_candidates": 32,
    }
    base.update(kw)
    return Namespace(**base)


def loss_of(name, output, target, table=None, **kw):
    opt = options(**kw)
    opt.loss = name
    return build_loss(opt, table)(output, target)


def test_registry():
    margins = {"maxmargin", "synmargin_proj", "synmargin_diff", "margin_random"}
    contrastive = {"infonce", "nllvmf_nce"}
    assert set(LOSSES) == {"ce", "l2", "cosine", "nllvmf"} | margins | contrastive
    assert CONTINUOUS_LOSSES == {"l2", "cosine", "nllvmf"} | margins | contrastive
    assert [decode_criterion(n) for n in ("nllvmf", "nllvmf_nce", "l2", "cosine")] == ["vmf", "vmf", "l2", "cosine"]
    # margin- and InfoNCE-trained: cosine nearest neighbour
    assert {decode_criterion(n) for n in margins | {"infonce"}} == {"cosine"}


# --- softmax --------------------------------------------------------------------------------------

# softmax(log [1, 2, 1, 4]) = [1/8, 2/8, 1/8, 4/8]: -log p = [3, 2, 3, 1] * log 2.
LOGITS = torch.log(torch.tensor([[1.0, 2.0, 1.0, 4.0], [1.0, 2.0, 1.0, 4.0]]))
CE_TARGET = torch.tensor([3, 1])


def test_ce():
    got = loss_of("ce", LOGITS, CE_TARGET)
    assert got.shape == (2,)
    torch.testing.assert_close(got, torch.tensor([1.0, 2.0]) * math.log(2))


def test_ce_label_smoothing():
    # (1 - eps) * (-log p_target) + eps * mean_j(-log p_j); the mean is (3+2+3+1)/4 log 2 = 2.25 log 2.
    got = loss_of("ce", LOGITS, CE_TARGET, label_smoothing=0.1)
    want = torch.tensor([0.9 * 1 + 0.1 * 2.25, 0.9 * 2 + 0.1 * 2.25]) * math.log(2)
    torch.testing.assert_close(got, want)


def _smoothed_ce_reference(logits, target, eps, weights):
    """Loss per row and the gradient of Σ weights·loss, at 40 digits (mpmath)."""
    loss, grad = [], []
    with mpmath.workdps(40):
        for row, y, w in zip(logits.tolist(), target.tolist(), weights.tolist(), strict=True):
            x = [mpmath.mpf(v) for v in row]
            lse = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in x))
            logp = [v - lse for v in x]
            n = len(x)
            loss.append(float(-(1 - mpmath.mpf(eps)) * logp[y] - mpmath.mpf(eps) / n * mpmath.fsum(logp)))
            q = [mpmath.mpf(eps) / n + (1 - mpmath.mpf(eps)) * (j == y) for j in range(n)]
            grad.append([float(mpmath.mpf(w) * (mpmath.exp(lp) - qj)) for lp, qj in zip(logp, q, strict=True)])
    return torch.tensor(loss, dtype=torch.float64), torch.tensor(grad, dtype=torch.float64)


@pytest.mark.parametrize("eps", [0.0, 1e-4, 0.1, 0.5, 0.99])
@pytest.mark.parametrize("scale", [1e-6, 1.0, 30.0, 1e4])
def test_ce_value_and_gradient_against_mpmath(eps, scale):
    """ce's loss (softmax.cross_entropy's own autograd function) and its gradient, from near-uniform
    logits to ones so far apart that p is a one-hot in float32."""
    torch.manual_seed(0)
    logits = torch.randn(6, 7, dtype=torch.float64) * scale
    target = torch.tensor([0, 6, 3, 3, 1, 5])
    weights = torch.rand(6, dtype=torch.float64) + 0.5
    want_loss, want_grad = _smoothed_ce_reference(logits, target, eps, weights)
    x = logits.float().requires_grad_()
    got = loss_of("ce", x, target, label_smoothing=eps)
    (got * weights.float()).sum().backward()
    tol = 1e-6 * max(1.0, scale)  # float32 logits of this size carry that much rounding
    torch.testing.assert_close(got.double(), want_loss, rtol=1e-5, atol=tol)
    torch.testing.assert_close(x.grad.double(), want_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ce_equals_pytorch_cross_entropy(eps, dtype):
    """The same values and gradients as F.cross_entropy, for a weighted sum, in bf16 too (both cast
    to float32 first, as the loss does), and for an empty batch."""
    torch.manual_seed(1)
    logits = (torch.randn(37, 501) * 4).to(dtype)
    target = torch.randint(0, 501, (37,))
    weights = torch.rand(37)
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    got = cross_entropy(a, target, eps)
    want = F.cross_entropy(b.float(), target, reduction="none", label_smoothing=eps)
    (got * weights).sum().backward()
    (want * weights).sum().backward()
    torch.testing.assert_close(got, want)
    assert a.grad.dtype == dtype
    torch.testing.assert_close(a.grad.float(), b.grad.float())
    empty = torch.zeros(0, 501, requires_grad=True)
    out = cross_entropy(empty, torch.zeros(0, dtype=torch.long), eps)
    out.sum().backward()
    assert out.shape == (0,) and empty.grad.shape == (0, 501)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_ce_on_a_gpu_matches_the_cpu_and_pytorch(eps):
    """On CUDA: the same loss and gradient as the CPU's and as F.cross_entropy there (float32 and
    bf16 logits), and the backward pass is deterministic (its target entries are a gather and a
    scatter, one per row, not an atomic add)."""
    torch.manual_seed(3)
    logits = torch.randn(300, 2003) * 4
    target = torch.randint(0, 2003, (300,))
    target[:50] = 7  # many rows on one word
    weights = torch.rand(300)
    for dtype in (torch.float32, torch.bfloat16):
        grads = []
        for device, fn in (("cpu", cross_entropy), ("cuda", cross_entropy), ("cuda", None), ("cuda", cross_entropy)):
            x = logits.to(dtype).to(device).requires_grad_()
            t, w = target.to(device), weights.to(device)
            out = fn(x, t, eps) if fn else F.cross_entropy(x.float(), t, reduction="none", label_smoothing=eps)
            (out * w).sum().backward()
            grads.append((out.cpu(), x.grad.float().cpu()))
        # float32 sums differ in order between the devices; a bf16 gradient can then round one ulp apart (2^-8)
        rtol = 1e-5 if dtype == torch.float32 else 2**-7
        for loss, grad in grads[1:]:
            torch.testing.assert_close(loss, grads[0][0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(grad, grads[0][1], rtol=rtol, atol=1e-6)
        assert torch.equal(grads[1][1], grads[3][1])  # two backward passes on CUDA: bit for bit


def test_ce_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([4, 0, 2, 2])
    for eps in (0.0, 0.3):
        assert torch.autograd.gradcheck(lambda v, e=eps: _SmoothedCrossEntropy.apply(v, target, e), (x,))


# --- l2, cosine ---------------------------------------------------------------------------------


def test_l2():
    pred = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 2.0], [0.6, 0.8, 0.0]])
    target = torch.tensor([2, 3, 4])
    # |(1,-1,0)|^2 = 2; |(0.5,0.5,1)|^2 = 1.5; exact hit = 0
    torch.testing.assert_close(loss_of("l2", pred, target, TABLE3), torch.tensor([2.0, 1.5, 0.0]))


def test_cosine():
    pred = torch.tensor([[1.0, 1.0, 0.0], [3.0, 4.0, 0.0], [0.0, -2.0, 0.0]])
    target = torch.tensor([1, 4, 2])
    # 1 - 1/sqrt(2); same direction (scale-free) = 0; opposite = 2
    want = torch.tensor([1 - 1 / math.sqrt(2), 0.0, 2.0])
    torch.testing.assert_close(loss_of("cosine", pred, target, TABLE3), want)


# --- max margin ---------------------------------------------------------------------------------

# Token 0: target e1, e_hat along e4.  cos(e_hat, e_j)     = [-, 0.6, 0.8, 0, 1.0]
#                                     cos(e1, e_j)         = [-, 1,   0,   0, 0.6]
#                                     difference           = [-, (target), 0.8, 0, 0.4]
# so the most informative negative is e2 (not e4, the word closest to e_hat); loss 0.5 + 0.8 - 0.6.
# Token 1: target e3, e_hat = (0.1, 0, 1): differences [-, 0.0995, 0, (target), 0.0597] -> e1;
# loss max(0, 0.5 + 0.0995 - 0.995) = 0.
MM_PRED = torch.tensor([[1.2, 1.6, 0.0], [0.1, 0.0, 1.0]])
MM_TARGET = torch.tensor([1, 3])


def test_maxmargin_negative_is_most_informative():
    neg = most_informative_negative(MM_PRED, MM_TARGET, TABLE3)
    assert neg.tolist() == [2, 1]
    # The target never wins, even when it is the best-scoring word, and padding is never chosen:
    # e_hat = -e1 scores -1 on the target e1 and 0 on padding.
    neg = most_informative_negative(torch.tensor([[-1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]), torch.tensor([1, 4]), TABLE3)
    assert 1 != neg[0].item() != 0 and neg[1].item() not in (0, 4)


def test_maxmargin_value():
    got = loss_of("maxmargin", MM_PRED, MM_TARGET, TABLE3)
    torch.testing.assert_close(got, torch.tensor([0.5 + 0.8 - 0.6, 0.0]))
    got = loss_of("maxmargin", MM_PRED, MM_TARGET, TABLE3, margin=2.0)
    want = 2.0 + 0.1 / math.sqrt(1.01) - 1 / math.sqrt(1.01)
    torch.testing.assert_close(got, torch.tensor([2.0 + 0.8 - 0.6, want]))


def test_maxmargin_gradient_only_through_prediction():
    """The negative is picked without gradient and its (frozen) embedding gets none: the gradient
    of token 0 is that of cos(e_hat, e2) - cos(e_hat, e1) with e2 held fixed; token 1 is inside
    the margin, so it gets no gradient at all."""
    pred = MM_PRED.clone().requires_grad_(True)
    table = TABLE3.clone()
    assert most_informative_negative(pred, MM_TARGET, table).grad_fn is None
    loss = loss_of("maxmargin", pred, MM_TARGET, table)
    loss.sum().backward()
    assert table.grad is None

    def d_cos(x, e):  # d/dx cos(x, e) for a unit e
        n = x.norm()
        return e / n - (x @ e) * x / n**3

    x = MM_PRED[0]
    want0 = d_cos(x, TABLE3[2]) - d_cos(x, TABLE3[1])
    torch.testing.assert_close(pred.grad[0], want0)
    torch.testing.assert_close(pred.grad[1], torch.zeros(3))


# --- nllvmf ---------------------------------------------------------------------------------------


def neg_log_cm(kappa, m):
    """-log C_m(kappa) at 40 digits: -(m/2-1) log k + (m/2) log 2pi + log I_{m/2-1}(k)."""
    with mpmath.workdps(40):
        k, nu = mpmath.mpf(kappa), mpmath.mpf(m) / 2 - 1
        value = -nu * mpmath.log(k) + mpmath.mpf(m) / 2 * mpmath.log(2 * mpmath.pi) + mpmath.log(mpmath.besseli(nu, k))
        return float(value)


def vmf_ratio_ref(kappa, m):
    with mpmath.workdps(40):
        nu = mpmath.mpf(m) / 2 - 1
        return float(mpmath.besseli(nu + 1, kappa) / mpmath.besseli(nu, kappa))


VMF_PRED = torch.tensor([[3.0, 4.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, -12.0, 5.0]], dtype=torch.float64)
VMF_TARGET = torch.tensor([4, 2, 3])


@pytest.mark.parametrize("lambda1,lambda2", [(0.02, 0.1), (0.0, 1.0)])
@pytest.mark.parametrize("m", [3, 4])
def test_nllvmf_value_and_gradient(m, lambda1, lambda2):
    table = (TABLE3 if m == 3 else TABLE4).double()
    pred = VMF_PRED[:, :m].clone().requires_grad_(True)
    got = loss_of("nllvmf", pred, VMF_TARGET, table, lambda1=lambda1, lambda2=lambda2)
    want, grads = [], []
    for x, t in zip(VMF_PRED[:, :m].tolist(), VMF_TARGET.tolist(), strict=True):
        kappa = math.sqrt(sum(v * v for v in x))
        dot = sum(a * b for a, b in zip(x, table[t].tolist(), strict=True))
        want.append(neg_log_cm(kappa, m) - lambda2 * dot + lambda1 * kappa)
        # d/d e_hat = (I_{m/2}/I_{m/2-1}(k) + lambda1) e_hat / k - lambda2 e(w)
        scale = (vmf_ratio_ref(kappa, m) + lambda1) / kappa
        grads.append([scale * a - lambda2 * b for a, b in zip(x, table[t].tolist(), strict=True)])
    torch.testing.assert_close(got.double(), torch.tensor(want, dtype=torch.float64), rtol=1e-6, atol=1e-6)
    got.sum().backward()
    torch.testing.assert_close(pred.grad, torch.tensor(grads, dtype=torch.float64), rtol=1e-6, atol=1e-6)


def test_nllvmf_hand_values():
    """Two literal checks at m = 3, where I_{1/2}(k) = sqrt(2/(pi k)) sinh k, so
    -log C_3(k) = log(4 pi sinh(k) / k)."""
    pred = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, -2.0]])
    target = torch.tensor([4, 3])
    got = loss_of("nllvmf", pred, target, TABLE3, lambda1=0.0, lambda2=1.0)
    want = [math.log(4 * math.pi * math.sinh(5) / 5) - 5.0, math.log(4 * math.pi * math.sinh(2) / 2) + 2.0]
    torch.testing.assert_close(got, torch.tensor(want))


@pytest.mark.parametrize("lambda1,lambda2", [(0.02, 0.1), (0.0, 1.0)])
def test_nllvmf_approx_value(lambda1, lambda2):
    """-vmf_approx: sqrt((v+1)^2 + k^2) - (v-1) log(v - 1 + sqrt((v+1)^2 + k^2)), v = m/2 - 1."""
    m = 3
    pred = VMF_PRED[:, :m].float()
    got = loss_of("nllvmf", pred, VMF_TARGET, TABLE3, lambda1=lambda1, lambda2=lambda2, vmf_approx=True)
    v = m / 2 - 1
    want = []
    for x, t in zip(pred.tolist(), VMF_TARGET.tolist(), strict=True):
        kappa = math.sqrt(sum(a * a for a in x))
        s = math.sqrt((v + 1) ** 2 + kappa**2)
        dot = sum(a * b for a, b in zip(x, TABLE3[t].tolist(), strict=True))
        want.append(s - (v - 1) * math.log(v - 1 + s) - lambda2 * dot + lambda1 * kappa)
    torch.testing.assert_close(got, torch.tensor(want))
    # e_hat = (3, 4, 0), k = 5: s = sqrt(2.25 + 25) = sqrt(27.25), v - 1 = -0.5
    s = math.sqrt(27.25)
    assert got[0].item() == pytest.approx(s + 0.5 * math.log(s - 0.5) - lambda2 * 5.0 + lambda1 * 5.0, rel=1e-6)


# --- generators' scores ---------------------------------------------------------------------------

# The closest word (largest e_hat . e(w)) of each row is listed in NN. The zero padding row
# scores 0 (cosine, vMF dot) or -|e_hat|^2 (l2): it beats every word under l2 in row 1 (short
# e_hat) and under cosine and vMF in row 2 (every dot negative), so a generator that did not
# exclude padding would return 0 there.
NN_PRED = torch.tensor([[0.1, 0.9, 1.8], [0.06, 0.24, 0.0], [-1.0, -0.1, -0.2], [2.0, 2.0, 0.1]])
NN = [3, 2, 2, 4]


@pytest.mark.parametrize("criterion", ContinuousGenerator.CRITERIA)
def test_generator_nearest_neighbour(criterion):
    gen = ContinuousGenerator(8, TABLE3.clone(), nonlinear=False, criterion=criterion)
    scores = gen.scores(NN_PRED)
    assert scores.shape == (4, 5)
    assert scores.argmax(-1).tolist() == NN
    assert scores.topk(1, dim=-1).indices.squeeze(-1).tolist() == NN
    # batch-first 3-D input too, as beam search passes it
    assert gen.scores(NN_PRED.view(2, 2, 3)).argmax(-1).view(-1).tolist() == NN


def test_generator_score_values():
    gen = {c: ContinuousGenerator(8, TABLE3.clone(), criterion=c) for c in ContinuousGenerator.CRITERIA}
    x = NN_PRED[0]
    words = TABLE3[1:]
    norm = x.norm().item()
    dots = words @ x
    torch.testing.assert_close(gen["cosine"].scores(x)[1:], dots / norm)
    torch.testing.assert_close(gen["l2"].scores(x)[1:], -((x - words) ** 2).sum(-1))
    log_c = -neg_log_cm(norm, 3)  # log C_3(|e_hat|) + e_hat . e(w)
    torch.testing.assert_close(gen["vmf"].scores(x)[1:], log_c + dots)


@pytest.mark.parametrize("criterion", ContinuousGenerator.CRITERIA)
def test_greedy_scores_drop_only_the_per_row_vmf_constant(criterion):
    """Greedy search ranks by greedy_scores: under vmf the scores less log C_m(‖ê‖) (one number
    per row, so the same argmax, with the word bias and the prior on top); the others unchanged."""
    gen = ContinuousGenerator(8, TABLE3.clone(), criterion=criterion, word_bias=True)
    with torch.no_grad():
        gen.bias.copy_(torch.tensor([0.0, 0.3, -0.2, 0.5, 0.1]))
    gen.set_prior(torch.log(torch.tensor([1.0, 1.0, 0.1, 0.2, 0.7])), 0.25)
    full, greedy = gen.scores(NN_PRED), gen.greedy_scores(NN_PRED)
    finite = full.isfinite()
    assert torch.equal(finite, greedy.isfinite())
    norms = NN_PRED.norm(dim=-1).tolist()
    constant = torch.tensor([[-neg_log_cm(k, 3) if criterion == "vmf" else 0.0] for k in norms])
    torch.testing.assert_close(greedy[finite], (full - constant).expand_as(full)[finite])
    assert torch.equal(greedy.argmax(-1), full.argmax(-1))


def test_softmax_generator_scores():
    gen = SoftmaxGenerator(4, 4)
    scores = gen.scores(LOGITS)
    torch.testing.assert_close(scores, torch.log(torch.tensor([1 / 8, 2 / 8, 1 / 8, 4 / 8])).expand(2, 4))
    assert scores.argmax(-1).tolist() == [3, 3]


# --- nllvmf, -vmf_form code -----------------------------------------------------------------------


def code_form_ref(x, e, m, lam):
    """The authors' code form -log C_m(k) + log(1 + k) (lam - cos) and its gradient in e_hat, at 40 digits."""
    with mpmath.workdps(40):
        x = [mpmath.mpf(v) for v in x]
        e = [mpmath.mpf(v) for v in e]
        k = mpmath.sqrt(sum(v * v for v in x))
        nu = mpmath.mpf(m) / 2 - 1
        neg_log_c = (
            -nu * mpmath.log(k) + mpmath.mpf(m) / 2 * mpmath.log(2 * mpmath.pi) + mpmath.log(mpmath.besseli(nu, k))
        )
        dot = sum(a * b for a, b in zip(x, e, strict=True))
        cos = dot / k
        value = neg_log_c + mpmath.log(1 + k) * (lam - cos)
        # d(-log C_m)/dk = I_{m/2}/I_{m/2-1}(k); dk/dx = x/k; dcos/dx = e/k - dot x/k^3
        a = mpmath.besseli(nu + 1, k) / mpmath.besseli(nu, k) + (lam - cos) / (1 + k)
        grad = [a * xi / k - mpmath.log(1 + k) * (ei / k - dot * xi / k**3) for xi, ei in zip(x, e, strict=True)]
        dkappa = mpmath.besseli(nu + 1, k) / mpmath.besseli(nu, k) + (lam - cos) / (1 + k)
        return float(value), [float(g) for g in grad], float(dkappa)


@pytest.mark.parametrize("lam", [0.0, 0.2, 1.0])
@pytest.mark.parametrize("m", [3, 4, 300])
def test_nllvmf_code_form_value_and_gradient(m, lam):
    """Over kappa from 0.05 to 3,000 (what a 300-d model reaches, and past it), each cosine sign."""
    gen = torch.Generator().manual_seed(m)
    table = F.normalize(torch.randn(6, m, generator=gen, dtype=torch.float64), dim=-1)
    table[0] = 0
    dirs = F.normalize(torch.randn(8, m, generator=gen, dtype=torch.float64), dim=-1)
    kappas = torch.tensor([0.05, 0.5, 2.0, 10.0, 50.0, 200.0, 1000.0, 3000.0], dtype=torch.float64)
    target = torch.tensor([1, 2, 3, 4, 5, 1, 2, 3])
    dirs[1] = table[2]  # cos 1
    dirs[6] = -table[2]  # cos -1
    base = dirs * kappas.unsqueeze(1)
    pred = base.clone().requires_grad_(True)
    got = loss_of("nllvmf", pred, target, table, vmf_form="code", vmf_lambda=lam)
    got.sum().backward()
    for i in range(len(kappas)):
        want, grad, dkappa = code_form_ref(base[i].tolist(), table[target[i]].tolist(), m, lam)
        assert got[i].item() == pytest.approx(want, rel=1e-7, abs=1e-7), (m, kappas[i].item())
        torch.testing.assert_close(pred.grad[i], torch.tensor(grad, dtype=torch.float64), rtol=1e-6, atol=1e-8)
        # the gradient in kappa along the prediction's own direction
        radial = (pred.grad[i] * base[i]).sum().item() / kappas[i].item()
        assert radial == pytest.approx(dkappa, rel=1e-6, abs=1e-8)


def test_nllvmf_code_form_hand_value_and_float32():
    """m = 3: -log C_3(k) = log(4 pi sinh(k) / k); e_hat = (3, 4, 0) against e4 = (0.6, 0.8, 0): cos 1, k 5."""
    pred = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, -2.0]])
    got = loss_of("nllvmf", pred, torch.tensor([4, 3]), TABLE3, vmf_form="code", vmf_lambda=0.2)
    want = [
        math.log(4 * math.pi * math.sinh(5) / 5) + math.log(6) * (0.2 - 1.0),
        math.log(4 * math.pi * math.sinh(2) / 2) + math.log(3) * (0.2 + 1.0),
    ]
    torch.testing.assert_close(got, torch.tensor(want))
    # float32 stays finite and close to float64 at the extremes of kappa
    big = torch.tensor([[1e-4, 0.0, 0.0], [5e4, 0.0, 0.0]])
    got32 = loss_of("nllvmf", big, torch.tensor([1, 2]), TABLE3, vmf_form="code")
    got64 = loss_of("nllvmf", big.double(), torch.tensor([1, 2]), TABLE3.double(), vmf_form="code")
    assert torch.isfinite(got32).all()
    torch.testing.assert_close(got32.double(), got64, rtol=1e-5, atol=1e-4)


def test_nllvmf_nce_takes_the_form():
    """nllvmf_nce's NLLvMF term is the chosen form: with no negatives' weight it is nllvmf's value."""
    from onmt_cont.losses.continuous import nll_vmf
    from onmt_cont.losses.contrastive import nll_vmf_nce

    pred = VMF_PRED[:, :3].float()
    table = TABLE3
    negatives = lambda unit, target: (torch.tensor([1, 2, 3, 4]), None)  # noqa: E731
    negatives.sources = ()
    for form in ("paper", "code"):
        got = nll_vmf_nce(pred, VMF_TARGET, table, negatives, 0.0, 0.02, 0.1, False, form=form, vmf_lambda=0.3)
        torch.testing.assert_close(got, nll_vmf(pred, table[VMF_TARGET], 0.02, 0.1, False, form, 0.3))


def test_a_loss_describes_itself_to_the_checks(monkeypatch):
    """The checks read a loss's Loss, not lists of names: a new loss registered with candidate logits and
    negatives takes -word_bias and -negatives (and gets its own defaults), one without is refused them, and
    the messages list the losses that accept the flag."""
    import dataclasses

    from onmt_cont.bin import train
    from onmt_cont.train.checks import check_options
    from onmt_cont.utils.errors import UserError

    new = dataclasses.replace(LOSSES["infonce"], name="mine", negatives="inbatch", num_negatives=7)
    monkeypatch.setitem(LOSSES, "mine", new)
    parser = train.build_parser()
    parser._option_string_actions["-loss"].choices = sorted(LOSSES)
    opt = parser.parse_args(["-loss", "mine", "-tgt_emb", "t.pt", "-word_bias"])
    check_options(opt)
    assert opt.negatives == "inbatch" and opt.num_negatives == 7
    monkeypatch.setitem(LOSSES, "mine", dataclasses.replace(new, candidate_logits=False, vocab_logits=None))
    with pytest.raises(
        UserError, match=r"-word_bias changes the logits of -loss infonce and nllvmf_nce, not -loss mine"
    ):
        check_options(parser.parse_args(["-loss", "mine", "-tgt_emb", "t.pt", "-word_bias"]))
    with pytest.raises(
        UserError,
        match=r"-seq_unlikelihood needs a softmax over the vocabulary: -loss ce, nllvmf, "
        r"infonce and nllvmf_nce, not -loss mine",
    ):
        check_options(parser.parse_args(["-loss", "mine", "-tgt_emb", "t.pt", "-seq_unlikelihood", "1"]))
