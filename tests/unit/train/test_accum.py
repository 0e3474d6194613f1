"""train.py -accum_count N: one update from the gradients of N batches, the update of the batches joined."""

import copy
import os
import re

import pytest
import torch
import torch.nn.functional as F

from lab.bench import benchlib
from onmt_cont.bin import train
from onmt_cont.constants import PAD_ID
from onmt_cont.utils.errors import UserError
from tests.helpers import TRANSFORMER_CE, sample_subset


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The first 100 pairs of the shipped sample (data/), preprocessed, and a random unit target table."""
    return sample_subset(tmp_path_factory.mktemp("portability"))


SIZE = [
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
    "-dropout",
    "0",
    "-attention_dropout",
    "0",
]


def _joined(a, b):
    """Two collated batches as one (each side padded to the longer)."""
    out = {"size": a["size"] + b["size"], "src_lengths": torch.cat([a["src_lengths"], b["src_lengths"]])}
    for key in ("src", "tgt"):
        width = max(a[key].size(1), b[key].size(1))
        out[key] = torch.cat([F.pad(x[key], (0, width - x[key].size(1)), value=PAD_ID) for x in (a, b)])
    return out


@pytest.mark.parametrize("loss", [["-loss", "ce", "-label_smoothing", "0.1"], ["-loss", "nllvmf", "-tie_emb"]])
@pytest.mark.parametrize("amp", [None, torch.bfloat16])
def test_two_batches_accumulated_are_the_joined_batch(loss, amp):
    opt = benchlib.row_options(SIZE, loss)
    table = benchlib.synthetic_table(53) if "nllvmf" in loss else None
    trainer = benchlib.build_trainer(opt, 40, 53, torch.device("cpu"), table=table, amp=amp)
    twin = copy.deepcopy(trainer)
    a = benchlib.synthetic_batch(3, 40, 53, torch.device("cpu"), seed=1, src_len=6)
    b = benchlib.synthetic_batch(5, 40, 53, torch.device("cpu"), seed=2, src_len=9)
    loss_acc, n_acc = benchlib.train_step(trainer, opt, [a, b], 1)
    loss_one, n_one = benchlib.train_step(twin, opt, _joined(a, b), 1)
    assert n_acc == n_one and loss_acc == pytest.approx(loss_one, rel=1e-4 if amp is None else 2e-2)
    for (name, p), q in zip(trainer.model.named_parameters(), twin.model.parameters(), strict=True):
        tol = dict(rtol=1e-4, atol=1e-6) if amp is None else dict(rtol=0, atol=1e-3)  # Adam's step: ~lr per entry
        torch.testing.assert_close(p, q, msg=name, **tol)


def test_train_py_takes_one_update_per_n_batches(sample, tmp_path):
    """100 pairs in batches of 16 sentences: 7 batches an epoch, so -accum_count 3 takes 3 updates an epoch
    (3 + 3 + the 1 left); -train_steps counts updates."""
    out = tmp_path / "m"
    out.mkdir()
    argv = [
        "-data",
        str(sample / "data"),
        "-save_model",
        str(out / "m"),
        "-log_file",
        str(out / "train.log"),
        *TRANSFORMER_CE,
        "-train_steps",
        "6",
        "-accum_count",
        "3",
        "-threads",
        "1",
        "-amp",
        "false",
    ]
    train.main(argv)
    log = (out / "train.log").read_text(encoding="utf-8")
    assert re.findall(r"epoch (\d+) done at step (\d+)", log) == [("1", "3")]
    assert "finished at step 6" in log
    with pytest.raises(SystemExit):
        train.main(argv[:-6] + ["-accum_count", "0", "-threads", "1"])


def test_accum_count_is_checked():
    from onmt_cont.train import checks

    opt = train.build_parser().parse_args(SIZE + ["-loss", "ce", "-accum_count", "0"])
    with pytest.raises(UserError, match="-accum_count must be at least 1"):
        checks.check_options(opt)


def test_keep_checkpoint_keeps_the_last_n(sample, tmp_path):
    """Issue 79: -keep_checkpoint 2 over 8 step checkpoints and 2 epoch checkpoints keeps the last two steps and both
    epochs; _best and _last stay; another prefix in the folder is not touched."""
    out = tmp_path / "m"
    out.mkdir()
    (out / "other_step_1.pt").write_text("not ours", encoding="utf-8")
    (out / "m_step_x.pt").write_text("not a step", encoding="utf-8")
    train.main(
        [
            "-data",
            str(sample / "data"),
            "-save_model",
            str(out / "m"),
            *TRANSFORMER_CE,
            "-train_steps",
            "15",
            "-save_checkpoint_steps",
            "2",
            "-save_checkpoint_epochs",
            "1",
            "-valid_steps",
            "7",
            "-keep_checkpoint",
            "2",
            "-threads",
            "1",
            "-amp",
            "false",
        ]
    )
    names = sorted(os.listdir(out))
    assert [n for n in names if n.startswith("m_step_")] == ["m_step_14.pt", "m_step_15.pt", "m_step_x.pt"]
    assert [n for n in names if n.startswith("m_epoch_")] == ["m_epoch_1.pt", "m_epoch_2.pt"]
    assert "m_last.pt" in names and "m_best.pt" in names and "other_step_1.pt" in names
    with pytest.raises(UserError, match="-keep_checkpoint"):
        from onmt_cont.train import checks

        checks.check_options(train.build_parser().parse_args(SIZE + ["-loss", "ce", "-keep_checkpoint", "0"]))


def test_fine_tuning_a_release_and_reset_optim(sample, tmp_path):
    """Issue 79: -train_from refused a release, so a shipped model could not be adapted, and there was no
    -reset_optim. -reset_optim all fine-tunes the weights (a release too) from step 0 with a new optimiser;
    -reset_optim states keeps the step and schedule with a new optimiser state."""
    from onmt_cont.bin import release

    base = ["-data", str(sample / "data"), *TRANSFORMER_CE, "-threads", "1", "-amp", "false"]
    train.main([*base, "-save_model", str(tmp_path / "a"), "-train_steps", "12"])
    release.main(["-model", str(tmp_path / "a_last.pt"), "-output", str(tmp_path / "a.release.pt")])
    with pytest.raises(SystemExit):  # cli_main: exit 2
        train.main(
            [
                *base,
                "-save_model",
                str(tmp_path / "b"),
                "-train_steps",
                "3",
                "-train_from",
                str(tmp_path / "a.release.pt"),
            ]
        )
    train.main(
        [
            *base,
            "-save_model",
            str(tmp_path / "b"),
            "-train_steps",
            "3",
            "-train_from",
            str(tmp_path / "a.release.pt"),
            "-reset_optim",
            "all",
            "-log_file",
            str(tmp_path / "b.log"),
        ]
    )
    tuned = torch.load(tmp_path / "b_last.pt", weights_only=True)
    assert tuned["progress"]["step"] == 3  # from step 0, not 12
    assert all(s["step"] == 3 for s in tuned["optim"]["state"].values())  # Adam counted only the new updates
    assert "-reset_optim all: fine-tuning the weights of" in (tmp_path / "b.log").read_text(encoding="utf-8")
    scratch = [*base, "-save_model", str(tmp_path / "c"), "-train_steps", "1", "-seed", "7", "-report_every", "1"]
    train.main(scratch)
    train.main(
        [
            *base,
            "-save_model",
            str(tmp_path / "d"),
            "-train_steps",
            "1",
            "-train_from",
            str(tmp_path / "a.release.pt"),
            "-reset_optim",
            "all",
            "-log_file",
            str(tmp_path / "d.log"),
            "-report_every",
            "1",
        ]
    )

    def distance(name):  # from the release's weights
        got, ref = (torch.load(tmp_path / n, weights_only=True)["model"] for n in (name, "a.release.pt"))
        return sum(float((got[k].float() - ref[k].float()).norm()) for k in ref if ref[k].is_floating_point())

    assert distance("d_last.pt") < 0.1 * distance("c_last.pt")  # it starts from the trained weights
    train.main(
        [
            *base,
            "-save_model",
            str(tmp_path / "e"),
            "-train_steps",
            "15",
            "-train_from",
            str(tmp_path / "a_last.pt"),
            "-reset_optim",
            "states",
        ]
    )
    states = torch.load(tmp_path / "e_last.pt", weights_only=True)
    assert states["progress"]["step"] == 15 and all(s["step"] == 3 for s in states["optim"]["state"].values())
    with pytest.raises(SystemExit):
        train.main([*base, "-save_model", str(tmp_path / "f"), "-train_steps", "3", "-reset_optim", "all"])
