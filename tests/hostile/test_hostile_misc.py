"""Hostile and careless input beyond translate.py and train.py (issue 56):
tools/average_models.py, YAML configs, and a further attack on preprocess.py, embeddings_to_torch.py,
build_lexicon.py and the tools. Each test is a row of docs/reliability.md."""

import os

import pytest
import torch

from tests.helpers import ROOT

# --- a tiny trained model (tools/average_models.py and the further attack) ----------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A cosine model trained 2 steps on test_faults' corpus (tied: the frozen table is also the
    decoder's input), its data, and a second unit table of the same shape."""
    from onmt_cont.bin import preprocess, train
    from onmt_cont.inputters.vocab import load_vocabs
    from tests.helpers import corpus, pp_argv, pp_files

    d = tmp_path_factory.mktemp("tiny")
    src, tgt = corpus()
    files = pp_files(
        d, "\n".join(src) + "\n", "\n".join(tgt) + "\n", "\n".join(src[:4]) + "\n", "\n".join(tgt[:4]) + "\n"
    )
    preprocess.main(pp_argv(files))
    prefix = files["-save_data"]
    _, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    gen = torch.Generator().manual_seed(0)
    tables = []
    for name in ("emb", "other"):
        table = torch.nn.functional.normalize(torch.randn(len(tgt_vocab), 16, generator=gen), dim=-1)
        table[0] = 0
        torch.save(table, d / f"{name}.pt")
        tables.append(str(d / f"{name}.pt"))
    argv = [
        "-data",
        prefix,
        "-loss",
        "cosine",
        "-rnn_size",
        "16",
        "-word_vec_size",
        "16",
        "-batch_size",
        "5",
        "-train_steps",
        "2",
        "-save_checkpoint_steps",
        "1",
        "-valid_steps",
        "100",
        "-tie_emb",
        "-save_model",
        str(d / "m"),
        "-tgt_emb",
        tables[0],
    ]
    train.main(argv)
    return {
        "dir": d,
        "prefix": prefix,
        "ckpt": str(d / "m_last.pt"),
        "emb": tables[0],
        "other": tables[1],
        "src": files["-train_src"],
        "tgt": files["-train_tgt"],
        "train_argv": argv,
    }


def tool_fails(capsys, tool, argv, *needles):
    from tests.helpers import fails

    return fails(capsys, load_tool(tool).main, argv, *needles)


def load_tool(name):
    from tests.helpers import load_tool as load

    return load(name)


# --- tools/average_models.py: only checkpoints of one run --------------------------------------------


@pytest.mark.parametrize("key", ["generator.table", "decoder.embeddings.table.weight"])
def test_average_models_refuses_other_frozen_tables(tiny, tmp_path, capsys, key):
    """Two checkpoints of the same options and vocabulary, one trained against another frozen
    target table (pretrained vs random_sphere): refused, naming both files and the table. Before:
    the table became their mean (rows shorter than 1), no error."""
    ckpt = torch.load(tiny["ckpt"], weights_only=True)
    ckpt["model"][key] = torch.load(tiny["other"], weights_only=True)
    torch.save(ckpt, tmp_path / "other_table.pt")
    step1 = str(tiny["dir"] / "m_step_1.pt")
    tool_fails(
        capsys,
        "average_models",
        ["-models", step1, tmp_path / "other_table.pt", "-output", tmp_path / "avg.pt"],
        "other_table.pt",
        "m_step_1.pt",
        key,
        "frozen",
    )
    assert not (tmp_path / "avg.pt").exists()


@pytest.mark.parametrize(
    "case,needle",
    [
        ("lower", "lowercased"),
        ("tgt_word", "another tgt vocabulary"),
        ("loss", "-loss l2 but"),
    ],
)
def test_average_models_refuses_other_vocabulary_or_options(tiny, tmp_path, capsys, case, needle):
    ckpt = torch.load(tiny["ckpt"], weights_only=True)
    if case == "lower":
        ckpt["vocab"]["lower"] = True
    elif case == "tgt_word":
        ckpt["vocab"]["tgt"][-1] = "zebra"
    else:
        ckpt["opt"]["loss"] = "l2"
    torch.save(ckpt, tmp_path / "x.pt")
    tool_fails(
        capsys,
        "average_models",
        ["-models", tiny["ckpt"], tmp_path / "x.pt", "-output", tmp_path / "a.pt"],
        needle,
        "x.pt",
        "m_last.pt",
    )
    assert not (tmp_path / "a.pt").exists()


