"""train.py -seq_unlikelihood (onmt_cont.losses.unlikelihood, its SequenceUnlikelihood): the
repeated n-grams, −log(1 − p) against mpmath, the logits per loss, the joined forward, one update
lowering the unlikelihood term, and the command line (train, resume, bad values)."""

import mpmath
import pytest
import torch
import torch.nn.functional as F

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from onmt_cont.inputters.batching import collate, make_batches
from onmt_cont.inputters.corpus import load_shard, shard_paths
from onmt_cont.losses.unlikelihood import SequenceUnlikelihood, repeated_ngrams, unlikelihood, word_logits
from onmt_cont.models.generators import ContinuousGenerator, SoftmaxGenerator
from onmt_cont.outputs import BiasedVector, logits_of
from onmt_cont.train.step import Trainer, TrainingForward, greedy_decodes
from onmt_cont.translate.search import greedy_search
from tests.helpers import WC, argv, assert_resumed_exactly, memorisation_data, record_steps, run_train
from tests.helpers import train_fails as fails


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return memorisation_data(tmp_path_factory.mktemp("data"), 64)


def test_repeated_ngrams_by_hand():
    be, a, b, c = 7, 4, 5, 6
    assert repeated_ngrams([[a, be, be, be, be]], 3) == [[False, False, True, True, True]]  # 'be be be' again
    assert repeated_ngrams([[a, be, be, be]], 3) == [[False] * 4]
    assert repeated_ngrams([[a, b, c, a, b, c]], 3) == [[False] * 3 + [True] * 3]
    assert repeated_ngrams([[a, b, c, a, b, a]], 3) == [[False] * 6]
    assert repeated_ngrams([[a, b, a, b], [a], []], 2) == [[False, False, True, True], [False], []]
    assert repeated_ngrams([[a, b, a]], 1) == [[False, False, True]]


@pytest.mark.parametrize("gap", [0.0, 3.0, 30.0, 80.0, -30.0, -200.0])
def test_unlikelihood_against_mpmath(gap):
    """−log(1 − p(w)) for a word ``gap`` above (or below) the others in logit, over the range a model
    reaches: p from e^-200 to within e^-80 of 1, where 1 − softmax in float32 is 0."""
    logits = torch.tensor([[float("-inf"), 0.5, -1.0, 2.0, 2.0 + gap]])
    got = unlikelihood(logits, torch.tensor([4])).double().item()
    mpmath.mp.dps = 60
    vals = [mpmath.mpf(v) for v in (0.5, -1.0, 2.0, 2.0 + gap)]
    p = mpmath.e ** vals[3] / sum(mpmath.e**v for v in vals)
    want = float(-mpmath.log(1 - p))
    assert got == pytest.approx(want, rel=1e-5, abs=1e-30)
    assert torch.isfinite(torch.tensor(got))


def test_word_logits_follow_the_loss():
    """vmf losses: êᵀe + b; infonce: (cos + b)/τ; softmax: the logits; padding and <s> left out.
    Their argmax is what greedy search takes for the generator's scores."""
    torch.manual_seed(0)
    table = F.normalize(torch.randn(9, 5), dim=-1)
    table[0] = 0
    gen = ContinuousGenerator(4, table, criterion="vmf", word_bias=True)
    with torch.no_grad():
        gen.bias.copy_(torch.randn(9))
    h = torch.randn(3, 4)
    out = gen(h, gold=torch.zeros(3, dtype=torch.long))
    assert isinstance(out, BiasedVector)
    got = word_logits(gen, out, "nllvmf_nce")
    want = out.vector @ table.t() + gen.bias
    torch.testing.assert_close(got[:, 3:], want[:, 3:])
    assert torch.isinf(got[:, [PAD_ID, BOS_ID]]).all()
    scores = gen.greedy_scores(gen(h))
    scores[:, BOS_ID] = float("-inf")
    assert torch.equal(got.argmax(-1), scores.argmax(-1))
    nce = word_logits(gen, out, "infonce", temperature=0.1)
    torch.testing.assert_close(nce[:, 3:], ((F.normalize(out.vector, dim=-1) @ table.t() + gen.bias) / 0.1)[:, 3:])
    soft = SoftmaxGenerator(4, 9)
    torch.testing.assert_close(word_logits(soft, soft(h), "ce")[:, 3:], soft(h)[:, 3:])
    # gradients reach the prediction and the bias
    word_logits(gen, out, "nllvmf_nce")[:, 3:].sum().backward()
    assert gen.bias.grad is not None and gen.proj.weight.grad is not None


