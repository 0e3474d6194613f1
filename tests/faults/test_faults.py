"""Bad input, script by script: a clear error (file, line, what was expected), exit 2, and no
output file left behind; or, where the input is legal but odd, a stated behaviour.

Each test is a row of docs/reliability.md ("Bad input" sections). Cases already covered by a
module's own tests are cited there instead of repeated here."""

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from onmt_cont.bin import build_lexicon, embeddings_to_torch, preprocess, train, translate
from onmt_cont.constants import SPECIALS
from onmt_cont.inputters.corpus import load_shard
from onmt_cont.inputters.vocab import Vocab, load_vocabs, save_vocabs
from tests.helpers import corpus, fails, pp_argv, pp_files, write

# -- preprocess.py --------------------------------------------------------------------------------


def test_preprocess_crlf_gives_the_same_data_as_lf(tmp_path):
    src, tgt = corpus(6)
    (tmp_path / "lf").mkdir()
    (tmp_path / "crlf").mkdir()
    lf = pp_files(tmp_path / "lf", "\n".join(src) + "\n", "\n".join(tgt) + "\n")
    crlf = pp_files(
        tmp_path / "crlf", "\r\n".join(src) + "\r\n", "\r\n".join(tgt) + "\r\n", "le chat\r\n", "the cat\r\n"
    )
    preprocess.main(pp_argv(lf))
    preprocess.main(pp_argv(crlf))
    for side in ("src", "tgt"):
        text = Path(crlf["-save_data"] + f".vocab.{side}.txt").read_bytes()
        assert b"\r" not in text
        assert text == Path(lf["-save_data"] + f".vocab.{side}.txt").read_bytes()
    for split in ("train.0", "valid.0"):
        a, b = (load_shard(f["-save_data"] + f".{split}.pt") for f in (lf, crlf))
        assert [(s.tolist(), t.tolist()) for s, t in a] == [(s.tolist(), t.tolist()) for s, t in b]


def test_preprocess_100k_token_line_is_dropped_and_counted(tmp_path, capsys):
    huge = " ".join(["chat"] * 100_000)
    files = pp_files(tmp_path, f"le chat\n{huge}\nun chien\n", f"the cat\nthe cat\n{huge}\n")
    preprocess.main(pp_argv(files))
    out = capsys.readouterr().out
    assert "train: 3 pairs read, 1 kept, dropped: 0 with an empty side, 2 too long (> 100 source" in out
    src_vocab, _, _ = load_vocabs(files["-save_data"] + ".vocab.pt")
    assert src_vocab.itos[len(SPECIALS) :] == ["chat", "le"]  # the dropped pairs add no words
    assert [len(s) for s, _ in load_shard(files["-save_data"] + ".train.0.pt")] == [2]


@pytest.mark.parametrize(
    "valid_src, valid_tgt, needle",
    [
        ("", "", "(0 read: 0 with an empty side, 0 longer"),
        ("\n\n", "the cat\n\n", "(2 read: 2 with an empty side, 0 longer"),
        (" ".join(["x"] * 101) + "\n", "y\n", "(1 read: 0 with an empty side, 1 longer than -src_seq_length 100"),
    ],
)
def test_preprocess_empty_validation_set_is_an_error(tmp_path, capsys, valid_src, valid_tgt, needle):
    files = pp_files(tmp_path, "le chat\n", "the cat\n", valid_src, valid_tgt)
    fails(capsys, preprocess.main, pp_argv(files), "no validation pair of", files["-valid_src"], needle)
    assert os.listdir(tmp_path / "out") == []


def test_preprocess_empty_training_files(tmp_path, capsys):
    files = pp_files(tmp_path, "", "")
    fails(
        capsys,
        preprocess.main,
        pp_argv(files),
        f"no training pair of {files['-train_src']} / {files['-train_tgt']}",
        "(0 read: 0 with an empty side",
    )
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("flag", ["-src_seq_length", "-tgt_seq_length"])
def test_preprocess_seq_length_below_one(tmp_path, capsys, flag):
    files = pp_files(tmp_path, "le chat\n", "the cat\n")
    fails(capsys, preprocess.main, pp_argv(files, flag, 0), f"{flag} must be at least 1, got 0")
    assert os.listdir(tmp_path / "out") == []