def test_average_models_of_one_run_still_averages(tiny, tmp_path):
    out = tmp_path / "avg.pt"
    load_tool("average_models").main(["-models", str(tiny["dir"] / "m_step_1.pt"), tiny["ckpt"], "-output", str(out)])
    got = torch.load(out, weights_only=True)["model"]
    assert torch.equal(got["generator.table"], torch.load(tiny["ckpt"], weights_only=True)["model"]["generator.table"])


# --- YAML configs (onmt_cont/opts.py load_config) ------------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


YAML_CASES = {
    "list_key": ("[a, b]: 1\n", "line 1: an option name must be text, got a YAML list ['a', 'b']"),
    "mapping_key": ("seed: 1\n? {a: 1}\n: 2\n", "line 2: an option name must be text, got a YAML dict"),
    "binary": (
        "save_data: !!binary aGVsbG8=\n",
        "line 1: option 'save_data': expected text, got binary data (!!binary)",
    ),
    "set": ("save_data: !!set {a, b}\n", "line 1: option 'save_data': expected a single value, got a YAML set"),
    "timestamp": ("save_data: 2001-12-14t21:59:43.10-05:00\n", "line 1: option 'save_data': got the YAML timestamp"),
    "alias": ("train_src: &p a.txt\ntrain_tgt: *p\n", "line 2: an alias (*p) is not accepted in a config"),
    "alias_bomb": (BOMB + "train_src: *i\n", "line 2: an alias (*a) is not accepted in a config"),  # 9^9 values
    "deep": ("train_src: " + "[" * 100_000 + "]" * 100_000 + "\n", "line 1: nested more than 50 levels deep"),
    "huge": ("save_data: " + "x" * 1_100_000 + "\n", "larger than 1 MB"),
}


@pytest.mark.parametrize("case", YAML_CASES)
def test_hostile_yaml_config(tmp_path, capsys, case):
    """Before: a list as a key was a TypeError traceback, deep nesting a RecursionError, !!binary,
    !!set and timestamps became paths like b'hello'.train.0.pt, and an alias bomb of a few hundred
    bytes expanded without bound (a line naming the expanded value)."""
    from onmt_cont.bin import preprocess
    from tests.helpers import fails, write

    text, needle = YAML_CASES[case]
    cfg = write(tmp_path / "c.yaml", text)
    err = fails(capsys, preprocess.main, ["-config", cfg], cfg, needle)
    assert len(err) < 1000
    assert os.listdir(tmp_path) == ["c.yaml"]


def test_moderate_alias_expansion_message_is_short(tmp_path, capsys):
    """An alias of a 10^5-value list given to a one-value option: refused at the alias, never
    expanded into the error line (before: a 600 KB error line; with 9 levels, memory without bound)."""
    from onmt_cont.bin import preprocess
    from tests.helpers import fails, write

    text = (
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcd", "bcde", strict=True))
        + "train_src: *e\n"
    )
    cfg = write(tmp_path / "c.yaml", text)
    err = fails(capsys, preprocess.main, ["-config", cfg], "is not accepted")
    assert len(err) < 1000, len(err)


def test_save_config_output_is_read_back_by_load_config(tmp_path):
    """-save_config writes a list two options share out twice, never as an alias that load_config
    (which refuses aliases) would then refuse."""
    import argparse

    from onmt_cont import opts

    shared = [1, 2]
    opts.save_config(argparse.Namespace(a=shared, b=shared, config=None), str(tmp_path / "c.yaml"))
    assert "&" not in (tmp_path / "c.yaml").read_text()
    assert opts.load_config(str(tmp_path / "c.yaml"))[0] == {"a": [1, 2], "b": [1, 2]}


