"""Hostile and careless input on the translate side (issue 56): decoding values that used to hang
beam search or silently spoil the output, piped sources, interrupts, offsets files that are
deep, huge or fitted on another model, and every script and tool asked to write over one of its
own inputs. Runs in-process on conftest's tiny models (trained once per session) under a
deadline, so a hang fails the test instead of stalling the suite.

Only modules are imported at the top: a name the fixes added is looked up inside each test, so
against the code before them every test fails on its own."""

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import onmt_cont
from onmt_cont.bin import build_lexicon, embeddings_to_torch, preprocess, train, translate
from onmt_cont.constants import EOS_ID
from onmt_cont.translate import calibration, search
from onmt_cont.translate import translator as translator_module
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.utils.errors import UserError
from tests import helpers as stub  # the search stub (V, A, B, C, run_beam)
from tests.helpers import ROOT, tool_path


@contextlib.contextmanager
def deadline(seconds):
    """Raise TimeoutError in the block after ``seconds``: a hang fails instead of stalling."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: it hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(main, argv, capsys, seconds=30):
    """A script's main in-process under a deadline -> (exit status, stdout, stderr)."""
    with deadline(seconds):
        try:
            code = main([str(a) for a in argv]) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:  # would stop the whole pytest session
            pytest.fail("KeyboardInterrupt escaped main: the user sees a traceback")
    torch.set_num_threads(1)  # a -threads value must not slow the tests that follow
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error(err, *needles):
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in errors[0], err
    return errors[0]


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def digest(path):
    path = Path(path)
    if path.is_dir():
        return sorted((p.name, digest(p)) for p in path.iterdir())
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sources(wc_data):
    return wc_data["dir"] / "valid.fr", wc_data["dir"] / "valid.en"


# -- 1. beam search ends at the length limit, whatever the scores ------------------------------------


@pytest.mark.parametrize("bad", ["nan", "inf", "nan_but_eos", "inf_and_-inf"])
def test_beam_search_ends_at_the_length_limit_whatever_the_scores(bad):
    """NaN totals are no -inf: before the fix no candidate was skipped at t == max_len, the loop
    went past it and never ended (issue 56, 1)."""

    def table(sid, prefix):
        if bad == "nan":
            return [math.nan] * stub.V
        if bad == "inf":
            return [math.inf] * stub.V
        if bad == "nan_but_eos":
            r = [math.nan] * stub.V
            r[EOS_ID] = -1.0
            return r
        r = [math.inf] * stub.V
        r[EOS_ID] = -math.inf
        return r

    with deadline(10):
        _, ids, attn = stub.run_beam(table, [[stub.A, stub.B], [stub.C]], [3, 2], k=2)
    assert len(ids[0]) <= 3 and len(ids[1]) <= 2
    assert all(len(a) == len(i) for a, i in zip(attn, ids, strict=True))


# -- 2. the output length has a cap ----------------------------------------------------------------------


def test_output_length_is_capped(wc_infonce, sources, tmp_path, capsys):
    """-max_length_ratio 1e5 decoded for minutes; now no output is longer than MAX_OUTPUT_LENGTH."""
    cap = search.MAX_OUTPUT_LENGTH
    limits = search.length_limits(torch.tensor([1, 50]), None, 1e5)
    assert limits.tolist() == [cap, cap]
    assert search.length_limits(torch.tensor([3]), None, 2.0).tolist() == [16]
    out = tmp_path / "o.txt"
    code, _, err = run_cli(
        translate.main,
        ["-model", wc_infonce, "-src", sources[0], "-output", out, "-max_length_ratio", "1e5", "-beam_size", "2"],
        capsys,
        seconds=60,
    )
    assert code == 0, err
    lines = out.read_text().splitlines()
    assert len(lines) == 8 and all(0 < len(line.split()) <= cap for line in lines)
    code, _, err = run_cli(
        translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", out, "-max_length", cap + 1], capsys
    )
    assert code == 2 and assert_one_error(err, "-max_length", str(cap))


# -- the numeric decoding flags under nan, inf, -inf, 0, a huge and a negative value ----------------------

