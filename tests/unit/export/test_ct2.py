"""CTranslate2 export (issue 71.2): onmt_cont_convert writes a model ctranslate2.Translator loads; greedy output
through it is translate.py's, word for word, for a softmax and a continuous (NLLvMF + contrastive, tied, word
bias) Transformer trained on the shipped sample; beam 5 is within a measured distance; int8 weights cost little;
translate.py (-engine ctranslate2, or read from -model), onmt_cont.load() and the server decode it; what
CTranslate2 cannot express is refused, and a failed export leaves nothing."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from tests.helpers import ROOT

pytest.importorskip("ctranslate2")

import onmt_cont  # noqa: E402
from onmt_cont.bin import convert as convert_cli  # noqa: E402
from onmt_cont.bin import preprocess, train  # noqa: E402
from onmt_cont.export.ct2 import convert  # noqa: E402
from onmt_cont.utils.errors import UserError  # noqa: E402
from tests.helpers import sample_table, translator  # noqa: E402

DATA = ROOT / "data"
TEST = [line.strip() for line in open(DATA / "test.fr", encoding="utf-8")]
REFS = [line.strip() for line in open(DATA / "test.en", encoding="utf-8")]
TRANSFORMER = [
    "-encoder_type",
    "transformer",
    "-decoder_type",
    "transformer",
    "-rnn_size",
    "64",
    "-word_vec_size",
    "64",
    "-heads",
    "4",
    "-layers",
    "2",
    "-transformer_ff",
    "128",
    "-dropout",
    "0.1",
    "-decay_method",
    "noam",
    "-learning_rate",
    "2",
    "-warmup_steps",
    "100",
    "-param_init",
    "0",
    "-param_init_glorot",
    "-batch_size",
    "32",
    "-train_steps",
    "300",
    "-valid_steps",
    "1000",
    "-threads",
    "1",
]


def _train(prefix, save, *flags):
    saved = torch.get_num_threads()
    train.main(["-data", prefix, "-save_model", save, *TRANSFORMER, *flags])
    torch.set_num_threads(saved)
    return save + "_last.pt"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{"softmax": ce on data that records its raw text (fr -> en), "continuous": nllvmf_nce, tied, word bias}."""
    d = tmp_path_factory.mktemp("ct2")
    split = {s: (str(DATA / f"{s}.fr"), str(DATA / f"{s}.en")) for s in ("train", "valid")}
    args = [
        "-train_src",
        split["train"][0],
        "-train_tgt",
        split["train"][1],
        "-valid_src",
        split["valid"][0],
        "-valid_tgt",
        split["valid"][1],
    ]
    preprocess.main([*args, "-save_data", str(d / "raw"), "-src_lang", "fr", "-tgt_lang", "en"])
    preprocess.main([*args, "-save_data", str(d / "vec"), "-tgt_emb", str(DATA / "en.vec.gz")])
    return {
        "softmax": _train(str(d / "raw"), str(d / "ce"), "-loss", "ce", "-label_smoothing", "0.1"),
        "continuous": _train(
            str(d / "vec"),
            str(d / "cont"),
            "-loss",
            "nllvmf_nce",
            "-tie_emb",
            "-tgt_emb",
            sample_table(d, str(d / "vec")),
            "-word_bias",
        ),
    }


@pytest.fixture(scope="module")
def exported(models, tmp_path_factory):
    d = tmp_path_factory.mktemp("ct2_out")
    out = {}
    for kind, path in models.items():
        convert_cli.main(["-model", path, "-output", str(d / kind)])
        out[kind] = str(d / kind)
    return out


def _pair(models, exported, kind, **options):
    torch.set_num_threads(1)
    ref = translator(models[kind], **options)
    ct2 = translator(exported[kind], **options)
    return ref.translate_lines(TEST, 32), ct2.translate_lines(TEST, 32)


