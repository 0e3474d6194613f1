"""The presets in configs/: each holds the configuration its results row was trained with, trains a
few steps on the shipped sample and decodes; the command line overrides a preset; a preset's bare
name works as -config."""

import shlex

import pytest
import torch

from onmt_cont import opts
from onmt_cont.bin import embeddings_to_torch, preprocess, train, translate
from tests.helpers import ROOT

DATA = ROOT / "data"

# The rows of docs/results.md as the recipes train them (lab/recipes/word_choice.sh's configurations and
# papers.sh's nllvmf_reg12_tied), plus validation at each epoch's end with early stopping.
TMODEL = (
    "-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 "
    "-transformer_ff 512 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot "
    "-decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
)
LMODEL = (
    "-brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3"
)
NCE = "-loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb"
STOP = "-epochs 40 -valid_steps 0 -valid_metric bleu -early_stopping 3 -early_stopping_window 2"
TINY = (
    "-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 4 -heads 4 "
    "-transformer_ff 256 -layer_norm post -attention_dropout 0 -ff_dropout 0 -emb_init normal -param_init 0 "
    "-param_init_glorot -batch_type tokens -batch_size 8192 -decay_method inverse_sqrt -learning_rate 0.005 "
    "-warmup_steps 2000 -adam_beta2 0.98 -max_grad_norm 25"
)
TINY_STOP = (
    "-train_steps 8000 -epochs 1000 -valid_steps 0 -valid_metric loss -valid_bleu -early_stopping 10 "
    "-save_checkpoint_epochs 1"
)
ROWS = {
    # t_nce_both_avg_d00_lr1_ns2048: README's recommended row
    "transformer_continuous": f"{TMODEL} -dropout 0 -learning_rate 1 {NCE} -sampling_correction -num_sampled 2048 "
    f"-word_bias -average_decay 1e-4 {STOP}",
    # t_ce_d01_avg: its softmax twin with the same moving average
    "transformer_softmax": f"{TMODEL} -dropout 0.1 -learning_rate 0.5 -loss ce -label_smoothing 0.1 "
    f"-average_decay 1e-4 {STOP}",
    # lstm_nce_bias_avg
    "lstm_continuous": f"{LMODEL} {NCE} -word_bias -average_decay 1e-4 {STOP}",
    # lstm_ce
    "lstm_softmax": f"{LMODEL} -loss ce {STOP}",
    # lab/recipes/transformer_tiny.sh's rows: Transformer-Tiny (Wu et al. 2021) and the continuous model at its size
    "transformer_tiny_softmax": f"{TINY} -dropout 0.3 -share_embeddings -share_decoder_embeddings -loss ce "
    f"-label_smoothing 0.1 {TINY_STOP}",
    "transformer_tiny_continuous": f"{TINY} -dropout 0.1 {NCE} -sampling_correction -num_sampled 2048 -word_bias "
    f"-average_decay 1e-4 {TINY_STOP}",
    # code_d0_conv of lab/recipes/vmf_paper_row.sh: the authors' code form, no dropout, to convergence
    "lstm_nllvmf_paper": f"{LMODEL.replace('-dropout 0.3', '-dropout 0')} -loss nllvmf -vmf_form code "
    f"-vmf_lambda 0.2 -tie_emb -epochs 30 -valid_steps 0 -valid_metric bleu -early_stopping 3 "
    "-early_stopping_window 2",
}
PRESETS = sorted(p.stem for p in (ROOT / "configs").glob("*.yaml"))


def parsed(argv):
    args = opts.parse(train.build_parser(), argv)
    return {k: v for k, v in vars(args).items() if k != "config"}


def test_every_preset_has_its_row():
    assert PRESETS == sorted(ROWS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_holds_its_results_row(name):
    """Every option the preset sets, and every default it leaves, equals the row's flags."""
    preset = parsed(["-config", str(ROOT / "configs" / f"{name}.yaml")])
    row = parsed(shlex.split(ROWS[name]))
    assert preset == row


def test_a_preset_by_its_bare_name(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # not the checkout: the name is resolved in the package's configs/
    args = opts.parse(train.build_parser(), ["-config", "transformer_continuous"])
    assert args.loss == "nllvmf_nce" and args.encoder_type == "transformer"
    assert args.config == str(ROOT / "configs" / "transformer_continuous.yaml")


def test_a_missing_preset_name_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        train.main(["-config", "transformer_continous"])
    assert exc.value.code == 2
    assert "transformer_continous: cannot read config" in capsys.readouterr().err


def test_the_command_line_overrides_a_preset():
    args = opts.parse(train.build_parser(), ["-config", "transformer_continuous", "-dropout", "0.1", "-epochs", "3"])
    assert args.dropout == 0.1 and args.epochs == 3 and args.loss == "nllvmf_nce"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The shipped sample, preprocessed with its vectors (the quickstart's first two steps)."""
    out = tmp_path_factory.mktemp("sample")
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
            str(out / "data"),
            "-tgt_emb",
            str(DATA / "en.vec.gz"),
        ]
    )
    embeddings_to_torch.main(
        [
            "-emb_file_dec",
            str(DATA / "en.vec.gz"),
            "-dict_file",
            str(out / "data.vocab.pt"),
            "-output_file",
            str(out / "emb"),
            "-normalize",
        ]
    )
    return out


@pytest.fixture(scope="module")
def sample_joint(tmp_path_factory):
    """The shipped sample with one vocabulary for both sides (preprocess.py -share_vocab)."""
    out = tmp_path_factory.mktemp("sample_joint")
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
            str(out / "data"),
            "-share_vocab",
        ]
    )
    return out


@pytest.mark.parametrize("name", PRESETS)
def test_preset_trains_and_decodes(name, sample, sample_joint, tmp_path):
    """A few updates of the preset as it is, then greedy decoding of a few test sentences."""
    prefix = tmp_path / "m"
    data = ["-data", str(sample / "data"), "-tgt_emb", str(sample / "emb.dec.pt")]
    if "-share_embeddings" in ROWS[name]:
        data = ["-data", str(sample_joint / "data")]
    train.main(["-config", name, *data, "-save_model", str(prefix), "-train_steps", "2", "-threads", "1"])
    ckpt = torch.load(f"{prefix}_last.pt", weights_only=True)
    saved = ckpt["opt"]
    expected = parsed(shlex.split(ROWS[name]))
    for key in ("loss", "encoder_type", "decoder_type", "rnn_size", "dropout", "tie_emb", "average_decay"):
        assert saved[key] == expected[key], key
    src = tmp_path / "src.fr"
    src.write_text(
        "".join((DATA / "test.fr").read_text(encoding="utf-8").splitlines(keepends=True)[:4]), encoding="utf-8"
    )
    translate.main(
        [
            "-model",
            f"{prefix}_last.pt",
            "-src",
            str(src),
            "-output",
            str(tmp_path / "out.en"),
            "-threads",
            "1",
            "-max_length",
            "5",
        ]
    )
    lines = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(line.strip() for line in lines)
