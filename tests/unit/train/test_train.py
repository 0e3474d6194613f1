"""train.py in-process: a generator x loss x tie_emb matrix of tiny models that learn a memorisation
task, exact resumption, plain-data checkpoints, and bad input that fails before training."""

import dataclasses
import math
import os
import re

import pytest
import torch
import yaml

import onmt_cont.losses
from onmt_cont.bin import preprocess, train
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.outputs import logits_of
from onmt_cont.train import build as training
from onmt_cont.train.step import Trainer
from onmt_cont.utils.errors import UserError
from tests.helpers import (
    BATCHES_PER_EPOCH,
    EMB_DIM,
    ROOT,
    argv,
    corpus,
    log_values,
    memorisation_data,
    record_steps,
    reported_losses,
    run_train,
)
from tests.helpers import train_fails as fails


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return memorisation_data(tmp_path_factory.mktemp("data"), EMB_DIM)


# --- the matrix ---------------------------------------------------------------------------------

CASES = (
    [("ce", "linear", False), ("ce", "linear", True)]
    + [
        (loss, gen, tie)
        for loss in ("l2", "cosine", "maxmargin", "nllvmf", "nllvmf_approx")
        for gen in ("linear", "nonlinear")
        for tie in (False, True)
    ]
    + [
        # The seed-paper methods, pairwise rather than every combination (the generator and -tie_emb do
        # not touch their code): the papers' setups (tied margin losses, untied ReWE) and the others.
        (loss, gen, tie)
        for loss in ("synmargin_proj", "synmargin_diff", "margin_random")
        for gen, tie in (("linear", True), ("nonlinear", False))
    ]
    + [
        # issue 15: maxmargin with table-free hard negatives, and the contrastive losses
        ("maxmargin_gold_nn", "linear", True),
        ("infonce", "nonlinear", False),
        ("nllvmf_nce", "linear", True),
    ]
    + [
        ("ce_rewe", "linear", False),
        ("ce_rewe", "linear", True),
        ("ce_joint", "joint", False),
        ("ce_joint_sampled", "joint", True),
    ]
)

# Case names that are not a -loss value: the -loss and the options they stand for.
VARIANTS = {
    "nllvmf": ("nllvmf", {"lambda1": "0", "lambda2": "1"}),
    "nllvmf_approx": ("nllvmf", {"lambda1": "0", "lambda2": "1", "vmf_approx": True}),
    "ce_rewe": ("ce", {"rewe_lambda": "20"}),
    "maxmargin_gold_nn": ("maxmargin", {"negatives": "gold_nn,inbatch", "num_negatives": "3"}),
    "nllvmf_nce": ("nllvmf_nce", {"lambda1": "0", "lambda2": "1"}),
    "ce_joint": ("ce", {}),
    # 12 of the 16 words: a batch's ~10 distinct target words and a few sampled negatives
    "ce_joint_sampled": ("ce", {"joint_sample": "0.75"}),
}

# Least decrease, first epoch -> mean of the last two, well below what each case shows (ce 0.5,
# l2 0.2, cosine 0.24, maxmargin 0.05, synmargin 0.28, margin_random 0.13, nllvmf 2.9 or more,
# ReWE (NLL + 20 x cosine) 4.4, joint 0.21, sampled joint 0.17, maxmargin gold_nn 0.14, infonce 0.78,
# nllvmf_nce 2.8).
MIN_DECREASE = {
    "ce": 0.15,
    "l2": 0.05,
    "cosine": 0.05,
    "maxmargin": 0.02,
    "synmargin_proj": 0.1,
    "synmargin_diff": 0.1,
    "margin_random": 0.05,
    "nllvmf": 0.5,
    "nllvmf_approx": 0.5,
    "ce_rewe": 1.5,
    "ce_joint": 0.08,
    "ce_joint_sampled": 0.06,
    "maxmargin_gold_nn": 0.05,
    "infonce": 0.3,
    "nllvmf_nce": 1.0,
}


@pytest.mark.parametrize("loss,generator,tie_emb", CASES, ids=lambda v: {True: "tie", False: "untied"}.get(v, v))
def test_matrix_learns(data, tmp_path, loss, generator, tie_emb):
    """Eight epochs of four batches; -report_every 4 makes each report the mean over one full
    epoch, so every report averages the same examples.

    NLLvMF runs unregularised (-lambda1 0 -lambda2 1): with the defaults the loss can only fall
    by about (lambda2 cos - lambda1)^2 m / 2, a few hundredths here, too little to tell learning
    from noise. The defaults are trained in test_nllvmf_memorises."""
    epochs = 8
    name, extra = VARIANTS.get(loss, (loss, {}))
    softmax = name == "ce"
    run = run_train(
        data,
        tmp_path,
        loss=name,
        generator=generator,
        tie_emb=tie_emb,
        epochs=epochs,
        tgt_emb=None if loss in ("ce", "ce_joint", "ce_joint_sampled") and not tie_emb else data["emb"],
        **extra,
    )
    losses = reported_losses(tmp_path / "train.log")
    assert len(losses) == epochs and all(math.isfinite(x) for x in losses)
    assert (losses[-1] + losses[-2]) / 2 < losses[0] - MIN_DECREASE[loss], losses
    assert run.progress["step"] == epochs * BATCHES_PER_EPOCH
    assert run.model.generator.continuous == (not softmax)
    assert run.model.decoder.embeddings.table.weight.requires_grad != tie_emb
    kind = "ReWE" if loss == "ce_rewe" else "Joint" if generator == "joint" else "Softmax" if softmax else "Continuous"
    assert type(run.model.generator).__name__ == kind + "Generator"
    if loss in VARIANTS and "negatives" in VARIANTS[loss][1]:
        assert run.opt.negatives == VARIANTS[loss][1]["negatives"]
    if "nllvmf" in loss:
        assert (run.opt.lambda1, run.opt.lambda2, run.opt.vmf_approx) == (0.0, 1.0, loss == "nllvmf_approx")


def test_nllvmf_memorises(data, tmp_path):
    """With the paper's regularisers (the defaults) NLLvMF learns the task: nearest-neighbour
    accuracy on seen pairs goes from chance to (nearly) all words."""
    run_train(data, tmp_path, loss="nllvmf", epochs=80, report_every=40)
    acc = log_values(tmp_path / "train.log", r"validation at step \d+: .*nn accuracy ([\d.]+)%")
    cos = log_values(tmp_path / "train.log", r"validation at step \d+: .*cosine (-?[\d.]+)")
    assert len(acc) == 80 and acc[0] < 40.0 and acc[-1] > 90.0, acc
    assert cos[-1] > 0.9, cos