def _bleu(lines):
    return sacrebleu.corpus_bleu(lines, [REFS], tokenize="none", force=True).score


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_greedy_output_is_the_checkpoints(models, exported, kind):
    ours, theirs = _pair(models, exported, kind)
    assert theirs == ours
    # outputs of at least 20 words repeat a pair somewhere, so the blocking is exercised on every model
    long = _pair(models, exported, kind, min_length=20)
    blocked = _pair(models, exported, kind, min_length=20, block_ngram_repeat=2)
    assert long[1] == long[0] and blocked[1] == blocked[0] and blocked[0] != long[0]


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_beam_5_within_a_small_distance(models, exported, kind):
    """CTranslate2's beam keeps k live hypotheses when one ends (it draws 2k candidates); ours lets the beam narrow,
    so a few sentences differ: on these 200 sentences and barely trained models up to 0.35 BLEU, on converged
    Multi30k models 0.06 (docs/benchmarks.md, "CTranslate2")."""
    ours, theirs = _pair(models, exported, kind, beam_size=5)
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    assert same >= 0.8 * len(TEST), same
    assert abs(_bleu(theirs) - _bleu(ours)) <= 0.6, (_bleu(theirs), _bleu(ours))


def test_the_scores_are_translate_pys(models, exported):
    torch.set_num_threads(1)
    ref = translator(models["continuous"], beam_size=4, n_best=2)
    ct2 = translator(exported["continuous"], beam_size=4, n_best=2)
    a, b = [], []
    ref.translate_lines(TEST[:20], 32, nbest=a)
    ct2.translate_lines(TEST[:20], 32, nbest=b)
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x[0][0] == y[0][0]]
    assert len(pairs) >= 15
    for x, y in pairs:
        assert y[0][1] == pytest.approx(x[0][1], abs=1e-3)


def test_int8_weights(models, exported, tmp_path):
    convert(models["continuous"], str(tmp_path / "int8"), quantization="int8")
    float_bleu = _bleu(translator(models["continuous"]).translate_lines(TEST, 32))
    int8 = translator(tmp_path / "int8").translate_lines(TEST, 32)
    assert os.path.getsize(tmp_path / "int8" / "model.bin") < 0.4 * os.path.getsize(
        Path(exported["continuous"]) / "model.bin"
    )
    assert _bleu(int8) >= float_bleu - 1.5


def translate(*args, stdin=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), "-threads", "1", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_translate_py_reads_the_engine_from_the_model_and_the_raw_text_record(models, exported):
    """The softmax model's data recorded fr -> en raw text: the export carries it, so raw French in gives the
    checkpoint's raw English out, on standard output, with no flag."""
    raw = (DATA / "raw" / "test.fr").read_text(encoding="utf-8").splitlines()[:10]
    stdin = "".join(line + "\n" for line in raw)
    ours = translate("-model", models["softmax"], "-src", "-", stdin=stdin)
    theirs = translate("-model", exported["softmax"], "-src", "-", stdin=stdin)
    assert ours.returncode == 0 and theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == ours.stdout and len(theirs.stdout.splitlines()) == 10
    assert "CTranslate2" in theirs.stderr and "records the text" in theirs.stderr
    same = translate("-model", exported["softmax"], "-engine", "ctranslate2", "-src", "-", stdin=stdin)
    assert same.stdout == ours.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["-engine", "torch"], "-engine ctranslate2"),
        (["-decode_prior", "0.5"], "onmt_cont_convert -decode_prior 0.5"),
        (["-csls", "5"], "-engine torch"),
        (["-length_penalty", "wu", "-beam_size", "2"], "Wu"),
    ],
)
def test_what_ctranslate2_cannot_do_is_refused(exported, args, needle):
    r = translate("-model", exported["continuous"], "-src", DATA / "test.fr", *args)
    assert r.returncode == 2 and needle in r.stderr and not r.stdout


def test_a_checkpoint_given_to_the_ctranslate2_engine_is_refused(models):
    r = translate("-model", models["continuous"], "-engine", "ctranslate2", "-src", DATA / "test.fr")
    assert r.returncode == 2 and "onmt_cont_convert -model" in r.stderr


def test_the_api_and_the_options_it_shares(models, exported):
    with onmt_cont.load(models["continuous"], beam_size=3, block_ngram_repeat=2) as m:
        ours = m.translate(TEST[:30])
    with onmt_cont.load(exported["continuous"], beam_size=3, block_ngram_repeat=2) as m:
        theirs = m.translate(TEST[:30])
        assert len(m.translate(TEST[:3], n_best=3)[0]) == 3
    assert sum(a == b for a, b in zip(ours, theirs, strict=True)) >= 25
    with pytest.raises(UserError, match="ensemble"):
        onmt_cont.load(exported["continuous"], ensemble=[exported["continuous"]])
    with pytest.raises(UserError, match="engine"):
        onmt_cont.load(exported["continuous"], engine="onnx")


