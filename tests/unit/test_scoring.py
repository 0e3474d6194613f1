"""BLEU that a raw or a tokenized reference cannot fool (issue 70.3): translate.py -tgt with -detokenize
scores a raw reference as sacreBLEU scores the written output (case-insensitive, and signed case:lc, for a
model that writes lowercase), the same figure as the tokenized reference of the same sentences gives, and a
reference that does not look like what it is scored as gets one warning."""

import re
import subprocess
import sys

import pytest
import sacrebleu

from tests.helpers import ROOT, sample_data, trained

DATA = ROOT / "data"
N = 40  # test sentences: the shipped raw test set's first lines and their tokenized forms


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("scoring")
    for name in ("test.fr", "test.en"):
        (d / name).write_text("".join(open(DATA / name, encoding="utf-8").readlines()[:N]), encoding="utf-8")
        (d / f"raw.{name}").write_text(
            "".join(open(DATA / "raw" / name, encoding="utf-8").readlines()[:N]), encoding="utf-8"
        )
    ckpt = trained(
        sample_data(d),
        str(d / "ce"),
        "-loss",
        "ce",
        "-train_steps",
        "150",
        "-rnn_size",
        "64",
        "-word_vec_size",
        "64",
        "-dropout",
        "0",
        "-learning_rate",
        "0.003",
    )
    return d, ckpt


def translate(*args):
    res = subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-threads", "1", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return res.stderr


def scores(err):
    detok = float(re.search(r"sacreBLEU \(detokenized\): ([\d.]+)  (\S+)", err).group(1))
    signature = re.search(r"sacreBLEU \(detokenized\): [\d.]+  (\S+)", err).group(1)
    tok = float(re.search(r"tokenized BLEU: ([\d.]+)", err).group(1))
    return detok, tok, signature


def test_a_raw_and_a_tokenized_reference_give_sacrebleus_score(model, tmp_path):
    d, ckpt = model
    raw_err = translate(
        "-model",
        ckpt,
        "-src",
        d / "raw.test.fr",
        "-src_lang",
        "fr",
        "-detokenize",
        "-tgt",
        d / "raw.test.en",
        "-output",
        tmp_path / "raw.out",
    )
    tok_err = translate("-model", ckpt, "-src", d / "test.fr", "-tgt", d / "test.en", "-output", tmp_path / "tok.out")
    raw_detok, raw_tok, signature = scores(raw_err)
    tok_detok, tok_tok, tok_signature = scores(tok_err)
    assert "case:lc" in signature and "case:lc" in tok_signature  # the sample's model writes lowercase
    # what sacrebleu -lc says of the written output against the raw reference
    written = (tmp_path / "raw.out").read_text(encoding="utf-8").splitlines()
    refs = (d / "raw.test.en").read_text(encoding="utf-8").splitlines()
    expected = sacrebleu.corpus_bleu(written, [refs], lowercase=True).score
    assert raw_detok == pytest.approx(expected, abs=0.006)
    # the same sentences through the tokenized path (tokenized source and reference) score the same
    assert tok_detok == pytest.approx(raw_detok, abs=0.006) and tok_tok == pytest.approx(raw_tok, abs=0.006)
    assert "warning" not in raw_err and "warning" not in tok_err


def test_a_reference_scored_as_what_it_is_not_gets_a_warning(model, tmp_path):
    d, ckpt = model
    err = translate("-model", ckpt, "-src", d / "test.fr", "-tgt", d / "raw.test.en", "-output", tmp_path / "o")
    assert "warning: -tgt" in err and "looks like raw text" in err and "-detokenize" in err
    err = translate(
        "-model", ckpt, "-src", d / "test.fr", "-detokenize", "-tgt", d / "test.en", "-output", tmp_path / "o2"
    )
    assert "looks tokenized" in err and "-tgt_tokenized" in err
    err = translate(
        "-model",
        ckpt,
        "-src",
        d / "test.fr",
        "-detokenize",
        "-tgt_tokenized",
        "-tgt",
        d / "test.en",
        "-output",
        tmp_path / "o3",
    )
    assert "warning" not in err
    # -tgt_tokenized: the old reading (the reference detokenized for sacreBLEU), the same score as without -detokenize
    plain = translate("-model", ckpt, "-src", d / "test.fr", "-tgt", d / "test.en", "-output", tmp_path / "o4")
    assert scores(err)[:2] == scores(plain)[:2]


def test_corpus_bleu_of_a_raw_reference_equals_sacrebleu_on_the_written_text():
    """The scorer itself at a BLEU far from 0: hypotheses are the tokenized references with every fifth word
    dropped; against the raw references (Moses-tokenized and lowercased for tokenized BLEU) the detokenized
    score is sacrebleu -lc's on the detokenized hypotheses, and both figures equal those of the tokenized pair."""
    from onmt_cont.evaluate import CorpusBleu, detokenize
    from onmt_cont.text.pipeline import TextPipeline

    tok = (DATA / "test.en").read_text(encoding="utf-8").splitlines()[:N]
    raw = (DATA / "raw" / "test.en").read_text(encoding="utf-8").splitlines()[:N]
    hyps = [" ".join(w for i, w in enumerate(line.split()) if i % 5 != 4) for line in tok]
    with (
        TextPipeline("en") as text,
        CorpusBleu("en", refs_tokenized=False, lowercase=True, tokenize_ref=text.encode) as from_raw,
    ):
        from_raw.add(hyps, raw)
        raw_detok, raw_tok = from_raw.scores()
    with CorpusBleu("en", lowercase=True) as from_tok:
        from_tok.add(hyps, tok)
        tok_detok, tok_tok = from_tok.scores()
    expected = sacrebleu.corpus_bleu(detokenize(hyps, "en"), [raw], lowercase=True).score
    assert 40 < raw_detok < 95 and raw_detok == pytest.approx(expected, abs=1e-9)
    assert tok_detok == pytest.approx(raw_detok, abs=0.5) and tok_tok == pytest.approx(raw_tok, abs=0.5)