def test_preprocess_truncated_gzip(tmp_path, capsys):
    data = gzip.compress(b"le chat\nun chien\n" * 1000)
    files = pp_files(tmp_path, "", "the cat\na dog\n" * 1000)
    files["-train_src"] = write(tmp_path / "train.src.gz", data[: len(data) // 2])
    fails(capsys, preprocess.main, pp_argv(files), f"{files['-train_src']}: cannot read", "end-of-stream")
    assert os.listdir(tmp_path / "out") == []


# -- a directory where a file is expected ---------------------------------------------------------


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny cosine model trained 3 steps on the memorisation corpus, its data and tables."""
    d = tmp_path_factory.mktemp("model")
    src, tgt = corpus()
    files = pp_files(
        d, "\n".join(src) + "\n", "\n".join(tgt) + "\n", "\n".join(src[:4]) + "\n", "\n".join(tgt[:4]) + "\n"
    )
    preprocess.main(pp_argv(files))
    prefix = files["-save_data"]
    _, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    gen = torch.Generator().manual_seed(0)
    tables = {}
    for name, dim in (("emb16", 16), ("emb24", 24), ("other16", 16)):
        table = torch.nn.functional.normalize(torch.randn(len(tgt_vocab), dim, generator=gen), dim=-1)
        table[0] = 0
        tables[name] = str(d / f"{name}.pt")
        torch.save(table, tables[name])
    argv = [
        "-data",
        prefix,
        "-loss",
        "cosine",
        "-rnn_size",
        "16",
        "-word_vec_size",
        "8",
        "-batch_size",
        "5",
        "-train_steps",
        "3",
        "-save_checkpoint_steps",
        "100",
        "-valid_steps",
        "100",
    ]
    train.main(argv + ["-save_model", str(d / "m"), "-tgt_emb", tables["emb16"]])
    return {
        "dir": d,
        "prefix": prefix,
        "ckpt": str(d / "m_last.pt"),
        "train_argv": argv,
        "src": files["-train_src"],
        "tgt": files["-train_tgt"],
        **tables,
    }


@pytest.mark.parametrize("flag", ["-src", "-tgt", "-lookup_dict"])
def test_translate_directory_as_input(model, tmp_path, capsys, flag):
    argv = {"-model": model["ckpt"], "-src": model["src"], "-output": tmp_path / "out.txt"}
    if flag == "-lookup_dict":
        argv["-replace_unk"] = None
    argv[flag] = tmp_path
    fails(
        capsys,
        translate.main,
        [x for kv in argv.items() for x in kv if x is not None],
        f"{tmp_path}: is a directory, expected a text file",
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag", ["-src", "-tgt"])
def test_build_lexicon_directory_as_input(model, tmp_path, capsys, flag):
    argv = {"-src": model["src"], "-tgt": model["tgt"], "-output": tmp_path / "lex.txt", flag: tmp_path}
    fails(
        capsys,
        build_lexicon.main,
        [x for kv in argv.items() for x in kv],
        f"{tmp_path}: is a directory, expected a text file",
    )
    assert os.listdir(tmp_path) == []


def test_output_that_is_a_directory(model, tmp_path, capsys):
    (tmp_path / "o").mkdir()
    fails(
        capsys,
        translate.main,
        ["-model", model["ckpt"], "-src", model["src"], "-output", tmp_path / "o"],
        f"-output {tmp_path / 'o'}: is a directory, expected a file name",
    )
    fails(
        capsys,
        build_lexicon.main,
        ["-src", model["src"], "-tgt", model["tgt"], "-output", tmp_path / "o"],
        f"-output {tmp_path / 'o'}: is a directory",
    )
    assert os.listdir(tmp_path) == ["o"] and os.listdir(tmp_path / "o") == []


# -- build_lexicon.py -----------------------------------------------------------------------------


def test_build_lexicon_empty_corpus(tmp_path, capsys):
    src, tgt = write(tmp_path / "s.txt", ""), write(tmp_path / "t.txt", "")
    fails(
        capsys,
        build_lexicon.main,
        ["-src", src, "-tgt", tgt, "-output", tmp_path / "lex.txt"],
        f"nothing to align: {src} has no words (0 lines)",
    )
    src = write(tmp_path / "s.txt", "\n \n")
    tgt = write(tmp_path / "t.txt", "a b\n\n")
    fails(
        capsys,
        build_lexicon.main,
        ["-src", src, "-tgt", tgt, "-output", tmp_path / "lex.txt"],
        f"{src} has no words (2 lines)",
    )
    assert not (tmp_path / "lex.txt").exists()


def test_build_lexicon_crlf_and_long_pairs(tmp_path, capsys):
    src, tgt = corpus(12)
    long_src, long_tgt = " ".join(["chat"] * 30), " ".join(["dog"] * 30)
    lf = [
        "-src",
        write(tmp_path / "s.txt", "\n".join(src) + "\n"),
        "-tgt",
        write(tmp_path / "t.txt", "\n".join(tgt) + "\n"),
    ]
    crlf = [
        "-src",
        write(tmp_path / "s2.txt", "\r\n".join([*src, long_src]) + "\r\n"),
        "-tgt",
        write(tmp_path / "t2.txt", "\r\n".join([*tgt, long_tgt]) + "\r\n"),
    ]
    build_lexicon.main([*lf, "-output", str(tmp_path / "lf.txt")])
    build_lexicon.main([*crlf, "-output", str(tmp_path / "crlf.txt"), "-max_length", "20"])
    out = capsys.readouterr().out
    assert "1 pair(s) with a side longer than -max_length 20 tokens left unaligned (first: line 13)" in out
    lexicon = (tmp_path / "crlf.txt").read_bytes()
    assert b"\r" not in lexicon
    # the long pair (30 x "chat" / "dog") was not aligned: the lexicon is the one of the LF corpus
    assert lexicon == (tmp_path / "lf.txt").read_bytes()
    fails(capsys, build_lexicon.main, [*lf, "-output", tmp_path / "x.txt", "-max_length", "-1"], "-max_length")
    pharaoh = write(tmp_path / "a.txt", "0-0\n" * 12)
    fails(
        capsys,
        build_lexicon.main,
        [*lf, "-output", tmp_path / "x.txt", "-alignments", pharaoh, "-max_length", "5"],
        "-max_length only apply when training the aligner",
    )
    assert not (tmp_path / "x.txt").exists()


# -- embeddings_to_torch.py -----------------------------------------------------------------------

VEC = "6 3\n</s> 0.1 0.2 0.3\nthe 1.0 0.0 0.0\ncat 0.0 2.0 0.0\ndog 0 0 3\nzebra 4 0 0\nyak 0 0 -2\n"


@pytest.fixture
def vocab_file(tmp_path):
    tgt = Vocab(list(SPECIALS) + ["the", "cat", "dog", "gnu"], [0] * 4 + [10, 5, 3, 2], total_tokens=25)
    src = Vocab(list(SPECIALS) + ["le"], [0] * 4 + [1], total_tokens=1)
    save_vocabs(str(tmp_path / "data"), src, tgt, lower=True)
    return str(tmp_path / "data.vocab.pt")


def emb_run(tmp_path, vocab_file, text, *extra):
    out = str(tmp_path / "emb")
    embeddings_to_torch.main(
        ["-emb_file_dec", write(tmp_path / "e.vec", text), "-dict_file", vocab_file, "-output_file", out, *extra]
    )
    missing = Path(out + ".dec.missing.txt").read_text(encoding="utf-8").split()
    return torch.load(out + ".dec.pt", weights_only=True), missing


@pytest.mark.parametrize("count", [60, 2])
def test_header_that_lies_about_the_count_is_a_note(tmp_path, vocab_file, capsys, count):
    table, missing = emb_run(tmp_path, vocab_file, VEC.replace("6 3", f"{count} 3"))
    assert f"note: the header says {count} words but the file has 6 vector lines" in capsys.readouterr().out
    assert table[4:7].tolist() == [[1, 0, 0], [0, 2, 0], [0, 0, 3]] and missing == ["gnu"]


def test_header_that_lies_about_the_dimension(tmp_path, vocab_file, capsys):
    fails(
        capsys,
        embeddings_to_torch.main,
        [
            "-emb_file_dec",
            write(tmp_path / "e.vec", VEC.replace("6 3", "6 300")),
            "-dict_file",
            vocab_file,
            "-output_file",
            tmp_path / "emb",
        ],
        "e.vec: inconsistent dimension: the header says 300 values per word, but 6 of 6 vector lines have "
        "another count (6 lines have 3 values)",
    )
    assert not list(tmp_path.glob("emb*"))


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1e39", "-3.5e38", "1e300"])
def test_non_finite_and_float32_overflow_values_are_skipped(tmp_path, vocab_file, capsys, bad, normalize):
    text = VEC.replace("cat 0.0 2.0", f"cat 0.0 {bad}") + f"emu 1 {bad} 2\n"  # a vocab word, another word
    table, missing = emb_run(tmp_path, vocab_file, text, *(["-normalize"] if normalize else []))
    out = capsys.readouterr().out
    assert "malformed lines skipped: 2 (first: line 4: a value is not finite in float32" in out and "line 8" in out
    assert torch.isfinite(table).all()
    assert missing == ["cat", "gnu"]  # cat got a random vector, like a word without one
    assert table[1].tolist() == pytest.approx([2, 0, -1] if not normalize else [2**-0.5, 0, -(2**-0.5)])


def test_huge_but_float32_values_normalize_to_unit_rows(tmp_path, vocab_file):
    # squares of 3e20 overflow float32: the lengths must be summed in float64
    table, _ = emb_run(tmp_path, vocab_file, VEC.replace("the 1.0 0.0 0.0", "the 3e20 0 4e20"), "-normalize")
    assert table[4].tolist() == pytest.approx([0.6, 0.0, 0.8])
    assert torch.isfinite(table).all()


def test_duplicate_words_keep_the_first_and_are_reported(tmp_path, vocab_file, capsys):
    table, _ = emb_run(tmp_path, vocab_file, VEC + "the 9 9 9\ncat 7 7 7\n")
    assert (
        "duplicate words skipped (first vector kept): 2 (first: line 8: 'the', line 9: 'cat')"
        in capsys.readouterr().out
    )
    assert table[4].tolist() == [1, 0, 0] and table[5].tolist() == [0, 2, 0]


# -- train.py: a table or checkpoint that does not fit -----------------------------------------


@pytest.mark.parametrize(
    "case, needles",
    [
        ("dim", ["generator.table is [16, 16] in the checkpoint but [16, 24] in -tgt_emb"]),
        ("values", ["holds other vectors than the table -train_from", "(generator.table)"]),
        ("vocab", ["was trained with another target vocabulary", "resume with the same -data"]),
    ],
)
def test_train_from_with_a_table_or_data_that_does_not_fit(model, tmp_path, capsys, case, needles):
    argv = model["train_argv"] + [
        "-save_model",
        tmp_path / "r",
        "-train_from",
        model["ckpt"],
        "-tgt_emb",
        model["emb24" if case == "dim" else "other16" if case == "values" else "emb16"],
    ]
    if case == "vocab":  # another corpus whose target vocabulary has the same size, other words
        src, tgt = corpus()
        tgt = [line.replace("cat", "kitten") for line in tgt]
        files = pp_files(tmp_path, "\n".join(src) + "\n", "\n".join(tgt) + "\n")
        preprocess.main(pp_argv(files))
        argv[argv.index("-data") + 1] = files["-save_data"]
        argv += ["-log_file", tmp_path / "train.log"]
    before = sorted(os.listdir(tmp_path))
    fails(capsys, train.main, argv, *needles)
    assert sorted(os.listdir(tmp_path)) == before  # no checkpoint, no log


@pytest.mark.parametrize("case", ["nan", "dim"])
def test_tgt_emb_extend_table_that_does_not_fit(model, tmp_path, capsys, case):
    table = torch.load(model["emb16" if case == "nan" else "emb24"], weights_only=True)
    table[5, 0] = float("nan") if case == "nan" else table[5, 0]
    torch.save(table, tmp_path / "ext.pt")
    needle = {
        "nan": f"-tgt_emb_extend {tmp_path / 'ext.pt'}: expected finite float vectors",
        "dim": "-tgt_emb_extend: vectors of dimension 24, but the model's target table has dimension 16",
    }[case]
    argv = ["-model", model["ckpt"], "-src", model["src"], "-output", tmp_path / "out.txt", "-tgt_emb_extend"]
    fails(
        capsys,
        translate.main,
        argv + [tmp_path / "ext.pt", "-tgt_emb_extend_vocab", model["prefix"] + ".vocab.pt"],
        needle,
    )
    assert not (tmp_path / "out.txt").exists()


# -- translate.py: legal but odd input ----------------------------------------------------------


def test_translate_crlf_and_a_100k_token_line(model, tmp_path, capsys):
    """CRLF input translates exactly like LF input; a 100K-token line is translated (not dropped,
    one output line per input line), its output bounded by -max_length."""
    lines = ["le chat rouge", "", "un chien", " ".join(["chat"] * 100_000)]
    outs = []
    for name, eol, n in (("lf", "\n", 4), ("crlf", "\r\n", 3)):  # the long line once: it takes ~1 s
        src = write(tmp_path / f"{name}.txt", eol.join(lines[:n]) + eol)
        out = tmp_path / f"{name}.out"
        translate.main(
            ["-model", model["ckpt"], "-src", src, "-output", str(out), "-max_length", "4", "-batch_size", "1"]
        )
        outs.append(out.read_text(encoding="utf-8").split("\n"))
    assert outs[1] == outs[0][:3] + [""]  # no "\r" in the CRLF output, the same words
    assert len(outs[0]) == 5 and outs[0][4] == "" and outs[0][1] == ""  # one line out per line in
    assert all(0 < len(outs[0][i].split()) <= 4 for i in (0, 2, 3))


# -- -config YAML ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            'train_src: !!python/object/apply:os.system ["touch {marker}"]\n',
            "line 1: not valid YAML (could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system')",
        ),
        ("shard_size: 7\n\nshard_sise: 8\n", "line 3: unknown option 'shard_sise'"),
        ("train_src: [a.txt, b.txt]\n", "line 1: option 'train_src': expected a single value, got a YAML list"),
        ("lower: true\nshard_size: [1, 2]\n", "line 2: option 'shard_size': expected a single value, got a YAML list"),
        ("train_src: {path: a.txt}\n", "line 1: option 'train_src': expected a single value, got a YAML dict"),
        ("save_data: no\n", "line 1: option 'save_data': got the YAML boolean False"),
        ("shard_size: 5\nseed: 1\nshard_size: 7\n", "line 3: option 'shard_size' is given twice (first on line 1)"),
        ("shard_size:\n", "line 1: option 'shard_size': no value (YAML null)"),
        (
            "lower:\n",
            "line 1: option 'lower': no value (YAML null); give one, or remove the line to keep the default False",
        ),
        ("just text\n", "expected a mapping of option: value, got str"),
        (b"save_data: caf\xe9\n", "line 1: invalid UTF-8"),
    ],
)
def test_bad_yaml_config(tmp_path, capsys, text, needle):
    marker = tmp_path / "pwned"
    if isinstance(text, str):
        text = text.replace("{marker}", str(marker))
    cfg = write(tmp_path / "c.yaml", text)
    fails(capsys, preprocess.main, ["-config", cfg], f"{cfg}", needle)
    assert not marker.exists()
    assert os.listdir(tmp_path) == ["c.yaml"]


def test_yaml_null_for_an_option_without_default_is_unset(tmp_path, capsys):
    src, tgt = corpus(4)
    files = pp_files(tmp_path, "\n".join(src) + "\n", "\n".join(tgt) + "\n")
    cfg = write(tmp_path / "c.yaml", "src_vocab:\ntgt_emb: ~\n")
    preprocess.main(["-config", cfg, *pp_argv(files)])
    assert os.path.exists(files["-save_data"] + ".vocab.pt")


def test_vec_reader_rejects_values_beyond_float32():
    from onmt_cont.inputters.numparse import FLOAT32_MAX, parse_values

    values, bad = parse_values([b"1 2", b"3.4e38 -3.4e38", b"3.5e38 0"], 2)
    assert [i for i, _, _ in bad] == [2] and np.abs(values[:2]).max() <= FLOAT32_MAX