def test_the_server_serves_an_export(models, exported, tmp_path):
    from tests.helpers import Server

    conf = tmp_path / "conf.json"
    conf.write_text(
        json.dumps(
            {
                "models_root": os.path.dirname(exported["continuous"]),
                "models": [{"id": 7, "model": os.path.basename(exported["continuous"])}],
            }
        ),
        encoding="utf-8",
    )
    server = Server(conf)
    try:
        status, out = server.call("/translator/translate", [{"src": s, "id": 7} for s in TEST[:10]])
    finally:
        assert server.stop() == 0
    assert status == 200
    with onmt_cont.load(models["continuous"]) as m:
        assert [h["tgt"] for h in out[0]] == m.translate(TEST[:10])


def test_what_has_no_exact_ctranslate2_form_is_refused_and_nothing_is_left(tmp_path):
    from tests.helpers import sample_data, trained

    prefix = sample_data(tmp_path)
    lstm = trained(
        prefix, str(tmp_path / "lstm"), "-loss", "ce", "-train_steps", "2", "-rnn_size", "16", "-word_vec_size", "16"
    )
    with pytest.raises(UserError, match="Transformer models"):
        convert(lstm, str(tmp_path / "out"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".tmp", "out"))) == []
    cos = _train(
        prefix,
        str(tmp_path / "cos"),
        "-loss",
        "cosine",
        "-tgt_emb",
        sample_table(tmp_path, prefix),
        "-train_steps",
        "2",
    )
    with pytest.raises(UserError, match="cosine"):
        convert(cos, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_an_existing_output_is_kept_without_force(models, tmp_path, capsys):
    out = tmp_path / "m"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", models["continuous"], "-output", str(out)])
    assert "-force" in capsys.readouterr().err and (out / "keep.txt").read_text(encoding="utf-8") == "mine"
    # issue 77.1: -force replaces an earlier export only, never a folder of other files
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", models["continuous"], "-output", str(out), "-force"])
    assert "nothing was deleted" in capsys.readouterr().err and (out / "keep.txt").read_text(encoding="utf-8") == "mine"
    (out / "keep.txt").unlink()
    convert_cli.main(["-model", models["continuous"], "-output", str(out / "e")])
    convert_cli.main(["-model", models["softmax"], "-output", str(out / "e"), "-force"])  # an export: replaced
    assert json.loads((out / "e" / "onmt_cont.json").read_text(encoding="utf-8"))["continuous"] is False
    assert os.stat(out / "e").st_mode & 0o777 == 0o777 & ~_umask()  # issue 77.16: not mkdtemp's 0700
    convert_cli.main(["-model", models["continuous"], "-output", str(tmp_path / "new" / "folder")])  # created
    assert (tmp_path / "new" / "folder" / "onmt_cont.json").exists()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_force_never_deletes_what_it_did_not_write(models, tmp_path, monkeypatch, capsys):
    """Issue 77.1: -force refuses a folder of the user's files, the folder holding -model, the current folder
    (all of them left as they were); issue 77.2: an -output that appears during a conversion is not replaced."""
    import shutil

    from onmt_cont.export import ct2

    home = tmp_path / "home"
    home.mkdir()
    model = home / "m.pt"
    shutil.copy(models["softmax"], model)
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    for output, cwd in ((home, tmp_path), (str(home) + "/", tmp_path), (".", home)):
        monkeypatch.chdir(cwd)
        with pytest.raises(SystemExit):
            convert_cli.main(["-model", str(model), "-output", str(output), "-force"])
        assert "nothing was deleted" in capsys.readouterr().err
        assert sorted(os.listdir(home)) == ["m.pt", "notes.txt"]
    monkeypatch.chdir(tmp_path)
    convert_cli.main(["-model", str(model), "-output", "export"])
    before = sorted(os.listdir(tmp_path / "export"))
    monkeypatch.chdir(tmp_path / "export")  # an export, but the shell stands in it
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", str(model), "-output", ".", "-force"])
    assert "holds the current folder; nothing was deleted" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "export")) == before
    monkeypatch.chdir(tmp_path)
    real = ct2._put_in_place

    def racing(tmp, output, model_path, force):  # another process writes -output meanwhile
        os.mkdir(output)
        (Path(output) / "theirs.txt").write_text("theirs", encoding="utf-8")
        return real(tmp, output, model_path, force)

    monkeypatch.setattr(ct2, "_put_in_place", racing)
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", str(model), "-output", str(tmp_path / "raced")])
    assert "appeared during the conversion" in capsys.readouterr().err
    assert os.listdir(tmp_path / "raced") == ["theirs.txt"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]  # no half-written export left