def _tiny_run(data, tmp_path, loss="nllvmf_nce"):
    """A tiny model trained for 6 epochs (dropout 0) and its first training batch."""
    run = run_train(data, tmp_path, loss=loss, word_bias=loss != "ce", **{**WC, "epochs": "6", "tie_emb": loss != "ce"})
    examples = load_shard(shard_paths(data["prefix"], "train")[0])
    batch = collate(examples, next(iter(make_batches(examples, 8, "sents"))))
    return run, batch


@pytest.mark.parametrize("loss", ["nllvmf_nce", "ce"])
def test_joined_forward_is_the_batch_and_its_decodes(data, tmp_path, loss):
    """The joined batch holds the batch's targets and the model's greedy decodes (<s> ŷ </s>); the
    split gives the batch's own output (as a forward on the batch alone) and −log(1 − p) summed
    over exactly the tokens repeated_ngrams flags, each scored at its own decode position."""
    run, batch = _tiny_run(data, tmp_path, loss)
    model = run.model
    model.eval()  # dropout 0 in WC anyway: forwards are deterministic
    ul = SequenceUnlikelihood(1.0, 1, 1, loss, search=greedy_decodes)  # n = 1: every repeated word, so flags are plenty
    joined, flags, decoded = ul.decode(model, batch)
    lengths = (batch["src_lengths"].float() * 2).long() + 10
    seqs, _ = greedy_search(model, batch["src"], batch["src_lengths"], lengths)
    assert decoded == sum(map(len, seqs))
    B = batch["src"].size(0)
    assert torch.equal(joined["src"], torch.cat([batch["src"]] * 2))
    t = batch["tgt"].size(1)
    assert torch.equal(joined["tgt"][:B, :t], batch["tgt"]) and (joined["tgt"][:B, t:] == PAD_ID).all()
    for b, q in enumerate(seqs):
        assert joined["tgt"][B + b, 1 : len(q) + 1].tolist() == q
    fwd = TrainingForward(model)
    with torch.no_grad():
        out, gold = fwd(joined["src"], joined["src_lengths"], joined["tgt"])
        (own, own_gold), total, flagged = ul.split(model.generator, out, gold, joined["tgt"], flags)
        alone, alone_gold = fwd(batch["src"], batch["src_lengths"], batch["tgt"])
    assert torch.equal(own_gold, alone_gold)
    own_vec = own.vector if isinstance(own, BiasedVector) else logits_of(own)  # ce: HiddenLogits
    alone_vec = alone.vector if isinstance(alone, BiasedVector) else logits_of(alone)
    torch.testing.assert_close(own_vec, alone_vec, rtol=1e-4, atol=1e-5)
    want_flags = repeated_ngrams(seqs, 1)
    assert flagged == sum(map(sum, want_flags)) > 0
    want = 0.0
    with torch.no_grad():  # each decode alone, teacher-forced on its own words
        for b, q in enumerate(seqs):
            tgt = torch.tensor([[BOS_ID, *q, EOS_ID]])
            o, _ = fwd(batch["src"][b : b + 1, : int(batch["src_lengths"][b])], batch["src_lengths"][b : b + 1], tgt)
            for i, f in enumerate(want_flags[b]):
                if f:
                    biased = isinstance(o, BiasedVector)
                    row = BiasedVector(o.vector[i : i + 1], o.bias) if biased else logits_of(o, slice(i, i + 1))
                    want += unlikelihood(word_logits(model.generator, row, loss), torch.tensor([q[i]])).item()
    assert total.item() == pytest.approx(want, rel=1e-4)