# --- further attack: text that is not UTF-8 text (utils/io.py read_lines, check_readable) -------------

SRC, TGT = "le chat\nun chien\n", "the cat\na dog\n"


def pp(tmp_path, train_src=SRC, train_tgt=TGT, *extra):
    from onmt_cont.bin import preprocess
    from tests.helpers import write

    (tmp_path / "out").mkdir(exist_ok=True)
    files = [
        write(tmp_path / "t.fr", train_src),
        write(tmp_path / "t.en", train_tgt),
        write(tmp_path / "v.fr", SRC),
        write(tmp_path / "v.en", TGT),
    ]
    argv = [
        "-train_src",
        files[0],
        "-train_tgt",
        files[1],
        "-valid_src",
        files[2],
        "-valid_tgt",
        files[3],
        "-save_data",
        str(tmp_path / "out" / "d"),
        *map(str, extra),
    ]
    return preprocess.main, argv


@pytest.mark.parametrize(
    "case,needle",
    [
        ("gzip_without_gz", "t.fr: is gzip-compressed: name it t.fr.gz"),  # was: "differ in length: 29 lines"
        ("utf16_bom", "t.fr: is UTF-16 or UTF-32 text"),  # was: "differ in length" (the last NUL counts a line)
        ("utf16_ascii", "t.fr, line 1: a NUL byte (at byte 1): not UTF-8 text"),  # was: tokens like 'l\x00e\x00'
        ("nul", "t.fr, line 2: a NUL byte (at byte 3)"),  # was: the word '\x00chien' in the vocabulary
    ],
)
def test_text_that_is_not_utf8_text(tmp_path, capsys, case, needle):
    import gzip

    from tests.helpers import fails

    src = {
        "gzip_without_gz": gzip.compress(SRC.encode()),
        "utf16_bom": SRC.encode("utf-16"),
        "utf16_ascii": SRC.encode("utf-16-le"),
        "nul": b"le chat\nun \x00chien\n",
    }[case]
    tgt = TGT.encode("utf-16-le") if case == "utf16_ascii" else TGT
    main, argv = pp(tmp_path, src, tgt)
    fails(capsys, main, argv, needle)
    assert os.listdir(tmp_path / "out") == []


def test_utf8_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    """A file saved by Notepad starts with U+FEFF; it was kept, so the corpus's first word became
    another word ('\\ufeffle' next to 'le')."""
    from onmt_cont.inputters.vocab import load_vocabs

    main, argv = pp(tmp_path, "\ufeff" + SRC)
    main(argv)
    src_vocab, _, _ = load_vocabs(str(tmp_path / "out" / "d.vocab.pt"))
    assert "le" in src_vocab.stoi and not any("\ufeff" in w for w in src_vocab.itos)


# --- further attack: preprocess.py --------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["out/", "out"])
def test_save_data_that_is_a_folder(tmp_path, capsys, prefix):
    """Before: -save_data out/ wrote hidden files out/.train.0.pt, out/.vocab.pt (or, when out/ did not
    exist, failed only after reading everything)."""
    from tests.helpers import fails

    main, argv = pp(tmp_path)
    argv[argv.index("-save_data") + 1] = str(tmp_path / prefix)
    fails(capsys, main, argv, "is a folder: -save_data takes a prefix")
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["-src_vocab_size", "0"], "the source vocabulary has no word"),
        (["-tgt_words_min_frequency", "99999999999999999999"], "the target vocabulary has no word"),
        (["-tgt_emb", "VEC"], "-tgt_emb"),
        (["-src_vocab", "EMPTY"], "lists no word"),
    ],
)
def test_vocabulary_with_no_word_is_an_error(tmp_path, capsys, extra, needle):
    """Before: accepted; every token of that side became <unk> and training went on from there."""
    from tests.helpers import fails, write

    extra = [
        write(tmp_path / "x.vec", "zebra 1 2\n") if x == "VEC" else write(tmp_path / "e.txt", "") if x == "EMPTY" else x
        for x in extra
    ]
    main, argv = pp(tmp_path, SRC, TGT, *extra)
    fails(capsys, main, argv, needle, "every token would be <unk>")
    assert os.listdir(tmp_path / "out") == []


