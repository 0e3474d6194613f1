"""Where outputs go: translate.py writes to standard output when -output is absent or -, streams a
pipe line in, line out, and prints everything else on standard error; an output that is no regular
file (a FIFO, a character device, a link to one) is written in place and never replaced; a link to
a regular file keeps being a link; a rewritten file keeps its permission bits."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest
import torch

from onmt_cont.utils.atomic import atomic_path, atomic_write_text
from tests.helpers import ROOT, sample_data, sample_table, trained

DATA = ROOT / "data"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A ce model of a few steps on the shipped sample."""
    d = tmp_path_factory.mktemp("outputs")
    return trained(
        sample_data(d), str(d / "ce"), "-loss", "ce", "-train_steps", "3", "-rnn_size", "16", "-word_vec_size", "16"
    )


def script(*args, stdin=None, timeout=120):
    return subprocess.run(
        [sys.executable, str(ROOT / "translate.py"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.parametrize("src", [["-src", "-"], []])  # no -src: standard input, as fairseq-interactive reads it
@pytest.mark.parametrize("output", [[], ["-output", "-"]])
def test_translations_alone_on_standard_output(model, output, src):
    r = script("-model", model, *src, "-threads", "1", "-max_length", "5", *output, stdin="le chat .\nun homme lit .\n")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2 and all(line.strip() for line in r.stdout.splitlines())
    assert "translated 2 lines" in r.stderr and "wrote standard output" in r.stderr
    assert "translated" not in r.stdout


def test_summary_and_verbose_lines_go_to_standard_error(model, tmp_path):
    src = tmp_path / "src.fr"
    src.write_text("le chat .\n", encoding="utf-8")
    ref = tmp_path / "ref.en"
    ref.write_text("the cat .\n", encoding="utf-8")
    r = script("-model", model, "-src", str(src), "-tgt", str(ref), "-verbose", "-threads", "1", "-max_length", "5")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1
    assert "BLEU" in r.stderr and "SENT 1: le chat ." in r.stderr and "PRED 1:" in r.stderr


def test_a_pipe_is_translated_line_in_line_out(model):
    """A line fed alone is answered before the next is written (a coprocess would deadlock on a
    reader that waits for a whole chunk)."""
    p = subprocess.Popen(
        [sys.executable, str(ROOT / "translate.py"), "-model", model, "-src", "-", "-threads", "1", "-max_length", "5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    answers = []
    try:
        for line in ("le chat .", "un homme lit .", "une femme ."):
            p.stdin.write(line + "\n")
            p.stdin.flush()
            got = []
            reader = threading.Thread(target=lambda got=got: got.append(p.stdout.readline()), daemon=True)
            reader.start()
            reader.join(60)
            assert got and got[0].endswith("\n"), f"no answer to {line!r} within 60 s while the pipe stays open"
            answers.append(got[0])
        p.stdin.close()
        assert p.wait(60) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert len(answers) == 3
    assert p.stdout.read() == ""


def test_a_stream_line_without_end_is_refused(model):
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv[0] = 'translate.py'; "
            "from onmt_cont.bin import translate as t; from onmt_cont.translate import files; "
            "files.MAX_STREAM_LINE = 1000; "
            f"t.main(['-model', {model!r}, '-src', '-', '-threads', '1'])",
        ],
        input="x" * 5000,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert "line 1: longer than 1,000 bytes" in r.stderr
    assert r.stdout == ""


def test_a_fifo_output_receives_the_translations_and_survives(model, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    r = script(
        "-model",
        model,
        "-src",
        str(DATA / "test.fr"),
        "-output",
        str(fifo),
        "-threads",
        "1",
        "-max_length",
        "5",
        timeout=300,
    )
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and len(got[0].splitlines()) == len((DATA / "test.fr").read_text(encoding="utf-8").splitlines())
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary file beside it


def test_a_link_to_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    atomic_write_text(str(link), "hello\n")
    reader.join(30)
    assert got == ["hello\n"]
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_character_device_is_written_in_place(tmp_path):
    """A private node of /dev/null's device (1, 3): writing it leaves a character device, as
    translate.py -output /dev/null must leave /dev/null."""
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with atomic_path(str(node)) as path, open(path, "w", encoding="utf-8") as f:
        f.write("translations\n")
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


def test_a_link_to_a_regular_file_stays_a_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(str(link), "new\n")
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8") == "new\n"


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    path = tmp_path / "private.txt"
    path.write_text("secret\n", encoding="utf-8")
    os.chmod(path, 0o600)
    atomic_write_text(str(path), "still secret\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    fresh = tmp_path / "fresh.txt"
    atomic_write_text(str(fresh), "x\n")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o666 & ~umask


# --- inputs that are no regular file ---------------------------------------------------------------


def run_script(name, *args, timeout=60):
    return subprocess.run(
        [sys.executable, str(ROOT / name), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "script, flag", [("translate.py", "-model"), ("train.py", "-config"), ("translate.py", "-config")]
)
def test_a_fifo_as_model_or_config_is_refused_at_once(tmp_path, script, flag):
    """(was: the open waited for a writer for ever) within the 60 s bound, exit 2, naming the file."""
    fifo = tmp_path / "x.fifo"
    os.mkfifo(fifo)
    extra = ["-src", DATA / "test.fr"] if script == "translate.py" else []
    r = run_script(script, flag, fifo, *extra)
    assert r.returncode == 2, r.stderr
    assert f"{fifo}: is a FIFO (named pipe), expected" in r.stderr


def test_a_device_as_model_or_table_is_named_for_what_it_is(tmp_path):
    """(was: -model /dev/urandom 'an empty file', a FIFO -tgt_emb 'no such file')"""
    r = run_script("translate.py", "-model", "/dev/urandom", "-src", DATA / "test.fr")
    assert r.returncode == 2 and "/dev/urandom: is a character device, expected a checkpoint" in r.stderr
    fifo = tmp_path / "v.fifo"
    os.mkfifo(fifo)
    r = run_script(
        "preprocess.py",
        "-train_src",
        DATA / "train.fr",
        "-train_tgt",
        DATA / "train.en",
        "-valid_src",
        DATA / "valid.fr",
        "-valid_tgt",
        DATA / "valid.en",
        "-save_data",
        tmp_path / "d",
        "-tgt_emb",
        fifo,
    )
    assert r.returncode == 2 and "is a FIFO (named pipe), expected a vector file" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.fifo"]


def test_preprocess_refuses_a_device_as_text(tmp_path):
    """(was: the line count spun for ever on /dev/zero)"""
    r = run_script(
        "preprocess.py",
        "-train_src",
        "/dev/zero",
        "-train_tgt",
        DATA / "train.en",
        "-valid_src",
        DATA / "valid.fr",
        "-valid_tgt",
        DATA / "valid.en",
        "-save_data",
        tmp_path / "d",
    )
    assert r.returncode == 2
    assert "/dev/zero: is a character device, expected a text file (a regular file: it is read twice" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_translate_refuses_dev_zero_as_source(model):
    """(was: memory grew until a MemoryError or the OOM killer)"""
    r = run_script("translate.py", "-model", model, "-src", "/dev/zero", "-threads", "1", timeout=120)
    assert r.returncode == 2
    assert "/dev/zero, line 1: longer than 1,048,576 bytes without a line end" in r.stderr


def test_a_checkpoint_holding_nan_is_refused(model, tmp_path):
    """(was: translate.py exited 0 with empty lines; tools/average_models.py wrote a NaN average)"""
    data = torch.load(model, weights_only=True)
    name = next(k for k, v in data["model"].items() if v.is_floating_point())
    data["model"][name] = data["model"][name].clone()
    data["model"][name].view(-1)[0] = float("nan")
    bad = tmp_path / "nan.pt"
    torch.save(data, bad)
    r = run_script("translate.py", "-model", bad, "-src", DATA / "test.fr", "-output", tmp_path / "o.txt")
    assert r.returncode == 2 and f"parameter {name} holds 1 NaN or infinite value(s)" in r.stderr
    r = run_script("tools/average_models.py", "-models", model, bad, "-output", tmp_path / "avg.pt")
    assert r.returncode == 2 and "NaN" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.pt"]


# --- Ctrl-C while a script starts ------------------------------------------------------------------


def test_ctrl_c_during_the_imports_is_one_line(monkeypatch, capsys):
    """(was: a 13-20 frame KeyboardInterrupt traceback through the import machinery)"""
    import importlib

    from onmt_cont.bin import launch

    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", interrupted)
    with pytest.raises(SystemExit) as exc:
        launch.run("translate")
    assert exc.value.code == 130
    assert capsys.readouterr().err == (
        "translate.py: stopped by SIGINT (Ctrl-C) while starting: nothing was read or written\n"
    )


def test_ctrl_c_soon_after_start_prints_no_traceback(model):
    """SIGINT 1.5 s after start: during the imports (torch's take seconds on a busy machine) or while it
    reads stdin, never in Python's own start-up (some tens of ms), which no script can cover."""
    # SIGINT's default action for the child: a job started in the background of a non-interactive shell
    # inherits it ignored, and Python then installs no KeyboardInterrupt handler at all
    p = subprocess.Popen(
        [sys.executable, str(ROOT / "translate.py"), "-model", model, "-src", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err and err.count("\n") == 1 and "SIGINT" in err


# --- -n_best, -with_score, -log_file ---------------------------------------------------------------


@pytest.fixture(scope="module")
def continuous_model(tmp_path_factory):
    """A continuous model (nllvmf_nce, word bias) of a few steps on the sample."""
    d = tmp_path_factory.mktemp("nbest")
    prefix = sample_data(d, DATA / "en.vec.gz")
    return trained(
        prefix,
        str(d / "c"),
        "-loss",
        "nllvmf_nce",
        "-tie_emb",
        "-word_bias",
        "-tgt_emb",
        sample_table(d, prefix),
        "-train_steps",
        "20",
        "-rnn_size",
        "32",
        "-word_vec_size",
        "32",
        "-learning_rate",
        "0.003",
    )


SRC3 = "un homme lit .\nune femme court dans l' herbe .\n\ndeux chiens .\n"


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_n_best_lists_with_scores(model, continuous_model, kind):
    path = model if kind == "softmax" else continuous_model
    common = ["-model", path, "-src", "-", "-threads", "1", "-max_length", "6"]
    best = script(*common, "-beam_size", "4", stdin=SRC3).stdout.splitlines()
    r = script(*common, "-beam_size", "4", "-n_best", "3", "-with_score", stdin=SRC3)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == 4 * 3 - 2  # an empty line gives one empty hypothesis
    groups = [rows[0:3], rows[3:6], rows[6:7], rows[7:10]]
    for group, one in zip(groups, best, strict=True):
        assert group[0][0] == one  # the first of the list is the 1-best
        scores = [float(score) for _, score in group]
        assert scores == sorted(scores, reverse=True)
    assert groups[2] == [["", "0.000000"]]
    plain = script(*common, "-beam_size", "4", "-n_best", "3", stdin=SRC3).stdout.splitlines()
    assert plain == [text for text, _ in rows]  # without -with_score: the same lines, no tab


def test_with_score_under_greedy_keeps_the_greedy_words(continuous_model):
    common = ["-model", continuous_model, "-src", "-", "-threads", "1", "-max_length", "6", "-beam_size", "1"]
    greedy = script(*common, stdin=SRC3).stdout.splitlines()
    scored = [line.split("\t") for line in script(*common, "-with_score", stdin=SRC3).stdout.splitlines()]
    assert [text for text, _ in scored] == greedy
    r = script(*common, "-n_best", "2", stdin=SRC3)
    assert r.returncode == 2 and "-n_best 2: must be from 1 to -beam_size (1)" in r.stderr


def test_the_api_gives_n_best_lists(continuous_model):
    import onmt_cont

    m = onmt_cont.load(continuous_model, beam_size=3, max_length=6)
    lists = m.translate(["un homme lit .", "deux chiens ."], n_best=2)
    assert [len(x) for x in lists] == [2, 2] and all(isinstance(s, float) for x in lists for _, s in x)
    assert [x[0][0] for x in lists] == m.translate(["un homme lit .", "deux chiens ."])
    with pytest.raises(Exception, match="-n_best 4"):
        m.translate(["un homme ."], n_best=4)


def test_log_file_holds_what_standard_error_shows(model, tmp_path):
    log = tmp_path / "t.log"
    r = script(
        "-model",
        model,
        "-src",
        "-",
        "-threads",
        "1",
        "-max_length",
        "5",
        "-log_file",
        str(log),
        "-verbose",
        stdin="le chat .\n",
    )
    assert r.returncode == 0
    text = log.read_text(encoding="utf-8")
    assert "translated 1 lines" in text and "SENT 1: le chat ." in text
    assert text.splitlines() == r.stderr.splitlines()


def test_a_moses_process_that_cannot_start_is_an_error(model, tmp_path):
    """perl present but unable to run the tokenizer (here: a perl that prints Thread.pm's error and
    exits) (was: an empty line for every input and exit 0, or a BrokenPipe traceback blaming -output)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perl").write_text('#!/bin/sh\necho "Can\'t locate Thread.pm in @INC" >&2\nexit 2\n')
    (fake / "perl").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    out = tmp_path / "o.txt"
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "translate.py"),
            "-model",
            model,
            "-src",
            str(DATA / "raw" / "test.fr"),
            "-src_lang",
            "fr",
            "-detokenize",
            "-tgt_lang",
            "en",
            "-output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 2, r.stderr
    assert "the Moses tokenizer for 'fr'" in r.stderr and "does not answer" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


# --- checkpoints whose parts do not fit ------------------------------------------------------------


def _broken(data, how):
    data = {**data, "opt": dict(data["opt"]), "vocab": dict(data["vocab"]), "model": dict(data["model"])}
    if how == "no_vocab":
        del data["vocab"]
    elif how == "no_option":
        del data["opt"]["rnn_size"]
    elif how == "string_option":
        data["opt"]["rnn_size"] = "abc"
    elif how == "shape":
        name = next(k for k, v in data["model"].items() if v.dim() == 2)
        data["model"][name] = torch.zeros(3, 3)
    elif how == "short_vocab":
        data["vocab"]["tgt"] = data["vocab"]["tgt"][:-5]
        data["vocab"].pop("tgt_counts", None)
    return data


@pytest.mark.parametrize(
    "how, needle",
    [
        ("no_vocab", "it holds no source and target vocabulary"),
        ("no_option", "an option is missing (rnn_size)"),
        ("string_option", "its options do not build a model"),
        ("shape", "its parameters do not fit the model its options describe"),
        ("short_vocab", "its target table has"),
    ],
)
def test_a_checkpoint_whose_parts_do_not_fit_is_named(continuous_model, tmp_path, how, needle):
    """(was: KeyError, AttributeError, TypeError and size-mismatch tracebacks; a target vocabulary
    shorter than the table was accepted)"""
    import onmt_cont
    from onmt_cont.utils.errors import UserError

    bad = tmp_path / f"{how}.pt"
    torch.save(_broken(torch.load(continuous_model, weights_only=True), how), bad)
    r = run_script("translate.py", "-model", bad, "-src", DATA / "test.fr", "-output", tmp_path / "o.txt")
    assert r.returncode == 2, r.stderr
    assert f"{bad}: not a usable checkpoint of train.py: {needle}" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(UserError, match="not a usable checkpoint"):
        onmt_cont.load(str(bad))


def test_a_release_is_smaller_and_decodes_the_same(continuous_model, tmp_path):
    """onmt_cont_release (issue 70.7: each checkpoint held the optimiser and random states)."""
    import onmt_cont

    rel = tmp_path / "m.release.pt"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from onmt_cont.bin.launch import release; release()",
            "-model",
            continuous_model,
            "-output",
            str(rel),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(rel) < 0.9 * os.path.getsize(continuous_model)  # the frozen table stays: 77% here
    data = torch.load(rel, weights_only=True)
    assert data["optim"] is None and "rng" not in data and data["release"] is True
    sentences = ["un homme lit .", "deux chiens courent dans l' herbe ."]
    for beam in (1, 3):
        a = onmt_cont.load(continuous_model, beam_size=beam, max_length=8).translate(sentences)
        b = onmt_cont.load(str(rel), beam_size=beam, max_length=8).translate(sentences)
        assert a == b
    r = run_script("train.py", "-data", "x", "-save_model", str(tmp_path / "m"), "-train_from", str(rel))
    assert r.returncode == 2 and "it is a release" in r.stderr


@pytest.mark.parametrize("flag", [["-src_lang", ""], ["-detokenize", "-tgt_lang", " "]])
def test_an_empty_language_is_refused(model, flag):
    """Issue 77.24: -detokenize -tgt_lang "" (an unset shell variable) exited 0 with tokenized output, and
    -src_lang "" turned tokenization off without a word."""
    r = script("-model", model, "-threads", "1", *flag, stdin="le chat .\n")
    assert r.returncode == 2 and "is empty (an unset shell variable?)" in r.stderr and r.stdout == ""
