"""The Python API (onmt_cont.load) and raw-text translation (translate.py -src_lang -src_bpe_codes -detokenize)
give what translate.py gives for the same model and input."""

import re
import subprocess
import sys

import pytest
import torch

import onmt_cont
from onmt_cont.bin import embeddings_to_torch, preprocess, train, translate
from onmt_cont.text.pipeline import TextPipeline, capitalize_first
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT

DATA = ROOT / "data"
RAW_FR = ["Un homme en chemise bleue, debout sur une échelle.", "", "Deux chiens jouent dans l'herbe verte-claire !"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A small Transformer with the recommended loss, 40 updates on the sample's first 600 pairs, source pieces."""
    out = tmp_path_factory.mktemp("api")
    for split, n in (("train", 600), ("valid", 40)):
        for lang in ("fr", "en"):
            lines = (DATA / f"{split}.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)[:n]
            (out / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "subword_nmt.learn_bpe", "-s", "300"],
        stdin=open(out / "train.fr"),
        stdout=open(out / "codes.fr", "w"),
        check=True,
    )
    with TextPipeline(bpe_codes=str(out / "codes.fr")) as pieces:
        for split in ("train", "valid"):
            lines = (out / f"{split}.fr").read_text(encoding="utf-8").splitlines()
            (out / f"{split}.bpe.fr").write_text("".join(pieces.encode(x) + "\n" for x in lines), encoding="utf-8")
    preprocess.main(
        [
            "-train_src",
            str(out / "train.bpe.fr"),
            "-train_tgt",
            str(out / "train.en"),
            "-valid_src",
            str(out / "valid.bpe.fr"),
            "-valid_tgt",
            str(out / "valid.en"),
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
    train.main(
        [
            "-config",
            "transformer_continuous",
            "-data",
            str(out / "data"),
            "-tgt_emb",
            str(out / "emb.dec.pt"),
            "-save_model",
            str(out / "m"),
            "-train_steps",
            "40",
            "-batch_size",
            "32",
            "-warmup_steps",
            "20",
            "-threads",
            "1",
            "-average_decay",
            "0",
        ]
    )
    return out


def run_translate(model, tmp_path, lines, *flags):
    src = tmp_path / "src.txt"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "out.txt"
    translate.main(["-model", str(model / "m_last.pt"), "-src", str(src), "-output", str(out), "-threads", "1", *flags])
    return out.read_text(encoding="utf-8").splitlines()


def test_text_pipeline_tokenizes_lowercases_and_cuts_pieces_then_detokenizes(model):
    with TextPipeline("fr", "en") as text:
        assert text.encode("L'homme court-il ?") == "l' homme court @-@ il ?"
        assert text.encode("   ") == ""
        assert text.decode("a dog , isn 't it ?") == "A dog, isn't it?"
        assert text.decode("") == ""
    with TextPipeline(bpe_codes=str(model / "codes.fr")) as pieces:  # tokenized input: only the pieces
        cut = pieces.encode("un homme extraordinairement grand")
        assert cut.replace("@@ ", "") == "un homme extraordinairement grand" and "@@ " in cut
    assert capitalize_first("« a dog »") == "« A dog »"


def test_bad_codes_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read subword codes"):
        TextPipeline(bpe_codes=str(tmp_path / "none"))


def test_api_on_tokenized_text_equals_translate_py(model, tmp_path):
    with TextPipeline(src_lang="fr", bpe_codes=str(model / "codes.fr")) as text:
        pieces = [text.encode(x) for x in RAW_FR]
    expected = run_translate(model, tmp_path, pieces)
    with onmt_cont.load(str(model / "m_last.pt")) as m:
        assert m.translate(pieces) == expected
    assert expected[1] == "" and expected[0] and expected[2]


def test_api_on_raw_text_equals_translate_py_raw(model, tmp_path):
    expected = run_translate(
        model,
        tmp_path,
        RAW_FR,
        "-src_lang",
        "fr",
        "-src_bpe_codes",
        str(model / "codes.fr"),
        "-detokenize",
        "-tgt_lang",
        "en",
    )
    with onmt_cont.load(str(model / "m_last.pt"), src_lang="fr", tgt_lang="en", bpe_codes=str(model / "codes.fr")) as m:
        got = m.translate(RAW_FR)
    assert got == expected
    assert got[0][0].isupper() and got[1] == ""
    # the same sentences tokenized by hand give the same words
    tokenized = run_translate(model, tmp_path, RAW_FR, "-src_lang", "fr", "-src_bpe_codes", str(model / "codes.fr"))
    with TextPipeline(tgt_lang="en") as text:
        assert [text.decode(x) for x in tokenized] == got


def test_api_decoding_options_and_errors(model):
    m = onmt_cont.load(str(model / "m_last.pt"), beam_size=3, block_ngram_repeat=2, max_length=6)
    out = m.translate(["un homme ."])
    assert len(out) == 1 and 0 < len(out[0].split()) <= 6
    with pytest.raises(TypeError, match="list of sentences"):
        m.translate("un homme .")
    # a misspelt option is not ignored, and the error names load() and the closest names, not an internal class
    with pytest.raises(UserError, match=r"load\(\): unknown option 'beam' \(did you mean (beta or )?beam_size"):
        onmt_cont.load(str(model / "m_last.pt"), beam=3)
    with pytest.raises(UserError, match="beam_size"):
        onmt_cont.load(str(model / "m_last.pt"), beam_size=0)


def test_one_model_shared_by_many_threads(model):
    """16 threads on one raw-text model (was: a deadlock in the Moses pipes, or a ValueError from the
    shared last_raw with a lexicon) give every thread the translations one thread gets."""
    import threading

    sentences = RAW_FR * 3
    with onmt_cont.load(
        str(model / "m_last.pt"), src_lang="fr", tgt_lang="en", bpe_codes=str(model / "codes.fr"), max_length=8
    ) as m:
        expected = m.translate(sentences)
        results, errors = {}, []

        def work(i):
            try:
                results[i] = m.translate(sentences[i % 3 :] + sentences[: i % 3])
            except Exception as exc:  # noqa: BLE001  (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a thread is still waiting after 120 s"
    assert errors == []
    for i, got in results.items():
        assert got == expected[i % 3 :] + expected[: i % 3]


@pytest.mark.parametrize("bad, needle", [("un homme\nlit .", "line break"), (42, "must be a string")])
def test_a_sentence_that_is_no_single_line_is_refused(model, bad, needle):
    """A line break would split the sentence on the Moses pipe (was: a bare AssertionError, and under
    python -O every later translation was the sentence before's)."""
    with onmt_cont.load(
        str(model / "m_last.pt"), src_lang="fr", tgt_lang="en", bpe_codes=str(model / "codes.fr"), max_length=5
    ) as m:
        with pytest.raises(UserError, match=needle):
            m.translate(["un chat .", bad])
        assert m.translate(["un chat .", "un chat ."])[0] == m.translate(["un chat ."])[0]  # still in step
        assert m.translate(["un\rchat ."]) == m.translate(["un chat ."])  # a carriage return is a space


def test_a_bad_codes_file_names_itself_and_does_not_end_the_process(tmp_path):
    """(was: subword-nmt's sys.exit(1): translate.py exited 1 without naming the file, and load()
    raised SystemExit, which ends a server)"""
    bad = tmp_path / "codes.fr"
    bad.write_text("#version: 0.2\na b c d\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"{bad}: not a subword-nmt codes file \(invalid line 2"):
        TextPipeline(bpe_codes=str(bad))


def test_api_takes_translate_py_flag_names(model, tmp_path):
    """Issue 70.7: the API's keywords are translate.py's flags too (-src_bpe_codes, -ban_unk_token, -gpu, ...):
    the same translations as the API's own names; one option given both ways is refused."""
    with onmt_cont.load(str(model / "m_last.pt"), src_lang="fr", bpe_codes=str(model / "codes.fr"), ban_unk=True) as a:
        expected = a.translate(RAW_FR)
    with onmt_cont.load(
        str(model / "m_last.pt"), src_lang="fr", src_bpe_codes=str(model / "codes.fr"), ban_unk_token=True, gpu=None
    ) as b:
        assert b.translate(RAW_FR) == expected
    with pytest.raises(UserError, match="src_bpe_codes and bpe_codes are one option"):
        onmt_cont.load(str(model / "m_last.pt"), src_bpe_codes="x", bpe_codes="x")
    # issue 79: OpenNMT-py's "gpu": -1 (its servers' usual CPU setting) is the CPU here too
    with onmt_cont.load(
        str(model / "m_last.pt"), src_lang="fr", bpe_codes=str(model / "codes.fr"), ban_unk=True, gpu=-1
    ) as c:
        assert c.translate(RAW_FR) == expected
    for bad in ("0", 1.5, True):
        with pytest.raises(UserError, match="gpu takes a CUDA device id"):
            onmt_cont.load(str(model / "m_last.pt"), gpu=bad)


def test_a_language_moses_does_not_know_is_refused_or_named():
    """Issue 77.21: -src_lang FR, french or xx fell back to English rules without a word (l' homme became l ' homme).
    A malformed code is refused with the code to give; a well-formed one Moses has no rules for is a warning."""
    import warnings

    from onmt_cont.text.pipeline import TextPipeline

    for bad, hint in (("FR", "such as fr"), ("french", "such as fr"), ("x-y", "such as en")):
        with pytest.raises(UserError, match=hint):
            TextPipeline(src_lang=bad)
    with pytest.raises(UserError, match="such as de"):
        TextPipeline(tgt_lang="German")
    with pytest.warns(UserWarning, match="no rules for 'xx' and use English ones"):
        TextPipeline(src_lang="xx").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TextPipeline(src_lang="fr", tgt_lang="de").close()


def test_api_type_errors_and_a_closed_model_are_user_errors(model):
    """Issue 77.19: translate(n_best="2") raised a TypeError from inside, translate() after close() a ToolException."""
    m = onmt_cont.load(str(model / "m_last.pt"), src_lang="fr", bpe_codes=str(model / "codes.fr"))
    for bad in ("2", 1.5, True):
        with pytest.raises(UserError, match="n_best takes a whole number"):
            m.translate([RAW_FR[0]], n_best=bad)
    m.close()
    with pytest.raises(UserError, match="this model was closed"):
        m.translate([RAW_FR[0]])


def test_api_device_and_path_arguments_are_user_errors(model):
    """Issue 77.19 and 77.11: device="cuda:0" on a CPU-only torch raised torch's AssertionError (the server died
    the same way at start-up), a device of another kind a RuntimeError, src_lang=5 a TypeError from a regex."""
    ckpt = str(model / "m_last.pt")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match=r"device 'cuda:0': CUDA is not available on this machine"):
            onmt_cont.load(ckpt, device="cuda:0")
    for bad, needle in (
        (dict(device="xyz"), "device must be 'cpu', 'cuda' or 'cuda:N', got 'xyz'"),
        (dict(device="mps"), "device must be 'cpu', 'cuda' or 'cuda:N', got 'mps'"),
        (dict(src_lang=5), "src_lang takes a language code such as 'fr', got 5"),
        (dict(tgt_lang=["en"]), "tgt_lang takes a language code"),
        (dict(lexicon=3), "lexicon takes a file's path, got 3"),
    ):
        with pytest.raises(UserError, match=re.escape(needle)):
            onmt_cont.load(ckpt, **bad)
    with pytest.raises(UserError, match="checkpoint takes a file's path, got None"):
        onmt_cont.load(None)
    with onmt_cont.load(model / "m_last.pt", device=torch.device("cpu"), tokenized=True) as m:  # Path and device
        assert len(m.translate(["un chien ."])) == 1


def test_api_errors_are_value_and_type_errors(model):
    """Issue 79: docs/usage.md said an unknown load() option raises TypeError, it raised UserError. The API's
    UserErrors are now also ValueErrors (TypeErrors for a wrong type), with translate.py's message."""
    ckpt = str(model / "m_last.pt")
    with pytest.raises(ValueError, match="onmt_cont.load\\(\\): unknown option 'beamsize' \\(did you mean beam_size"):
        onmt_cont.load(ckpt, beamsize=5)
    with pytest.raises(ValueError, match="-alpha must be a finite number"):
        onmt_cont.load(ckpt, alpha=-1.0)
    with pytest.raises(TypeError, match="ban_unk takes True or False"):
        onmt_cont.load(ckpt, ban_unk="yes")
    with onmt_cont.load(ckpt, tokenized=True) as m:
        with pytest.raises(TypeError, match="n_best takes a whole number"):
            m.translate(["un chien ."], n_best="2")
        with pytest.raises(ValueError, match="holds a line break"):
            m.translate(["un\nchien"])


def test_per_call_beam_size_and_tgt_prefix(model):
    """Issue 79: the API could not take beam_size per call, and had no tgt_prefix."""
    ckpt = str(model / "m_last.pt")
    src = ["un chien court .", "deux hommes ."]
    with (
        onmt_cont.load(ckpt, tokenized=True, beam_size=1, block_ngram_repeat=0) as greedy,
        onmt_cont.load(ckpt, tokenized=True, beam_size=3, block_ngram_repeat=0) as beam3,
        onmt_cont.load(ckpt, tokenized=True, beam_size=1, block_ngram_repeat=0) as m,
    ):
        assert m.translate(src, beam_size=3) == beam3.translate(src)
        assert m.translate(src) == greedy.translate(src)  # the model's own beam again
        assert len(m.translate(src, beam_size=3, n_best=3)[0]) == 3
        forced = m.translate(src, tgt_prefix=["a woman", None])
        assert forced[0].split()[:2] == ["a", "woman"] and forced[1] == greedy.translate(src)[1]
        with pytest.raises(TypeError, match="tgt_prefix takes one string"):
            m.translate(src, tgt_prefix=["a woman"])
        with pytest.raises(ValueError, match="beam_size must be from 1"):
            m.translate(src, beam_size=0)
    with onmt_cont.load(ckpt, tokenized=True, random_sampling_topk=5, seed=2) as sampled:  # beam: draws per sentence
        hyps = sampled.translate(src, beam_size=3, n_best=3)
        assert [len(h) for h in hyps] == [3, 3] and all(h[0][1] >= h[1][1] >= h[2][1] for h in hyps)
        with pytest.raises(ValueError, match="-n_best 3: must be from 1 to -beam_size"):
            sampled.translate(src, n_best=3)


def test_raw_text_to_a_model_of_tokens_is_warned_once(model):
    """Issue 79: raw text sent to a model of tokens came back as silent garbage from the API and the server
    (translate.py warned). The API warns once per model; the server logs it once."""
    import warnings as w

    with onmt_cont.load(str(model / "m_last.pt"), tokenized=True) as m:
        with pytest.warns(
            UserWarning,
            match="punctuation stuck to words: it looks like raw text, but it is read as "
            "tokenized text; load the model with src_lang",
        ):
            m.translate(["Un chien court dans l'herbe.", "Deux hommes, trois femmes."])
        with w.catch_warnings():
            w.simplefilter("error")
            m.translate(["Un chien court dans l'herbe."])  # once is enough
            m.translate(["un chien court ."])