def test_convert_into_an_unwritable_folder_is_one_line(models, tmp_path, monkeypatch, capsys):
    """Issue 77.13: mkdtemp's OSError (a folder this user cannot write; root can write anywhere, hence the stand-in)
    became a traceback."""
    import tempfile

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", models["softmax"], "-output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "cannot write in" in err and "Permission denied" in err and "Traceback" not in err


def test_both_engines_refuse_the_same_bad_options(models, exported):
    """Issue 77.12: the CTranslate2 engine skipped translate.py's checks: -max_length 0 raised CTranslate2's
    ValueError (the checkpoint gives empty lines), a pathlib.Path, max_length "x" and block_ngram_repeat -1 raised
    TypeErrors, length_penalty "foo" and alpha nan were taken."""
    import math
    from pathlib import Path

    for path in (models["continuous"], exported["continuous"]):
        for bad, needle in (
            (dict(max_length="x"), "-max_length must be an integer"),
            (dict(block_ngram_repeat=-1), "-block_ngram_repeat must be 0"),
            (dict(length_penalty="foo"), "-length_penalty must be one of none, avg, wu"),
            (dict(alpha=math.nan), "-alpha must be a finite number"),
            (dict(max_length_ratio=math.inf), "-max_length_ratio must be a finite number"),
        ):
            with pytest.raises(UserError, match=needle):
                onmt_cont.load(path, **bad)
        with onmt_cont.load(Path(path), max_length=0) as m:  # a pathlib.Path; no output at all, as asked
            assert m.translate(TEST[:3]) == ["", "", ""]
            assert [[t for t, _ in h] for h in m.translate(TEST[:2], n_best=1)] == [[""], [""]]


def test_a_prefix_past_the_output_limit_is_refused_by_both_engines(models, exported, tmp_path):
    """Issue 77.15: a -tgt_prefix longer than -max_length: the checkpoint wrote the whole prefix (past the 1,024-word
    cap), the export cut it at the limit. Both now refuse it, naming the line (across -chunk_size chunks)."""
    src = tmp_path / "src.txt"
    src.write_text("un chien .\nun homme .\nune femme .\n", encoding="utf-8")
    tgt = tmp_path / "tgt.txt"
    tgt.write_text("a\na dog\na dog runs in the park\n", encoding="utf-8")
    for model in (models["continuous"], exported["continuous"]):
        r = translate("-model", model, "-src", src, "-tgt", tgt, "-tgt_prefix", "-max_length", "4", "-chunk_size", "1")
        assert (
            r.returncode == 2
            and "-tgt_prefix, line 3: a prefix of 6 words is longer than this line's output may be (4: -max_length"
            in r.stderr
        ), r.stderr
        ok = translate("-model", model, "-src", src, "-tgt", tgt, "-tgt_prefix", "-max_length", "6")
        assert ok.returncode == 0 and ok.stdout.splitlines()[2].startswith("a dog runs in the park"), ok.stderr


