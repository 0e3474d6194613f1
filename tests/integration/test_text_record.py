"""Models that carry their preprocessing (issue 70.2): preprocess.py -src_lang/-tgt_lang/-src_bpe_codes records
the raw text the data was made from (languages, lowercasing, the BPE codes themselves with their sha256) in the
vocabulary and every checkpoint; translate.py and onmt_cont.load() then read and write raw text with no flags,
say so once, and -tokenized keeps the tokens; input that does not look like what a model reads gets a warning."""

import subprocess
import sys

import pytest
import torch

import onmt_cont
from onmt_cont.bin import preprocess, train
from onmt_cont.text.pipeline import TextPipeline
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT
from tests.helpers import translate_py as translate

RAW = ROOT / "data" / "raw"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("record")
    for split, n in (("train", 400), ("valid", 20), ("test", 8)):
        for lang in ("fr", "en"):
            lines = (RAW / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (d / f"raw.{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
            with TextPipeline(lang) as text:  # tools/moses_tok.py's tokenization
                (d / f"tok.{split}.{lang}").write_text("".join(text.encode(x) + "\n" for x in lines), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "subword_nmt.learn_bpe", "-s", "200"],
        stdin=open(d / "tok.train.fr"),
        stdout=open(d / "codes.fr", "w"),
        check=True,
    )
    with TextPipeline(bpe_codes=str(d / "codes.fr")) as pieces:
        for split in ("train", "valid", "test"):
            lines = (d / f"tok.{split}.fr").read_text(encoding="utf-8").splitlines()
            (d / f"bpe.{split}.fr").write_text("".join(pieces.encode(x) + "\n" for x in lines), encoding="utf-8")
    preprocess.main(
        [
            "-train_src",
            str(d / "bpe.train.fr"),
            "-train_tgt",
            str(d / "tok.train.en"),
            "-valid_src",
            str(d / "bpe.valid.fr"),
            "-valid_tgt",
            str(d / "tok.valid.en"),
            "-save_data",
            str(d / "data"),
            "-src_lang",
            "fr",
            "-tgt_lang",
            "en",
            "-src_bpe_codes",
            str(d / "codes.fr"),
        ]
    )
    saved = torch.get_num_threads()
    train.main(
        [
            "-data",
            str(d / "data"),
            "-save_model",
            str(d / "m"),
            "-loss",
            "ce",
            "-rnn_size",
            "32",
            "-word_vec_size",
            "32",
            "-batch_size",
            "32",
            "-train_steps",
            "30",
            "-valid_steps",
            "1000",
            "-threads",
            "1",
        ]
    )
    torch.set_num_threads(saved)
    return d


def test_the_checkpoint_records_the_text_and_translate_applies_it(model):
    ckpt = torch.load(model / "m_last.pt", weights_only=True)
    record = ckpt["vocab"]["text"]
    assert record["src_lang"] == "fr" and record["tgt_lang"] == "en" and record["lower"] is True
    assert record["src_bpe"]["codes"] == (model / "codes.fr").read_text(encoding="utf-8")
    bare, err = translate("-model", model / "m_last.pt", "-src", model / "raw.test.fr")
    assert "records the text it was trained on: raw fr text, Moses-tokenized and lowercased" in err
    assert "codes.fr" in err and "output detokenized as en" in err
    explicit, _ = translate(
        "-model",
        model / "m_last.pt",
        "-src",
        model / "raw.test.fr",
        "-src_lang",
        "fr",
        "-src_bpe_codes",
        model / "codes.fr",
        "-detokenize",
        "-tgt_lang",
        "en",
    )
    assert bare == explicit and len(bare) == 8 and bare[0][:1].isupper()
    tokens, err = translate("-model", model / "m_last.pt", "-src", model / "bpe.test.fr", "-tokenized")
    assert "records the text" not in err and tokens != bare and not any(t[:1].isupper() for t in tokens)
    with onmt_cont.load(str(model / "m_last.pt")) as m:
        assert m.translate((model / "raw.test.fr").read_text(encoding="utf-8").splitlines()) == bare
    with onmt_cont.load(str(model / "m_last.pt"), tokenized=True) as m:
        assert m.translate((model / "bpe.test.fr").read_text(encoding="utf-8").splitlines()) == tokens


def test_damaged_codes_and_a_record_without_languages_are_refused(model, tmp_path, capsys):
    ckpt = torch.load(model / "m_last.pt", weights_only=True)
    ckpt["vocab"]["text"]["src_bpe"]["codes"] += "x y\n"
    torch.save(ckpt, tmp_path / "bad.pt")
    with pytest.raises(UserError, match="do not match their checksum"):
        onmt_cont.load(str(tmp_path / "bad.pt"))
    with pytest.raises(SystemExit):
        preprocess.main(
            [
                "-train_src",
                str(model / "bpe.train.fr"),
                "-train_tgt",
                str(model / "tok.train.en"),
                "-valid_src",
                str(model / "bpe.valid.fr"),
                "-valid_tgt",
                str(model / "tok.valid.en"),
                "-save_data",
                str(tmp_path / "d"),
                "-src_bpe_codes",
                str(model / "codes.fr"),
            ]
        )
    assert "give -src_lang" in capsys.readouterr().err and not list(tmp_path.glob("d.*"))


def test_raw_input_to_a_model_of_tokens_gets_a_warning(model, tmp_path):
    """A model without a record (preprocess.py without -src_lang) given raw text: one warning, naming -src_lang."""
    preprocess.main(
        [
            "-train_src",
            str(model / "tok.train.fr"),
            "-train_tgt",
            str(model / "tok.train.en"),
            "-valid_src",
            str(model / "tok.valid.fr"),
            "-valid_tgt",
            str(model / "tok.valid.en"),
            "-save_data",
            str(tmp_path / "d"),
        ]
    )
    train.main(
        [
            "-data",
            str(tmp_path / "d"),
            "-save_model",
            str(tmp_path / "m"),
            "-loss",
            "ce",
            "-rnn_size",
            "16",
            "-word_vec_size",
            "16",
            "-train_steps",
            "2",
            "-threads",
            "1",
        ]
    )
    _, err = translate("-model", tmp_path / "m_last.pt", "-src", model / "raw.test.fr")
    assert "warning: -src" in err and "looks like raw text" in err and "-src_lang" in err
    _, err = translate("-model", tmp_path / "m_last.pt", "-src", model / "tok.test.fr")
    assert "warning" not in err


def test_unsegmented_input_to_a_model_of_pieces_gets_a_warning(model):
    """The model reads subword-nmt pieces: tokens without them (-tokenized, no codes) get one warning naming
    -src_bpe_codes; the pieces themselves get none."""
    _, err = translate("-model", model / "m_last.pt", "-src", model / "tok.test.fr", "-tokenized")
    assert "warning: -src" in err and "reads subword-nmt pieces, but the input holds none" in err
    _, err = translate("-model", model / "m_last.pt", "-src", model / "bpe.test.fr", "-tokenized")
    assert "warning" not in err
