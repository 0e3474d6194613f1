"""-replace_unk on attention fixtures, BLEU reporting, translate.py's invariants in-process, and
one end-to-end run of preprocess -> embeddings_to_torch -> build_lexicon -> train -> translate
on the sample data."""

import os
import re
from pathlib import Path

import pytest
import torch

from onmt_cont.bin import build_lexicon, embeddings_to_torch, preprocess, train, translate
from onmt_cont.constants import UNK, UNK_ID
from onmt_cont.evaluate import bleu_report, detokenize
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.translate.beam import beam_search
from onmt_cont.translate.search import greedy_search
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import read_lexicon, remove_bpe, replace_unk
from onmt_cont.utils.errors import UserError
from tests import helpers
from tests.helpers import ROOT

DATA = ROOT / "data"
N_TEST = sum(1 for _ in open(DATA / "test.fr", encoding="utf-8"))


def write(path, lines):
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def attention(rows, width):
    """One-hot-ish attention rows: each row a list of (position, weight); the rest share 0.01."""
    attn = torch.full((len(rows), width), 0.01)
    for t, row in enumerate(rows):
        for pos, w in row:
            attn[t, pos] = w
    return attn


# -- -replace_unk ---------------------------------------------------------------------------------


def test_lexicon_hit():
    src = "un chat noir .".split()
    attn = attention([[(0, 0.9)], [(1, 0.8)], [(2, 0.7)], [(3, 0.9)]], 4)
    out = replace_unk(["a", UNK, "black", "."], attn, src, {"chat": "cat"})
    assert out == ["a", "cat", "black", "."]


def test_lexicon_miss_copies_the_source_word():
    src = "le zorglub mange".split()
    attn = attention([[(0, 0.9)], [(1, 0.6)], [(2, 0.9)]], 3)
    assert replace_unk(["the", UNK, "eats"], attn, src, {"le": "the"}) == ["the", "zorglub", "eats"]
    assert replace_unk(["the", UNK, "eats"], attn, src, None) == ["the", "zorglub", "eats"]


@pytest.mark.parametrize("pos", [1, 2, 3])
def test_bpe_pieces_are_joined_around_the_attended_piece(pos):
    src = "le chat@@ on@@ s dort".split()
    attn = attention([[(pos, 0.9)]], 5)
    assert replace_unk([UNK], attn, src, {}) == ["chatons"]
    assert replace_unk([UNK], attn, src, {"chatons": "kittens", "chat": "cat"}) == ["kittens"]


def test_attention_on_padding_or_beyond_the_sentence_picks_the_best_real_word():
    src = "un chien .".split()
    # width 6: positions 3..5 are padding (or an </s>) in a batch whose longest source has 6 tokens
    attn = attention([[(5, 0.9), (1, 0.3), (0, 0.2)], [(3, 0.95), (0, 0.4)]], 6)
    assert replace_unk([UNK, UNK], attn, src, {"chien": "dog"}) == ["dog", "un"]


def test_attention_on_punctuation_picks_the_best_other_word():
    src = "« le chien , le chat » .".split()
    attn = attention([[(3, 0.9), (6, 0.8), (4, 0.1), (2, 0.5)]], 8)
    assert replace_unk([UNK], attn, src, {"chien": "dog"}) == ["dog"]
    # a source of punctuation only: the best-attended token is still used
    assert replace_unk([UNK], attention([[(1, 0.9)]], 2), ["!", "?"], {}) == ["?"]


def test_no_unk_left():
    torch.manual_seed(0)
    src = "<unk> le chat@@ on , <unk> mange la souris .".split()
    lexicon = {"chaton": UNK, "souris": "mouse"}  # a lexicon entry that maps to <unk> does not count
    for _ in range(50):
        out = [UNK if torch.rand(()) < 0.5 else "w" for _ in range(12)]
        attn = torch.softmax(torch.randn(12, 15) * 3, -1)  # 15 > len(src): weights on padding too
        assert UNK not in replace_unk(out, attn, src, lexicon)
    assert replace_unk([], torch.zeros(0, 3), src, lexicon) == []
    assert replace_unk([UNK], attention([[(0, 0.9)]], 3), [], lexicon) == [UNK]  # nothing to copy from


