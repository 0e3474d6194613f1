"""train.py against careless and hostile input (issue 56, the training side): resuming without
losing the best model, the moving average, TensorBoard and log files that cannot be written,
read-only folders, seeds, checkpoints that lack parts, shards of another vocabulary, signals,
and every numeric flag with nan, inf, -inf, 0, a huge and a negative value."""

import argparse
import contextlib
import errno
import importlib.util
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from onmt_cont.bin import embeddings_to_torch, preprocess, train
from onmt_cont.inputters.corpus import read_shard, vocab_fingerprint
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.models.checkpoint import load_checkpoint
from onmt_cont.train.average import ParameterAverage
from onmt_cont.train.step import Trainer
from onmt_cont.utils import numbers
from tests.helpers import ROOT, memorisation_data, tool_path

TINY = [
    "-rnn_size",
    "8",
    "-word_vec_size",
    "8",
    "-dropout",
    "0",
    "-batch_size",
    "5",
    "-valid_batch_size",
    "8",
    "-seed",
    "1",
    "-learning_rate",
    "0.01",
    "-report_every",
    "1",
    "-epochs",
    "10",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The memorisation corpus (20 pairs, 4 batches of 5), every sentence ending with "." (for
    -drop_final_punct), an 8-d table."""
    return memorisation_data(tmp_path_factory.mktemp("hostile"), 8, final=".")


def args(data, out, *extra, steps=2):
    """A tiny model trained for ``steps`` steps into ``out``/m, logging to ``out``/train.log."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        "-data",
        data["prefix"],
        "-tgt_emb",
        data["emb"],
        "-save_model",
        str(out / "m"),
        "-log_file",
        str(out / "train.log"),
        *TINY,
        "-train_steps",
        str(steps),
        *extra,
    ]