# --- start-up errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra,needles",
    [
        ({"loss": "ce", "generator": "nonlinear"}, ["-loss ce", "-generator nonlinear"]),
        ({"loss": "nllvmf", "tgt_emb": None}, ["-loss nllvmf", "-tgt_emb"]),
        ({"loss": "ce", "tie_emb": True, "tgt_emb": None}, ["-tie_emb", "-tgt_emb"]),
        ({"loss": "ce", "rewe_lambda": "20", "tgt_emb": None}, ["-rewe_lambda", "-tgt_emb"]),
        ({"loss": "cosine", "rewe_lambda": "20"}, ["-rewe_lambda", "-loss ce", "-loss cosine"]),
        ({"loss": "ce", "generator": "joint", "rewe_lambda": "20"}, ["-rewe_lambda", "-generator joint"]),
        ({"loss": "ce", "rewe_lambda": "-1"}, ["-rewe_lambda", "-1"]),
        ({"loss": "synmargin_proj", "generator": "joint"}, ["-generator joint", "-loss synmargin_proj"]),
        ({"loss": "ce", "generator": "joint", "joint_sample": "0"}, ["-joint_sample", "(0, 1]"]),
        ({"loss": "ce", "generator": "joint", "joint_sample": "1.5"}, ["-joint_sample", "1.5"]),
        ({"loss": "ce", "joint_sample": "0.25"}, ["-joint_sample", "-generator joint"]),
        ({"loss": "ce", "generator": "joint", "joint_dim": "0"}, ["-joint_dim", "0"]),
        ({"loss": "margin_random", "num_negatives": "0"}, ["-num_negatives", "0"]),
        ({"loss": "cosine", "num_negatives": "3"}, ["-num_negatives", "cosine"]),
        ({"loss": "nllvmf", "negatives": "inbatch"}, ["-negatives", "nllvmf"]),
        ({"loss": "maxmargin", "negatives": "exact,inbatch"}, ["-negatives", "exact"]),
        ({"loss": "infonce", "negatives": "hardest"}, ["-negatives", "hardest"]),
        ({"loss": "infonce", "temperature": "0"}, ["-temperature", "positive"]),
        ({"loss": "infonce", "num_sampled": "0"}, ["-num_sampled", "at least 1"]),
        ({"loss": "nllvmf_nce", "contrastive_weight": "-1"}, ["-contrastive_weight"]),
        ({"loss": "cosine", "vmf_form": "code"}, ["-vmf_form code", "-loss cosine"]),
        ({"loss": "nllvmf", "vmf_form": "code", "vmf_lambda": "-0.1"}, ["-vmf_lambda", "-0.1"]),
        ({"loss": "ce", "rewe_hidden": "16"}, ["-rewe_hidden", "-rewe_lambda"]),
        ({"loss": "hinge"}, ["-loss", "hinge"]),
        ({"bogus_option": "1"}, ["-bogus_option"]),
        ({"valid_steps": "-1"}, ["-valid_steps", "-1"]),
        ({"save_checkpoint_steps": "0"}, ["-save_checkpoint_steps"]),
        ({"save_checkpoint_epochs": "0"}, ["-save_checkpoint_epochs"]),
        ({"brnn": True, "rnn_size": "33"}, ["-rnn_size", "33"]),
        ({"loss": "ce", "label_smoothing": "1.5"}, ["-label_smoothing", "1.5"]),
        ({"learning_rate": "-1"}, ["-learning_rate", "-1"]),
        ({"valid_remove_bpe": True}, ["-valid_remove_bpe", "-valid_metric bleu", "-valid_metric loss"]),
        ({"dropout": "1.5"}, ["dropout", "1.5"]),
        ({"log_file": "/nonexistent_dir/train.log"}, ["-log_file", "/nonexistent_dir"]),
    ],
)
def test_bad_options(data, tmp_path, capsys, extra, needles):
    fails(capsys, argv(data, tmp_path, **extra), *needles)
    assert list(tmp_path.iterdir()) == []


def test_missing_data(data, tmp_path, capsys):
    missing = str(tmp_path / "nope" / "d")
    fails(capsys, argv(data, tmp_path, data=missing, loss="ce"), missing + ".vocab.pt")
    fails(capsys, argv(data, tmp_path, data=None, loss="ce"), "-data")
    fails(capsys, argv(data, tmp_path, save_model=str(tmp_path / "no_dir" / "m")), str(tmp_path / "no_dir"))
    assert not list(tmp_path.glob("*.pt"))


def test_missing_train_shards(data, tmp_path, capsys):
    prefix = tmp_path / "d"
    os.symlink(data["prefix"] + ".vocab.pt", str(prefix) + ".vocab.pt")
    fails(capsys, argv(data, tmp_path, data=str(prefix), loss="ce"), "no train shards", str(prefix))