FLOAT_VALUES = ["nan", "inf", "-inf", "0", "1e308", "-1"]
INT_VALUES = ["nan", "inf", "-inf", "0", "99999999999999999999", "-1"]
TRANSLATE_FLAGS = {  # flag -> (values, extra options it needs)
    "-batch_size": (INT_VALUES, []),
    "-chunk_size": (INT_VALUES, []),
    "-max_length": (INT_VALUES, []),
    "-max_length_ratio": (FLOAT_VALUES, []),
    "-beam_size": (INT_VALUES, []),
    "-alpha": (FLOAT_VALUES, ["-length_penalty", "wu"]),
    "-block_ngram_repeat": (INT_VALUES, []),
    "-decode_prior": (FLOAT_VALUES, []),
    "-decode_prior_cap": (INT_VALUES, ["-decode_prior", "0.5"]),
    "-csls": (INT_VALUES, []),
    "-ann_nlist": (INT_VALUES, ["-ann", "faiss"]),
    "-ann_nprobe": (INT_VALUES, ["-ann", "faiss"]),
    "-ann_hnsw_m": (INT_VALUES, ["-ann", "faiss", "-ann_index", "hnsw"]),
    "-ann_ef_search": (INT_VALUES, ["-ann", "faiss", "-ann_index", "hnsw"]),
    "-threads": (INT_VALUES, []),
    "-gpu": (INT_VALUES, []),
    "-alignment_layer": (INT_VALUES, []),
}
BEAM = ["-beam_size", "2"]  # the search that hung; -beam_size itself is tried alone


def sane(lines, n, vocab, flag, value):
    """One line per source line, words of the target vocabulary (no padding, no <s>), each line
    within the length cap and non-empty unless the user asked for none (-max_length 0)."""
    assert len(lines) == n
    for line in lines:
        words = line.split()
        assert set(words) <= vocab and not set(words) & {"<blank>", "<s>"}, line
        assert len(words) <= search.MAX_OUTPUT_LENGTH
        assert words or (flag, value) == ("-max_length", "0"), (flag, value)


@pytest.mark.parametrize("flag,value", [(f, v) for f, (values, _) in TRANSLATE_FLAGS.items() for v in values])
def test_every_numeric_translate_flag_ends_sanely(flag, value, wc_infonce, sources, tmp_path, capsys):
    """Exit 0 with a sane output, or exit 2 with one error line and no output; never a hang."""
    if flag.startswith("-ann"):
        pytest.importorskip("faiss")
    _, extra = TRANSLATE_FLAGS[flag]
    out = tmp_path / "o.txt"
    argv = [
        "-model",
        wc_infonce,
        "-src",
        sources[0],
        "-output",
        out,
        *(BEAM if flag != "-beam_size" else []),
        *extra,
        f"{flag}={value}",
    ]
    code, _, err = run_cli(translate.main, argv, capsys, seconds=60)
    assert code in (0, 2), err
    if code == 2:
        assert_one_error(err)
        assert not out.exists()
        return
    vocab = set(torch.load(wc_infonce, weights_only=True)["vocab"]["tgt"])
    sane(out.read_text().splitlines(), 8, vocab, flag, value)
    assert "Traceback" not in err


CALIBRATE_FLAGS = {
    "-decode_prior": FLOAT_VALUES,
    "-rounds": INT_VALUES,
    "-step": FLOAT_VALUES,
    "-min_tokens": INT_VALUES,
    "-block_ngram_repeat": INT_VALUES,
    "-batch_size": INT_VALUES,
    "-target": FLOAT_VALUES,
    "-threads": INT_VALUES,
}


