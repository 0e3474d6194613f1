"""SentencePiece as the subword option (issue 70.5): a source model (continuous and softmax models) and a target
model (softmax models), applied to the Moses-tokenized text, recorded in the checkpoint by preprocess.py
-src_spm/-tgt_spm, so translate.py and onmt_cont.load() read raw text and write running text with no flags."""

import re
import subprocess
import sys

import pytest
import sentencepiece
import torch

import onmt_cont
from onmt_cont.bin import embeddings_to_torch, preprocess, train
from onmt_cont.text.pipeline import TextPipeline
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT
from tests.helpers import translate_py as translate

DATA = ROOT / "data"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("spm")
    for split, n in (("train", 500), ("valid", 20), ("test", 8)):
        for lang in ("fr", "en"):
            lines = (DATA / "raw" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (d / f"raw.{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
            with TextPipeline(lang) as text:
                (d / f"tok.{split}.{lang}").write_text("".join(text.encode(x) + "\n" for x in lines), encoding="utf-8")
    for lang in ("fr", "en"):
        sentencepiece.SentencePieceTrainer.train(
            input=str(d / f"tok.train.{lang}"),
            model_prefix=str(d / f"spm.{lang}"),
            vocab_size=300,
            character_coverage=1.0,
            minloglevel=2,
        )
        sp = sentencepiece.SentencePieceProcessor(model_file=str(d / f"spm.{lang}.model"))
        for split in ("train", "valid", "test"):
            lines = (d / f"tok.{split}.{lang}").read_text(encoding="utf-8").splitlines()
            (d / f"sp.{split}.{lang}").write_text(
                "".join(" ".join(sp.encode(x, out_type=str)) + "\n" for x in lines), encoding="utf-8"
            )
    return d


def train_model(d, name, tgt, *flags, pp_flags=()):
    preprocess.main(
        [
            "-train_src",
            str(d / "sp.train.fr"),
            "-train_tgt",
            str(d / f"{tgt}.train.en"),
            "-valid_src",
            str(d / "sp.valid.fr"),
            "-valid_tgt",
            str(d / f"{tgt}.valid.en"),
            "-save_data",
            str(d / name),
            "-src_lang",
            "fr",
            "-tgt_lang",
            "en",
            "-src_spm",
            str(d / "spm.fr.model"),
            *pp_flags,
        ]
    )
    saved = torch.get_num_threads()
    train.main(
        [
            "-data",
            str(d / name),
            "-save_model",
            str(d / f"m_{name}"),
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
            *flags,
        ]
    )
    torch.set_num_threads(saved)
    return str(d / f"m_{name}_last.pt")


def test_softmax_model_with_source_and_target_pieces(corpus):
    d = corpus
    model = train_model(d, "ce", "sp", "-loss", "ce", pp_flags=["-tgt_spm", str(d / "spm.en.model")])
    record = torch.load(model, weights_only=True)["vocab"]["text"]
    assert record["src_spm"]["model"] == (d / "spm.fr.model").read_bytes()
    assert record["tgt_spm"]["file"] == "spm.en.model"
    out, err = translate("-model", model, "-src", d / "raw.test.fr")
    assert "SentencePiece pieces (spm.fr.model" in err and len(out) == 8
    assert not any("\u2581" in line for line in out) and out[0][:1].isupper()
    explicit, _ = translate(
        "-model",
        model,
        "-src",
        d / "raw.test.fr",
        "-src_lang",
        "fr",
        "-src_spm",
        d / "spm.fr.model",
        "-tgt_spm",
        d / "spm.en.model",
        "-detokenize",
        "-tgt_lang",
        "en",
    )
    assert explicit == out
    pieces, _ = translate("-model", model, "-src", d / "sp.test.fr", "-tokenized")
    assert any("\u2581" in line for line in pieces)  # -tokenized: the model's own pieces
    with onmt_cont.load(model) as m:
        assert m.translate((d / "raw.test.fr").read_text(encoding="utf-8").splitlines()) == out
    # with a raw reference, BLEU is over the joined, detokenized words
    _, err = translate("-model", model, "-src", d / "raw.test.fr", "-tgt", d / "raw.test.en")
    assert "sacreBLEU (detokenized)" in err and "warning" not in err


def test_continuous_model_with_source_pieces(corpus):
    d = corpus
    preprocess.main(
        [
            "-train_src",
            str(d / "sp.train.fr"),
            "-train_tgt",
            str(d / "tok.train.en"),
            "-valid_src",
            str(d / "sp.valid.fr"),
            "-valid_tgt",
            str(d / "tok.valid.en"),
            "-save_data",
            str(d / "v0"),
            "-tgt_emb",
            str(DATA / "en.vec.gz"),
        ]
    )
    embeddings_to_torch.main(
        [
            "-emb_file_dec",
            str(DATA / "en.vec.gz"),
            "-dict_file",
            str(d / "v0.vocab.pt"),
            "-output_file",
            str(d / "emb"),
            "-normalize",
        ]
    )
    model = train_model(
        d,
        "v0",
        "tok",
        "-loss",
        "nllvmf",
        "-tie_emb",
        "-tgt_emb",
        str(d / "emb.dec.pt"),
        pp_flags=["-tgt_emb", str(DATA / "en.vec.gz")],
    )
    out, err = translate("-model", model, "-src", d / "raw.test.fr")
    assert "SentencePiece pieces" in err and len(out) == 8 and not any("\u2581" in line for line in out)


def test_a_file_that_is_no_sentencepiece_model_is_refused(corpus, tmp_path, capsys):
    d = corpus
    with pytest.raises(SystemExit):
        preprocess.main(
            [
                "-train_src",
                str(d / "sp.train.fr"),
                "-train_tgt",
                str(d / "tok.train.en"),
                "-valid_src",
                str(d / "sp.valid.fr"),
                "-valid_tgt",
                str(d / "tok.valid.en"),
                "-save_data",
                str(tmp_path / "x"),
                "-src_lang",
                "fr",
                "-src_spm",
                str(d / "tok.train.fr"),
            ]
        )
    assert "-src_spm" in capsys.readouterr().err and not list(tmp_path.glob("x.*"))
    with pytest.raises(UserError, match="not a SentencePiece model"):
        TextPipeline(src_spm=str(d / "tok.train.fr"))


def _refused(*args):
    res = subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-threads", "1", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2 and not res.stdout, res.stderr
    return res.stderr


def test_sentencepiece_models_that_do_not_fit_are_refused(corpus, capsys):
    """Issue 77.14: -tgt_spm on a model of words glued each line together ("amaninablueshirt..."), a -src_spm the
    model was not trained with fed it unseen pieces, and preprocess.py recorded a -src_spm other than the one the
    data was cut with; all without a word."""
    d = corpus
    sentencepiece.SentencePieceTrainer.train(
        input=str(d / "tok.train.fr"),
        model_prefix=str(d / "other.fr"),
        vocab_size=120,
        character_coverage=1.0,
        minloglevel=2,
        model_type="char",
    )
    with pytest.raises(SystemExit):
        preprocess.main(
            [
                "-train_src",
                str(d / "sp.train.fr"),
                "-train_tgt",
                str(d / "tok.train.en"),
                "-valid_src",
                str(d / "sp.valid.fr"),
                "-valid_tgt",
                str(d / "tok.valid.en"),
                "-save_data",
                str(d / "wrong"),
                "-src_lang",
                "fr",
                "-tgt_lang",
                "en",
                "-src_spm",
                str(d / "other.fr.model"),
            ]
        )
    assert re.search(
        r"-src_spm: .*sp.train.fr was not cut with it: \d+ of its first 200 lines cut again give other "
        r"pieces \(first: line 1\)",
        capsys.readouterr().err,
    )
    assert not list(d.glob("wrong.*"))
    words = train_model(d, "words", "tok", "-loss", "ce")  # target of words, source of spm.fr pieces
    err = _refused(
        "-model",
        words,
        "-src",
        d / "raw.test.fr",
        "-tgt_spm",
        d / "spm.en.model",
        "-src_lang",
        "fr",
        "-src_spm",
        d / "spm.fr.model",
        "-detokenize",
        "-tgt_lang",
        "en",
    )
    assert (
        "-tgt_spm" in err
        and "% of the model's target vocabulary are pieces of it: the model was trained on "
        "words, not SentencePiece pieces"
        in err
    ), err
    err = _refused("-model", words, "-src", d / "raw.test.fr", "-src_lang", "fr", "-src_spm", d / "other.fr.model")
    assert (
        "of the model's source vocabulary are pieces of it: the model was trained on the pieces of another "
        "SentencePiece model" in err
    ), err
    with pytest.raises(UserError, match="-tgt_spm .* of the model's target vocabulary are pieces of it"):
        onmt_cont.load(words, tgt_spm=str(d / "spm.en.model"))