def exits_2(capsys, argv, *needles, main=train.main):
    """main(argv) exits 2 with one 'error: ...' line naming every needle, no traceback. -> stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and [line.startswith("error: ") for line in err.splitlines()].count(True) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def log(out):
    return (out / "train.log").read_text(encoding="utf-8")


def validations_returning(monkeypatch, losses):
    """Trainer.validate reports these losses, one per validation, in order."""
    real, it = Trainer.validate, iter(losses)

    def fake(self, batches):
        return {**real(self, batches), "loss": next(it)}

    monkeypatch.setattr(Trainer, "validate", fake)


def dies_at(monkeypatch, step, exc=None):
    """Trainer.train_step raises ``exc`` (default: RuntimeError("worker lost"); called instead
    when callable) at its ``step``-th call."""
    real, calls = Trainer.train_step, [0]
    exc = RuntimeError("worker lost") if exc is None else exc

    def step_or_die(self, *a, **k):
        calls[0] += 1
        if calls[0] == step:
            if callable(exc):
                exc()
            else:
                raise exc
        return real(self, *a, **k)

    monkeypatch.setattr(Trainer, "train_step", step_or_die)


# --- item 4: -resume auto chooses by step and keeps a better PREFIX_best.pt --------------------------


def test_resume_auto_chooses_by_step_and_keeps_a_better_best(data, tmp_path, monkeypatch, capsys):
    """A run validating and saving every 2 steps dies at step 7, after step 6's validation wrote
    m_best.pt (loss 1.0) but before its checkpoint (removed here): the newest checkpoint is step
    4's. m_step_2.pt is touched (newer by time, older by step). -resume auto goes on from
    m_step_4.pt and says what it found; its validations at steps 6 (3.0) and 8 (2.0) beat what
    step 4 had reached (4.0) but not m_best.pt: it is kept; a loss of 0.5 at step 10 replaces it.
    Before: m_step_2.pt was chosen, and m_best.pt overwritten by worse models."""
    argv = args(data, tmp_path, "-valid_steps", "2", "-save_checkpoint_steps", "2", "-resume", "auto", steps=10)
    validations_returning(monkeypatch, [5.0, 4.0, 1.0])
    dies_at(monkeypatch, 7)
    with pytest.raises(RuntimeError, match="worker lost"):
        train.main(argv)
    for name in ("m_step_6.pt", "m_last.pt"):
        (tmp_path / name).unlink(missing_ok=True)  # as if killed before step 6's checkpoint
    best = load_checkpoint(str(tmp_path / "m_best.pt"))["progress"]
    assert (best["step"], best["best_score"]) == (6, 1.0)
    later = time.time() + 100
    os.utime(tmp_path / "m_step_2.pt", (later, later))
    monkeypatch.undo()
    validations_returning(monkeypatch, [3.0, 2.0, 0.5])
    capsys.readouterr()
    run = train.main(argv)
    text = log(tmp_path)
    assert "-resume auto: found 2 checkpoint(s)" in text and "m_step_2.pt, m_step_4.pt" in text
    assert f"continuing from {tmp_path / 'm_step_4.pt'}, step 4" in text and "resumed from step 4" in text
    assert f"kept {tmp_path / 'm_best.pt'} (step 6, validation loss 1.0000)" in text
    assert text.count("written before the restart) is better: kept") == 2
    assert run.progress["step"] == 10
    best = load_checkpoint(str(tmp_path / "m_best.pt"))["progress"]
    assert (best["step"], best["best_score"]) == (10, 0.5)


# --- item 7: -average_every N > 1 ----------------------------------------------------------------


def test_average_every_n_is_close_to_the_trained_parameters_not_the_init(data, tmp_path, monkeypatch):
    """12 steps with -average_every 6: the saved average is within a tenth of the way from the
    trained parameters to the initial ones (before: a third of it was the random initialisation)."""
    init = {}
    real_init = ParameterAverage.__init__

    def record(self, model, decay, every=1):
        init.update({n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad})
        real_init(self, model, decay, every)

    monkeypatch.setattr(ParameterAverage, "__init__", record)
    train.main(args(data, tmp_path, "-average_decay", "1e-4", "-average_every", "6", "-valid_steps", "100", steps=12))
    ckpt = load_checkpoint(str(tmp_path / "m_last.pt"))
    names = list(ckpt["train_model"])

    def dist(a, b):
        return math.sqrt(sum(float(((a[n] - b[n]) ** 2).sum()) for n in names))

    avg, trained = ckpt["model"], ckpt["train_model"]
    moved = dist(trained, init)
    assert moved > 0.1
    assert dist(avg, trained) < 0.1 * moved, (dist(avg, trained), moved)


# --- item 10: TensorBoard that cannot be written ----------------------------------------------------


def test_tensorboard_full_disk_warns_once_and_training_goes_on(data, tmp_path, monkeypatch, capsys):
    """The event file's third write fails as a full disk does: one warning, no traceback, training
    ends and writes m_last.pt (before: two tracebacks, one from the writer's thread, and no m_last.pt)."""
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer.record_writer import RecordWriter

    real, calls = RecordWriter.write, [0]

    def write(self, data):
        calls[0] += 1
        if calls[0] >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(RecordWriter, "write", write)
    train.main(args(data, tmp_path, "-tensorboard", "-tensorboard_log_dir", str(tmp_path / "tb"), steps=4))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "Exception in thread" not in err
    assert log(tmp_path).count("cannot write (no space left on device); the TensorBoard scalars are no longer") == 1
    assert "finished at step 4" in log(tmp_path) and (tmp_path / "m_last.pt").exists()


def test_tensorboard_log_dir_that_cannot_be_created_warns(data, tmp_path, capsys):
    """A -tensorboard_log_dir below a file: one warning, training goes on (TensorBoard only observes)."""
    pytest.importorskip("tensorboard")
    (tmp_path / "afile").write_text("x")
    train.main(args(data, tmp_path, "-tensorboard", "-tensorboard_log_dir", str(tmp_path / "afile" / "tb")))
    assert "the TensorBoard scalars are no longer written (training goes on)" in log(tmp_path)
    assert (tmp_path / "m_last.pt").exists()


# --- items 11, 12: folders and log files that cannot be written -------------------------------------


def test_log_file_that_is_a_folder_or_a_pipe(data, tmp_path, capsys):
    """-log_file naming a folder (before: IsADirectoryError after the run was built) or a FIFO
    (before: the open waited for a reader forever): an error at start, nothing written."""
    out = tmp_path / "out"
    argv = args(data, out)
    at = argv.index("-log_file") + 1
    argv[at] = str(tmp_path)
    exits_2(capsys, argv, f"-log_file {tmp_path} is a folder")
    os.mkfifo(tmp_path / "fifo")
    argv[at] = str(tmp_path / "fifo")

    def hang(signum, frame):
        raise TimeoutError("-log_file FIFO: still waiting after 60 s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)  # a hang fails the test, not the suite
    try:
        exits_2(capsys, argv, "is a pipe or a socket")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not list(out.iterdir())


def test_save_model_that_is_a_folder(data, tmp_path, capsys):
    """-save_model runs/ wrote runs/_step_N.pt, hidden files: a prefix is asked for."""
    argv = args(data, tmp_path)
    at = argv.index("-save_model") + 1
    for given in (str(tmp_path), str(tmp_path) + "/"):
        argv[at] = given
        exits_2(capsys, argv, f"-save_model {given} is a folder: -save_model takes a prefix")
    assert not list(tmp_path.iterdir())


READ_ONLY_CHILD = textwrap.dedent("""
    import contextlib, io, json, os, sys
    sys.path.insert(0, {root!r})
    import torch
    torch.set_num_threads(1)
    from onmt_cont.bin import train
    if os.geteuid() != 0:
        os.chmod({ro!r} + "/tb", 0o555)
        os.chmod({ro!r}, 0o555)
    base, ro, results = json.loads({base!r}), {ro!r}, {{}}
    cases = {{
        "save_model": ["-save_model", ro + "/m", "-log_file", {out!r} + "/a.log"],
        "log_file": ["-save_model", {out!r} + "/l", "-log_file", ro + "/train.log"],
        "tensorboard": ["-save_model", {out!r} + "/m", "-log_file", {out!r} + "/c.log", "-tensorboard",
                        "-tensorboard_log_dir", ro + "/tb"],
    }}
    for name, extra in cases.items():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                train.main(base + extra)
                code = 0
            except SystemExit as exc:
                code = exc.code
            except BaseException as exc:
                import traceback
                traceback.print_exc()
                code = "Traceback"
        results[name] = [code, out.getvalue(), err.getvalue()]
    print(json.dumps(results))
""")


def read_only_run(tmp_path, script):
    """Run ``script`` (python) with ``tmp_path``/ro read-only: a read-only bind mount in a mount
    namespace as root (who may write anywhere), chmod 555 otherwise. -> its stdout."""
    ro = tmp_path / "ro"
    if os.geteuid() != 0:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    unshare = shutil.which("unshare")
    mount = f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"
    probe = (
        subprocess.run([unshare, "-m", "sh", "-c", f"{mount} && ! touch {ro}/x 2>/dev/null"], capture_output=True)
        if unshare
        else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root, and no read-only bind mount is possible here (unshare -m)")
    return subprocess.run(
        [unshare, "-m", "sh", "-c", f'{mount} && exec "$0" -c "$1"', sys.executable, script],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_read_only_folders(data, tmp_path):
    """A read-only -save_model folder holding a dead writer's temporary file: an error before step 1
    (before: every step trained, then an OSError traceback, or a PermissionError traceback at
    start from removing that file). -log_file in a read-only folder: an error at start (before: an
    OSError traceback). A read-only -tensorboard_log_dir: one warning, training goes on."""
    ro, out = tmp_path / "ro", tmp_path / "out"
    (ro / "tb").mkdir(parents=True)
    out.mkdir()
    (ro / ".tmp-999999999-abcd1234-m_step_3.pt").write_bytes(b"PK\x03\x04half")
    base = ["-data", data["prefix"], "-tgt_emb", data["emb"], *TINY, "-train_steps", "2"]
    script = READ_ONLY_CHILD.format(root=str(ROOT), ro=str(ro), out=str(out), base=json.dumps(base))
    proc = read_only_run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    code, stdout, err = results["save_model"]
    assert code == 2 and err.startswith(f"error: -save_model {ro}/m: cannot write in the folder {ro}"), results
    assert "step 1:" not in stdout and not (out / "a.log").exists()
    code, stdout, err = results["log_file"]
    assert code == 2 and err.startswith(f"error: -log_file {ro}/train.log: cannot write in the folder {ro}"), results
    assert not (out / "l_last.pt").exists()
    code, stdout, err = results["tensorboard"]
    assert code == 0 and "Traceback" not in stdout + err, results
    assert stdout.count(f"-tensorboard_log_dir {ro}/tb: cannot write") == 1 and (out / "m_last.pt").exists()


# --- item 16: seeds --------------------------------------------------------------------------------


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", ["99999999999999999999999", "-1", "4294967296"])
@pytest.mark.parametrize(
    "script",
    [
        "train",
        "preprocess",
        "embeddings_to_torch",
        "bin_bootstrap",
        "paired_bootstrap",
        "score_calibration",
        "train_vectors",
    ],
)
def test_seed_out_of_range(data, tmp_path, capsys, script, seed):
    """-seed beyond 64 bits was a ValueError traceback in train.py; a negative one a traceback in
    embeddings_to_torch.py and the tools (numpy). Every script takes 0 .. 2^32 - 1 and says so."""
    mains = {"train": train.main, "preprocess": preprocess.main, "embeddings_to_torch": embeddings_to_torch.main}
    main = mains.get(script) or load_tool(script).main
    argv = args(data, tmp_path) if script == "train" else []
    with pytest.raises(SystemExit) as exc:
        main([*argv, "-seed", seed])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"argument -seed: a seed is an integer from 0 to {numbers.SEED_MAX}" in err, err


def test_seed_bounds_are_accepted(data, tmp_path):
    for seed in ("0", str(numbers.SEED_MAX)):
        run = train.main(args(data, tmp_path / seed, "-seed", seed, steps=1))
        assert run.progress["step"] == 1


# --- items 17, 23: checkpoints that lack parts, averages, another run's ------------------------------


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    """A 4-step run with checkpoints at steps 2 and 4 (its folder)."""
    out = tmp_path_factory.mktemp("trained")
    train.main(args(data, out, "-save_checkpoint_steps", "2", steps=4))
    return out


def edited(src, dst, **changes):
    """``src`` with keys set (None: removed), saved as ``dst``."""
    ckpt = load_checkpoint(str(src))
    for key, value in changes.items():
        if value is None:
            ckpt.pop(key)
        else:
            ckpt[key] = value
    torch.save(ckpt, dst)
    return dst


@pytest.mark.parametrize("part", ["progress", "vocab"])
def test_train_from_a_checkpoint_without_progress_or_vocab(data, trained, tmp_path, capsys, part):
    """Before: KeyError traceback. Now: what is missing, before anything is written."""
    bad = edited(trained / "m_step_4.pt", tmp_path / "bad.pt", **{part: None})
    out = tmp_path / "out"
    exits_2(
        capsys,
        args(data, out, "-train_from", str(bad)),
        f"-train_from {bad}: cannot go on from it",
        f"it holds no {part}",
    )
    assert not list(out.iterdir())


def test_train_from_without_rng_optimiser_or_an_average_says_so(data, trained, tmp_path):
    """A checkpoint without random states (before: KeyError), without optimiser state, or written
    by tools/average_models.py: training goes on from it, and the log says what is not restored."""
    ckpt = edited(
        trained / "m_step_4.pt", tmp_path / "avg.pt", rng=None, optim=None, averaged=["m_step_2.pt", "m_step_4.pt"]
    )
    run = train.main(args(data, tmp_path / "out", "-train_from", str(ckpt), steps=6))
    assert run.progress["step"] == 6
    text = log(tmp_path / "out")
    for needle in ("it is an average of 2 checkpoints", "it holds no optimiser state", "it holds no random states"):
        assert f"warning: -train_from {ckpt}: {needle}" in text


def test_resume_auto_passes_over_what_cannot_be_resumed_exactly(data, trained, tmp_path):
    """-resume auto with a newer m_step_8.pt without progress (before: KeyError), an m_step_6.pt
    averaged by tools/average_models.py (before: resumed silently, fresh optimiser) and an
    m_last.pt without random states: it goes on from m_step_4.pt and names each file passed over."""
    for name in ("m_step_2.pt", "m_step_4.pt"):
        shutil.copy(trained / name, tmp_path / name)
    edited(trained / "m_step_4.pt", tmp_path / "m_step_8.pt", progress=None)
    edited(trained / "m_step_4.pt", tmp_path / "m_last.pt", rng=None)
    edited(trained / "m_step_4.pt", tmp_path / "m_epoch_6.pt", optim=None, averaged=["a.pt", "b.pt"])
    run = train.main(args(data, tmp_path, "-resume", "auto", steps=5))
    text = log(tmp_path)
    assert "passed over m_step_8.pt (it holds no progress" in text
    assert "m_epoch_6.pt (it is an average of 2 checkpoints" in text and "m_last.pt (it holds no random states" in text
    assert f"continuing from {tmp_path / 'm_step_4.pt'}, step 4" in text and run.progress["step"] == 5


@pytest.mark.parametrize("kind", ["option", "vocabulary"])
def test_resume_auto_on_another_runs_checkpoint_gives_the_right_advice(data, trained, tmp_path, capsys, kind):
    """-resume auto finding another model's checkpoint under -save_model: the error says it belongs
    to another run and to give this one its own -save_model (before: it named -train_from, which was
    not given, and advised leaving the option out, which would train the other model on)."""
    shutil.copy(trained / "m_step_4.pt", tmp_path / "m_step_4.pt")
    if kind == "vocabulary":
        ckpt = load_checkpoint(str(tmp_path / "m_step_4.pt"))
        ckpt["vocab"]["tgt"] = list(reversed(ckpt["vocab"]["tgt"]))
        torch.save(ckpt, tmp_path / "m_step_4.pt")
    extra = ["-rnn_size", "16"] if kind == "option" else []
    err = exits_2(
        capsys,
        args(data, tmp_path, "-resume", "auto", *extra),
        f"the checkpoint {tmp_path / 'm_step_4.pt'} found by -resume auto under -save_model",
        "it belongs to another run: give this one its own -save_model",
    )
    assert "-train_from" not in err
    if kind == "option":
        assert "or, to continue that run, leave -rnn_size out to resume" in err


# --- items 18, 24: shards of another vocabulary ------------------------------------------------------


@pytest.fixture()
def copy_of_data(data, tmp_path):
    """The data's files in a folder of the test's own (shards may be edited there)."""
    d = tmp_path / "data"
    d.mkdir()
    for f in Path(data["dir"]).glob("d.*"):
        shutil.copy(f, d / f.name)
    return {**data, "prefix": str(d / "d")}


def relist(prefix):
    """A shard edited by hand no longer matches PREFIX.shards.json: list the edited set again, as
    preprocess.py would, so that the check under test is the one that answers."""
    import glob as globlib

    from onmt_cont.inputters.corpus import write_manifest

    write_manifest(prefix, len(globlib.glob(globlib.escape(prefix) + ".train.*.pt")))


def test_validation_shard_with_ids_beyond_the_vocabulary(copy_of_data, tmp_path, capsys):
    """Before: an IndexError at the first validation, after training. Now: an error at start that
    names the shard."""
    path = copy_of_data["prefix"] + ".valid.0.pt"
    shard = read_shard(path)
    shard["tgt"][0] = 40
    torch.save(shard, path)
    relist(copy_of_data["prefix"])
    out = tmp_path / "out"
    exits_2(capsys, args(copy_of_data, out), f"{path}: target word id 40 is outside the 17 words")
    assert not list(out.iterdir())


def test_training_shard_of_another_vocabulary(copy_of_data, tmp_path, capsys):
    """Shards record the fingerprint of their vocabularies (preprocess.py); a training shard of
    another vocabulary of the same size (ids in range, other words: before, trained on silently)
    is refused at start. A shard of an older preprocess.py (no fingerprint) is taken, with a warning."""
    src_vocab, tgt_vocab, _ = load_vocabs(copy_of_data["prefix"] + ".vocab.pt")
    path = copy_of_data["prefix"] + ".train.0.pt"
    shard = read_shard(path)
    assert shard["vocab_fingerprint"] == vocab_fingerprint(src_vocab, tgt_vocab)
    assert read_shard(copy_of_data["prefix"] + ".valid.0.pt")["vocab_fingerprint"] == shard["vocab_fingerprint"]
    tgt_vocab.itos = [*tgt_vocab.itos[:4], *reversed(tgt_vocab.itos[4:])]
    torch.save({**shard, "vocab_fingerprint": vocab_fingerprint(src_vocab, tgt_vocab)}, path)
    relist(copy_of_data["prefix"])
    out = tmp_path / "out"
    exits_2(
        capsys,
        args(copy_of_data, out),
        f"{path} was made with other vocabularies than",
        "its word ids would mean other words",
    )
    assert not list(out.iterdir())
    shard.pop("vocab_fingerprint")
    torch.save(shard, path)
    relist(copy_of_data["prefix"])
    train.main(args(copy_of_data, out))
    assert f"warning: {path} record no vocabulary fingerprint (made by an older preprocess.py)" in log(out)


# --- item 19: SIGINT and SIGTERM ---------------------------------------------------------------------


def test_ctrl_c_ends_with_one_line_saying_what_was_kept(data, tmp_path, monkeypatch, capsys):
    """Ctrl-C at step 5 (checkpoints every 2 steps): exit 130, no traceback, one line naming the
    last checkpoint and how to go on (before: a KeyboardInterrupt traceback)."""
    dies_at(monkeypatch, 6, KeyboardInterrupt())
    try:
        train.main(args(data, tmp_path, "-save_checkpoint_steps", "2", steps=10))
        raised = None
    except BaseException as exc:  # noqa: BLE001 (a KeyboardInterrupt must not end the test session)
        raised = exc
    assert isinstance(raised, SystemExit) and raised.code == 130, repr(raised)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    line = f"stopped by SIGINT at step 5; the last checkpoint is {tmp_path / 'm_step_4.pt'} (step 4); the 1 step(s) "
    assert line in log(tmp_path) and "-resume auto" in log(tmp_path)


def test_sigterm_to_one_process_leaves_a_line_in_the_log(data, tmp_path, monkeypatch):
    """SIGTERM to a single train.py at step 3: exit 143, and the log says it was stopped and what
    was kept (before: Python's default, the process ended without a word)."""

    def untouched(signum, frame):  # what SIGTERM does here if train.py installs no handler of its own
        raise AssertionError("train.py left SIGTERM to the default")

    previous = signal.signal(signal.SIGTERM, untouched)
    try:
        dies_at(monkeypatch, 3, lambda: os.kill(os.getpid(), signal.SIGTERM))
        with pytest.raises(SystemExit) as exc:
            train.main(args(data, tmp_path, steps=10))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exc.value.code == 143
    line = "stopped by SIGTERM at step 2, before this run's first checkpoint; nothing of it was written"
    assert line in log(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_a_real_train_py(data, tmp_path, signum):
    """The same with a real train.py process, signalled once it has written a checkpoint."""
    argv = args(data, tmp_path, "-save_checkpoint_steps", "1", steps=100000)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 120
    while not (tmp_path / "m_step_2.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in out + err
    assert f"stopped by {signal.Signals(signum).name} at step" in log(tmp_path)
    assert "the last checkpoint is" in log(tmp_path)


# --- item 21 and the numeric flags ---------------------------------------------------------------


def test_non_finite_and_vanishing_floats(data, tmp_path, capsys):
    """-max_grad_norm nan turned clipping off silently; -average_decay 1e-400 became 0 (no average);
    a YAML .nan passes through the same check."""
    out = tmp_path / "out"
    exits_2(capsys, args(data, out, "-max_grad_norm", "nan"), "argument -max_grad_norm: expected a finite number")
    exits_2(capsys, args(data, out, "-average_decay", "1e-400"), "'1e-400' is too small for a float: it would be 0.0")
    exits_2(capsys, args(data, out, "-learning_rate", "1e400"), "expected a finite number", "beyond the float range")
    (tmp_path / "c.yaml").write_text("max_grad_norm: .nan\n")
    exits_2(capsys, args(data, out, "-config", str(tmp_path / "c.yaml")), "max_grad_norm", "nan")
    assert not list(out.iterdir())
    with pytest.raises(argparse.ArgumentTypeError):
        numbers.finite_float("-1e-999")
    assert numbers.finite_float("0.0e-999") == 0.0 and numbers.finite_float("1e-300") == 1e-300


def test_a_model_too_large_for_the_memory_is_refused_at_once(data, tmp_path, capsys):
    """-rnn_size 100000 (310 billion parameters) allocated for minutes or took the machine's
    memory: the model is sized on the meta device first."""
    start = time.time()
    exits_2(capsys, args(data, tmp_path / "out", "-rnn_size", "100000"), "trained parameters", "GiB", "choose smaller")
    assert time.time() - start < 20


# Options a flag needs to be used at all (otherwise it is refused as unused, which tests nothing).
CONTEXT = {
    **dict.fromkeys(
        ["-heads", "-transformer_ff", "-attention_dropout", "-alignment_layer"],
        ["-encoder_type", "transformer", "-decoder_type", "transformer", "-heads", "2"],
    ),
    "-max_positions": [
        "-encoder_type",
        "transformer",
        "-decoder_type",
        "transformer",
        "-heads",
        "2",
        "-position_encoding",
        "learned",
    ],
    **dict.fromkeys(["-joint_dim", "-joint_sample", "-joint_dropout"], ["-generator", "joint"]),
    "-rewe_hidden": ["-rewe_lambda", "1"],
    "-margin": ["-loss", "maxmargin"],
    "-num_negatives": ["-loss", "margin_random"],
    "-num_sampled": ["-loss", "infonce", "-negatives", "random,inbatch"],
    "-ann_candidates": ["-loss", "infonce", "-negatives", "gold_nn"],
    "-prefix_window": ["-loss", "infonce", "-negatives", "prefix,inbatch"],
    "-temperature": ["-loss", "infonce"],
    "-contrastive_weight": ["-loss", "nllvmf_nce"],
    "-table_lr_scale": ["-loss", "infonce", "-train_table"],
    **dict.fromkeys(["-lambda1", "-lambda2"], ["-loss", "nllvmf"]),
    **dict.fromkeys(["-seq_unlikelihood_ngram", "-seq_unlikelihood_every"], ["-seq_unlikelihood", "0.5"]),
    "-warmup_steps": ["-decay_method", "noam"],
    "-average_every": ["-average_decay", "0.1"],
    "-early_stopping_window": ["-early_stopping", "2"],
}
VALUES = ["nan", "inf", "-inf", "0", "99999999999999999999999", "-1"]


def numeric_flags():
    """Every option of train.py that takes a number (int, float, -gpu, -alignment_layer, -seed)."""
    kinds = (int, float, numbers.finite_float, numbers.seed)
    return sorted(
        a.option_strings[0]
        for a in train.build_parser()._actions
        if a.type in kinds or getattr(a.type, "__name__", "") in ("gpu_option", "parse_alignment_layer")
    )


def test_numeric_flags_are_all_covered():
    flags = numeric_flags()
    assert {"-rnn_size", "-dropout", "-max_grad_norm", "-seed", "-gpu", "-threads"} <= set(flags)
    assert not set(CONTEXT) - set(flags)  # no stale entry


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("flag", numeric_flags())
def test_every_numeric_flag_with_hostile_values(data, tmp_path, capsys, flag, value):
    """Each ends, within a minute, with exit 0 and a finite model, or with exit 2 and one error:
    line, no traceback. Accepted values train 2 steps of a tiny model."""
    argv = args(data, tmp_path, *CONTEXT.get(flag, []), "-valid_steps", "0", "-epochs", "1", flag, value)

    def hang(signum, frame):
        raise TimeoutError(f"{flag} {value}: still running after 60 s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    try:
        code = 0
        with contextlib.redirect_stdout(io.StringIO()):
            train.main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 0:
        ckpt = load_checkpoint(str(tmp_path / "m_last.pt"))
        assert ckpt["progress"]["step"] <= 4
        assert all(torch.isfinite(t).all() for t in ckpt["model"].values() if t.is_floating_point())
    else:
        assert code == 2
        assert [line.startswith("error: ") for line in err.splitlines()].count(True) == 1, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_checkpoint_is_written_waits_for_it(data, tmp_path, monkeypatch, signum):
    """A signal that arrives inside torch.save (a real train.py took one there: the half-written zip's
    own error masked the stop, and a traceback came out) waits until the checkpoint is written; then
    the run stops with its one line, and that checkpoint is whole and named as the last one kept."""
    from onmt_cont.models import checkpoint as checkpoint_mod

    real = checkpoint_mod.atomic_torch_save
    calls = []

    def signalled_mid_write(obj, path):
        calls.append(path)
        if len(calls) == 2:
            os.kill(os.getpid(), signum)  # delivered while the file is being written
        return real(obj, path)

    monkeypatch.setattr(checkpoint_mod, "atomic_torch_save", signalled_mid_write)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(SystemExit) as exc:
            train.main(args(data, tmp_path, "-save_checkpoint_steps", "2", steps=10))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exc.value.code == 128 + signum
    second = calls[1]
    assert torch.load(second, weights_only=True)["progress"]["step"] == 4  # written whole
    assert f"the last checkpoint is {second}" in log(tmp_path)