def test_table_rows_must_fit_vocab(data, tmp_path, capsys):
    v = data["tgt_vocab_size"]
    bad = tmp_path / "short.pt"
    torch.save(torch.nn.functional.normalize(torch.randn(v - 1, EMB_DIM)), bad)
    log = tmp_path / "train.log"
    fails(
        capsys,
        argv(data, tmp_path, loss="l2", tgt_emb=str(bad), log_file=str(log)),
        str(bad),
        f"{v - 1} rows",
        f"{v} words",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short.pt"]  # no checkpoint, no log


@pytest.mark.parametrize("kind", ["dict", "text", "gzip_vec", "int_tensor", "vector", "nan", "missing"])
def test_tgt_emb_not_a_table(data, tmp_path, capsys, kind):
    path = tmp_path / f"emb.{kind}"
    v = data["tgt_vocab_size"]
    if kind == "dict":
        torch.save({"table": torch.zeros(v, EMB_DIM)}, path)
    elif kind == "text":
        path.write_text("the 0.1 0.2\n", encoding="utf-8")
    elif kind == "gzip_vec":
        path = ROOT / "data" / "en.vec.gz"
    elif kind == "int_tensor":
        torch.save(torch.zeros(v, EMB_DIM, dtype=torch.long), path)
    elif kind == "vector":
        torch.save(torch.zeros(v), path)
    elif kind == "nan":
        torch.save(torch.full((v, EMB_DIM), float("nan")), path)
    fails(capsys, argv(data, tmp_path, loss="cosine", tgt_emb=str(path)), f"-tgt_emb {path}")
    assert not list(tmp_path.glob("m_*"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_without_cuda(data, tmp_path, capsys):
    fails(capsys, argv(data, tmp_path, loss="ce", gpu="0"), "-gpu 0", "CUDA")
    assert not list(tmp_path.glob("m_*"))


def test_gpu_minus_one_means_cpu(monkeypatch):
    """OpenNMT's -gpu -1 is the CPU, also on a machine with CUDA (mocked here: before, it went to
    torch.cuda.set_device(-1) and a raw RuntimeError)."""
    from onmt_cont.translate import options as translate
    from onmt_cont.utils.device import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: pytest.fail(f"set_device({i})"))
    for build in (train.build_parser, translate.build_parser):
        assert build().parse_args(["-gpu", "-1"]).gpu is None
        assert build().parse_args(["-gpu", "0"]).gpu == 0
        with pytest.raises(UserError, match="expected a CUDA device id"):
            build().parse_args(["-gpu", "first"])
    assert resolve_device(None) == resolve_device(-1) == torch.device("cpu")


def test_train_from_not_a_checkpoint(data, tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint\n", encoding="utf-8")
    fails(capsys, argv(data, tmp_path, loss="ce", train_from=str(bad)), str(bad), "checkpoint")


# --- non-finite loss ------------------------------------------------------------------------------


@pytest.mark.parametrize("save_every", ["1", "1000"])
def test_nan_loss_stops(data, tmp_path, capsys, monkeypatch, save_every):
    """The l2 loss returns NaN at its third call (step 3; no validation before it)."""
    real = onmt_cont.losses.LOSSES["l2"]

    def nan_at_step_3(opt, table):
        fn, calls = real.build(opt, table), [0]

        def loss(output, target):
            calls[0] += 1
            out = fn(output, target)
            return out * float("nan") if calls[0] == 3 else out

        return loss

    monkeypatch.setitem(onmt_cont.losses.LOSSES, "l2", dataclasses.replace(real, build=nan_at_step_3))
    fails(capsys, argv(data, tmp_path, loss="l2", save_checkpoint_steps=save_every, epochs=3), "step 3", "nan")
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == (["m_step_1.pt", "m_step_2.pt"] if save_every == "1" else [])


def test_huge_learning_rate_stops(data, tmp_path, capsys):
    """An absurd SGD rate drives the loss to inf/NaN deterministically; nothing is written."""
    err = fails(
        capsys, argv(data, tmp_path, loss="l2", optim="sgd", learning_rate="1e30", max_grad_norm="0", epochs=5), "step "
    )
    assert re.search(r"step \d+: the (training loss|gradient norm) is (nan|inf)", err), err
    assert not list(tmp_path.glob("m_*"))


# --- checkpoints and resuming -----------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["nllvmf", "ce", "margin_random", "ce_joint_sampled"])
def test_resume_is_exact(data, tmp_path, monkeypatch, loss):
    """Train 10 steps (2.5 epochs of 4 batches, dropout on, checkpoints every 2, validation every 3
    and at each epoch end); resume from step 4 (an epoch's end, before its validation) and from
    step 6 (mid-epoch): every later step's loss, the final parameters and the progress (best
    validation loss included) equal the uninterrupted run's. margin_random draws its negatives and
    the sampled joint softmax its candidates from the global RNG, which checkpoints carry."""
    seen = record_steps(monkeypatch)
    extra = {"loss": "ce", "generator": "joint", "joint_sample": "0.75"} if loss == "ce_joint_sampled" else {}
    common = {
        "loss": loss,
        "dropout": "0.3",
        "epochs": "5",
        "train_steps": "10",
        "save_checkpoint_steps": "2",
        "report_every": "1",
        "valid_steps": "3",
        **extra,
    }
    full = run_train(data, tmp_path / "full", **common)
    reference = dict(seen)
    assert sorted(reference) == list(range(1, 11))
    logged = reported_losses(tmp_path / "full" / "train.log")
    assert len(logged) == 10
    for k in (4, 6):
        seen.clear()
        ckpt = tmp_path / "full" / f"m_step_{k}.pt"
        resumed = run_train(data, tmp_path / f"from{k}", train_from=str(ckpt), **common)
        assert [s for s, _ in seen] == list(range(k + 1, 11))
        for step, value in seen:
            assert value == reference[step], (k, step)
        for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
            assert torch.equal(a, b), name
        assert resumed.progress == full.progress


def test_why_a_run_stopped_is_in_the_log_file(data, tmp_path, capsys, monkeypatch):
    """Issue 69.18: a run that stops on an error (here the loss turns NaN at step 3) says why in -log_file,
    not only on the console; a run stopped before its log exists writes none."""
    real = onmt_cont.losses.LOSSES["l2"]

    def nan_at_step_3(opt, table):
        fn, calls = real.build(opt, table), [0]

        def loss(output, target):
            calls[0] += 1
            return fn(output, target) * (float("nan") if calls[0] == 3 else 1.0)

        return loss

    monkeypatch.setitem(onmt_cont.losses.LOSSES, "l2", dataclasses.replace(real, build=nan_at_step_3))
    log = tmp_path / "train.log"
    fails(capsys, argv(data, tmp_path, loss="l2", epochs=3, log_file=str(log)), "step 3", "nan")
    last = log.read_text(encoding="utf-8").splitlines()[-1]
    assert "error: " in last and "step 3" in last and "nan" in last, last
    assert capsys.readouterr().out.count("error: ") == 0  # the console has it once, on stderr
    fails(
        capsys, argv(data, tmp_path, loss="l2", epochs=3, rnn_size="0", log_file=str(tmp_path / "t2.log")), "-rnn_size"
    )
    assert not (tmp_path / "t2.log").exists()


def test_checkpoint_of_the_adam_loop_resumes_under_fused_adam(data, tmp_path, monkeypatch):
    """Every checkpoint written before train.py fused Adam on the CPU holds the per-tensor loop's state: it resumes
    under the fused kernel and ends where the loop would have, up to float rounding; the optimiser is fused."""
    common = {
        "loss": "nllvmf",
        "dropout": "0",
        "epochs": "5",
        "train_steps": "8",
        "save_checkpoint_steps": "4",
        "valid_steps": "100",
    }
    real = training.make_optimizer
    monkeypatch.setattr(training, "make_optimizer", lambda opt, model, fused=None: real(opt, model, fused=False))
    loop = run_train(data, tmp_path / "loop", **common)
    assert not loop.optimizer.defaults["fused"] and loop.progress["step"] == 8
    monkeypatch.setattr(training, "make_optimizer", real)
    resumed = run_train(data, tmp_path / "fused", train_from=str(tmp_path / "loop" / "m_step_4.pt"), **common)
    assert resumed.optimizer.defaults["fused"] and resumed.progress["step"] == 8
    for a, b in zip(loop.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_checkpoints_plain_data(data, tmp_path):
    run_train(data, tmp_path, loss="maxmargin", tie_emb=True, epochs=2, save_checkpoint_steps=3, valid_steps=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["m_best.pt", "m_last.pt", "m_step_3.pt", "m_step_6.pt", "m_step_8.pt", "train.log"], names
    for name in names[:-1]:
        ckpt = torch.load(tmp_path / name, weights_only=True)
        assert ckpt["format_version"] == 1
        assert set(ckpt) == {"format_version", "model", "optim", "opt", "vocab", "progress", "rng"}
        assert all(isinstance(v, (str, int, float, bool, type(None))) for v in ckpt["opt"].values())
        assert ckpt["opt"]["loss"] == "maxmargin" and ckpt["opt"]["tie_emb"] is True
        assert all(isinstance(t, str) for t in ckpt["vocab"]["tgt"])
        assert all(isinstance(t, torch.Tensor) for t in ckpt["model"].values())
    last = torch.load(tmp_path / "m_last.pt", weights_only=True)
    assert last["progress"]["step"] == 8 and last["progress"]["epoch"] == 2
    step6 = torch.load(tmp_path / "m_step_6.pt", weights_only=True)
    assert step6["progress"]["step"] == 6
    table = last["model"]["generator.table"]
    torch.testing.assert_close(table.norm(dim=-1)[1:], torch.ones(table.size(0) - 1))


def test_save_checkpoint_epochs(data, tmp_path):
    run_train(data, tmp_path, loss="cosine", epochs=4, save_checkpoint_epochs=2)
    names = sorted(p.name for p in tmp_path.iterdir() if "epoch" in p.name)
    assert names == ["m_epoch_2.pt", "m_epoch_4.pt"], names
    for n in (2, 4):
        progress = torch.load(tmp_path / f"m_epoch_{n}.pt", weights_only=True)["progress"]
        assert progress["epoch"] == n and progress["step"] == n * BATCHES_PER_EPOCH


def test_train_from_keeps_model_options(data, tmp_path):
    run_train(data, tmp_path / "a", loss="cosine", generator="nonlinear", epochs=1)
    # The network is defined by the checkpoint; its options win over the defaults.
    run = run_train(data, tmp_path / "b", train_from=str(tmp_path / "a" / "m_last.pt"), epochs=2)
    assert run.opt.loss == "cosine" and run.opt.generator == "nonlinear"
    assert run.progress["step"] == 2 * BATCHES_PER_EPOCH


def test_train_from_conflicting_model_option(data, tmp_path, capsys):
    run_train(data, tmp_path / "a", loss="cosine", epochs=1)
    ckpt = str(tmp_path / "a" / "m_last.pt")
    fails(capsys, argv(data, tmp_path / "b", train_from=ckpt, loss="l2"), "-loss l2", ckpt, "-loss cosine")
    fails(capsys, argv(data, tmp_path / "b", train_from=ckpt, rnn_size="64"), "-rnn_size 64", "-rnn_size 32")


# --- options and logging --------------------------------------------------------------------------


def test_batch_type_tokens(data, tmp_path):
    run = run_train(data, tmp_path, loss="l2", batch_type="tokens", batch_size="24", epochs=2, report_every=1)
    steps = run.progress["step"]
    assert steps > 2 * BATCHES_PER_EPOCH  # up to 8 padded tokens a sentence: 3 or 4 per batch
    assert len(reported_losses(tmp_path / "train.log")) == steps


def test_early_stopping(data, tmp_path, monkeypatch):
    """Validation loss that never improves after the first: stop after 2 bad validations."""
    values = iter([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    real = Trainer.validate

    def validate(self, batches):
        stats = real(self, batches)
        stats["loss"] = next(values)
        return stats

    monkeypatch.setattr(Trainer, "validate", validate)
    run = run_train(data, tmp_path, loss="ce", epochs=10, valid_steps=2, early_stopping=2)
    assert run.progress["step"] == 6
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert "early stopping: 2 validations without improvement" in log
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["m_best.pt", "m_last.pt", "m_step_6.pt"]


# a loss curve with a dip and a plateau: patience 2 on each score stops at the 4th validation;
# on the mean of the last 2 (5, 4.5, 4.25, 4.45, 3.7, 3.25, 3.55, 3.65) it rides them out and stops at the 8th
DIPPING = [5.0, 4.0, 4.5, 4.4, 3.0, 3.5, 3.6, 3.7] + [9.0] * 30


def dipping_validation(monkeypatch):
    real = Trainer.validate
    seen = []

    def validate(self, batches):
        seen.append(DIPPING[len(seen)])
        return {**real(self, batches), "loss": seen[-1]}

    monkeypatch.setattr(Trainer, "validate", validate)
    return seen


@pytest.mark.parametrize("window, validations", [(None, 4), ("1", 4), ("2", 8)])
def test_early_stopping_window_rides_out_a_dip(data, tmp_path, monkeypatch, window, validations):
    """-early_stopping follows the mean of the last N scores; PREFIX_best.pt still follows each score."""
    seen = dipping_validation(monkeypatch)
    run = run_train(data, tmp_path, loss="ce", epochs=20, valid_steps=2, early_stopping=2, early_stopping_window=window)
    assert len(seen) == validations and run.progress["step"] == 2 * validations
    assert run.progress["best_score"] == min(seen)  # 4.0, or 3.0 once the window lets the run reach it
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert ("mean loss of the last 2 validations: 3.6500 (best 3.2500; 2 without improvement)" in log) == (
        window == "2"
    )


def test_early_stopping_window_survives_train_from(data, tmp_path, monkeypatch):
    """Resumed from a checkpoint taken inside the dip, the window left out: the checkpoint's window
    and its running best are kept, and the run stops where the uninterrupted one did."""
    seen = dipping_validation(monkeypatch)
    common = {"loss": "ce", "epochs": 20, "valid_steps": 2, "early_stopping": 2, "save_checkpoint_steps": 6}
    full = run_train(data, tmp_path / "full", early_stopping_window=2, **common)
    assert full.progress["step"] == 16
    seen[:] = DIPPING[:3]  # the checkpoint at step 6 holds three validations
    again = run_train(data, tmp_path / "again", train_from=str(tmp_path / "full" / "m_step_6.pt"), **common)
    assert again.progress == full.progress and len(seen) == 8
    # a different window on resume starts the running best again: 4.45 is then a new best, 3.7 too, ...
    seen[:] = DIPPING[:3]
    other = run_train(
        data, tmp_path / "other", train_from=str(tmp_path / "full" / "m_step_6.pt"), early_stopping_window=3, **common
    )
    assert "early stopping's running best and its count start again" in (tmp_path / "other" / "train.log").read_text()
    assert other.progress["step"] != full.progress["step"]


@pytest.mark.parametrize(
    "flag, value, needle",
    [
        ("early_stopping_window", "0", "-early_stopping_window must be at least 1"),
        ("early_stopping", "-1", "-early_stopping must be 0 (off)"),
    ],
)
def test_early_stopping_bad_values(data, tmp_path, capsys, flag, value, needle):
    fails(capsys, argv(data, tmp_path, loss="ce", **{flag: value}), needle, value)
    assert not any(tmp_path.iterdir())


def test_config_and_save_config(data, tmp_path, capsys):
    cfg = tmp_path / "train.yaml"
    out = tmp_path / "run"
    out.mkdir()
    # -save_config writes the effective options and trains nothing
    train.main(
        argv(data, out, loss="cosine", generator="nonlinear", epochs=2, save_config=str(cfg), log_file=str(out / "log"))
    )
    assert cfg.exists() and not list(out.iterdir())  # nothing trained, no log
    saved = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    assert saved["loss"] == "cosine" and saved["generator"] == "nonlinear" and saved["epochs"] == 2
    assert saved["tie_emb"] is False and saved["rnn_size"] == 32 and saved["dropout"] == 0.0
    assert "save_config" not in saved and "config" not in saved
    # it round-trips: the same options again (given both ways and equal: no conflict)
    cfg2 = tmp_path / "again.yaml"
    train.main(["-config", str(cfg), "-save_config", str(cfg2)])
    assert yaml.safe_load(cfg2.read_text(encoding="utf-8")) == saved
    run = train.main(["-config", str(cfg), "-epochs", "2"])
    assert run.opt.loss == "cosine" and run.opt.generator == "nonlinear" and run.opt.rnn_size == 32
    assert run.progress["step"] == 2 * BATCHES_PER_EPOCH
    assert (out / "m_last.pt").exists() and "finished at step 8" in (out / "log").read_text(encoding="utf-8")
    capsys.readouterr()
    # the command line overrides the file, and says so; an unknown key is an error naming the option
    cfg3 = tmp_path / "override.yaml"
    train.main(["-config", str(cfg), "-epochs", "3", "-save_config", str(cfg3)])
    assert yaml.safe_load(cfg3.read_text(encoding="utf-8")) == {**saved, "epochs": 3}
    assert f"note: -epochs 3 on the command line replaces 2 from {cfg}" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("rnn_sise: 32\n", encoding="utf-8")
    fails(capsys, ["-config", str(bad)], "rnn_sise", str(bad))


def test_log_file_and_validation_stats(data, tmp_path, capsys):
    vmf_run = run_train(data, tmp_path / "vmf", loss="nllvmf", epochs=2, valid_steps=4, report_every=2)
    ce_run = run_train(
        data, tmp_path / "ce", loss="ce", tgt_emb=None, epochs=2, valid_steps=4, report_every=2, label_smoothing="0.1"
    )
    stdout = capsys.readouterr().out
    vmf = (tmp_path / "vmf" / "train.log").read_text(encoding="utf-8")
    ce = (tmp_path / "ce" / "train.log").read_text(encoding="utf-8")
    for log in (vmf, ce):
        assert len(re.findall(r"\] step \d+: loss -?[\d.]+; [^\n]*lr 1\.00e-02", log)) == 4
        assert "finished at step 8" in log
    assert "-loss nllvmf -generator linear" in vmf and "-loss ce -generator linear" in ce
    assert len(re.findall(r"validation at step [48]: loss -?[\d.]+; cosine -?[\d.]+; nn accuracy [\d.]+%", vmf)) == 2
    assert len(re.findall(r"validation at step [48]: loss [\d.]+; ppl [\d.]+; accuracy [\d.]+%", ce)) == 2
    assert "validation at step 8" in stdout  # the log goes to stdout too

    # the last line's numbers, recomputed from the final model
    def nll_and_accuracy(run):
        run.model.eval()
        nll, right, n = 0.0, 0, 0
        with torch.no_grad():
            for batch in run.valid:
                output, gold = run.trainer._forward(batch)
                if run.model.generator.continuous:
                    nll += torch.nn.functional.cosine_similarity(output, run.model.generator.table[gold]).sum().item()
                    scores = output @ run.model.generator.table[1:].t()  # unit rows: best dot = nearest
                    right += (scores.argmax(-1) + 1 == gold).sum().item()
                else:
                    output = logits_of(output)  # -loss ce hands the loss the decoder states (HiddenLogits)
                    nll += torch.nn.functional.cross_entropy(output, gold, reduction="sum").item()
                    right += (output.argmax(-1) == gold).sum().item()
                n += gold.numel()
        return nll / n, 100.0 * right / n

    nll, acc = nll_and_accuracy(ce_run)
    last = re.findall(r"validation at step 8: loss ([\d.]+); ppl ([\d.]+); accuracy ([\d.]+)%", ce)[0]
    assert float(last[1]) == pytest.approx(math.exp(nll), abs=0.006)  # exp(NLL), not exp(smoothed loss)
    assert float(last[0]) > nll + 0.01  # the smoothed loss is another number
    assert float(last[2]) == pytest.approx(acc, abs=0.006)
    cos, acc = nll_and_accuracy(vmf_run)
    last = re.findall(r"validation at step 8: loss -?[\d.]+; cosine (-?[\d.]+); nn accuracy ([\d.]+)%", vmf)[0]
    assert float(last[0]) == pytest.approx(cos, abs=6e-5)
    assert float(last[1]) == pytest.approx(acc, abs=0.006)


def test_no_temp_files_left(data, tmp_path):
    run_train(data, tmp_path, loss="l2", epochs=2, save_checkpoint_steps=1, valid_steps=1)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name]


def test_with_fasttext_table(tmp_path):
    """The sample data and a table from embeddings_to_torch.py (first 100 pairs, a few steps)."""
    from onmt_cont.bin import embeddings_to_torch

    root = ROOT / "data"
    for split, n in (("train", 100), ("valid", 20)):
        for lang in ("fr", "en"):
            lines = (root / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    prefix = str(tmp_path / "d")
    preprocess.main(
        [
            "-train_src",
            str(tmp_path / "train.fr"),
            "-train_tgt",
            str(tmp_path / "train.en"),
            "-valid_src",
            str(tmp_path / "valid.fr"),
            "-valid_tgt",
            str(tmp_path / "valid.en"),
            "-save_data",
            prefix,
            "-tgt_emb",
            str(root / "en.vec.gz"),
        ]
    )
    embeddings_to_torch.main(
        [
            "-emb_file_dec",
            str(root / "en.vec.gz"),
            "-dict_file",
            prefix + ".vocab.pt",
            "-output_file",
            str(tmp_path / "emb"),
            "-normalize",
        ]
    )
    data = {"prefix": prefix, "emb": str(tmp_path / "emb.dec.pt")}
    run = run_train(data, tmp_path / "run", loss="nllvmf", train_steps=4, batch_size=16, report_every=1)
    assert run.model.generator.table.size(1) == 300


# -- model selection: -valid_metric -----------------------------------------------------------------


def test_valid_shard_keeps_the_target_text(data):
    from onmt_cont.inputters.corpus import load_shard, load_shard_text

    text = load_shard_text(data["prefix"] + ".valid.0.pt")
    _, tgt = corpus()
    assert text == tgt[:8]
    assert len(load_shard(data["prefix"] + ".valid.0.pt")) == 8


@pytest.mark.parametrize("loss", ["ce", "cosine"])
def test_valid_metric_bleu_decodes_greedily_like_translate(data, tmp_path, loss):
    """The logged BLEU is translate.py's greedy output on the validation source, scored against
    the validation target: recompute it from the best checkpoint through translate.py."""
    from onmt_cont.bin import translate

    tgt_emb = data["emb"] if loss != "ce" else None
    run = run_train(
        data, tmp_path, loss=loss, tgt_emb=tgt_emb, epochs=3, valid_metric="bleu", valid_steps=BATCHES_PER_EPOCH
    )
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    bleus = [float(x) for x in re.findall(r"greedy BLEU ([\d.]+) \(<unk> [\d.]+% of the output\)", log)]
    assert len(bleus) == 3
    assert "new best validation bleu" in log
    best_at = max(range(3), key=lambda i: (bleus[i], -i))  # the first maximum is kept
    assert run.progress["best_score"] == pytest.approx(bleus[best_at], abs=0.01)
    src, tgt = corpus()
    (tmp_path / "v.fr").write_text("\n".join(src[:8]) + "\n", encoding="utf-8")
    (tmp_path / "v.en").write_text("\n".join(tgt[:8]) + "\n", encoding="utf-8")
    translate.main(
        [
            "-model",
            str(tmp_path / "m_best.pt"),
            "-src",
            str(tmp_path / "v.fr"),
            "-output",
            str(tmp_path / "out.en"),
            "-beam_size",
            "1",
            "-block_ngram_repeat",
            "0",
        ]
    )
    from onmt_cont.evaluate import tokenized_bleu

    hyps = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    assert tokenized_bleu(hyps, tgt[:8])[0] == pytest.approx(bleus[best_at], abs=0.01)


def test_valid_metric_accuracy_is_higher_better_and_drives_early_stopping(data, tmp_path, monkeypatch):
    """Accuracy that falls after the first validation: best stays at the first, stop after 2."""
    real = Trainer.validate
    seen = []

    def validate(self, batches):
        stats = real(self, batches)
        stats["accuracy"] = 0.9 - 0.1 * len(seen)
        seen.append(stats["accuracy"])
        return stats

    monkeypatch.setattr(Trainer, "validate", validate)
    run = run_train(
        data, tmp_path, loss="ce", tgt_emb=None, epochs=10, valid_steps=2, early_stopping=2, valid_metric="accuracy"
    )
    assert seen == pytest.approx([0.9, 0.8, 0.7])
    assert run.progress["best_score"] == pytest.approx(0.9)
    assert run.progress["step"] == 6


def test_a_run_stopped_by_loss_goes_on_when_resumed_with_another_metric(data, tmp_path, monkeypatch):
    """A run that stopped early by its loss, resumed with -valid_metric accuracy: the loss's count must
    not stop it before it has validated once; accuracy's own count stops it after 2 bad validations."""
    scores = {"loss": iter([1.0, 2.0, 3.0]), "accuracy": iter([])}
    real = Trainer.validate

    def validate(self, batches):
        stats = real(self, batches)
        return {**stats, "loss": next(scores["loss"], 9.0), "accuracy": next(scores["accuracy"], 0.0)}

    monkeypatch.setattr(Trainer, "validate", validate)
    common = {"loss": "ce", "tgt_emb": None, "epochs": 20, "valid_steps": 2, "early_stopping": 2}
    stopped = run_train(data, tmp_path, **common)
    assert stopped.progress["step"] == 6 and stopped.progress["bad_validations"] == 2
    scores["accuracy"] = iter([0.5, 0.6, 0.4, 0.3])
    resumed = run_train(data, tmp_path, resume="auto", valid_metric="accuracy", **common)
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert "-valid_metric accuracy (the checkpoint followed loss): early stopping's best score" in log
    # validations at steps 8, 10, 12 and 14 score 0.5, 0.6 (best), 0.4, 0.3 (the second bad one: stop)
    assert resumed.progress["step"] == 14
    assert resumed.progress["best_score"] == pytest.approx(0.6)


def test_is_better_directions():
    from onmt_cont.train.stopping import is_better

    assert is_better(3.0, None) and is_better(1.0, 2.0) and not is_better(2.0, 1.0)
    assert is_better(2.0, 1.0, higher=True) and not is_better(1.0, 2.0, higher=True)
    assert not is_better(float("nan"), 1.0) and not is_better(float("nan"), 1.0, higher=True)
    assert not is_better(1.0, 1.0) and not is_better(1.0, 1.0, higher=True)


def test_valid_bleu_without_shard_text_never_matches_unk():
    """Shards of an older preprocess.py: a reference <unk> must not reward an output <unk>."""
    from onmt_cont.inputters.vocab import Vocab
    from onmt_cont.train.validate import ValidBleu

    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "a", "b"])
    examples = [(torch.tensor([4, 5]), torch.tensor([4, 1, 5]))]
    vb = ValidBleu(examples, None, vocab, vocab, 8)
    assert vb.refs == ["a <unk-ref> b"] and vb.src_lines == ["a b"]


def test_valid_bleu_joins_bpe_pieces(monkeypatch):
    """-valid_remove_bpe: the output's and the references' pieces are joined before BLEU, so two
    segmentations of the same words score 100, and without it they do not."""
    from onmt_cont.inputters.vocab import Vocab
    from onmt_cont.train import validate
    from onmt_cont.train.validate import ValidBleu

    class Fake:
        unk_out, words_out = 0, 6

        def translate_lines(self, lines, batch_size):
            return ["a ca@@ t sat on the mat"]

    monkeypatch.setattr(validate, "Translator", lambda *args, **kwargs: Fake())
    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "x"])
    examples = [(torch.tensor([4]), torch.tensor([4]))]
    ref = ["a c@@ at sat on the mat"]
    assert ValidBleu(examples, ref, vocab, vocab, 8, join_bpe=True)(None, "cpu")["bleu"] == pytest.approx(100.0)
    assert ValidBleu(examples, ref, vocab, vocab, 8)(None, "cpu")["bleu"] < 70.0


@pytest.mark.parametrize("loss", ["nllvmf", "ce"])
def test_tensorboard_scalars_read_back(data, tmp_path, loss):
    """-tensorboard writes the logged numbers as scalars; the tensorboard package reads them back."""
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = tmp_path / "tb"
    run_train(
        data,
        tmp_path,
        loss=loss,
        epochs=2,
        tensorboard=True,
        tensorboard_log_dir=str(board),
        valid_steps="2",
        valid_metric="bleu",
        report_every="2",
        tgt_emb=data["emb"] if loss != "ce" else None,
    )
    acc = EventAccumulator(str(board))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    per_model = {"train/cosine", "valid/cosine"} if loss != "ce" else {"train/ppl", "valid/ppl"}
    assert {
        "train/loss",
        "train/accuracy",
        "train/lr",
        "train/tgt_tokens_per_s",
        "valid/loss",
        "valid/bleu",
        *per_model,
    } <= tags, tags
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    logged = [(int(s), float(v)) for s, v in re.findall(r"\] step (\d+): loss (-?[\d.]+)", log)]
    written = [(e.step, e.value) for e in acc.Scalars("train/loss")]
    assert [s for s, _ in written] == [s for s, _ in logged] and len(logged) >= 2
    assert all(abs(w - x) < 1e-4 for (_, w), (_, x) in zip(written, logged, strict=True))
    bleu = [float(x) for x in re.findall(r"greedy BLEU ([\d.]+)", log)]
    assert [round(e.value, 2) for e in acc.Scalars("valid/bleu")] == bleu


# -- -average_decay ------------------------------------------------------------------------------


def test_parameter_average_by_hand():
    """OpenNMT-py's weights max(d, 1 - (s + 1)/(s + 10)); the average starts as the parameters after
    the first update (never the initialisation); then every -average_every steps only, the new
    parameters weighing what the steps since the last update would have weighed together; the
    model holds the average inside swapped() and its raw parameters after."""
    from onmt_cont.train.average import ParameterAverage

    model = torch.nn.Linear(2, 1, bias=False)
    frozen = torch.nn.Parameter(torch.ones(1), requires_grad=False)
    model.register_parameter("frozen", frozen)
    avg = ParameterAverage(model, decay=0.3, every=2)
    assert avg.weight(1) == pytest.approx(1 - 2 / 11) and avg.weight(100) == 0.3
    with avg.swapped() as raw:  # no average before the first update: the model as it is
        assert torch.equal(model.weight, raw["weight"])
    one, two, three = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 0.0]]), torch.tensor([[5.0, 4.0]])
    with torch.no_grad():
        model.weight.copy_(one)
    avg.update(1)  # the first update: the average starts here, whatever -average_every
    assert avg.names == ["weight"]
    torch.testing.assert_close(avg.average[0], one)
    with torch.no_grad():
        model.weight.copy_(two)
    avg.update(2)  # steps since the start: 2 alone
    w = max(0.3, 1 - 3 / 12)
    want = (1 - w) * one + w * two
    torch.testing.assert_close(avg.average[0], want)
    with torch.no_grad():
        model.weight.copy_(three)
    avg.update(3)  # not a multiple of 2: nothing
    torch.testing.assert_close(avg.average[0], want)
    avg.update(4)  # steps 3 and 4 together: 1 - (1 - d_3)(1 - d_4)
    w = 1 - (1 - max(0.3, 1 - 4 / 13)) * (1 - max(0.3, 1 - 5 / 14))
    assert avg.span_weight(4) == pytest.approx(w)
    want = (1 - w) * want + w * three
    torch.testing.assert_close(avg.average[0], want)
    with avg.swapped() as raw:
        torch.testing.assert_close(model.weight.detach(), want)
        torch.testing.assert_close(raw["weight"], three)
    torch.testing.assert_close(model.weight.detach(), three)
    late = ParameterAverage(model, decay=0.3, every=1000)  # past step 2: d_t = 0.3 for every step of the span
    assert late.span_weight(10_000) == pytest.approx(1 - 0.7**1000)


