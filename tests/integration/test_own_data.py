"""docs/recipes/own_data.sh end to end on the shipped sample's raw text (data/raw/): tokenization, source pieces,
target vectors trained on the target side, preprocess, a preset, raw test source to running text, sacreBLEU."""

import os
import re
import subprocess

import pytest
import torch

from tests.helpers import ROOT

RAW = ROOT / "data" / "raw"


def cut(src, dst, n):
    dst.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")


def recipe(tmp_path, cwd=None, **env):
    return subprocess.run(
        ["bash", str(ROOT / "docs" / "recipes" / "own_data.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    for split, n in (("train", 400), ("valid", 30)):
        for lang in ("fr", "en"):
            cut(RAW / f"{split}.{lang}", raw / f"{split}.{lang}", n)
    cut(RAW / "test.fr", raw / "test.fr", 12)
    cut(RAW / "test.en", raw / "test.en", 12)
    cut(RAW / "test.en", raw / "test_en.en", 12)  # an English test source for the en->fr run
    return raw


def test_own_data_recipe_from_raw_text_to_running_text(corpus, tmp_path):
    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        SRC_MERGES="200",
        VECTORS="train",
        VEC_DIM="16",
        VEC_EPOCHS="1",
        THREADS="1",
        TRAIN_FLAGS="-train_steps 4 -rnn_size 32 -word_vec_size 32 -transformer_ff 64 -heads 2",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    # every step wrote what the next one read
    assert (out / "codes.fr").stat().st_size > 0 and "@@ " in (out / "pieces" / "train.fr").read_text()
    vectors = out / "vectors.en.vec.gz"
    assert vectors.stat().st_size > 0
    assert (out / "model_last.pt").is_file()
    lines = (out / "test.en").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 12
    assert all(line and line[0].isupper() for line in lines), lines  # running text: a capital first letter
    assert "sacreBLEU of" in res.stdout and "translate more raw text with" in res.stdout


def test_own_data_recipe_refuses_a_missing_file_before_doing_anything(corpus, tmp_path):
    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "nope"),
        TEST=str(corpus / "test"),
    )
    assert res.returncode == 2 and f"no such file: {corpus / 'nope'}.fr" in res.stderr
    assert not out.exists()
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        PRESET="nope",
    )
    assert res.returncode == 2 and "no configs/nope.yaml" in res.stderr


def test_own_data_recipe_reads_relative_paths_from_the_callers_folder(corpus, tmp_path):
    """Issue 69.18: TRAIN=train from the corpus folder means that folder's train.LANG (before: the checkout's, so
    "no such file: train.fr"); OUT and VECTORS likewise. Here the corpus files are found, and the missing VECTORS
    file, named from the caller's folder, stops it before anything is written."""
    res = recipe(
        tmp_path,
        cwd=str(corpus),
        OUT="run",
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN="train",
        VALID="valid",
        TEST="test",
        VECTORS="none.vec",
    )
    assert res.returncode == 2 and f"no such file: {corpus / 'none.vec'}" in res.stderr, res.stderr
    assert not (corpus / "run").exists()
    res = recipe(tmp_path, cwd=str(corpus), SRC_LANG="fr", TGT_LANG="en", TRAIN="train", VALID="nope", TEST="test")
    assert res.returncode == 2 and f"no such file: {corpus / 'nope'}.fr" in res.stderr, res.stderr


def test_own_data_recipe_takes_a_random_table_for_too_little_target_text(corpus, tmp_path):
    """French targets: no vectors ship for them, so too little text means a random table."""
    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="en",
        TGT_LANG="fr",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test_en"),
        VEC_DIM="16",
        THREADS="1",
        TRAIN_FLAGS="-train_steps 2 -rnn_size 32 -word_vec_size 32 -transformer_ff 64 -heads 2",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "400 lines of target text, so VECTORS=random" in res.stdout
    assert not (out / "vectors.fr.vec.gz").exists() and not (out / "codes.en").exists()  # en: whole words
    table = torch.load(out / "emb.dec.pt", weights_only=True)
    assert table.shape[1] == 16 and torch.allclose(table[4:].norm(dim=1), torch.ones(len(table) - 4))


def test_own_data_recipe_falls_back_to_the_shipped_vectors_and_takes_epochs(corpus, tmp_path):
    """English targets with too little text: the sample's own data/en.vec.gz, not a random table (issue
    70.8: a random table gave BLEU 2.6 on the shipped raw sample); EPOCHS bounds the training."""
    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        THREADS="1",
        EPOCHS="1",
        TRAIN_FLAGS="-rnn_size 32 -word_vec_size 32 -transformer_ff 64 -heads 2 -batch_size 200",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "so VECTORS=data/en.vec.gz" in res.stdout
    assert torch.load(out / "emb.dec.pt", weights_only=True).shape[1] == 300
    assert (out / "train.log").read_text(encoding="utf-8").count("done at step") == 1  # one epoch