def test_misleading_messages_of_the_export_and_sentencepiece(models, exported, tmp_path, capsys):
    """Issue 77.18: -src_spm DIR said "no such file"; convert copied a checkpoint whose embedded SentencePiece model
    failed its checksum without a word; -alignment_layer 0 on a 1-layer export was refused as "fixed when it was
    converted (None)"."""
    from onmt_cont.text.subwords import read_spm
    from onmt_cont.translate.ct2 import check_engine_options

    with pytest.raises(UserError, match=r"-src_spm .*: is a folder; give the SentencePiece model file in it"):
        read_spm(str(tmp_path), "-src_spm")
    ckpt = torch.load(models["softmax"], weights_only=True)
    ckpt["vocab"]["text"]["tgt_spm"] = {"model": b"damaged", "sha256": "0" * 64, "file": "en.model"}
    damaged = tmp_path / "damaged.pt"
    torch.save(ckpt, damaged)
    with pytest.raises(SystemExit):
        convert_cli.main(["-model", str(damaged), "-output", str(tmp_path / "out")])
    assert "the SentencePiece model it carries does not match its checksum" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with open(os.path.join(exported["continuous"], "onmt_cont.json"), encoding="utf-8") as f:
        record = json.load(f)
    assert record["decoder_layers"] == 2 and record["alignment_layer"] is None
    check_engine_options({"alignment_layer": 1}, record)  # the last of 2: the exported one
    check_engine_options({"alignment_layer": -1}, record)
    check_engine_options({"alignment_layer": 0}, {**record, "decoder_layers": 1})  # the only layer
    with pytest.raises(
        UserError,
        match=r"-alignment_layer 0: this export's attention is the last decoder layer "
        r"\(of 2\), fixed when it was converted; convert again",
    ):
        check_engine_options({"alignment_layer": 0}, record)


def test_the_export_decodes_with_ctranslate2_alone_by_its_readme(models, exported):
    """Issue 79: a CTranslate2 user had to rebuild our tokenization and lowercasing by hand and to know
    max_decoding_length. The export's README.md spells the steps out for its own record; done with the bare
    ctranslate2 and mosestokenizer packages, greedy search gives translate.py's output line for line."""
    import ctranslate2
    from mosestokenizer import MosesDetokenizer, MosesTokenizer

    readme = (Path(exported["softmax"]) / "README.md").read_text(encoding="utf-8")
    assert 'MosesTokenizer("fr", no_escape=True)(line)' in readme and "lowercase the tokens" in readme
    assert "max_decoding_length=max(limits)" in readme and 'MosesDetokenizer("en")(words)' in readme
    raw = (DATA / "raw" / "test.fr").read_text(encoding="utf-8").splitlines()[:20]
    ours = translate(
        "-model",
        exported["softmax"],
        "-src",
        "-",
        "-beam_size",
        "1",
        "-block_ngram_repeat",
        "0",
        stdin="".join(line + "\n" for line in raw),
    ).stdout.splitlines()
    translator = ctranslate2.Translator(exported["softmax"], device="cpu")
    with MosesTokenizer("fr", no_escape=True) as tok, MosesDetokenizer("en") as detok:
        batch = [[t.lower() for t in tok(line)] for line in raw]
        limits = [min(int(2 * len(tokens)) + 10, 1024) for tokens in batch]
        results = translator.translate_batch(batch, beam_size=1, max_input_length=0, max_decoding_length=max(limits))
        theirs = []
        for result, n in zip(results, limits, strict=True):
            line = detok(result.hypotheses[0][:n])
            theirs.append(line if line.startswith("<") else line[:1].upper() + line[1:])
    assert theirs == ours
    tokens = (Path(exported["continuous"]) / "README.md").read_text(encoding="utf-8")
    assert "it reads tokens" in tokens and "join the words with spaces" in tokens


def test_min_length_and_report_time_in_both_engines(models, exported):
    """Issue 79: OpenNMT-py's -min_length and -report_time were missing. No output ends before -min_length words
    (unless its length limit comes first), the same in both engines; -report_time prints OpenNMT-py's lines."""
    src = "".join(line + "\n" for line in TEST[:8])
    plain = translate("-model", models["continuous"], "-src", "-", stdin=src).stdout.splitlines()
    assert min(len(line.split()) for line in plain) < 14
    outs = {}
    for name, model in (("torch", models["continuous"]), ("ct2", exported["continuous"])):
        for beam in ("1", "3"):
            res = translate(
                "-model", model, "-src", "-", "-min_length", "14", "-beam_size", beam, "-report_time", stdin=src
            )
            assert res.returncode == 0, res.stderr
            outs[name, beam] = res.stdout.splitlines()
            assert all(len(line.split()) >= 14 for line in outs[name, beam]), outs[name, beam]
            assert "Total translation time (s): " in res.stderr and "Tokens per second: " in res.stderr
    assert outs["torch", "1"] == outs["ct2", "1"]
    with onmt_cont.load(models["continuous"], min_length=14, beam_size=1) as m:
        assert m.translate(TEST[:8]) == outs["torch", "1"]
    with pytest.raises(UserError, match="-min_length must be a whole number from 0"):
        onmt_cont.load(models["continuous"], min_length=-1)