def test_one_update_lowers_the_unlikelihood(data, tmp_path):
    """A step whose token-level loss is zero moves the model along −∇ of the unlikelihood term
    alone: recomputed on the same joined batch, the term falls."""
    run, batch = _tiny_run(data, tmp_path)
    model = run.model
    ul = SequenceUnlikelihood(1.0, 1, 1, "nllvmf_nce", search=greedy_decodes)
    joined, flags, _ = ul.decode(model, batch)

    def term():
        with torch.no_grad():
            out, gold = TrainingForward(model)(joined["src"], joined["src_lengths"], joined["tgt"])
            return ul.split(model.generator, out, gold, joined["tgt"], flags)[1].item()

    before = term()
    zero = lambda output, gold: 0.0 * output.vector.sum(-1)  # noqa: E731
    trainer = Trainer(model, zero, torch.optim.SGD(model.parameters(), lr=0.05), seq_unlikelihood=ul)
    trainer.train_step(batch, 1)
    assert trainer.last_stats[-2] > 0  # flagged tokens
    assert term() < before - 1e-4


def test_train_resume_and_bad_values(data, tmp_path, monkeypatch, capsys):
    """End to end: the log reports the decodes' repeats; the updates differ from a run without it;
    a run resumed with the same options continues bit for bit; bad values are refused before
    anything is written."""
    common = {**WC, "loss": "nllvmf_nce", "word_bias": True, "train_steps": "8", "epochs": "5"}
    plain = run_train(data, tmp_path / "plain", **common)
    seen = record_steps(monkeypatch)
    full = run_train(
        data, tmp_path / "full", seq_unlikelihood="2", seq_unlikelihood_ngram="2", seq_unlikelihood_every="2", **common
    )
    reference = dict(seen)
    log = (tmp_path / "full" / "train.log").read_text()
    assert "of tokens in a repeated n-gram, -log(1-p)" in log
    assert full.opt.seq_unlikelihood_ngram == 2 and full.opt.seq_unlikelihood_every == 2
    assert any((a != b).any() for a, b in zip(full.model.parameters(), plain.model.parameters(), strict=True))
    seen.clear()
    resumed = run_train(
        data,
        tmp_path / "res",
        train_from=str(tmp_path / "full" / "m_step_4.pt"),
        seq_unlikelihood="2",
        seq_unlikelihood_ngram="2",
        seq_unlikelihood_every="2",
        **common,
    )
    assert_resumed_exactly(seen, reference, resumed, full, 4)
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    fails(capsys, argv(data, bad, **common, seq_unlikelihood="-1"), "-seq_unlikelihood is a weight", "-1")
    for value in ("nan", "inf"):  # refused by the parser, as every float option's
        fails(
            capsys,
            argv(data, bad, **common, seq_unlikelihood=value),
            "-seq_unlikelihood: expected a finite number",
            value,
        )
    fails(
        capsys,
        argv(data, bad, **common, seq_unlikelihood_ngram="3"),
        "-seq_unlikelihood_ngram",
        "give -seq_unlikelihood WEIGHT",
    )
    fails(
        capsys,
        argv(data, bad, **common, seq_unlikelihood="1", seq_unlikelihood_every="0"),
        "-seq_unlikelihood_every must be at least 1",
    )
    fails(
        capsys,
        argv(data, bad, **common, seq_unlikelihood="1", seq_unlikelihood_ngram="0"),
        "-seq_unlikelihood_ngram must be at least 1",
    )
    fails(
        capsys,
        argv(data, bad, **{**common, "loss": "cosine", "word_bias": None}, seq_unlikelihood="1"),
        "-seq_unlikelihood needs a softmax",
        "not -loss cosine",
    )
    fails(
        capsys,
        argv(
            data,
            bad,
            **{**common, "loss": "ce", "word_bias": None, "tie_emb": None},
            generator="joint",
            joint_sample="0.5",
            seq_unlikelihood="1",
        ),
        "-joint_sample",
    )
    assert not list(bad.iterdir())