def test_lexicon_is_parsed_not_executed(tmp_path):
    marker = tmp_path / "pwned"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    path = write(tmp_path / "lex.txt", ["chat cat", "import os", f"x {code}", "chat chatte", "", "  chien   dog  "])
    lexicon = read_lexicon(path)
    assert lexicon == {"chat": "cat", "import": "os", "x": code, "chien": "dog"}  # the first entry of 'chat' wins
    assert not marker.exists()
    with pytest.raises(UserError) as exc:
        read_lexicon(write(tmp_path / "lex2.txt", ["chat cat", f"exec({code!r})"]))
    assert str(tmp_path / "lex2.txt") in str(exc.value) and "line 2" in str(exc.value)
    assert not marker.exists()


@pytest.mark.parametrize("lines, lineno", [(["a b", "c d e"], 2), (["a b", "b c", "lonely"], 3)])
def test_malformed_lexicon_names_file_and_line(tmp_path, lines, lineno):
    path = write(tmp_path / "lex.txt", lines)
    with pytest.raises(UserError, match=rf"{re.escape(path)}, line {lineno}: expected 'source_word target_word'"):
        read_lexicon(path)


def test_lexicon_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "lex.txt"
    path.write_bytes(b"chat cat\nchien d\xffog\n")
    with pytest.raises(UserError, match=rf"{re.escape(str(path))}, line 2: invalid UTF-8"):
        read_lexicon(str(path))


# -- BLEU -------------------------------------------------------------------------------------------


def test_bleu_report_lines():
    hyps = ["a man , walking .", "two dogs play in the snow ."]
    report, score = bleu_report(hyps, hyps)
    assert score == pytest.approx(100.0)
    assert report[0].startswith("sacreBLEU (detokenized): 100.00") and "tok:13a" in report[0]
    assert report[2].startswith("tokenized BLEU: 100.00") and "tok:none" in report[2]
    _, low = bleu_report(["a man , walking .", "a cat sleeps ."], hyps)
    assert 0 < low < 100
    with pytest.raises(ValueError):
        bleu_report(hyps, hyps[:1])


def test_detokenize():
    assert detokenize(["a man , walking .", "", "l' homme"], "en") == ["a man, walking.", "", "l' homme"]


# -- shared tiny checkpoints (trained once for the module) -------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; with two, OpenMP's spinning threads make each small
    op 100x slower as soon as other processes share the cores."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


