"""The seed-paper methods: syn-margin and random-negative margin losses (Bhat et al.), ReWE
(Jauregi Unanue et al.) and the structure-aware joint output layer (Pappas et al.).

Hand-computed values on the 5-word table of test_losses (row 0 padding, zero)::

    e1 = (1, 0, 0), e2 = (0, 1, 0), e3 = (0, 0, 1), e4 = (0.6, 0.8, 0)

and, at the end, the acceptance runs on the shipped sample in data/.
"""

import math
from argparse import Namespace

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.bin import embeddings_to_torch, preprocess, train, translate
from onmt_cont.losses import build_loss
from onmt_cont.losses.continuous import random_negatives, synthetic_negative
from onmt_cont.losses.softmax import cross_entropy, nll_plus_rewe
from onmt_cont.models.generators import (
    ReWEGenerator,
    ReWEHead,
    ReWEOutput,
    SampledLogits,
    SoftmaxGenerator,
    sample_candidates,
)
from onmt_cont.models.model import build_model
from tests.helpers import ROOT, joint, model_opts

TABLE3 = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
DATA = ROOT / "data"


def loss_of(name, output, target, table=TABLE3, **kw):
    opt = Namespace(**{"loss": name, "label_smoothing": 0.0, "margin": 0.5, "num_negatives": 5, **kw})
    return build_loss(opt, table)(output, target)


# --- syn-margin -----------------------------------------------------------------------------------

# ê = (3, 4, 0) against u = e1: û = (0.6, 0.8, 0), cos θ = 0.6, sin θ = 0.8.
#   proj: û − (ûᵀu)u = (0, 0.8, 0)  -> u_orth = e2,               u_orthᵀû = 0.8
#   diff: û − u = (−0.4, 0.8, 0)     -> u_diff = (−1, 2, 0)/√5,     u_diffᵀû = 1/√5 = sin(θ/2)
# ê = (0, 0, −2) against u = e3 (opposite): û = −e3; proj: residual 0 -> negative 0;
#   diff: û − u = −2 e3 -> u_diff = −e3, u_diffᵀû = 1.
SM_PRED = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, -2.0]])
SM_TARGET = torch.tensor([1, 3])