# --- further attack: embeddings_to_torch.py -------------------------------------------------------------


@pytest.mark.parametrize("case", ["header", "dim"])
def test_huge_dimension_is_refused_before_allocating(tmp_path, capsys, case):
    """A header '5 99999999999' (or -init random_sphere -dim 99999999999) asked numpy for 256 TiB:
    a MemoryError traceback."""
    from onmt_cont.bin import embeddings_to_torch
    from tests.helpers import fails, write

    main, argv = pp(tmp_path)
    main(argv)
    vocab = str(tmp_path / "out" / "d.vocab.pt")
    if case == "header":
        args = ["-emb_file_dec", write(tmp_path / "x.vec", "2 99999999999\nthe 1 2\ncat 3 4\n")]
        needle = "gives dimension 99999999999 values per word; more than 65,536"
    else:
        args, needle = ["-init", "random_sphere", "-dim", "99999999999"], "-dim must be at most 65536, got 99999999999"
    fails(capsys, embeddings_to_torch.main, [*args, "-dict_file", vocab, "-output_file", tmp_path / "e"], needle)
    assert not list(tmp_path.glob("e.*"))


# --- further attack: build_lexicon.py --------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["-iterations", "99999999999999999999"], "-iterations must be from 1 to 1000"),  # ran for ever
        (["-tension", "inf"], "-tension must be from 0 to 100"),  # exit 0, an empty lexicon, a RuntimeWarning
        (["-vb_alpha", "inf"], "-vb_alpha must be above 0 and at most 1e+06"),  # the same
        (["-vb_alpha", "1e308"], "-vb_alpha must be above 0"),
        (["-min_count", "99999999999999999999"], "the lexicon is empty"),  # exit 0, an empty lexicon
    ],
)
def test_build_lexicon_bounds_and_empty_lexicon(tmp_path, capsys, extra, needle):
    """An empty lexicon makes translate.py -replace_unk copy every source word (the reason an empty
    corpus is already an error)."""
    from onmt_cont.bin import build_lexicon
    from tests.helpers import fails, write

    argv = [
        "-src",
        write(tmp_path / "s.fr", SRC),
        "-tgt",
        write(tmp_path / "s.en", TGT),
        "-output",
        tmp_path / "lex.txt",
        *extra,
    ]
    fails(capsys, build_lexicon.main, argv, needle)
    assert not (tmp_path / "lex.txt").exists()


# --- further attack: tools --------------------------------------------------------------------------------


def test_average_models_refuses_a_checkpoint_given_twice(tiny, tmp_path, capsys):
    """Before: -models a.pt ./a.pt b.pt averaged a twice (a weight of 2/3), silently."""
    step1 = str(tiny["dir"] / "m_step_1.pt")
    os.link(step1, tmp_path / "hard.pt")
    tool_fails(
        capsys,
        "average_models",
        ["-models", step1, tmp_path / "hard.pt", tiny["ckpt"], "-output", tmp_path / "a.pt"],
        "hard.pt is",
        "again: each checkpoint may be averaged",
    )
    assert not (tmp_path / "a.pt").exists()


@pytest.mark.parametrize(
    "case,needle",
    [
        ("batch_size", "-batch_size must be at least 1"),  # was: ValueError: range() arg 3 must not be zero
        ("k", "-k and -batch_size must be at least 1"),  # was: acc@0 = 0.0, acc@-1 = 0.0
        ("threads", "-threads must be from 0"),  # was: RuntimeError: set_num_threads expects a positive integer
        ("lines", "has 20 lines but"),  # was: ValueError: zip() argument 2 is longer than argument 1
        ("empty", "no non-empty source line"),  # was: torch.cat(): expected a non-empty list of Tensors
    ],
)
def test_accuracy_at_k_bad_input(tiny, tmp_path, capsys, case, needle):
    from tests.helpers import write

    src, tgt = tiny["src"], tiny["tgt"]
    extra = {"batch_size": ["-batch_size", "0"], "k": ["-k", "1", "0"], "threads": ["-threads", "-1"]}.get(case, [])
    if case == "lines":
        tgt = write(tmp_path / "two.en", "the cat\na dog\n")
    elif case == "empty":
        src = tgt = write(tmp_path / "empty.txt", "")
    saved = torch.get_num_threads()
    try:
        tool_fails(capsys, "accuracy_at_k", ["-model", tiny["ckpt"], "-src", src, "-tgt", tgt, *extra], needle)
    finally:
        torch.set_num_threads(saved)