@pytest.mark.parametrize("flag,value", [(f, v) for f, values in CALIBRATE_FLAGS.items() for v in values])
def test_every_numeric_calibrate_flag_ends_sanely(flag, value, wc_infonce, sources, tmp_path, capsys):
    calibrate = load_tool("calibrate_offsets")
    out = tmp_path / "off.json"
    given = [f"{flag}={value}"] if flag != "-target" else [flag, *[value] * 6]
    rounds = [] if flag == "-rounds" else ["-rounds", "2"]
    argv = ["-model", wc_infonce, "-src", sources[0], "-tgt", sources[1], "-output", out, *rounds, *given]
    code, _, err = run_cli(calibrate.main, argv, capsys, seconds=60)
    assert code in (0, 2), err
    if code == 2:
        assert_one_error(err)
        assert not out.exists()
        return
    offsets, beta = calibration.load_offsets(str(out))
    assert all(math.isfinite(o) for o in offsets) and math.isfinite(beta)


# -- 1, 20, 21: the Python API refuses the same values ------------------------------------------------------


@pytest.mark.parametrize(
    "option,value",
    [
        ("decode_prior", math.nan),
        ("decode_prior", -math.inf),
        ("decode_prior", 1e308),
        ("alpha", math.nan),
        ("alpha", math.inf),
        ("max_length_ratio", math.nan),
        ("max_length_ratio", math.inf),
        ("max_length", 10**9),
        ("beam_size", 10**9),
        ("csls", 10**6),
        ("block_ngram_repeat", -1),
        ("beam_size", 2.0),
    ],
)
def test_api_refuses_what_translate_py_refuses(option, value, wc_infonce):
    with deadline(30), pytest.raises(UserError, match=option):
        onmt_cont.load(str(wc_infonce), **{option: value})


def test_a_prior_that_rounds_to_zero_or_comes_from_yaml_is_refused(wc_infonce, sources, tmp_path, capsys):
    """-decode_prior 1e-400 was 0.0 (the prior silently off); a YAML .nan must not slip past the flag's checks;
    the API's batch_size must be a count."""
    out = tmp_path / "o.txt"
    code, _, err = run_cli(
        translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", out, "-decode_prior", "1e-400"], capsys
    )
    assert code == 2 and assert_one_error(err, "-decode_prior")
    (tmp_path / "c.yaml").write_text("decode_prior: .nan\nbeam_size: 2\n")
    code, _, err = run_cli(
        translate.main,
        ["-config", tmp_path / "c.yaml", "-model", wc_infonce, "-src", sources[0], "-output", out],
        capsys,
    )
    assert code == 2 and assert_one_error(err, "decode_prior") and not out.exists()
    with pytest.raises(UserError, match="batch_size"):
        onmt_cont.load(str(wc_infonce), batch_size=math.nan)