@pytest.mark.parametrize(
    "name, value",
    [
        ("MIN_VEC_LINES", "abc"),
        ("MIN_VEC_LINES", "1e1"),
        ("MIN_VEC_LINES", "20,000"),
        ("VEC_DIM", "-3"),
        ("EPOCHS", "two"),
    ],
)
def test_own_data_recipe_checks_its_numbers_first(corpus, tmp_path, name, value):
    """(was: MIN_VEC_LINES=abc failed a test inside an if, which set -e ignores, and took a random table)"""
    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        **{name: value},
    )
    assert res.returncode == 2 and f"{name} must be a whole number, got '{value}'" in res.stderr
    assert not out.exists()


def test_own_data_recipe_with_sentencepiece(corpus, tmp_path):
    """Issue 70.5: SUBWORD=sentencepiece cuts the source with a SentencePiece model, which the checkpoint carries:
    the raw test source is translated into running text with no flags."""
    import torch

    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        SUBWORD="sentencepiece",
        SPM_VOCAB="300",
        VECTORS="random",
        VEC_DIM="16",
        THREADS="1",
        DECODE="-beam_size 1",
        TRAIN_FLAGS="-train_steps 4 -rnn_size 32 -word_vec_size 32 -transformer_ff 64 -heads 2",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "\u2581" in (out / "pieces" / "train.fr").read_text(encoding="utf-8")
    record = torch.load(out / "model_last.pt", weights_only=True)["vocab"]["text"]
    assert record["src_spm"]["file"] == "spm.fr.model" and record["src_lang"] == "fr"
    lines = (out / "test.en").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 12 and not any("\u2581" in line for line in lines)
    bad = recipe(
        tmp_path,
        OUT=str(tmp_path / "x"),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        SUBWORD="wordpiece",
    )
    assert bad.returncode == 2 and "SUBWORD must be bpe or sentencepiece" in bad.stderr


def test_own_data_recipe_keeps_case(corpus, tmp_path):
    """Issue 70.4: CASED=1 keeps case from the tokenization to the output: the data, the checkpoint's record (not
    lowercased), translate.py's source (not lowercased) and a case-sensitive BLEU (case:mixed)."""
    import torch

    out = tmp_path / "run"
    res = recipe(
        tmp_path,
        OUT=str(out),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        CASED="1",
        VECTORS="random",
        VEC_DIM="16",
        THREADS="1",
        DECODE="-beam_size 1",
        PRESET="transformer_softmax",
        TRAIN_FLAGS="-train_steps 4 -rnn_size 32 -word_vec_size 32 -transformer_ff 64 -heads 2",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert any(ch.isupper() for ch in (out / "tok" / "train.en").read_text(encoding="utf-8"))
    record = torch.load(out / "model_last.pt", weights_only=True)["vocab"]["text"]
    assert record["lower"] is False
    assert "case:mixed" in res.stderr + res.stdout and "case-sensitive" in res.stdout
    bad = recipe(
        tmp_path,
        OUT=str(tmp_path / "x"),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        CASED="yes",
    )
    assert bad.returncode == 2 and "CASED must be 0 or 1" in bad.stderr


def test_own_data_recipe_says_the_smallest_spm_vocab_that_works(corpus, tmp_path):
    """Issue 77.20: SUBWORD=sentencepiece with a too small SPM_VOCAB ended in SentencePiece's traceback."""
    res = recipe(
        tmp_path,
        OUT=str(tmp_path / "run"),
        SRC_LANG="fr",
        TGT_LANG="en",
        TRAIN=str(corpus / "train"),
        VALID=str(corpus / "valid"),
        TEST=str(corpus / "test"),
        SUBWORD="sentencepiece",
        SPM_VOCAB="10",
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    smallest = int(
        re.search(
            r"SPM_VOCAB=10 is too small: the source has \d+ distinct characters and SentencePiece "
            r"needs a piece for each and 3 of its own: give SPM_VOCAB of at least (\d+)",
            res.stderr,
        ).group(1)
    )
    import sentencepiece

    tok = tmp_path / "run" / "tok" / "train.fr"
    sentencepiece.SentencePieceTrainer.train(
        input=str(tok),
        model_prefix=str(tmp_path / "ok"),
        vocab_size=smallest,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    with pytest.raises(RuntimeError, match="smaller than required_chars"):
        sentencepiece.SentencePieceTrainer.train(
            input=str(tok),
            model_prefix=str(tmp_path / "no"),
            vocab_size=smallest - 1,
            character_coverage=1.0,
            hard_vocab_limit=False,
            minloglevel=2,
        )