@pytest.mark.parametrize("case,needle", [("lines", "-lines must be at least 1"), ("empty", "no non-empty line")])
def test_output_norms_bad_input(tiny, tmp_path, capsys, case, needle):
    """-lines -5 took every line but the last 5; an empty -src was a torch.cat traceback."""
    from tests.helpers import write

    src = write(tmp_path / "e.txt", "\n\n") if case == "empty" else tiny["src"]
    extra = ["-lines", "-5"] if case == "lines" else []
    tool_fails(capsys, "output_norms", ["-model", tiny["ckpt"], "-src", src, *extra], needle)


def test_replacement_accuracy_batch_size_zero(tiny, tmp_path, capsys):
    from tests.helpers import write

    lex = write(tmp_path / "lex.txt", "chat cat\n")
    tool_fails(
        capsys,
        "replacement_accuracy",
        ["-model", tiny["ckpt"], "-src", tiny["src"], "-lookup_dict", lex, "-batch_size", "0"],
        "-batch_size must be at least 1",
    )


@pytest.mark.parametrize(
    "tool,extra,needle",
    [
        ("paired_bootstrap", ["-n", "99999999999"], "-n must be from 1 to 1,000,000"),  # was: MemoryError (745 GiB)
        ("bin_bootstrap", ["-n", "99999999999"], "-n must be from 1 to 1,000,000"),
        ("bin_bootstrap", ["-tolerance", "nan"], "-tolerance must be at least 1, got nan"),  # was: "beyond nanx"
    ],
)
def test_bootstrap_bounds(tmp_path, capsys, tool, extra, needle):
    from tests.helpers import write

    ref = write(tmp_path / "ref.en", TGT)
    train = ["-train", ref] if tool == "bin_bootstrap" else []
    with pytest.raises(SystemExit) as exc:
        load_tool(tool).main([*train, "-ref", ref, "-a", ref, "-b", ref, *extra])
    assert exc.value.code == 2 and needle in capsys.readouterr().err


def test_bootstrap_errors_exit_2(tmp_path, capsys):
    """Like every script: an error line and exit 2 (they exited 1)."""
    from tests.helpers import write

    ref = write(tmp_path / "ref.en", TGT)
    tool_fails(
        capsys,
        "paired_bootstrap",
        ["-ref", ref, "-a", write(tmp_path / "one.en", "x\n"), "-b", ref],
        "1 lines, but the reference has 2",
    )


def test_moses_tok_names_a_line_that_is_not_utf8():
    """Before: a UnicodeEncodeError traceback from the tokenizer's pipe ('surrogates not allowed')."""
    import io

    from onmt_cont.utils.errors import UserError

    moses = load_tool("moses_tok")
    lines = moses.stdin_lines(io.BytesIO(b"hello\ncaf\xe9\n"))
    assert next(lines) == "hello\n"
    with pytest.raises(UserError, match="standard input, line 2: invalid UTF-8"):
        next(lines)


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["-min_count", "999999"], "-min_count 999999: no word of -input is seen that often"),  # was: gensim traceback
        (["-dim", "99999999999"], "-dim must be at most 65,536"),
        (["-epochs", "99999999999"], "-epochs must be at most 10,000"),
    ],
)
def test_train_vectors_bounds(tmp_path, capsys, extra, needle):
    pytest.importorskip("gensim")
    from tests.helpers import write

    tool_fails(
        capsys,
        "train_vectors",
        ["-input", write(tmp_path / "t.en", TGT), "-output", tmp_path / "v.vec", *extra],
        needle,
    )
    assert not (tmp_path / "v.vec").exists()