def test_average_decay_checkpoint_holds_the_moving_average(data, tmp_path):
    """The average does not change training (the raw parameters at every step equal a run without
    it); the checkpoint's model is the moving average of those raw parameters, computed here from
    a checkpoint per step of the plain run; train_model is the raw last step."""
    common = {
        "loss": "ce",
        "dropout": "0.3",
        "epochs": "3",
        "train_steps": "6",
        "save_checkpoint_steps": "1",
        "report_every": "1",
        "valid_steps": "100",
    }
    run_train(data, tmp_path / "plain", **common)
    run_train(data, tmp_path / "avg", average_decay="0.2", **common)
    assert reported_losses(tmp_path / "plain" / "train.log") == reported_losses(tmp_path / "avg" / "train.log")
    from onmt_cont.models.checkpoint import load_checkpoint

    first = load_checkpoint(str(tmp_path / "plain" / "m_step_1.pt"))["model"]
    trainable = list(load_checkpoint(str(tmp_path / "avg" / "m_last.pt"))["train_model"])
    # no checkpoint holds the initial parameters the average starts from: its value after step 1
    # is taken from the averaged run, and steps 2-6 are replayed from the plain run's parameters
    avg1 = load_checkpoint(str(tmp_path / "avg" / "m_step_1.pt"))
    expect = {n: avg1["model"][n].clone() for n in trainable}
    for n in trainable:
        torch.testing.assert_close(avg1["train_model"][n], first[n])
    for step in range(2, 7):
        raw = load_checkpoint(str(tmp_path / "plain" / f"m_step_{step}.pt"))["model"]
        w = max(0.2, 1 - (step + 1) / (step + 10))
        for n in trainable:
            expect[n] = (1 - w) * expect[n] + w * raw[n]
    last = load_checkpoint(str(tmp_path / "avg" / "m_last.pt"))
    for n in trainable:
        torch.testing.assert_close(last["model"][n], expect[n], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(last["train_model"][n], raw[n])
    assert any(not torch.equal(last["model"][n], raw[n]) for n in trainable)


def test_average_decay_validates_the_average_and_resumes_exactly(data, tmp_path, monkeypatch):
    """Validation scores the average (its loss differs from the plain run's, training does not);
    -train_from a mid-run checkpoint continues the same losses and ends with the same average and
    raw parameters; resuming without -average_decay goes on from the raw parameters."""
    seen = record_steps(monkeypatch)
    common = {
        "loss": "nllvmf",
        "dropout": "0.3",
        "epochs": "5",
        "train_steps": "10",
        "save_checkpoint_steps": "2",
        "report_every": "1",
        "valid_steps": "3",
        "average_decay": "0.1",
        "average_every": "2",
    }
    full = run_train(data, tmp_path / "full", **common)
    reference = dict(seen)
    run_train(data, tmp_path / "plain", **{**common, "average_decay": None, "average_every": None})
    valid = r"validation at step \d+: loss (-?[\d.]+)"
    assert log_values(tmp_path / "full" / "train.log", valid) != log_values(tmp_path / "plain" / "train.log", valid)
    assert reported_losses(tmp_path / "full" / "train.log") == reported_losses(tmp_path / "plain" / "train.log")
    seen.clear()
    resumed = run_train(data, tmp_path / "from6", train_from=str(tmp_path / "full" / "m_step_6.pt"), **common)
    assert [s for s, _ in seen] == list(range(7, 11)) and all(v == reference[s] for s, v in seen)
    for name, a in full.model.state_dict().items():
        assert torch.equal(a, resumed.model.state_dict()[name]), name
    for a, b in zip(full.average.average, resumed.average.average, strict=True):
        assert torch.equal(a, b)
    from onmt_cont.models.checkpoint import load_checkpoint

    a, b = (load_checkpoint(str(tmp_path / d / "m_last.pt")) for d in ("full", "from6"))
    assert all(torch.equal(a["model"][n], b["model"][n]) for n in a["model"])
    # without -average_decay: the raw parameters of step 6, and no train_model in its checkpoints
    seen.clear()
    off = run_train(
        data,
        tmp_path / "off",
        train_from=str(tmp_path / "full" / "m_step_6.pt"),
        **{**common, "average_decay": None, "average_every": None},
    )
    assert all(v == reference[s] for s, v in seen)
    assert "train_model" not in load_checkpoint(str(tmp_path / "off" / "m_last.pt"))
    assert off.average is None and "was trained with -average_decay" in (tmp_path / "off" / "train.log").read_text()


def test_train_from_average_goes_on_from_the_average(data, tmp_path, capsys):
    """-train_from_average: the resumed model starts from the checkpoint's moving average (without
    the flag: its raw parameters), and training goes on from there; refused without -train_from,
    with -resume auto, and on a checkpoint that holds no average, before anything is written."""
    from onmt_cont.models.checkpoint import load_checkpoint

    common = {
        "loss": "nllvmf",
        "epochs": "5",
        "train_steps": "6",
        "save_checkpoint_steps": "3",
        "report_every": "1",
        "valid_steps": "100",
    }
    run_train(data, tmp_path / "avg", average_decay="0.3", **common)
    ckpt = load_checkpoint(str(tmp_path / "avg" / "m_step_3.pt"))
    start = {"train_from": str(tmp_path / "avg" / "m_step_3.pt"), **common, "train_steps": "3"}  # no step taken
    at = run_train(data, tmp_path / "at", train_from_average=True, **start).model.state_dict()
    raw = run_train(data, tmp_path / "raw", **start).model.state_dict()
    trained = list(ckpt["train_model"])
    assert all(torch.equal(at[n], ckpt["model"][n]) for n in trained)
    assert all(torch.equal(raw[n], ckpt["train_model"][n]) for n in trained)
    assert any(not torch.equal(at[n], raw[n]) for n in trained)
    log = (tmp_path / "at" / "train.log").read_text()
    assert "-train_from_average: training goes on from the moving average" in log
    on = run_train(data, tmp_path / "on", train_from_average=True, **{**start, "train_steps": "6"})
    assert any(not torch.equal(on.model.state_dict()[n], at[n]) for n in trained)  # and it trains from there
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    fails(capsys, argv(data, bad, train_from_average=True, **common), "-train_from_average", "give -train_from")
    fails(capsys, argv(data, bad, train_from_average=True, resume="auto", **common), "not -resume auto")
    fails(
        capsys,
        argv(data, bad, train_from_average=True, train_from=str(tmp_path / "on" / "m_last.pt"), **common),
        "holds no moving average",
        "leave the flag out",
    )
    assert not list(bad.iterdir())


# -- -drop_final_punct ---------------------------------------------------------------------------


def test_drop_final_punct_by_hand():
    """p = 1: a source that ends with a listed id (and holds another token) loses it, and its target
    its own listed final id; p = 0: nothing changes; the draw is one uniform per example."""
    import numpy as np

    from onmt_cont.inputters.batching import drop_final_punct

    t = torch.tensor
    examples = [
        (t([5, 6, 9]), t([7, 8, 10])),  # both end with punctuation: both lose it
        (t([5, 9]), t([7, 8])),  # the target does not: only the source loses it
        (t([5, 6]), t([7, 10])),  # the source does not end with it: untouched
        (t([9]), t([10])),  # a source of only the mark keeps it
        (t([5, 9]), t([10])),
    ]  # a target of only the mark keeps it
    got = drop_final_punct(examples, 1.0, {9}, {10}, np.random.default_rng(0))
    assert [(s.tolist(), g.tolist()) for s, g in got] == [
        ([5, 6], [7, 8]),
        ([5], [7, 8]),
        ([5, 6], [7, 10]),
        ([9], [10]),
        ([5], [10]),
    ]
    kept = drop_final_punct(examples, 0.0, {9}, {10}, np.random.default_rng(0))
    assert all(a[0] is b[0] and a[1] is b[1] for a, b in zip(kept, examples, strict=True))
    many = [(t([5, 9]), t([7, 10]))] * 20000
    share = sum(len(s) == 1 for s, _ in drop_final_punct(many, 0.3, {9}, {10}, np.random.default_rng(1))) / 20000
    assert abs(share - 0.3) < 0.015


@pytest.fixture(scope="module")
def punct_data(tmp_path_factory):
    return memorisation_data(tmp_path_factory.mktemp("punct"), EMB_DIM, final=".")


def iterator_batches(ds, epoch, **kw):
    from onmt_cont.inputters.batching import ShardedIterator
    from onmt_cont.inputters.corpus import shard_paths

    it = ShardedIterator(shard_paths(ds["prefix"], "train"), 5, "sents", 7, **kw)
    return [(b["src"].tolist(), b["tgt"].tolist()) for _, _, b in it.epoch(epoch)]


def test_drop_final_punct_iterator_is_a_function_of_seed_and_epoch(punct_data):
    """Off: the batches of an iterator built without the option. On: the same twice for an epoch,
    another epoch drops other sources, and every source and target lost its final mark together."""
    src_vocab, tgt_vocab, _ = load_vocabs(punct_data["prefix"] + ".vocab.pt")
    ids = ([src_vocab.stoi["."]], [tgt_vocab.stoi["."]])
    assert iterator_batches(punct_data, 0) == iterator_batches(punct_data, 0, drop_p=0.0, punct_ids=ids)
    on = iterator_batches(punct_data, 0, drop_p=0.5, punct_ids=ids)
    assert on == iterator_batches(punct_data, 0, drop_p=0.5, punct_ids=ids)

    def dropped(batches):  # the source lines without their final ".", as text
        out = set()
        for src, tgt in batches:
            for s, g in zip(src, tgt, strict=True):
                s = [w for w in s if w != 0]
                g = [w for w in g if w != 0]
                assert (s[-1] == ids[0][0]) == (g[-2] == ids[1][0])  # g: <s> ... </s>
                if s[-1] != ids[0][0]:
                    out.add(" ".join(src_vocab.decode(s)))
        return out

    first, second = dropped(on), dropped(iterator_batches(punct_data, 1, drop_p=0.5, punct_ids=ids))
    assert 0 < len(first) < 20 and first != second


def test_drop_final_punct_trains_logs_and_resumes_exactly(punct_data, tmp_path, monkeypatch):
    """The flag changes the training losses and says so in the log; -train_from a mid-run
    checkpoint, the flag left out, keeps the checkpoint's value and continues the same losses."""
    seen = record_steps(monkeypatch)
    common = {"loss": "nllvmf", "epochs": "4", "save_checkpoint_steps": "6", "report_every": "1"}
    run_train(punct_data, tmp_path / "plain", **common)
    plain = reported_losses(tmp_path / "plain" / "train.log")
    seen.clear()
    run_train(punct_data, tmp_path / "full", drop_final_punct="0.5", **common)
    reference = dict(seen)
    log = (tmp_path / "full" / "train.log").read_text()
    assert "-drop_final_punct 0.5" in log and reported_losses(tmp_path / "full" / "train.log") != plain
    seen.clear()
    run_train(punct_data, tmp_path / "from6", train_from=str(tmp_path / "full" / "m_step_6.pt"), **common)
    assert [s for s, _ in seen] == list(range(7, 17)) and all(v == reference[s] for s, v in seen)


def test_drop_final_punct_bad_input(data, punct_data, tmp_path, capsys):
    for value in ("-0.1", "1.5"):
        fails(
            capsys,
            argv(punct_data, tmp_path, loss="ce", drop_final_punct=value),
            "-drop_final_punct is a probability in [0, 1]",
            value,
        )
    # the memorisation corpus has no punctuation: nothing to drop
    fails(
        capsys,
        argv(data, tmp_path, loss="ce", drop_final_punct="0.1"),
        "-drop_final_punct: the source vocabulary of",
        "has none of . ! ?",
    )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "value, needle", [("-0.1", "-average_decay must be in [0, 1]"), ("1.5", "-average_decay must be in [0, 1]")]
)
def test_average_decay_bad_values(data, tmp_path, capsys, value, needle):
    fails(capsys, argv(data, tmp_path, loss="ce", average_decay=value), needle, value)
    fails(
        capsys,
        argv(data, tmp_path, loss="ce", average_decay="0.1", average_every="0"),
        "-average_every must be at least 1",
    )
    assert not any(tmp_path.iterdir())