def test_ignore_when_blocking(models, exported):
    """Issue 79: OpenNMT-py's -ignore_when_blocking was missing: an n-gram holding one of its words is never
    blocked. The checkpoint engine has it; CTranslate2's blocking has no exceptions, so the export refuses it."""
    from onmt_cont.translate.search import blocked_words

    assert blocked_words([1, 2, 3, 1, 2], 3) == {3} and blocked_words([1, 2, 3, 1, 2], 3, frozenset({3})) == set()
    assert blocked_words([5, 7, 5], 2) == {7} and blocked_words([5, 7, 5], 2, frozenset({5})) == set()
    src = "".join(line + "\n" for line in TEST[:8])
    flags = ["-beam_size", "1", "-block_ngram_repeat", "1"]
    strict = translate("-model", models["continuous"], "-src", "-", *flags, stdin=src).stdout.splitlines()
    assert all(len(set(line.split())) == len(line.split()) for line in strict)  # no word twice
    loose = translate("-model", models["continuous"], "-src", "-", *flags, "-ignore_when_blocking", "a", ".", stdin=src)
    assert loose.returncode == 0, loose.stderr
    assert any(line.split().count("a") > 1 for line in loose.stdout.splitlines())  # "a man ... on a building"
    for model, needle in (
        (exported["continuous"], "CTranslate2's n-gram blocking has no exceptions"),
        (models["continuous"], "-ignore_when_blocking: zzzq: not in the model's target vocabulary"),
    ):
        res = translate(
            "-model", model, "-src", "-", "-ignore_when_blocking", "zzzq" if "not in" in needle else ".", stdin=src
        )
        assert res.returncode == 2 and needle in res.stderr, res.stderr


def test_report_align_with_n_best_and_scores_in_both_engines(models, exported):
    """Issue 79: -report_align with -n_best or -with_score was refused (OpenNMT-py allows it). Each hypothesis's
    line now holds its own alignment, before the tab and score; the 1-best's is -report_align's alone."""
    src = "".join(line + "\n" for line in TEST[:4])
    for model in (models["continuous"], exported["continuous"]):
        res = translate(
            "-model", model, "-src", "-", "-beam_size", "3", "-n_best", "2", "-report_align", "-with_score", stdin=src
        )
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert len(lines) == 8
        for line in lines:
            text, rest = line.split(" ||| ")
            align, score = rest.split("\t")
            assert len(align.split()) == len(text.split()) and float(score) < 0
        alone = translate("-model", model, "-src", "-", "-beam_size", "3", "-report_align", stdin=src)
        assert alone.stdout.splitlines() == [line.split("\t")[0] for line in lines[::2]]


def test_coverage_penalty_against_a_hand_computation():
    """-coverage_penalty's two forms (OpenNMT-py's penalties.py), over the coverage c_j = sum_i a_ij."""
    from onmt_cont.translate.beam import coverage_penalty

    attn = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5], [0.5, 0.5, 0.0]])  # c = 1.25, 1.0, 0.75
    assert coverage_penalty(attn, "wu", 0.2) == pytest.approx(0.2 * -math.log(0.75))
    assert coverage_penalty(attn, "summary", 0.5) == pytest.approx(0.5 * 0.25)
    assert coverage_penalty(attn, "none", 0.5) == 0.0
    never = coverage_penalty(torch.tensor([[1.0, 0.0]]), "wu", 1.0)  # a word never attended to: large, finite
    assert math.isfinite(never) and never > 80