TINY = [
    "-rnn_size",
    "32",
    "-word_vec_size",
    "16",
    "-batch_size",
    "32",
    "-valid_steps",
    "1000",
    "-save_checkpoint_steps",
    "1000",
    "-report_every",
    "10",
    "-seed",
    "1",
]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The end-to-end chain on data/, in-process: preprocess -tgt_emb, embeddings_to_torch
    -normalize, build_lexicon, then train a tied nllvmf model (~30 steps) and a ce model (5 steps)."""
    d = tmp_path_factory.mktemp("e2e")
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
    build_lexicon.main(
        ["-src", str(DATA / "train.fr"), "-tgt", str(DATA / "train.en"), "-output", str(d / "lexicon.txt")]
    )
    train.main(
        [
            "-data",
            prefix,
            "-save_model",
            str(d / "vmf"),
            "-tgt_emb",
            str(d / "emb.dec.pt"),
            "-loss",
            "nllvmf",
            "-tie_emb",
            "-train_steps",
            "30",
            "-learning_rate",
            "0.005",
            *TINY,
        ]
    )
    train.main(["-data", prefix, "-save_model", str(d / "ce"), "-loss", "ce", "-train_steps", "5", *TINY])
    return {"dir": d, "vmf": str(d / "vmf_last.pt"), "ce": str(d / "ce_last.pt"), "lexicon": str(d / "lexicon.txt")}


@pytest.fixture(scope="module")
def unk_model(work):
    """The ce checkpoint with the <unk> logit raised so high that every output word is <unk>."""
    data = load_checkpoint(work["ce"])
    data["model"]["generator.proj.bias"][UNK_ID] += 1000.0
    path = str(work["dir"] / "unk_last.pt")
    torch.save(data, path)
    return path


def run_translate(capsys, model, src_lines, tmp_path, *extra, name="out.txt"):
    """translate.main in-process; returns (output lines, the summary it printed on standard error)."""
    src = write(tmp_path / "src.txt", src_lines)
    out = tmp_path / name
    translate.main(["-model", model, "-src", src, "-output", str(out), *map(str, extra)])
    stdout = capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n")
    return text.split("\n")[:-1], stdout


def fails(capsys, argv, *needles):
    with pytest.raises(SystemExit) as exc:
        translate.main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    return err


# -- end to end ------------------------------------------------------------------------------------


def test_end_to_end_replace_unk_and_bleu(work, capsys, tmp_path):
    out = tmp_path / "test.pred.en"
    translate.main(
        [
            "-model",
            work["vmf"],
            "-src",
            str(DATA / "test.fr"),
            "-output",
            str(out),
            "-tgt",
            str(DATA / "test.en"),
            "-replace_unk",
            "-lookup_dict",
            work["lexicon"],
            "-batch_size",
            "100",
        ]
    )
    stdout = capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == N_TEST
    assert all(line.strip() for line in lines[:-1])
    assert UNK not in out.read_text(encoding="utf-8").split()
    assert re.search(r"^sacreBLEU \(detokenized\): \d+\.\d\d  nrefs:1\|.*tok:13a\|.*version:", stdout, re.M)
    assert re.search(r"^tokenized BLEU: \d+\.\d\d  nrefs:1\|.*tok:none", stdout, re.M)
    assert sorted(os.listdir(tmp_path)) == ["test.pred.en"]  # no temporary file left


# -- translate.py invariants -------------------------------------------------------------------------

SOURCES = [
    "un homme avec un chapeau .",
    "",
    "deux chiens jouent dans la neige .",
    "   ",
    "une femme .",
    "qqxx zzyy wwvv",
    "des enfants jouent au football sur l' herbe verte devant une maison .",
]


@pytest.mark.parametrize("model", ["ce", "vmf"])
@pytest.mark.parametrize("beam", [1, 5])
def test_one_line_per_input_line_in_order(work, capsys, tmp_path, model, beam):
    lines, _ = run_translate(
        capsys, work[model], SOURCES, tmp_path, "-beam_size", beam, "-batch_size", 2, "-max_length", 6
    )
    assert len(lines) == len(SOURCES)
    for src, out in zip(SOURCES, lines, strict=True):
        assert (out == "") == (src.strip() == "")  # empty in, empty out; anything else, something out
        assert len(out.split()) <= 6
    # each line translated alone gives the same result: the batching kept the order
    for i in (0, 2, 6):
        alone, _ = run_translate(
            capsys, work[model], [SOURCES[i]], tmp_path, "-beam_size", beam, "-max_length", 6, name="alone.txt"
        )
        assert alone == [lines[i]]


@pytest.mark.parametrize("beam", [1, 3])
def test_order_is_kept_with_unk_copies(work, unk_model, capsys, tmp_path, beam):
    """Every output word is an <unk> replaced by a copy of its own line's source word, so each
    output line must use only the words of the matching input line."""
    sources = [" ".join(f"w{i}x{j}" for j in range(1 + i % 4)) for i in range(9)]
    sources[4] = ""
    lines, _ = run_translate(
        capsys, unk_model, sources, tmp_path, "-replace_unk", "-max_length", 3, "-batch_size", 3, "-beam_size", beam
    )
    assert len(lines) == len(sources)
    for src, out in zip(sources, lines, strict=True):
        assert (out == "") == (src == "")
        assert set(out.split()) <= set(src.split())
        assert len(out.split()) == (3 if src else 0)


@pytest.mark.parametrize("beam", [1, 5])
def test_unknown_words_only_still_translate(work, unk_model, capsys, tmp_path, beam):
    src = ["qqxx zzyy wwvv", "chat zzyy"]
    lines, _ = run_translate(
        capsys, work["vmf"], src, tmp_path, "-replace_unk", "-lookup_dict", work["lexicon"], "-beam_size", beam
    )
    assert len(lines) == 2 and all(line.strip() for line in lines) and UNK not in " ".join(lines).split()
    lines, _ = run_translate(
        capsys, unk_model, src, tmp_path, "-replace_unk", "-lookup_dict", work["lexicon"], "-max_length", 2
    )
    assert lines[0].split() == [w for w in lines[0].split() if w in src[0].split()]  # copies: not in the lexicon
    assert "cat" in lines[1].split() or "zzyy" in lines[1].split()
    lines, _ = run_translate(capsys, unk_model, src, tmp_path, "-max_length", 2)  # without -replace_unk
    assert lines == [f"{UNK} {UNK}"] * 2


def test_verbose_and_tgt(work, capsys, tmp_path):
    ref = write(tmp_path / "ref.txt", ["a man with a hat .", "", "two dogs ."])
    lines, stdout = run_translate(
        capsys, work["ce"], ["un homme .", "", "deux chiens ."], tmp_path, "-verbose", "-tgt", ref, "-max_length", 4
    )
    assert "SENT 1: un homme .\nPRED 1: " + lines[0] in stdout
    assert "SENT 2: \nPRED 2: \n" in stdout
    assert "SENT 3: deux chiens ." in stdout
    assert "sacreBLEU (detokenized):" in stdout and "tokenized BLEU:" in stdout
    assert "translated 3 lines" in stdout


def test_empty_source_file(work, capsys, tmp_path):
    empty = write(tmp_path / "empty.txt", [])
    lines, stdout = run_translate(capsys, work["ce"], [], tmp_path, "-tgt", empty)
    assert lines == [] and "translated 0 lines" in stdout and "no sentences to score" in stdout


def test_beam_size_one_search_equals_greedy_on_a_real_model(work):
    model, _, src_vocab, _ = model_from_checkpoint(load_checkpoint(work["vmf"]))
    model.eval()
    sents = ["un homme .", "deux chiens jouent dans la neige ."]
    src = torch.zeros(2, 7, dtype=torch.long)
    for i, s in enumerate(sents):
        ids = src_vocab.encode(s.split())
        src[i, : len(ids)] = torch.tensor(ids)
    lengths = torch.tensor([3, 7])
    max_lengths = torch.tensor([5, 9])
    g_ids, g_attn = greedy_search(model, src, lengths, max_lengths)
    b_ids, b_attn = beam_search(model, src, lengths, max_lengths, 1, "none")
    assert b_ids == g_ids
    for g, b in zip(g_attn, b_attn, strict=True):
        torch.testing.assert_close(b, g)


def test_translator_translates_lines(work):
    translator = helpers.translator(work["ce"], max_length=3)
    out = translator.translate_lines(["un homme .", "", "chat"], batch_size=2)
    assert len(out) == 3 and out[1] == "" and all(len(o.split()) <= 3 for o in out)


# -- errors: a message, exit 2, and no output file ---------------------------------------------------


def test_lookup_dict_without_replace_unk_is_an_error(work, capsys, tmp_path):
    src = write(tmp_path / "src.txt", ["un homme ."])
    out = tmp_path / "out.txt"
    fails(
        capsys,
        ["-model", work["ce"], "-src", src, "-output", out, "-lookup_dict", work["lexicon"]],
        "-lookup_dict",
        "-replace_unk",
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "case",
    [
        "bad_lexicon",
        "tgt_lines",
        "missing_src",
        "missing_model",
        "max_length",
        "max_length_ratio",
        "no_dir",
        "beam",
        "block",
    ],
)
def test_errors_leave_no_output(work, capsys, tmp_path, case):
    src = write(tmp_path / "src.txt", ["un homme .", "une femme ."])
    out = tmp_path / "out.txt"
    argv = ["-model", work["ce"], "-src", src, "-output", out]
    needles = {
        "bad_lexicon": (
            ["-replace_unk", "-lookup_dict", write(tmp_path / "lex.txt", ["chat cat", "oops"])],
            [str(tmp_path / "lex.txt"), "line 2"],
        ),
        "tgt_lines": (["-tgt", write(tmp_path / "ref.txt", ["a man ."])], ["has 1 lines", "has 2"]),
        "missing_src": (["-src", str(tmp_path / "nope.txt")], ["nope.txt"]),
        "missing_model": (["-model", str(tmp_path / "nope.pt")], ["nope.pt"]),
        "max_length": (["-max_length", "-1"], ["-max_length"]),
        "max_length_ratio": (["-max_length_ratio", "-0.5"], ["-max_length_ratio"]),
        "no_dir": (["-output", str(tmp_path / "no" / "out.txt")], [str(tmp_path / "no")]),
        "beam": (["-beam_size", "0"], ["-beam_size"]),
        "block": (["-block_ngram_repeat", "-2"], ["-block_ngram_repeat", "-2", "positive n-gram size"]),
    }[case]
    fails(capsys, argv + needles[0], *needles[1])
    assert sorted(os.listdir(tmp_path)) == sorted(
        p for p in ("src.txt", "lex.txt", "ref.txt") if (tmp_path / p).exists()
    )


def test_failure_during_translation_writes_nothing(work, capsys, tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    out.write_text("previous\n", encoding="utf-8")

    def boom(self, *args, **kwargs):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(Translator, "translate_batch", boom)
    src = write(tmp_path / "src.txt", ["un homme ."])
    with pytest.raises(RuntimeError):
        translate.main(["-model", work["ce"], "-src", src, "-output", str(out)])
    assert out.read_text(encoding="utf-8") == "previous\n"  # the old file is untouched
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "src.txt"]


def test_remove_bpe_function():
    assert remove_bpe("a cat@@ s sat on the mat@@") == "a cats sat on the mat"
    assert remove_bpe("un@@ believ@@ able .") == "unbelievable ."
    assert remove_bpe("") == "" and remove_bpe("no pieces") == "no pieces"


def test_remove_bpe_joins_the_models_pieces(work, capsys, tmp_path):
    """A checkpoint whose target words are renamed to BPE pieces ('w@@'): -remove_bpe joins them in
    the written output, and only there."""
    data = load_checkpoint(work["ce"])
    data["vocab"]["tgt"] = [w if i < 4 else w + "@@" for i, w in enumerate(data["vocab"]["tgt"])]
    path = str(work["dir"] / "bpe_last.pt")
    torch.save(data, path)
    src = ["un homme avec un chapeau .", "deux chiens ."]
    raw, _ = run_translate(capsys, path, src, tmp_path, "-max_length", 5, name="raw.txt")
    joined, _ = run_translate(capsys, path, src, tmp_path, "-max_length", 5, "-remove_bpe", name="joined.txt")
    assert all("@@" in line for line in raw)
    assert joined == [remove_bpe(line) for line in raw]
    assert all("@@" not in line and " " not in line for line in joined)


@pytest.mark.parametrize("beam", [1, 3])
def test_ban_unk_token(work, unk_model, capsys, tmp_path, beam):
    """The unk_model's best word is always <unk>: without the ban every decoded word is <unk> (and
    the count says so); with -ban_unk_token none is, and the sentences still end."""
    src = ["un homme avec un chapeau .", "deux chiens ."]
    lines, stdout = run_translate(
        capsys, unk_model, src, tmp_path, "-beam_size", beam, "-max_length", 6, "-block_ngram_repeat", 0
    )  # blocking would stop the <unk> repeats
    n = sum(len(line.split()) for line in lines)
    assert all(w == "<unk>" for line in lines for w in line.split()) and n > 0
    assert f"decoded {n} words, {n} of them <unk> (100.0%)" in stdout
    banned, stdout = run_translate(
        capsys, unk_model, src, tmp_path, "-beam_size", beam, "-max_length", 6, "-ban_unk_token", name="ban.txt"
    )
    assert len(banned) == 2 and all("<unk>" not in line for line in banned)
    assert ", 0 of them <unk> (0.0%)" in stdout


def test_unk_count_before_replacement(work, unk_model, capsys, tmp_path):
    extra = ["-max_length", 3, "-replace_unk", "-lookup_dict", work["lexicon"]]
    lines, stdout = run_translate(capsys, unk_model, ["deux chiens ."], tmp_path, *extra)
    assert "<unk>" not in lines[0]
    assert "decoded 3 words, 3 of them <unk> (100.0%), each replaced (-replace_unk)" in stdout


def test_replace_unk_also_reports_bleu_without_it(work, unk_model, capsys, tmp_path):
    """A model that decodes only <unk>: its own output scores 0 whatever the lexicon makes of it,
    and the summary says so beside the BLEU of the replaced output."""
    src = ["qqxx zzyy wwvv", "chat zzyy ."]
    ref = write(tmp_path / "ref.txt", src)
    lines, stdout = run_translate(capsys, unk_model, src, tmp_path, "-replace_unk", "-tgt", ref, "-max_length", 3)
    assert all(UNK not in line.split() for line in lines)
    assert re.search(r"^tokenized BLEU: \d+\.\d\d", stdout, re.M)
    own = re.search(
        r"^without -replace_unk \(the model's own words, 100\.0% <unk>\): sacreBLEU (\d+\.\d\d), "
        r"tokenized BLEU (\d+\.\d\d)$",
        stdout,
        re.M,
    )
    assert own and float(own.group(1)) == 0.0 and float(own.group(2)) == 0.0


def test_bleu_without_replace_unk_equals_a_run_without_it(work, capsys, tmp_path):
    src = [line for _, line in zip(range(30), open(DATA / "test.fr", encoding="utf-8"), strict=False)]
    ref_lines = [line for _, line in zip(range(30), open(DATA / "test.en", encoding="utf-8"), strict=False)]
    ref = write(tmp_path / "ref.txt", ref_lines)
    _, with_unk = run_translate(
        capsys, work["vmf"], src, tmp_path, "-replace_unk", "-lookup_dict", work["lexicon"], "-tgt", ref
    )
    _, plain = run_translate(capsys, work["vmf"], src, tmp_path, "-tgt", ref)
    own = re.search(r"^without -replace_unk .*: sacreBLEU (\d+\.\d\d), tokenized BLEU (\d+\.\d\d)$", with_unk, re.M)
    assert own.group(1) == re.search(r"^sacreBLEU \(detokenized\): (\d+\.\d\d)", plain, re.M).group(1)
    assert own.group(2) == re.search(r"^tokenized BLEU: (\d+\.\d\d)", plain, re.M).group(1)
    assert "without -replace_unk" not in plain


def test_length_batches():
    from onmt_cont.translate.base import length_batches

    lengths = [3, 1, 7, 2, 2, 9, 4]
    order = sorted(range(7), key=lambda i: lengths[i])  # 1, 3, 4, 0, 6, 2, 5
    assert length_batches(order, lengths, 3) == [[1, 3, 4], [0, 6, 2], [5]]
    batches = length_batches(order, lengths, 8, "tokens")
    assert [i for b in batches for i in b] == order  # every sentence once, in order
    assert batches == [[1, 3, 4], [0, 6], [2], [5]]  # 2 x 3 = 6; 4 x 2 = 8; 7; 9 alone (over the bound)
    assert all(max(lengths[i] for i in b) * len(b) <= 8 or len(b) == 1 for b in batches)


@pytest.mark.parametrize("model_key", ["vmf", "ce"])
def test_batch_type_tokens_gives_the_same_translations(work, capsys, tmp_path, model_key):
    src = [line.strip() for _, line in zip(range(40), open(DATA / "test.fr", encoding="utf-8"), strict=False)]
    by_sents, _ = run_translate(capsys, work[model_key], src, tmp_path, name="sents.txt")
    by_tokens, _ = run_translate(
        capsys, work[model_key], src, tmp_path, "-batch_type", "tokens", "-batch_size", 120, name="tokens.txt"
    )
    assert by_tokens == by_sents and len(by_sents) == 40


@pytest.mark.parametrize("model_key, beam", [("vmf", 1), ("vmf", 3), ("ce", 1), ("ce", 3)])
def test_block_ngram_repeat_on_real_models(work, capsys, tmp_path, model_key, beam):
    """The tiny models repeat words; -block_ngram_repeat n leaves no n-gram twice in a line, and
    changes the output only where a line had one."""
    src = [line.strip() for _, line in zip(range(40), open(DATA / "test.fr", encoding="utf-8"), strict=False)]
    plain, _ = run_translate(capsys, work[model_key], src, tmp_path, "-beam_size", beam, name="plain.txt")

    def repeats(line, n):
        w = line.split()
        grams = [tuple(w[i : i + n]) for i in range(len(w) - n + 1)]
        return len(grams) - len(set(grams))

    assert sum(repeats(line, 1) for line in plain) > 0  # else the test shows nothing
    for n in (1, 2):
        blocked, _ = run_translate(
            capsys, work[model_key], src, tmp_path, "-beam_size", beam, "-block_ngram_repeat", n, name=f"block{n}.txt"
        )
        assert len(blocked) == len(src) and all(repeats(line, n) == 0 for line in blocked)
        if beam == 1:  # greedy: a line without a repeat is decoded exactly as before
            for a, b in zip(plain, blocked, strict=True):
                if repeats(a, n) == 0:
                    assert a == b
        assert blocked != plain or all(repeats(line, n) == 0 for line in plain)