def test_open_vocab_eval_vocab_pt_and_bad_utf8(tiny, tmp_path, capsys):
    """-vocab PREFIX.vocab.pt (the help asks for the .tgt.txt) and a hypothesis that is not UTF-8 were
    UnicodeDecodeError tracebacks."""
    from tests.helpers import write

    base = ["-train_tgt", tiny["tgt"], "-ref", tiny["tgt"]]
    tool_fails(
        capsys,
        "open_vocab_eval",
        [*base, "-vocab", tiny["prefix"] + ".vocab.pt", "-hyp", tiny["tgt"]],
        "expected the text file PREFIX.vocab.tgt.txt",
    )
    bad = write(tmp_path / "bad.en", b"the cat\n\xff\n")
    tool_fails(
        capsys,
        "open_vocab_eval",
        [*base, "-vocab", tiny["prefix"] + ".vocab.tgt.txt", "-hyp", bad],
        "bad.en, line 2: invalid UTF-8",
    )


def test_report_tools_refuse_json_they_cannot_read(tmp_path, capsys):
    """A 100,000-deep JSON array (or another shape) in a run folder was a RecursionError (KeyError)
    traceback in lab/tools/quality_report.py and lab/tools/m30k_report.py."""
    deep = "[" * 100_000 + "]" * 100_000
    run = tmp_path / "q" / "r.s1"
    run.mkdir(parents=True)
    for test in ("test_2016_flickr", "test_2017_flickr"):
        (run / f"{test}.calibration.json").write_text(deep)
    tool_fails(capsys, "quality_report", [run], "calibration.json: not JSON (RecursionError)")
    (run / "test_2016_flickr.calibration.json").write_text('{"1": {"ref": 1}}')
    tool_fails(capsys, "quality_report", [run], "expected lab/tools/rare_word_f1.py -json's table")
    (run / "test_2016_flickr.acc.txt").write_text(deep)
    tool_fails(
        capsys, "m30k_report", ["-results", tmp_path / "q"], "acc.txt: not the JSON line of lab/tools/accuracy_at_k"
    )


def test_time_to_quality_log_that_is_not_utf8(tmp_path, capsys):
    from tests.helpers import write

    log = write(tmp_path / "train.log", b"[10:00:00] start\n[10:00:01] \xff\n")
    tool_fails(capsys, "time_to_quality", ["-ref", log, "-runs", log], "train.log, line 2: invalid UTF-8")


def test_rare_word_f1_json_is_written_whole_or_not_at_all(tmp_path, monkeypatch, capsys):
    """-json was opened for writing before the table was dumped: a failure left an empty file."""
    from tests.helpers import write

    rwf = load_tool("rare_word_f1")
    ref = write(tmp_path / "ref.en", TGT)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rwf.json, "dumps", broken)
    monkeypatch.setattr(rwf.json, "dump", broken)
    with pytest.raises(OSError):
        rwf.main(["-train", ref, "-ref", ref, "-hyp", ref, "-json", str(tmp_path / "t.json")])
    assert not (tmp_path / "t.json").exists()


def test_score_calibration_refit_learning_rate_nan(capsys):
    with pytest.raises(SystemExit) as exc:
        load_tool("score_calibration").main(["-model", "m.pt", "-data", "d", "-refit_learning_rate", "nan"])
    assert exc.value.code == 2 and "expected a finite number, got 'nan'" in capsys.readouterr().err


# --- round 3's further attack (issue 69, "Beyond the list"): the defects it found ------------------------