def test_synthetic_negatives_by_hand():
    unit = F.normalize(SM_PRED, dim=-1)
    proj = synthetic_negative(unit, TABLE3[SM_TARGET], "proj")
    diff = synthetic_negative(unit, TABLE3[SM_TARGET], "diff")
    torch.testing.assert_close(proj, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(diff, torch.tensor([[-1 / math.sqrt(5), 2 / math.sqrt(5), 0.0], [0.0, 0.0, -1.0]]))


@pytest.mark.parametrize("margin", [0.5, 2.0])
def test_synmargin_values(margin):
    proj = loss_of("synmargin_proj", SM_PRED, SM_TARGET, margin=margin)
    diff = loss_of("synmargin_diff", SM_PRED, SM_TARGET, margin=margin)
    torch.testing.assert_close(proj, torch.tensor([margin + 0.8 - 0.6, margin + 0.0 + 1.0]))
    torch.testing.assert_close(diff, torch.tensor([margin + 1 / math.sqrt(5) - 0.6, margin + 1.0 + 1.0]))
    # the hinge: well inside the margin is zero
    close = torch.tensor([[1.0, 0.01, 0.0]])
    assert loss_of("synmargin_proj", close, torch.tensor([1]), margin=0.5).item() == 0.0


@pytest.mark.parametrize("how", ["proj", "diff"])
def test_synmargin_closed_form(how):
    """max(0, γ + sin θ − cos θ) (proj) and max(0, γ + sin(θ/2) − cos θ) (diff) at angles θ from the
    target, any norm of ê, in a plane that is not a coordinate plane."""
    gamma = 0.7
    u = F.normalize(torch.tensor([1.0, 2.0, 2.0, -1.0]), dim=0)
    v = F.normalize(torch.tensor([2.0, -1.0, 0.0, 0.0]), dim=0)  # v ⊥ u
    table = torch.stack([torch.zeros(4), u])
    thetas = torch.tensor([0.05, 0.4, 1.0, 1.5, 2.2, 3.0])
    pred = (torch.cos(thetas)[:, None] * u + torch.sin(thetas)[:, None] * v) * torch.linspace(0.3, 7.0, 6)[:, None]
    got = loss_of(f"synmargin_{how}", pred, torch.ones(6, dtype=torch.long), table, margin=gamma)
    neg = torch.sin(thetas) if how == "proj" else torch.sin(thetas / 2)
    torch.testing.assert_close(got, torch.relu(gamma + neg - torch.cos(thetas)))


@pytest.mark.parametrize("how", ["proj", "diff"])
def test_synmargin_gradient_does_not_flow_into_the_negative(how):
    """The negative is a constant: dL/dê = (I − ûûᵀ)(u_neg − u)/‖ê‖ with u_neg held fixed, and the
    target vector u gets −û, from the positive term alone. With the negative left in the graph u's
    gradient would differ (checked, so this test can fail). (For proj the prediction's gradient
    happens to be the same either way: u_orth maximises vᵀû over unit v ⊥ u.)"""
    pred = SM_PRED[:1].clone().requires_grad_(True)
    table = TABLE3.clone().requires_grad_(True)
    target = SM_TARGET[:1]
    loss_of(f"synmargin_{how}", pred, target, table).sum().backward()
    x = SM_PRED[0]
    unit = x / x.norm()
    u = TABLE3[1]
    neg = synthetic_negative(unit[None], u[None], how)[0]
    assert neg.requires_grad is False
    want = (torch.eye(3) - torch.outer(unit, unit)) @ (neg - u) / x.norm()
    torch.testing.assert_close(pred.grad[0], want)
    want_table = torch.zeros(5, 3)
    want_table[1] = -unit
    torch.testing.assert_close(table.grad, want_table)

    # the same loss with the negative left in the graph
    p = SM_PRED[:1].clone().requires_grad_(True)
    t = TABLE3[1:2].clone().requires_grad_(True)
    un = F.normalize(p, dim=-1)
    res = un - (un * t).sum(-1, keepdim=True) * t if how == "proj" else un - t
    attached = F.normalize(res, dim=-1)
    torch.relu(0.5 + (attached * un).sum(-1) - (t * un).sum(-1)).sum().backward()
    assert not torch.allclose(t.grad[0], -unit, atol=1e-3)
    assert torch.allclose(p.grad, pred.grad) == (how == "proj")


@pytest.mark.parametrize("how", ["proj", "diff"])
@pytest.mark.parametrize("scale", [1.0, 2.5, 1e-3])
def test_synmargin_degenerate_prediction_equals_target(how, scale):
    """û = u: the synthetic negative is the zero vector, the loss is max(0, γ − 1) and the gradient
    zero. A hair away from u (or at e4, which binary cannot hold exactly) the negative is a unit
    vector in the direction of the rounding noise: the loss is still γ − 1 to float precision, the
    gradient finite, at most 2/‖ê‖ (the loss has a kink there, as |θ| has at 0). Never NaN."""
    for target, base, noise in ((1, TABLE3[1], 0.0), (1, TABLE3[1], 1e-7), (4, TABLE3[4], 0.0)):
        pred = ((base + noise * torch.tensor([0.3, -0.2, 0.5])) * scale).unsqueeze(0).requires_grad_(True)
        loss = loss_of(f"synmargin_{how}", pred, torch.tensor([target]), margin=1.5)
        loss.sum().backward()
        assert torch.isfinite(loss).all() and torch.isfinite(pred.grad).all()
        torch.testing.assert_close(loss, torch.tensor([0.5]), atol=1e-5, rtol=0)
        assert pred.grad.norm().item() <= 2 / pred.detach().norm().item() + 1e-4
        if noise == 0.0 and target == 1:
            assert torch.equal(pred.grad, torch.zeros(1, 3))
    unit = TABLE3[1:2]
    assert torch.equal(synthetic_negative(unit, unit, how), torch.zeros(1, 3))


# --- random negatives ----------------------------------------------------------------------------


def test_random_negatives_skip_padding_and_the_target():
    """Uniform over the words other than padding and the target: with 5 rows each target has 3
    possible negatives, each drawn about a third of the time."""
    torch.manual_seed(0)
    target = torch.tensor([1, 2, 3, 4]).repeat_interleave(50)
    draws = random_negatives(target, 5, 30)  # [200, 30]
    assert draws.shape == (200, 30)
    assert (draws != 0).all() and (draws != target[:, None]).all() and (draws < 5).all()
    for t in (1, 2, 3, 4):
        counts = torch.bincount(draws[target == t].flatten(), minlength=5).float() / (50 * 30)
        others = [w for w in (1, 2, 3, 4) if w != t]
        torch.testing.assert_close(counts[others], torch.full((3,), 1 / 3), atol=0.03, rtol=0)


def test_margin_random_value():
    """ê along e4 against the target e1: cos to the target 0.6; to e2 0.8, e3 0, e4 1. With γ = 0.5 a
    negative costs e2: 0.7, e3: 0, e4: 0.9; the loss is their mean over the k drawn negatives."""
    pred = torch.tensor([[1.2, 1.6, 0.0]] * 3)
    target = torch.tensor([1, 1, 1])
    cost = torch.tensor([float("nan"), float("nan"), 0.7, 0.0, 0.9])
    torch.manual_seed(123)
    drawn = random_negatives(target, 5, 4)
    torch.manual_seed(123)
    got = loss_of("margin_random", pred, target, num_negatives=4)
    torch.testing.assert_close(got, cost[drawn].mean(-1))
    assert len(set(got.tolist())) > 1  # each token draws its own negatives


# --- ReWE --------------------------------------------------------------------------------------

# softmax(log [1, 2, 1, 4]) = [1/8, 2/8, 1/8, 4/8]: NLL of word 3 is log 2, of word 1 is 2 log 2.
REWE_OUT = ReWEOutput(
    logits=torch.log(torch.tensor([[1.0, 2.0, 1.0, 4.0], [1.0, 2.0, 1.0, 4.0]])),
    embedding=torch.tensor([[3.0, 4.0, 0.0], [0.0, 2.0, 0.0]]),
)
REWE_TARGET = torch.tensor([3, 1])
# e(3) = e3: cos((3,4,0), e3) = 0, squared error 9 + 16 + 1 = 26; e(1) = e1: cos = 0, error 1 + 4 = 5.
REWE_VEC = TABLE3[REWE_TARGET]


@pytest.mark.parametrize("lam", [0.0, 1.0, 20.0])
def test_rewe_loss_values(lam):
    nll = torch.tensor([1.0, 2.0]) * math.log(2)
    torch.testing.assert_close(nll_plus_rewe(REWE_OUT, REWE_TARGET, REWE_VEC, lam, "cosine"), nll + lam * 1.0)
    torch.testing.assert_close(
        nll_plus_rewe(REWE_OUT, REWE_TARGET, REWE_VEC, lam, "mse"), nll + lam * torch.tensor([26.0, 5.0])
    )
    # as built from the options, with the generator's table
    opt = Namespace(loss="ce", label_smoothing=0.0, rewe_lambda=lam, rewe_loss="cosine")
    torch.testing.assert_close(build_loss(opt, TABLE3)(REWE_OUT, REWE_TARGET), nll + lam * 1.0)


def test_rewe_lambda_zero_leaves_the_head_out_of_the_graph():
    emb = REWE_OUT.embedding.clone().requires_grad_(True)
    logits = REWE_OUT.logits.clone().requires_grad_(True)
    nll_plus_rewe(ReWEOutput(logits, emb), REWE_TARGET, REWE_VEC, 0.0).sum().backward()
    assert emb.grad is None and logits.grad is not None


def test_rewe_head_draws_no_global_random_numbers():
    """Building the ReWE generator draws exactly what the plain softmax generator draws; the head
    comes from its own generator, seeded by -seed."""
    table = F.normalize(torch.randn(7, 5), dim=-1)
    torch.manual_seed(0)
    plain = SoftmaxGenerator(6, 7)
    after_plain = torch.randn(3)
    torch.manual_seed(0)
    rewe = ReWEGenerator(6, 7, table, head_hidden=4, init=0.1, seed=1)
    after_rewe = torch.randn(3)
    assert torch.equal(after_plain, after_rewe)
    assert torch.equal(plain.proj.weight, rewe.proj.weight)
    again = ReWEGenerator(6, 7, table, head_hidden=4, init=0.1, seed=1)
    other = ReWEGenerator(6, 7, table, head_hidden=4, init=0.1, seed=2)
    assert torch.equal(rewe.head.w1.weight, again.head.w1.weight)
    assert not torch.equal(rewe.head.w1.weight, other.head.w1.weight)
    assert rewe.head.w2.weight.shape == (5, 4) and rewe.head.w2.weight.abs().max() <= 0.1


def test_rewe_model_initialises_like_the_plain_model():
    """The global param_init loop skips the head: every shared parameter starts bit-identical."""
    table = torch.randn(9, 5)
    torch.manual_seed(0)
    plain = build_model(model_opts(), 11, 9, table).state_dict()
    torch.manual_seed(0)
    rewe = build_model(model_opts(rewe_lambda=0.0), 11, 9, table).state_dict()
    assert set(rewe) - set(plain) == {
        "generator.head.w1.weight",
        "generator.head.w1.bias",
        "generator.head.w2.weight",
        "generator.head.w2.bias",
        "generator.table",
    }
    for name, tensor in plain.items():
        assert torch.equal(tensor, rewe[name]), name
    assert rewe["generator.head.w1.weight"].shape == (8, 8)  # -rewe_hidden defaults to -rnn_size
    own = ReWEHead(8, 8, 5, init=0.1, seed=3)  # the head keeps its own initialisation
    assert torch.equal(rewe["generator.head.w1.weight"], own.w1.weight)
    assert torch.equal(rewe["generator.head.w2.bias"], own.w2.bias)


def test_rewe_generator_ignores_the_head_when_decoding():
    gen = ReWEGenerator(6, 7, F.normalize(torch.randn(7, 5), dim=-1), head_hidden=4)
    dec_out = torch.randn(3, 6)
    decoded = gen(dec_out)
    trained = gen(dec_out, gold=torch.tensor([1, 2, 3]))
    assert isinstance(decoded, torch.Tensor) and isinstance(trained, ReWEOutput)
    assert trained.embedding.shape == (3, 5)
    torch.testing.assert_close(decoded, trained.logits)
    torch.testing.assert_close(gen.scores(decoded), gen.scores(trained))
    torch.testing.assert_close(gen.scores(decoded), torch.log_softmax(gen.proj(dec_out), -1))


# --- joint input-output layer ---------------------------------------------------------------------


def test_joint_logits_formula():
    """logits_w = tanh(U e_w + b_u) · tanh(V h + b_v) + b_w, written out word by word."""
    gen, emb = joint()
    h = torch.randn(2, 4)
    U, b_u = gen.word_proj.weight, gen.word_proj.bias
    V, b_v = gen.context_proj.weight, gen.context_proj.bias
    ctx = torch.tanh(h @ V.t() + b_v)
    want = torch.empty(2, 6)
    for w in range(6):
        want[:, w] = ctx @ torch.tanh(U @ emb.table.weight[w] + b_u) + gen.bias[w]
    torch.testing.assert_close(gen(h), want)
    torch.testing.assert_close(gen.scores(gen(h)), torch.log_softmax(want, -1))
    assert gen(h.view(1, 2, 4)).shape == (1, 2, 6)  # batch-first 3-D, as decoding passes it


def test_joint_reads_the_decoder_embeddings():
    """With -tie_emb E is the frozen table through the decoder's projection: the projection is
    trained through the generator, the table is not, and nothing is registered twice."""
    opt = model_opts(generator="joint", tie_emb=True, joint_dim=4)
    model = build_model(opt, 11, 9, torch.randn(9, 5))
    gen, emb = model.generator, model.decoder.embeddings
    assert gen.embeddings is emb and emb.proj is not None
    assert not any(k.startswith("generator.embeddings") for k in model.state_dict())
    assert {n for n, _ in gen.named_parameters()} == {
        "word_proj.weight",
        "word_proj.bias",
        "context_proj.weight",
        "context_proj.bias",
        "bias",
    }
    gen(torch.randn(3, 8)).sum().backward()
    assert emb.proj.weight.grad is not None and emb.table.weight.grad is None
    torch.testing.assert_close(emb.matrix(), emb.proj(F.normalize(emb.table.weight)))


def test_joint_padding_row_gets_no_gradient():
    gen, emb = joint()
    with torch.no_grad():
        emb.table.weight[0].zero_()
    gen(torch.randn(2, 4)).sum().backward()
    assert torch.equal(emb.table.weight.grad[0], torch.zeros(3)) and emb.table.weight.grad[1:].abs().sum() > 0


def test_sample_candidates():
    torch.manual_seed(0)
    gold = torch.tensor([7, 3, 7, 19, 3])
    for fraction, size in ((0.25, 5), (0.1, 3), (0.5, 10)):
        cand = sample_candidates(gold, 20, fraction)
        assert cand.numel() == size and torch.equal(cand, cand.unique())  # sorted, distinct
        assert set(gold.tolist()) <= set(cand.tolist())
    assert torch.equal(sample_candidates(gold, 20, 1.0), torch.arange(20))
    # negatives are uniform over the non-gold words
    counts = torch.zeros(20)
    for _ in range(400):
        counts[sample_candidates(gold, 20, 0.25)] += 1
    others = [w for w in range(20) if w not in (3, 7, 19)]
    assert (counts[[3, 7, 19]] == 400).all()
    torch.testing.assert_close(counts[others] / 400, torch.full((17,), 2 / 17), atol=0.05, rtol=0)


def test_joint_sample_one_is_the_full_softmax():
    """-joint_sample 1.0 goes through the sampled path with every word a candidate: the loss and
    its gradient equal the full softmax's, and nothing is drawn from the RNG."""
    gold = torch.tensor([1, 4, 4, 2])
    h = torch.randn(4, 4)
    grads = []
    for sample in (None, 1.0):
        gen, _ = joint(sample=sample)
        gen.train()
        state = torch.get_rng_state()
        out = gen(h, gold)
        assert torch.equal(state, torch.get_rng_state())
        assert isinstance(out, SampledLogits) == (sample is not None)
        loss = cross_entropy(out, gold)
        loss.sum().backward()
        grads.append((loss.detach(), [p.grad.clone() for p in gen.parameters()]))
    torch.testing.assert_close(grads[0][0], grads[1][0])
    for a, b in zip(grads[0][1], grads[1][1], strict=True):
        torch.testing.assert_close(a, b)


def test_joint_sampled_softmax():
    """Training with a fraction p: the softmax over the candidates only; the targets are found among
    them. Validation (eval mode) and decoding (no gold) use the full softmax."""
    gen, _ = joint(vocab=40, sample=0.25)
    gold = torch.tensor([5, 9, 5, 33])
    h = torch.randn(4, 4)
    torch.manual_seed(1)
    out = gen(h, gold)
    assert isinstance(out, SampledLogits) and out.candidates.numel() == 10
    full = gen(h)
    torch.testing.assert_close(out.logits, full[:, out.candidates])
    pos = [out.candidates.tolist().index(g) for g in gold.tolist()]
    want = -torch.log_softmax(full[:, out.candidates], -1)[torch.arange(4), pos]
    torch.testing.assert_close(cross_entropy(out, gold), want)
    gen.eval()
    assert isinstance(gen(h, gold), torch.Tensor) and gen(h, gold).shape == (4, 40)


def test_joint_eval_cache_follows_parameter_changes():
    """Decoding computes tanh(U·Eᵀ + b_u) once per parameter state, and again after an update."""
    gen, emb = joint()
    gen.eval()
    h = torch.randn(2, 4)
    with torch.no_grad():
        first = gen(h)
        assert gen._cache is not None
        torch.testing.assert_close(gen(h), first)
        emb.table.weight[2] += 0.5  # as an optimiser step would
        changed = gen(h)
    with torch.enable_grad():  # no cache: computed afresh
        torch.testing.assert_close(changed, gen(h).detach())
    assert not torch.allclose(changed, first)


def test_joint_eval_cache_follows_a_fused_optimiser_step():
    """train.py's Adam is fused on the CPU, and a fused step changes the parameters without bumping their
    version: the validation after it must score with the new words, not the cached ones of before it."""
    gen, emb = joint()
    h = torch.randn(2, 4)
    gen.eval()
    with torch.no_grad():
        before = gen(h)
    gen.train()  # as Trainer.train_step does
    params = [p for p in (*gen.parameters(), *emb.parameters()) if p.requires_grad]
    for p in params:
        p.grad = torch.ones_like(p)
    torch.optim.Adam(params, lr=0.1, fused=True).step()
    gen.eval()  # as Trainer.validate does
    with torch.no_grad():
        after = gen(h)
    with torch.enable_grad():  # no cache: computed afresh
        torch.testing.assert_close(after, gen(h).detach())
    assert not torch.allclose(after, before)


# --- acceptance on data/ --------------------------------------------------------------------------

TINY = [
    "-rnn_size",
    "16",
    "-word_vec_size",
    "8",
    "-batch_size",
    "16",
    "-train_steps",
    "15",
    "-report_every",
    "5",
    "-valid_steps",
    "1000",
    "-save_checkpoint_steps",
    "1000",
    "-seed",
    "7",
]

ACCEPTANCE = {
    "synmargin_proj": ["-loss", "synmargin_proj", "-tie_emb"],
    "synmargin_diff": ["-loss", "synmargin_diff"],
    "margin_random": ["-loss", "margin_random", "-num_negatives", "5"],
    "rewe": ["-loss", "ce", "-rewe_lambda", "20", "-rewe_loss", "cosine"],
    "joint": ["-loss", "ce", "-generator", "joint", "-joint_dim", "64", "-joint_sample", "0.25"],
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """data/ preprocessed with its embeddings (normalised), and the first 20 test sentences."""
    d = tmp_path_factory.mktemp("seed_methods")
    prefix = str(d / "data")
    preprocess.main(
        [
            "-train_src",
            str(DATA / "train.fr"),
            "-train_tgt",
            str(DATA / "train.en"),
            "-valid_src",
            str(DATA / "valid.fr"),
            "-valid_tgt",
            str(DATA / "valid.en"),
            "-save_data",
            prefix,
            "-tgt_emb",
            str(DATA / "en.vec.gz"),
        ]
    )
    embeddings_to_torch.main(
        [
            "-emb_file_dec",
            str(DATA / "en.vec.gz"),
            "-dict_file",
            prefix + ".vocab.pt",
            "-output_file",
            str(d / "emb"),
            "-normalize",
        ]
    )
    lines = (DATA / "test.fr").read_text(encoding="utf-8").splitlines()[:20]
    (d / "src.fr").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"dir": d, "prefix": prefix, "emb": str(d / "emb.dec.pt"), "src": str(d / "src.fr")}


def train_on_sample(sample, name, *extra):
    return train.main(
        [
            "-data",
            sample["prefix"],
            "-save_model",
            str(sample["dir"] / name),
            "-tgt_emb",
            sample["emb"],
            "-log_file",
            str(sample["dir"] / f"{name}.log"),
            *TINY,
            *extra,
        ]
    )


@pytest.mark.parametrize("name", ACCEPTANCE)
def test_acceptance_train_and_translate(sample, capsys, name):
    """15 steps on data/, then 20 sentences (the joint model with beam search): one line per input."""
    run = train_on_sample(sample, name, *ACCEPTANCE[name])
    assert run.progress["step"] == 15
    log = (sample["dir"] / f"{name}.log").read_text(encoding="utf-8")
    assert {"rewe": "ReWE head: ", "joint": "output layer (joint generator): "}.get(name, "output layer") in log
    out = sample["dir"] / f"{name}.out"
    beam = ["-beam_size", "3"] if name == "joint" else []
    translate.main(
        ["-model", str(sample["dir"] / f"{name}_last.pt"), "-src", sample["src"], "-output", str(out), *beam]
    )
    assert "translated 20 lines" in capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n") and len(text.split("\n")) == 21
    assert any(line.strip() for line in text.split("\n"))


def test_acceptance_rewe_lambda_zero_trains_like_ce(sample):
    """Same seed, dropout on, gradient clipping active, a validation inside: -rewe_lambda 0 ends
    with bit-identical parameters wherever both checkpoints have them."""
    extra = ["-dropout", "0.3", "-max_grad_norm", "0.05", "-valid_steps", "10"]
    train_on_sample(sample, "ce", "-loss", "ce", *extra)
    train_on_sample(sample, "rewe0", "-loss", "ce", "-rewe_lambda", "0", *extra)
    ce = torch.load(sample["dir"] / "ce_last.pt", weights_only=True)["model"]
    rewe = torch.load(sample["dir"] / "rewe0_last.pt", weights_only=True)["model"]
    assert set(ce) < set(rewe) and {k for k in rewe if k not in ce} == {
        "generator.head.w1.weight",
        "generator.head.w1.bias",
        "generator.head.w2.weight",
        "generator.head.w2.bias",
        "generator.table",
    }
    for name in ce:
        assert torch.equal(ce[name], rewe[name]), name
    log = (sample["dir"] / "ce.log").read_text(encoding="utf-8")
    assert "validation at step 10" in log