def test_valid_steps_0_validates_at_each_epoch_end_only(data, tmp_path):
    run_train(data, tmp_path, loss="ce", tgt_emb=None, epochs=3, valid_steps=0)
    steps = log_values(tmp_path / "train.log", r"validation at step (\d+):")
    assert steps == [BATCHES_PER_EPOCH, 2 * BATCHES_PER_EPOCH, 3 * BATCHES_PER_EPOCH]


def test_normalization_sents_divides_by_sentences(data, tmp_path):
    """-normalization sents: one SGD step moves every parameter by tokens / sentences times what
    -normalization tokens moves it (the gradient of the summed loss over the sentence count)."""
    from onmt_cont.inputters.batching import collate
    from onmt_cont.inputters.corpus import load_shard
    from onmt_cont.losses import build_loss
    from onmt_cont.models.model import build_model

    examples = load_shard(data["prefix"] + ".train.0.pt")
    batch = collate(examples, list(range(5)))
    tokens = int((batch["tgt"][:, 1:] != 0).sum())
    opt = train.build_parser().parse_args(argv(data, tmp_path, loss="cosine", tie_emb=True))
    table = torch.load(data["emb"], weights_only=True)
    moves = {}
    for how in ("tokens", "sents"):
        torch.manual_seed(0)
        model = build_model(opt, len(load_vocabs(data["prefix"] + ".vocab.pt")[0]), data["tgt_vocab_size"], table)
        before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        loss_fn = build_loss(opt, model.generator.table)
        trainer = Trainer(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1), 0.0, normalization=how)
        trainer.train_step(batch, 1)
        moves[how] = {n: p.detach() - before[n] for n, p in model.named_parameters() if p.requires_grad}
    assert tokens != 5
    for name, delta in moves["tokens"].items():
        torch.testing.assert_close(moves["sents"][name], delta * tokens / 5, rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError):
        Trainer(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1), normalization="words")