@pytest.mark.parametrize(
    "text,kind",
    [
        ("rnn_size: 010", "an octal"),
        ("seed: 1:30", "a base 60"),
        ("rnn_size: 0x20", "a hexadecimal"),
        ("learning_rate: 1:30.5", "a base 60"),
    ],
)
def test_config_numbers_mean_what_the_command_line_means(tmp_path, capsys, text, kind):
    """YAML 1.1 read 010 as 8 and 1:30 as 90 where the command line reads 10 or refuses: refused, with the line."""
    from onmt_cont.bin import train
    from tests.helpers import fails

    (tmp_path / "c.yaml").write_text(text + "\n", encoding="utf-8")
    fails(
        capsys,
        train.main,
        ["-config", str(tmp_path / "c.yaml"), "-save_config", str(tmp_path / "o.yaml")],
        "c.yaml, line 1",
        f"is {kind} number in YAML",
    )
    assert not (tmp_path / "o.yaml").exists()
    (tmp_path / "c.yaml").write_text("rnn_size: '010'\nseed: 0\n", encoding="utf-8")  # quoted: as on the command line
    train.main(["-config", str(tmp_path / "c.yaml"), "-save_config", str(tmp_path / "o.yaml")])
    assert "rnn_size: 10" in (tmp_path / "o.yaml").read_text(encoding="utf-8")


def test_translate_into_a_reader_that_stops_early(tiny, tmp_path):
    """`translate.py ... | head -1` ended with a BrokenPipeError traceback; now quietly, status 141, as a filter."""
    import subprocess
    import sys

    src = tmp_path / "src.txt"
    src.write_text("".join(open(tiny["src"], encoding="utf-8").readlines()[:3]) * 300, encoding="utf-8")
    res = subprocess.run(
        f"{sys.executable} {ROOT}/translate.py -model {tiny['ckpt']} -src {src} -batch_size 2 -chunk_size 2 | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
        executable="/bin/bash",
    )
    assert len(res.stdout.splitlines()) == 1
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr


def test_an_output_name_of_255_bytes(tiny, tmp_path):
    """A legal 255-byte name was refused ("file name too long") for its temporary file's longer name."""
    from onmt_cont.bin import translate

    out = tmp_path / ("x" * 251 + ".txt")
    translate.main(["-model", tiny["ckpt"], "-src", tiny["src"], "-output", str(out)])
    assert out.is_file() and sorted(os.listdir(tmp_path)) == [out.name]


def test_an_all_zero_vector_is_malformed(tiny, tmp_path, capsys):
    """A word with an all-zero vector became a zero row that cosine never ranks and NLLvMF never trains; it is
    now a malformed line (as a NaN), so the word gets a random vector and the report names the line."""
    from onmt_cont.bin import embeddings_to_torch
    from onmt_cont.inputters.vocab import load_vocabs

    _, tgt_vocab, _ = load_vocabs(tiny["prefix"] + ".vocab.pt")
    words = [w for w in tgt_vocab.itos if not w.startswith("<")][:3]
    vec = tmp_path / "v.vec"
    vec.write_text(f"3 4\n{words[0]} 0 0 0 0\n{words[1]} 1 0 0 0\n{words[2]} 0 1 0 0\n", encoding="utf-8")
    embeddings_to_torch.main(
        ["-emb_file_dec", str(vec), "-dict_file", tiny["prefix"] + ".vocab.pt", "-output_file", str(tmp_path / "e")]
    )
    out = capsys.readouterr().out
    assert "line 2: an all-zero vector" in out, out
    table = torch.load(tmp_path / "e.dec.pt", weights_only=True)
    assert table[tgt_vocab.stoi[words[0]]].norm() > 0
    assert words[0] in (tmp_path / "e.dec.missing.txt").read_text(encoding="utf-8").split()


def test_detokenized_output_keeps_a_leading_special_token():
    """'<unk> .' was written '<Unk>.' (the first letter raised inside the token)."""
    from onmt_cont.text.pipeline import capitalize_first

    assert capitalize_first("<unk>.") == "<unk>." and capitalize_first("a <unk> .") == "A <unk> ."
    assert capitalize_first("« le chat »") == "« Le chat »"


def test_closed_standard_input_is_named(tiny, tmp_path):
    """-src - with standard input closed (`<&-`) was "/dev/stdin: no such file"."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, f"{ROOT}/translate.py", "-model", tiny["ckpt"], "-src", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.close(0),
    )
    assert res.returncode == 2 and "standard input is closed" in res.stderr, res.stderr