def test_coverage_penalty_re_ranks_beam_search_in_both_engines(models, exported):
    """Issue 79: OpenNMT-py's -coverage_penalty / -beta were missing. As OpenNMT-py's (without -stepwise_penalty),
    they re-rank beam search's finished hypotheses: each one's score falls by beta x the penalty of its own
    attention, which the checkpoint forced through its words (-tgt_prefix) reads again (the export's attention is
    its last decoder layer's: -alignment_layer -1). Checked on "summary", linear in the attention: "wu"'s log of
    a coverage near 0 turns batching's rounding into a visible difference."""
    from onmt_cont.translate.beam import coverage_penalty

    torch.set_num_threads(1)
    forced = translator(models["continuous"], beam_size=1, alignment_layer=-1)
    engines = {
        "torch": lambda **options: translator(models["continuous"], alignment_layer=-1, **options),
        "ct2": lambda **options: translator(exported["continuous"], **options),
    }
    for name, make in engines.items():
        runs = {}
        for kind in ("none", "summary", "wu"):
            cover = {} if kind == "none" else {"coverage_penalty": kind, "beta": 1.0}
            t = make(beam_size=5, n_best=5, **cover)
            runs[kind] = []
            t.translate_lines(TEST[:12], 32, nbest=runs[kind])
        checked = 0
        for src, before, after in zip(TEST[:12], runs["none"], runs["summary"], strict=True):
            old = dict(before)
            for line, score in after:
                if line not in old:
                    continue
                words = line.split()
                _, attns = forced.translate_batch([src.split()], attention=True, prefixes=[words])
                penalty = coverage_penalty(attns[0][: len(words)], "summary", 1.0)
                assert old[line] - score == pytest.approx(penalty, abs=2e-3), (name, line)
                checked += 1
        assert checked >= 30, (name, checked)
        assert any(a[0][0] != b[0][0] for a, b in zip(runs["none"], runs["wu"], strict=True)), name
    res = translate("-model", models["continuous"], "-src", "-", "-coverage_penalty", "summary", stdin="un chien .\n")
    assert res.returncode == 2 and "-coverage_penalty summary is weighed by -beta, 0 here" in res.stderr
    with onmt_cont.load(exported["continuous"], coverage_penalty="wu", beta=0.2) as m:
        assert len(m.translate(TEST[:3])) == 3
        with pytest.raises(ValueError, match="re-ranks the finished hypotheses of beam search"):
            m.translate(TEST[:3], beam_size=1)


def test_sampled_scores_are_log_probabilities_in_both_engines(models, exported):
    """Sampling with -n_best / -with_score (issue 79): each draw's score is its log-probability (with </s>'s)
    over its length, whichever engine drew it: CTranslate2's score_batch of the export gives the same figure."""
    import ctranslate2

    torch.set_num_threads(1)
    scorer = ctranslate2.Translator(exported["continuous"], device="cpu", intra_threads=1)
    sampling = {"beam_size": 3, "n_best": 3, "random_sampling_topk": -1, "seed": 7}
    for t in (translator(models["continuous"], **sampling), translator(exported["continuous"], **sampling)):
        nbest = []
        t.translate_lines(TEST[:6], 32, nbest=nbest)
        for src, hyps in zip(TEST[:6], nbest, strict=True):
            for line, score in hyps:
                words = line.split()
                if len(words) >= 2 * len(src.split()) + 10:  # cut at the length limit: no </s> to score
                    continue
                ended = scorer.score_batch([src.split()], [words])[0].log_probs
                assert score == pytest.approx(sum(ended) / max(len(words), 1), abs=2e-3), (words, score)


def test_the_exports_attention_under_beam_search_over_a_batch(models, exported):
    """CTranslate2 returns a wrong first row of attention under beam search over several sentences (found with
    -coverage_penalty: it summed to 0.29 here); the export engine takes that row from one greedy step. Every
    row of every 1-best is now the checkpoint's (its last decoder layer), so -replace_unk and -report_align are."""
    torch.set_num_threads(1)
    forced = translator(models["continuous"], beam_size=1, alignment_layer=-1)
    ct2 = translator(exported["continuous"], beam_size=5)
    outputs, attns = ct2.translate_batch([line.split() for line in TEST[:12]], attention=True)
    for src, words, attn in zip(TEST[:12], outputs, attns, strict=True):
        _, ref = forced.translate_batch([src.split()], attention=True, prefixes=[words])
        assert torch.allclose(attn, ref[0][: len(words)], atol=1e-4), words