def test_stale_temporary_files_with_odd_names_are_passed_over(tmp_path):
    """A PID past any real one (was: OverflowError) and a folder named like a temporary file (was:
    IsADirectoryError) are left alone, not a traceback."""
    from onmt_cont.utils.atomic import remove_stale_temps

    (tmp_path / ".tmp-99999999999999999999-abcd1234-o.txt").write_text("x")
    (tmp_path / f".tmp-{dead_pid()}-abcd1234-o.txt").mkdir()
    assert remove_stale_temps(str(tmp_path), "o.txt", exact=True) == [".tmp-99999999999999999999-abcd1234-o.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()]


def test_translator_checks_its_options_too(wc_infonce):
    from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint

    model, _, src_vocab, tgt_vocab = model_from_checkpoint(load_checkpoint(str(wc_infonce)))
    with pytest.raises(UserError, match="-decode_prior"):
        translator_module.Translator(model, src_vocab, tgt_vocab, DecodingConfig(decode_prior=math.nan))


# -- 20: a checkpoint without training counts is no prior ---------------------------------------------------


def test_decode_prior_on_a_checkpoint_without_counts_is_an_error(wc_infonce, sources, tmp_path, capsys):
    """It used to decode every word as <unk>, exit 0."""
    data = torch.load(wc_infonce, weights_only=True)
    del data["vocab"]["tgt_counts"]
    path = tmp_path / "nocounts.pt"
    torch.save(data, path)
    out = tmp_path / "o.txt"
    code, _, err = run_cli(
        translate.main, ["-model", path, "-src", sources[0], "-output", out, "-decode_prior", "0.5"], capsys
    )
    assert code == 2 and assert_one_error(err, "no training counts") and not out.exists()
    code, _, err = run_cli(translate.main, ["-model", path, "-src", sources[0], "-output", out], capsys)
    assert code == 0  # without the prior the counts are not needed


# -- 25: -csls K larger than the vocabulary -----------------------------------------------------------------


def test_csls_larger_than_the_vocabulary_is_refused(wc_infonce, sources, tmp_path, capsys):
    words = len(torch.load(wc_infonce, weights_only=True)["vocab"]["tgt"])
    out = tmp_path / "o.txt"
    code, _, err = run_cli(
        translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", out, "-csls", words], capsys
    )
    assert code == 2 and assert_one_error(err, f"-csls {words}", f"{words} words") and not out.exists()
    code, _, err = run_cli(
        translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", out, "-csls", words - 2], capsys
    )
    assert code == 0, err


# -- 9: piped input ----------------------------------------------------------------------------------------------


def feed_fifo(path, text):
    """Make ``path`` a FIFO and write ``text`` into it from a thread (as ``<(...)`` does)."""
    os.mkfifo(path)
    writer = threading.Thread(target=lambda: Path(path).write_text(text, encoding="utf-8"), daemon=True)
    writer.start()
    return writer


def test_a_pipe_as_source_and_reference_is_read_once(wc_infonce, sources, tmp_path, capsys):
    """-src <(...) used to be counted (which drained it) and then read: an empty output, exit 0,
    or a second open that blocks forever. -tgt likewise."""
    plain = tmp_path / "plain.txt"
    assert run_cli(translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", plain], capsys)[0] == 0
    writers = [
        feed_fifo(tmp_path / "src.fifo", sources[0].read_text()),
        feed_fifo(tmp_path / "ref.fifo", sources[1].read_text()),
    ]
    out = tmp_path / "piped.txt"
    code, stdout, err = run_cli(
        translate.main,
        ["-model", wc_infonce, "-src", tmp_path / "src.fifo", "-output", out, "-tgt", tmp_path / "ref.fifo"],
        capsys,
    )
    assert code == 0, err
    assert out.read_text() == plain.read_text() and "translated 8 lines" in err and "BLEU" in err
    for w in writers:
        w.join(5)


def test_a_piped_reference_of_another_length_writes_nothing(wc_infonce, sources, tmp_path, capsys):
    writer = feed_fifo(tmp_path / "ref.fifo", "".join(sources[1].read_text().splitlines(True)[:5]))
    out = tmp_path / "o.txt"
    code, _, err = run_cli(
        translate.main,
        ["-model", wc_infonce, "-src", sources[0], "-output", out, "-tgt", tmp_path / "ref.fifo"],
        capsys,
    )
    writer.join(5)
    assert code == 2 and assert_one_error(err, "ends after line 5", "same number of lines") and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]


def test_src_dash_reads_standard_input(wc_infonce, sources, tmp_path, capsys, monkeypatch):
    """In-process, standard input is a FIFO the test writes; translate.py reads it as -src -."""
    writer = feed_fifo(tmp_path / "stdin.fifo", sources[0].read_text())
    monkeypatch.setattr(translate, "STDIN", str(tmp_path / "stdin.fifo"), raising=False)
    out = tmp_path / "o.txt"
    code, stdout, err = run_cli(translate.main, ["-model", wc_infonce, "-src", "-", "-output", out], capsys)
    writer.join(5)
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 8
    code, _, err = run_cli(translate.main, ["-model", wc_infonce, "-src", "-", "-tgt", "-", "-output", out], capsys)
    assert code == 2 and assert_one_error(err, "standard input")


# -- 19: interrupts ------------------------------------------------------------------------------------------------


def test_ctrl_c_says_what_was_kept_without_a_traceback(wc_infonce, sources, tmp_path, capsys, monkeypatch):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(translator_module.Translator, "translate_lines", interrupted)
    out = tmp_path / "o.txt"
    code, _, err = run_cli(translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", out], capsys)
    assert code == 130 and "Traceback" not in err
    assert err.count("\n") == 1 and "SIGINT" in err and "was not written" in err and "0 of 8 lines" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def dead_pid():
    """The PID of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_the_next_run_removes_what_a_killed_run_left(wc_infonce, sources, tmp_path, capsys):
    """SIGKILL cannot be caught: the next translate.py to the same -output removes the temporary
    file of a writer that is gone, and leaves a live writer's and other outputs' alone."""
    stale = tmp_path / f".tmp-{dead_pid()}-abcd1234-o.txt"
    live = tmp_path / f".tmp-{os.getpid()}-abcd1234-o.txt"
    other = tmp_path / f".tmp-{dead_pid()}-abcd1234-o.txt.bak"
    for p in (stale, live, other):
        p.write_text("half a translation\n")
    code, _, err = run_cli(
        translate.main, ["-model", wc_infonce, "-src", sources[0], "-output", tmp_path / "o.txt"], capsys
    )
    assert code == 0 and stale.name in err
    assert not stale.exists() and live.exists() and other.exists()


def test_sigterm_removes_the_partial_output(wc_infonce, tmp_path):
    """kill PID (SIGTERM) used to end translate.py at once, leaving .tmp-PID-... behind for ever.
    A real process reading -src - (a pipe that stays open), so the signal comes mid-run."""
    out = tmp_path / "o.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "translate.py"), "-model", str(wc_infonce), "-src", "-", "-output", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        proc.stdin.write("le chat\n")
        proc.stdin.flush()
        start = time.time()
        while not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() - start < 60
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.count("\n") == 1 and "SIGTERM" in err and "was not written" in err
    assert list(tmp_path.iterdir()) == []


# -- 13: tools/calibrate_offsets.py --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["output_dir", "empty", "blank", "step_inf", "step_huge"])
def test_calibrate_refuses_bad_input_before_decoding(case, wc_infonce, sources, tmp_path, capsys):
    calibrate = load_tool("calibrate_offsets")
    src, ref, out = sources[0], sources[1], tmp_path / "off.json"
    extra, needle = [], None
    if case == "output_dir":
        out.mkdir()
        needle = "is a directory"
    elif case in ("empty", "blank"):
        src = ref = tmp_path / "held_out.txt"
        src.write_text("" if case == "empty" else "\n \n\n")
        needle = "no words"
    else:
        extra, needle = ["-step", "inf" if case == "step_inf" else "1e6"], "-step"
    code, stdout, err = run_cli(
        calibrate.main, ["-model", wc_infonce, "-src", src, "-tgt", ref, "-output", out, *extra], capsys
    )
    assert code == 2 and assert_one_error(err, needle)
    assert "round 0" not in stdout  # refused before the first decode
    assert out.is_dir() if case == "output_dir" else not out.exists()


# -- 14: offsets files that are deep, huge or out of range --------------------------------------------------


def offsets_file(tmp_path, **changes):
    path = tmp_path / "o.json"
    calibration.save_offsets(str(path), [0.0] * 6, 0.0, [1.0] * 6, "test")
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "case,needle",
    [
        ("deep", "nested too deeply"),
        ("huge_int", "finite numbers"),
        ("huge_float", "finite numbers"),
        ("huge_beta", "decode_prior"),
        ("digits", "not a JSON file"),
        ("big_file", "bytes"),
    ],
)
def test_offsets_files_beyond_reason_are_clear_errors(case, needle, tmp_path):
    """A 200,000-deep nesting gave RecursionError, an integer of 10^400 OverflowError, and offsets
    of ±1e308 passed the check and then made every score infinite."""
    path = offsets_file(tmp_path)
    text = path.read_text()
    if case == "deep":
        path.write_text(text[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    elif case == "huge_int":
        path.write_text(text.replace('"offsets": [0.0, 0.0', '"offsets": [' + "1" + "0" * 400 + ", 0.0"))
    elif case == "huge_float":
        offsets_file(tmp_path, offsets=[1e308, -1e308, 0, 0, 0, 0])
    elif case == "huge_beta":
        offsets_file(tmp_path, decode_prior=1e300)
    elif case == "digits":  # over Python's 4300-digit limit for int()
        path.write_text(text.replace('"offsets": [0.0, 0.0', '"offsets": [' + "1" * 5000 + ", 0.0"))
    else:
        path.write_text(text[:-1] + ', "pad": "' + "x" * (2 << 20) + '"}')
    with deadline(30), pytest.raises(UserError, match=needle) as exc:
        calibration.load_offsets(str(path))
    assert len(str(exc.value)) < 400  # the message does not print the file back


# -- 22: an offsets file is tied to its model --------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted(wc_infonce, sources, tmp_path_factory):
    """Offsets fitted on the continuous model (one round)."""
    path = tmp_path_factory.mktemp("fitted") / "off.json"
    load_tool("calibrate_offsets").main(
        [
            "-model",
            str(wc_infonce),
            "-src",
            str(sources[0]),
            "-tgt",
            str(sources[1]),
            "-output",
            str(path),
            "-rounds",
            "1",
        ]
    )
    return path


def test_offsets_record_their_model_and_are_refused_for_another(fitted, wc_infonce, wc_ce, sources, tmp_path, capsys):
    capsys.readouterr()
    record = json.loads(fitted.read_text())["model"]
    assert record["kind"] == "continuous" and len(record["tgt_vocab_sha256"]) == 64
    out = tmp_path / "o.txt"
    base = ["-src", sources[0], "-output", out, "-freq_offsets", fitted]
    code, _, err = run_cli(translate.main, ["-model", wc_infonce, *base], capsys)
    assert code == 0 and "warning" not in err
    code, _, err = run_cli(translate.main, ["-model", wc_ce, *base], capsys)
    assert code == 2 and assert_one_error(err, "fitted on a continuous model", "softmax")
    # the same kind of model with other training counts (the bins): another vocabulary
    data = torch.load(wc_infonce, weights_only=True)
    data["vocab"]["tgt_counts"] = [c * 2 for c in data["vocab"]["tgt_counts"]]
    other = tmp_path / "other.pt"
    torch.save(data, other)
    out.unlink()
    code, _, err = run_cli(translate.main, ["-model", other, *base], capsys)
    assert code == 2 and assert_one_error(err, "another target vocabulary") and not out.exists()
    with pytest.raises(UserError, match="fitted on a continuous model"):
        onmt_cont.load(str(wc_ce), freq_offsets=str(fitted))
    # a file written before the record: accepted, with a warning line
    old = json.loads(fitted.read_text())
    del old["model"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    code, _, err = run_cli(translate.main, ["-model", wc_ce, *base[:-1], tmp_path / "old.json"], capsys)
    warnings = [line for line in err.splitlines() if not line.startswith(("translated ", "decoded "))]
    assert code == 0 and len(warnings) == 1 and warnings[0].startswith("warning: -freq_offsets")


# -- 5: no script or tool writes over one of its inputs -------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(wc_data, wc_infonce, tmp_path_factory):
    """Copies of every kind of input the scripts read, in one folder."""
    d = tmp_path_factory.mktemp("inputs")
    for name in (
        "train.fr",
        "train.en",
        "valid.fr",
        "valid.en",
        "d.vocab.pt",
        "d.train.0.pt",
        "d.valid.0.pt",
        "d.vocab.tgt.txt",
        "emb.pt",
    ):
        shutil.copy(wc_data["dir"] / name, d / name)
    shutil.copy(wc_infonce, d / "m_last.pt")
    shutil.copy(wc_infonce, d / "m_epoch_1.pt")
    (d / "lex.txt").write_text("chat cat\n")
    (d / "align.txt").write_text("0-0\n" * 20)
    (d / "cfg.yaml").write_text("{}\n")
    (d / "codes.bpe").write_text("#version: 0.2\n")
    (d / "vec.vec").write_text("2 2\na 1 0\nb 0 1\n")
    (d / "train.log").write_text("log\n")
    shared = d / "shared" / "multi30k"
    shared.mkdir(parents=True)
    (shared / "train.fr").write_text("une ligne\n")
    calibration.save_offsets(str(d / "off.json"), [0.0] * 6, 0.0, [1.0] * 6, "test")
    return d


def script(name):
    return {
        "preprocess": preprocess.main,
        "embeddings_to_torch": embeddings_to_torch.main,
        "build_lexicon": build_lexicon.main,
        "translate": translate.main,
        "train": train.main,
    }.get(name) or load_tool(name).main


# (script, the other arguments, the output flag, the input flag): the output is given the input's path
PRE = ["-train_src", "train.fr", "-train_tgt", "train.en", "-valid_src", "valid.fr", "-valid_tgt", "valid.en"]
OVERWRITES = [
    *[
        (
            "preprocess",
            PRE
            + [
                "-tgt_emb",
                "vec.vec",
                "-src_vocab",
                "d.vocab.tgt.txt",
                "-tgt_vocab",
                "d.vocab.tgt.txt",
                "-config",
                "cfg.yaml",
            ],
            "-save_data",
            f,
        )
        for f in ("-train_src", "-train_tgt", "-valid_src", "-valid_tgt", "-tgt_emb", "-src_vocab", "-config")
    ],
    ("preprocess", PRE + ["-tgt_vocab", "d.vocab.tgt.txt"], "-save_data", "-tgt_vocab"),
    ("preprocess", PRE + ["-save_data", "d"], None, "-train_src=d.train.0.pt"),  # a file the prefix writes
    *[
        (
            "embeddings_to_torch",
            [
                "-emb_file_dec",
                "vec.vec",
                "-emb_file_enc",
                "vec.vec",
                "-dict_file",
                "d.vocab.pt",
                "-from_model",
                "m_last.pt",
            ],
            "-output_file",
            f,
        )
        for f in ("-emb_file_dec", "-dict_file", "-from_model")
    ],
    *[
        (
            "build_lexicon",
            ["-src", "train.fr", "-tgt", "train.en", "-alignments", "align.txt", "-output", "lexo.txt"],
            o,
            f,
        )
        for o in ("-output", "-save_alignments")
        for f in ("-src", "-tgt", "-alignments")
    ],
    ("build_lexicon", ["-src", "train.fr", "-tgt", "train.en", "-output", "lex.txt"], "-save_alignments", "-output"),
    *[
        (
            "translate",
            [
                "-model",
                "m_last.pt",
                "-src",
                "valid.fr",
                "-tgt",
                "valid.en",
                "-replace_unk",
                "-lookup_dict",
                "lex.txt",
                "-freq_offsets",
                "off.json",
                "-tgt_emb_extend",
                "vec.vec",
                "-tgt_emb_extend_vocab",
                "d.vocab.tgt.txt",
                "-src_bpe_codes",
                "codes.bpe",
                "-config",
                "cfg.yaml",
            ],
            "-output",
            f,
        )
        for f in (
            "-model",
            "-src",
            "-tgt",
            "-lookup_dict",
            "-freq_offsets",
            "-tgt_emb_extend",
            "-tgt_emb_extend_vocab",
            "-src_bpe_codes",
            "-config",
        )
    ],
    *[
        (
            "train",
            [
                "-data",
                "d",
                "-save_model",
                "out_m",
                "-tgt_emb",
                "emb.pt",
                "-train_from",
                "m_last.pt",
                "-config",
                "cfg.yaml",
            ],
            o,
            f,
        )
        for o, f in (
            ("-save_model", "-data"),
            ("-save_model", "-tgt_emb"),
            ("-log_file", "-tgt_emb"),
            ("-log_file", "-train_from"),
            ("-log_file", "-config"),
            ("-save_config", "-config"),
            ("-save_config", "-train_from"),
        )
    ],
    ("train", ["-data", "d", "-save_model", "out_m", "-tgt_emb", "emb.pt"], None, "-log_file=d.vocab.pt"),
    ("train", ["-data", "d", "-save_model", "m", "-tgt_emb", "emb.pt"], None, "-log_file=m_last.pt"),
    ("average_models", ["-models", "m_last.pt", "m_epoch_1.pt"], "-output", "-models"),
    ("average_models", ["-last", "1", "-prefix", "m"], None, "-output=m_epoch_1.pt"),
    *[
        (
            "calibrate_offsets",
            ["-model", "m_last.pt", "-src", "valid.fr", "-tgt", "valid.en", "-match", "train.log"],
            "-output",
            f,
        )
        for f in ("-model", "-src", "-tgt", "-match")
    ],
    ("make_sample", ["-shared", "shared"], None, "-out=shared/multi30k"),
    ("m30k_report", ["-results", "shared"], "-png", "-results"),
    *[
        ("rare_word_f1", ["-train", "train.en", "-ref", "valid.en", "-hyp", "valid.fr"], "-json", f)
        for f in ("-train", "-ref", "-hyp")
    ],
    *[
        ("replacement_accuracy", ["-model", "m_last.pt", "-src", "valid.fr", "-lookup_dict", "lex.txt"], "-json", f)
        for f in ("-model", "-src", "-lookup_dict")
    ],
    ("score_calibration", ["-model", "m_last.pt", "-data", "d", "-refit_epochs", "1"], "-output", "-model"),
    ("score_calibration", ["-model", "m_last.pt", "-data", "d", "-refit_epochs", "1"], None, "-output=d.valid.0.pt"),
    *[
        ("strip_final_punct", ["-src", "valid.fr", "-tgt", "valid.en", "-out_src", "a.txt", "-out_tgt", "b.txt"], o, f)
        for o in ("-out_src", "-out_tgt")
        for f in ("-src", "-tgt")
    ],
    ("strip_final_punct", ["-src", "valid.fr", "-tgt", "valid.en", "-out_src", "a.txt"], "-out_tgt", "-out_src"),
    *[
        ("time_to_quality", ["-ref", "train.log", "-runs", "valid.en", "-best_from", "valid.fr"], "-plot", f)
        for f in ("-ref", "-runs", "-best_from")
    ],
    ("train_vectors", ["-input", "vec.vec"], "-output", "-input"),
]


def case_id(case):
    return f"{case[0]}:{case[2] or ''}{case[3]}"


@pytest.mark.parametrize("case", OVERWRITES, ids=case_id)
def test_no_output_over_an_input(case, inputs, capsys, monkeypatch):
    """Each output given the path of one of the script's inputs: exit 2, one error line, the
    input unchanged and nothing new written (translate.py -output m_last.pt replaced the
    checkpoint with text, calibrate_offsets.py -output the model)."""
    name, args, out_flag, in_flag = case
    monkeypatch.chdir(inputs)
    before = digest(inputs)
    argv = list(args)
    if out_flag is None:  # "-flag=path": an output named as an input file (a prefix's file)
        argv.append(in_flag)
        victim = in_flag.split("=", 1)[1]
    else:
        victim = argv[argv.index(in_flag) + 1] if in_flag in argv else None
        argv += [out_flag, victim]
    code, _, err = run_cli(script(name), argv, capsys)
    assert code == 2, err
    assert_one_error(err, "which this run")
    assert digest(inputs) == before  # nothing changed, nothing new
    assert victim


def test_kill_resume_never_empties_a_folder_it_did_not_make(tmp_path, capsys, monkeypatch):
    """lab/tools/kill_resume.py empties -out first: not a folder with other files, nor the sample it reads."""
    kr = load_tool("kill_resume")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n")
    code, _, err = run_cli(kr.main, ["-out", mine], capsys)
    assert code == 2 and assert_one_error(err, "not a work folder") and (mine / "thesis.tex").exists()
    sample = tmp_path / "root" / "data"
    sample.mkdir(parents=True)
    (sample / "train.fr").write_text("x\n")
    monkeypatch.setattr(kr, "ROOT", str(tmp_path / "root"))
    code, _, err = run_cli(kr.main, ["-out", sample], capsys)
    assert code == 2 and assert_one_error(err, "sample") and (sample / "train.fr").exists()