def test_each_run_marks_its_start_in_an_appended_log(data, tmp_path):
    """A log that a resumed run appends to shows where each run began (issue 69.14: a recipe counted
    'done at step' lines in such a log and took a 2-epoch model for a 3-epoch one)."""
    run_train(data, tmp_path, loss="cosine", epochs="2")
    run_train(data, tmp_path, loss="cosine", epochs="3", train_from=str(tmp_path / "m_last.pt"))
    text = (tmp_path / "train.log").read_text(encoding="utf-8")
    starts = re.findall(r"train\.py started \(PID \d+\), (.*)", text)
    assert starts == ["from step 0", f"from {tmp_path / 'm_last.pt'} at step {2 * BATCHES_PER_EPOCH}"]
    ckpt = torch.load(tmp_path / "m_last.pt", weights_only=True)
    assert ckpt["progress"]["epoch"] == 3  # what lab/recipes/multi30k.sh now reads, not the log's lines


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["-margin", "0.3"], "-margin does nothing for -loss l2 (it is read by -loss synmargin_proj"),
        (["-temperature", "0.05"], "-temperature does nothing for -loss l2"),
        (["-lambda2", "0.5"], "-lambda2 does nothing for -loss l2"),
        (["-heads", "4"], "-heads does nothing without a transformer side"),
        (["-rewe_loss", "mse"], "-rewe_loss picks the ReWE head's loss: without -rewe_lambda it does nothing"),
    ],
)
def test_options_that_do_nothing_are_named_in_the_log(data, tmp_path, capsys, extra, needle):
    """Issue 69.18: an option the chosen model and loss never read was accepted without a word; now the
    log warns (the run itself is as before: warning, not refusal, so configs shared between models work)."""
    log = tmp_path / "train.log"
    train.main(argv(data, tmp_path, loss="l2", train_steps="1", log_file=str(log)) + extra)
    text = log.read_text(encoding="utf-8")
    assert f"warning: {needle}" in text, text
    train.main(
        argv(
            data,
            tmp_path / "..",
            loss="l2",
            train_steps="1",
            save_model=str(tmp_path / "n"),
            log_file=str(tmp_path / "plain.log"),
        )
    )
    assert "does nothing" not in (tmp_path / "plain.log").read_text(encoding="utf-8")


def test_checkpoints_of_one_state_are_one_file(data, tmp_path):
    """Issue 70.7: PREFIX_step_N, _last and _best of the same step and progress were three full copies of one
    model; now they are names of one file (a hard link), and a checkpoint of another step is a file of its own."""
    run = train.main(
        argv(data, tmp_path, loss="cosine", train_steps="6", save_checkpoint_steps="3", valid_steps="3", epochs="100")
    )
    assert run.progress["step"] == 6
    names = {n: os.stat(tmp_path / f"m_{n}.pt") for n in ("step_3", "step_6", "last", "best")}
    assert names["step_6"].st_ino == names["last"].st_ino and names["step_6"].st_nlink >= 2
    assert names["step_3"].st_ino != names["step_6"].st_ino
    best = torch.load(tmp_path / "m_best.pt", weights_only=True)["progress"]["step"]
    assert names["best"].st_ino == names[f"step_{best}"].st_ino  # written at that step's validation
    last = torch.load(tmp_path / "m_last.pt", weights_only=True)
    step6 = torch.load(tmp_path / "m_step_6.pt", weights_only=True)
    assert all(torch.equal(last["model"][k], step6["model"][k]) for k in last["model"])
