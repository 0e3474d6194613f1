"""Crashes, full disks and checkpoints (docs/reliability.md): SIGKILL at random moments and
resume, a full disk while writing checkpoints, translations, shards and tables (simulated, and a
real tmpfs where this process may mount one), and files that are not the checkpoint expected."""

import ast
import errno
import importlib.util
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from onmt_cont.bin import embeddings_to_torch, preprocess, train, translate
from onmt_cont.models.checkpoint import load_checkpoint, newest_checkpoint
from onmt_cont.train.step import Trainer
from tests.helpers import ROOT, tool_path


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


kr = load_tool("kill_resume")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """200 pairs of the sample, a tied 300-d fastText table, and a 6-step model trained on them."""
    d = tmp_path_factory.mktemp("sample")
    data_args = kr.prepare_data(str(d / "data"), n_train=200, n_valid=40)
    model_dir = d / "model"
    model_dir.mkdir()
    train.main(kr.train_args(data_args, str(model_dir / "m"), steps=6) + ["-save_checkpoint_steps", "3"])
    return {
        "dir": d,
        "args": data_args,
        "data": data_args[1],
        "emb": data_args[3],
        "model": model_dir / "m_last.pt",
        "src": d / "data" / "valid.fr",
    }


def exits_2(capsys, main, argv, *needles):
    """main(argv) exits 2 with 'error: ...' naming every needle, and no traceback. -> stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def temp_files(directory):
    return [f for f in os.listdir(directory) if f.startswith((".tmp-", ".preprocess-"))]


# --- SIGKILL and resume --------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(sample, tmp_path):
    """Two SIGKILLs of train.py subprocesses (seeded: one 0-30 ms after a random PREFIX_step_K.pt
    appears, one inside a checkpoint write, half the file on disk), each followed by a resume from
    the newest loadable checkpoint: after each kill every checkpoint on disk loads; at the end every
    checkpoint (parameters, optimiser, progress, RNG) equals an uninterrupted run's bit for bit, and
    the half-written temporary file is gone. lab/tools/kill_resume.py runs the larger sweep."""
    steps = 12
    ref = tmp_path / "ref"
    ref.mkdir()
    train.main(kr.train_args(sample["args"], str(ref / "m"), steps=steps))  # in-process, one thread (conftest)
    records = kr.run_killed(
        sample["args"], str(tmp_path / "killed"), kills=2, seed=3, steps=steps, log=lambda line: None, fork=True
    )
    assert len(records) == 2
    assert all(r["loadable"] >= 1 for r in records)
    in_write = [r for r in records if r["where"].startswith("inside checkpoint write")]
    assert len(in_write) == 1 and len(in_write[0]["temps"]) == 1, records  # the half-written file
    assert kr.compare(str(ref), str(tmp_path / "killed")) == []


@pytest.mark.parametrize("loss", ["nllvmf_nce", "ce"])
def test_validation_does_not_change_training(sample, tmp_path, loss):
    """Validating every 4 steps or only at the epoch's end (10 steps) leaves step 12's parameters, optimiser and
    random states the same bit for bit: nllvmf_nce draws random candidate words on validation too, from a fixed
    seed and on the side; ce draws nothing. Two validations of the same parameters score the same."""
    runs = {}
    for every in ("4", "1000"):
        (tmp_path / every).mkdir()
        argv = kr.train_args(
            sample["args"],
            str(tmp_path / every / "m"),
            loss=loss,
            steps=12,
            extra=["-valid_steps", every, "-save_checkpoint_steps", "12"],
        )
        runs[every] = train.main(argv)
    a, b = (load_checkpoint(str(tmp_path / every / "m_step_12.pt")) for every in ("4", "1000"))
    for key in ("model", "optim", "rng"):
        assert kr._equal(a[key], b[key]), key + kr._max_diff(a[key], b[key])
    first, second = runs["4"].validate(), runs["4"].validate()
    assert first["loss"] == second["loss"]


def test_kill_resume_forks_only_where_safe(tmp_path, monkeypatch):
    """Where CUDA is visible, kill_resume's fork=True runs train.py in a fresh interpreter instead
    (a fork's backward fails once the parent's autograd has started its device threads)."""
    for safe in (True, False):
        monkeypatch.setattr(kr, "fork_is_safe", lambda safe=safe: safe)
        child = kr.Child(["-h"], str(tmp_path / f"err{safe}.txt"), fork=True)
        assert child.wait() == 0
        assert (child.proc is None) == safe


def test_checkpoint_holds_everything_resume_needs(sample):
    ckpt = torch.load(sample["model"], weights_only=True)
    assert set(ckpt["progress"]) == {
        "step",
        "epoch",
        "shard",
        "batch",
        "best_score",
        "bad_validations",
        "valid_metric",
        "recent_scores",
        "best_window",
    }
    assert ckpt["progress"]["step"] == 6 and ckpt["progress"]["best_score"] is not None
    assert set(ckpt["rng"]) == {"torch", "cuda", "python"}
    random.setstate(ckpt["rng"]["python"])  # what train.py -train_from does with it
    assert ckpt["optim"]["state"] and "scaler" not in ckpt  # no fp16 loss scale on CPU


def test_resuming_an_early_stopped_run_takes_no_step(sample, tmp_path, monkeypatch):
    """A run that stopped early, resumed with the same options, stops at once (it took one more step)."""
    values = iter([1.0, 2.0, 3.0] + [4.0] * 20)
    real = Trainer.validate

    def never_improves(self, batches):
        return {**real(self, batches), "loss": next(values)}

    monkeypatch.setattr(Trainer, "validate", never_improves)
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=40)
    args[args.index("-early_stopping") + 1] = "2"
    first = train.main(args)
    assert first.progress["step"] == 10 and first.progress["bad_validations"] == 2  # validations at 4, 8, 10
    again = train.main(args + ["-train_from", str(tmp_path / "m_last.pt")])
    assert again.progress == first.progress


def test_stale_temporary_files_of_a_dead_writer_are_removed(sample, tmp_path):
    """Only the leftovers of dead processes with this prefix go; a live writer's file stays."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        names = [
            f".tmp-{dead.pid}-abcd1234-m_step_3.pt",
            f".tmp-{live.pid}-abcd1234-m_step_4.pt",
            f".tmp-{dead.pid}-abcd1234-other_step_3.pt",
        ]
        for name in names:
            (tmp_path / name).write_bytes(b"PK\x03\x04half")
        train.main(kr.train_args(sample["args"], str(tmp_path / "m"), steps=1))
        assert sorted(temp_files(tmp_path)) == sorted(names[1:])
    finally:
        live.kill()
        live.wait()


# --- a full disk ---------------------------------------------------------------------------------


def enospc_on_save(monkeypatch, fail_at):
    """torch.save writes half its bytes, then fails as a full disk does, at its ``fail_at``-th call."""
    real, calls = torch.save, [0]

    def save(obj, f, *args, **kwargs):
        calls[0] += 1
        if calls[0] != fail_at:
            return real(obj, f, *args, **kwargs)
        buf = io.BytesIO()
        real(obj, buf, *args, **kwargs)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", save)


def test_resume_auto_continues_a_killed_run(sample, tmp_path, monkeypatch, capsys):
    """train.py -resume auto: the same command line starts fresh, then, after the run died at step
    5, continues from its newest checkpoint (step 4) and ends bitwise equal to an uninterrupted run."""
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=8, extra=["-resume", "auto"])
    real_step, calls = Trainer.train_step, [0]

    def dies_at_5(self, *a, **k):
        calls[0] += 1
        if calls[0] == 5:
            raise RuntimeError("worker lost")
        return real_step(self, *a, **k)

    monkeypatch.setattr(Trainer, "train_step", dies_at_5)
    with pytest.raises(RuntimeError, match="worker lost"):
        train.main(args)
    monkeypatch.undo()
    assert "no checkpoint of" in capsys.readouterr().out
    (tmp_path / "m_epoch_9.pt").write_bytes(b"half a checkpoint")  # newer, damaged: passed over
    run = train.main(args)
    out = capsys.readouterr().out
    assert f"-resume auto: continuing from {tmp_path / 'm_step_4.pt'}, step 4" in out
    assert "-resume auto: passed over m_epoch_9.pt (not a checkpoint written by train.py" in out
    assert "resumed from step 4" in out and run.progress["step"] == 8
    ref = tmp_path / "ref"
    ref.mkdir()
    train.main(kr.train_args(sample["args"], str(ref / "m"), steps=8))
    a = torch.load(tmp_path / "m_last.pt", weights_only=True)["model"]
    b = torch.load(ref / "m_last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(SystemExit):
        train.main(args + ["-train_from", str(tmp_path / "m_step_4.pt")])
    assert "leave out -train_from" in capsys.readouterr().err


def test_disk_full_during_training(sample, tmp_path, capsys, monkeypatch):
    """The third checkpoint write fails: a clear error, the first two intact, nothing half-written;
    resuming from the newest then reaches the same end as an uninterrupted run."""
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=6)
    enospc_on_save(monkeypatch, fail_at=3)
    exits_2(
        capsys,
        train.main,
        args,
        f"cannot write {tmp_path / 'm_step_3.pt'}: no space left on device",
        "m_step_3.pt, if any, is unchanged",
    )
    assert sorted(f for f in os.listdir(tmp_path)) == ["m_step_1.pt", "m_step_2.pt"]
    monkeypatch.undo()
    assert newest_checkpoint(str(tmp_path / "m")) == str(tmp_path / "m_step_2.pt")
    train.main(args + ["-train_from", str(tmp_path / "m_step_2.pt")])
    ref = tmp_path / "ref"
    ref.mkdir()
    train.main(kr.train_args(sample["args"], str(ref / "m"), steps=6))
    assert kr.compare(str(ref), str(tmp_path)) == []


def test_disk_full_writing_translations(sample, tmp_path, capsys, monkeypatch):
    """The old output stays as it was; no temporary file."""
    out = tmp_path / "out.txt"
    out.write_text("an earlier translation\n", encoding="utf-8")
    real_open = open

    class FullDisk(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full_open(path, mode="r", *args, **kwargs):
        if "w" in mode:
            real_open(path, mode, *args, **kwargs).close()
            return FullDisk()
        return real_open(path, mode, *args, **kwargs)

    import onmt_cont.translate.files as files_module
    import onmt_cont.utils.atomic as atomic_mod

    monkeypatch.setattr(atomic_mod, "open", full_open, raising=False)
    monkeypatch.setattr(files_module, "open", full_open, raising=False)  # it streams into the temp file
    exits_2(
        capsys,
        translate.main,
        ["-model", str(sample["model"]), "-src", str(sample["src"]), "-output", str(out)],
        f"cannot write {out}: no space left on device",
    )
    assert out.read_text(encoding="utf-8") == "an earlier translation\n"
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("fail_at", [1, 2])
def test_disk_full_in_preprocess(sample, tmp_path, capsys, monkeypatch, fail_at):
    """Shard 1 of 2 or the valid shard: nothing of the run is left (no shard, vocabulary or tmp dir)."""
    d = Path(sample["data"]).parent
    argv = [
        "-train_src",
        str(d / "train.fr"),
        "-train_tgt",
        str(d / "train.en"),
        "-valid_src",
        str(d / "valid.fr"),
        "-valid_tgt",
        str(d / "valid.en"),
        "-save_data",
        str(tmp_path / "p"),
        "-shard_size",
        "150",
        "-shuffle",
    ]
    enospc_on_save(monkeypatch, fail_at)
    which = "p.train.0.pt" if fail_at == 1 else "p.train.1.pt"
    exits_2(capsys, preprocess.main, argv, f"cannot write {tmp_path / which}: no space left on device")
    assert os.listdir(tmp_path) == []


def test_disk_full_in_embeddings_to_torch(sample, tmp_path, capsys, monkeypatch):
    enospc_on_save(monkeypatch, fail_at=1)
    exits_2(
        capsys,
        embeddings_to_torch.main,
        [
            "-emb_file_dec",
            str(ROOT / "data" / "en.vec.gz"),
            "-dict_file",
            sample["data"] + ".vocab.pt",
            "-output_file",
            str(tmp_path / "e"),
        ],
        f"cannot write {tmp_path / 'e.dec.pt'}: no space left on device",
    )
    assert os.listdir(tmp_path) == []


def test_disk_full_on_the_second_table_keeps_the_earlier_outputs(sample, tmp_path, capsys, monkeypatch):
    """Issue 69.18: the disk fills while the source table is written, after the target table: the run's
    files are renamed into place only together, so the earlier run's files are all still there and the
    message's "nothing was written" is true (before: e.dec.pt and its missing list were the new run's,
    e.enc.pt the old one's, next to "nothing was written")."""
    vec = str(ROOT / "data" / "en.vec.gz")
    args = [
        "-emb_file_dec",
        vec,
        "-emb_file_enc",
        vec,
        "-dict_file",
        sample["data"] + ".vocab.pt",
        "-output_file",
        str(tmp_path / "e"),
    ]
    names = ["e.dec.missing.txt", "e.dec.pt", "e.enc.missing.txt", "e.enc.pt"]
    for name in names:
        (tmp_path / name).write_text("earlier run\n", encoding="utf-8")
    enospc_on_save(monkeypatch, fail_at=2)
    exits_2(
        capsys,
        embeddings_to_torch.main,
        args,
        f"cannot write {tmp_path / 'e.enc.pt'}: no space left on device",
        "nothing was written",
    )
    assert sorted(os.listdir(tmp_path)) == names
    assert all((tmp_path / name).read_text(encoding="utf-8") == "earlier run\n" for name in names)


REAL_FS_CHILD = textwrap.dedent("""
    import contextlib, io, json, os, subprocess, sys
    import torch
    torch.set_num_threads(1)
    from onmt_cont.bin import preprocess, train, translate
    from onmt_cont.utils.loading import load_checkpoint_data
    args, mnt, sizes = json.loads(sys.argv[1])
    result = {}
    for name, size in sizes.items():
        os.makedirs(os.path.join(mnt, name))
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", os.path.join(mnt, name)], check=True)
    def fill(d):
        # an earlier out.txt, then a filler file that takes every free byte
        with open(os.path.join(d, "out.txt"), "w") as f:
            f.write("an earlier translation\\n")
        try:
            with open(os.path.join(d, "filler"), "wb") as f:
                while True:
                    f.write(b"x" * 1024)
                    f.flush()
        except OSError:
            pass
    fill(os.path.join(mnt, "translate"))
    def run(name, main, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code
        d = os.path.join(mnt, name)
        loads = {}
        for f in sorted(os.listdir(d)):
            if f == "filler":
                continue
            if f.endswith(".txt"):
                loads[f] = open(os.path.join(d, f)).read()
                continue
            try:
                load_checkpoint_data(os.path.join(d, f))
                loads[f] = True
            except Exception:
                loads[f] = False
        result[name] = {"code": code, "err": err.getvalue(), "files": loads}
    run("train", train.main, args["train"] + ["-save_model", os.path.join(mnt, "train", "m")])
    run("translate", translate.main, args["translate"] + ["-output", os.path.join(mnt, "translate", "out.txt")])
    run("preprocess", preprocess.main, args["preprocess"] + ["-save_data", os.path.join(mnt, "preprocess", "p")])
    print(json.dumps(result))
""")


@pytest.mark.slow
def test_disk_full_on_a_real_small_filesystem(sample, tmp_path):
    """tmpfs mounts of a few pages, in a user and mount namespace (unshare -r -m): room for one
    checkpoint, not two; full already (an earlier out.txt and a filler file) for the translations;
    not room for the first shard."""
    unshare = shutil.which("unshare")
    mount = f"mount -t tmpfs -o size=4k tmpfs {tmp_path}"
    probe = subprocess.run([unshare, "-r", "-m", "sh", "-c", mount], capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("this process may not mount a tmpfs (unshare -r -m mount): only the simulated tests ran")
    size = os.path.getsize(sample["model"])
    short_src = tmp_path / "five.fr"  # decoded in no time; the filesystem is full before translate.py starts
    short_src.write_text("".join(sample["src"].read_text(encoding="utf-8").splitlines(True)[:5]), encoding="utf-8")
    d = Path(sample["data"]).parent
    args = {
        "train": kr.train_args(sample["args"], "UNUSED", steps=3),
        "translate": ["-model", str(sample["model"]), "-src", str(short_src), "-max_length", "5"],
        "preprocess": [
            "-train_src",
            str(d / "train.fr"),
            "-train_tgt",
            str(d / "train.en"),
            "-valid_src",
            str(d / "valid.fr"),
            "-valid_tgt",
            str(d / "valid.en"),
        ],
    }
    del args["train"][args["train"].index("-save_model") : args["train"].index("UNUSED") + 1]
    sizes = {"train": f"{(size * 3 // 2) // 4096 * 4096}", "translate": "4k", "preprocess": "4k"}
    proc = subprocess.run(
        [unshare, "-r", "-m", sys.executable, "-c", REAL_FS_CHILD, json.dumps([args, str(tmp_path), sizes])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(
            os.environ,
            OMP_NUM_THREADS="1",  # keep a PYTHONPATH that holds the packages
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        ),
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("train", "translate", "preprocess"):
        assert res[name]["code"] == 2, res
        assert res[name]["err"].startswith("error: cannot write ") and "Traceback" not in res[name]["err"], res
        assert "no space left on device" in res[name]["err"], res
    assert res["train"]["files"] == {"m_step_1.pt": True}, res
    assert res["translate"]["files"] == {"out.txt": "an earlier translation\n"}, res
    assert res["preprocess"]["files"] == {}, res
    assert re.search(r"cannot write \S+/train/m_step_2\.pt", res["train"]["err"]), res


# --- files that are not the checkpoint expected --------------------------------------------------


class RunsCode:
    """Unpickling this runs os.system: what a malicious "checkpoint" holds."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def bad_file(kind, sample, tmp_path):
    """Write (or point at) a file of the given kind. -> (path, what the error must say)."""
    model = sample["model"]
    path = tmp_path / f"{kind}.pt"
    if kind == "truncated":
        data = model.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path, "truncated or corrupt torch.save file"
    if kind == "empty":
        path.write_bytes(b"")
        return path, "empty file"
    if kind == "random_bytes":
        path.write_bytes(random.Random(0).randbytes(5000))
        return path, "not a torch.save file"
    if kind == "text":
        path.write_text("the 0.1 0.2\n", encoding="utf-8")
        return path, "not a torch.save file"
    if kind == "vocab":
        return Path(sample["data"] + ".vocab.pt"), "it looks like a vocabulary file written by preprocess.py"
    if kind == "shard":
        return Path(sample["data"] + ".valid.0.pt"), "it looks like a data shard written by preprocess.py"
    if kind == "table":
        return Path(sample["emb"]), "it looks like an embedding table written by embeddings_to_torch.py"
    if kind == "newer_format":
        ckpt = torch.load(model, weights_only=True)
        ckpt["format_version"] = 2
        torch.save(ckpt, path)
        return path, "checkpoint format 2 (this version of onmt_cont reads 1; the file was written by a newer one)"
    if kind == "pickled_code":
        torch.save({"model": RunsCode(tmp_path / "MARKER"), "opt": {}}, path)
        return path, "holds Python objects other than tensors and plain data; refused without unpickling them"
    if kind == "directory":
        path.mkdir()
        return path, "is a directory"
    raise AssertionError(kind)


BAD_KINDS = [
    "truncated",
    "empty",
    "random_bytes",
    "text",
    "vocab",
    "shard",
    "table",
    "newer_format",
    "pickled_code",
    "directory",
]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_checkpoint_refused(sample, tmp_path, capsys, kind):
    """As train.py -train_from and translate.py -model: exit 2 naming the file and the reason,
    nothing written, and a pickled os.system never runs."""
    path, reason = bad_file(kind, sample, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    exits_2(
        capsys,
        train.main,
        kr.train_args(sample["args"], str(out / "m"), steps=2) + ["-train_from", str(path)],
        str(path),
        reason,
    )
    exits_2(
        capsys,
        translate.main,
        ["-model", str(path), "-src", str(sample["src"]), "-output", str(out / "o.txt")],
        str(path),
        reason,
    )
    assert os.listdir(out) == []
    assert not (tmp_path / "MARKER").exists()


def test_checkpoint_given_as_table_or_vocabulary(sample, tmp_path, capsys):
    """A checkpoint as -tgt_emb (train.py), as -dict_file (embeddings_to_torch.py), and as -data."""
    ckpt = str(sample["model"])
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=2)
    args[args.index("-tgt_emb") + 1] = ckpt
    exits_2(capsys, train.main, args, f"-tgt_emb {ckpt}", "embeddings_to_torch.py")
    exits_2(
        capsys,
        embeddings_to_torch.main,
        ["-emb_file_dec", str(ROOT / "data" / "en.vec.gz"), "-dict_file", ckpt, "-output_file", str(tmp_path / "e")],
        ckpt,
        "not a vocabulary file written by preprocess.py",
    )
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=2)
    args[args.index("-data") + 1] = ckpt
    exits_2(capsys, train.main, args, f"-data {ckpt}", "prefix")
    assert os.listdir(tmp_path) == []


def test_pickled_code_refused_by_every_loader(sample, tmp_path, capsys):
    """The same file as vocabulary (-dict_file), as a shard and as -tgt_emb: never unpickled."""
    path, reason = bad_file("pickled_code", sample, tmp_path)
    exits_2(
        capsys,
        embeddings_to_torch.main,
        [
            "-emb_file_dec",
            str(ROOT / "data" / "en.vec.gz"),
            "-dict_file",
            str(path),
            "-output_file",
            str(tmp_path / "e"),
        ],
        str(path),
        reason,
    )
    args = kr.train_args(sample["args"], str(tmp_path / "m"), steps=2)
    args[args.index("-tgt_emb") + 1] = str(path)
    exits_2(capsys, train.main, args, str(path), reason)
    with pytest.raises(Exception, match="refused without unpickling"):
        load_checkpoint(str(path))
    assert not (tmp_path / "MARKER").exists()


def test_every_torch_load_is_weights_only():
    """Each torch.load call in the package, tools/, lab/bench/ and the scripts is utils/loading.py's, with
    weights_only=True; nothing else unpickles (pickle.load(s), numpy's allow_pickle=True)."""
    files = [p for d in ("onmt_cont", "tools", "lab") for p in (ROOT / d).rglob("*.py")] + list(ROOT.glob("*.py"))
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            kwargs = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if (
                func.endswith(("torch.load", "pickle.load", "pickle.loads", "Unpickler"))
                or kwargs.get("allow_pickle") == "True"
            ):
                found.append((path.relative_to(ROOT).as_posix(), func, kwargs.get("weights_only")))
    assert found == [("onmt_cont/utils/loading.py", "torch.load", "True")], found


def test_fp16_loss_scale_is_saved(sample, tmp_path):
    """With -amp -amp_dtype fp16 (GPU only) the GradScaler's state goes into the checkpoint and loads
    under weights_only; checked here with a CPU GradScaler, as this suite has no GPU."""
    from onmt_cont.models.checkpoint import model_from_checkpoint, save_checkpoint

    data = load_checkpoint(str(sample["model"]))
    model, opt, src_vocab, tgt_vocab = model_from_checkpoint(data)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(torch.ones(()))  # creates the scale, as the first training step does
    scaler.update(new_scale=256.0)  # as after a few overflowing steps
    save_checkpoint(str(tmp_path / "m.pt"), model, None, opt, src_vocab, tgt_vocab, data["progress"], scaler=scaler)
    restored = torch.amp.GradScaler("cpu")
    restored.load_state_dict(load_checkpoint(str(tmp_path / "m.pt"))["scaler"])
    assert restored.get_scale() == 256.0


@pytest.mark.slow
def test_torchrun_restarts_resume_from_the_newest_checkpoint(tmp_path, monkeypatch):
    """torchrun --max-restarts with train.py -resume auto survives SIGKILLs of a worker (one inside
    rank 0's checkpoint write): every restart resumes from the newest complete checkpoint, none
    from step 0, and every checkpoint equals the uninterrupted 2-rank run's, bit for bit (each
    rank gets its own random states back; gloo's sum of two ranks is order-free). The ranks'
    generators are made to differ (tests/helpers.py's SKEWED_RANKS: on CPU they would stay equal,
    and a resume giving every rank rank 0's states would pass), and the checkpoints compared
    hold both ranks' states. ~30 s; the tool runs 10 kills:
    python lab/tools/kill_resume.py -out DIR -torchrun 2 -kills 10 -steps 40."""
    from tests.helpers import SKEWED_RANKS

    script = tmp_path / "skewed_ranks.py"
    script.write_text(SKEWED_RANKS.format(root=str(ROOT)))
    train_py, real_cmd = os.path.join(kr.ROOT, "train.py"), kr.torchrun_cmd
    monkeypatch.setattr(
        kr, "torchrun_cmd", lambda *a, **k: [str(script) if c == train_py else c for c in real_cmd(*a, **k)]
    )
    data_args = kr.prepare_data(str(tmp_path / "data"), n_train=120, n_valid=20)
    kr.run_torchrun(data_args, str(tmp_path / "ref"), steps=14)
    records, resumed = kr.run_torchrun(
        data_args, str(tmp_path / "killed"), steps=14, kills=3, seed=2, log=lambda line: None
    )
    assert len(records) == 3 and "inside a checkpoint write" in records[2]["where"]
    # rank 0 may still finish a checkpoint after a kill of rank 1, before torchrun stops it
    assert len(resumed) == 3 and all(r >= rec["newest_step"] > 0 for r, rec in zip(resumed, records, strict=True))
    assert kr.compare(str(tmp_path / "ref"), str(tmp_path / "killed")) == []
    ranks = load_checkpoint(str(tmp_path / "ref" / "m_last.pt"))["rng"]["ranks"]
    assert len(ranks) == 2 and not torch.equal(ranks[0]["torch"], ranks[1]["torch"])


def test_compare_reports_every_difference(sample, tmp_path):
    """lab/tools/kill_resume.py's oracle: a copy of a run compares equal; one float one ulp off in one
    checkpoint's parameters, its optimiser state, progress or random state, a missing checkpoint and
    a leftover temporary file are each reported, and only where they are."""
    ref = sample["model"].parent
    names = sorted(f for f in os.listdir(ref) if f.startswith("m_") and f.endswith(".pt"))
    assert {"m_step_3.pt", "m_step_6.pt", "m_last.pt"} <= set(names)

    def copy(name):
        d = tmp_path / name
        shutil.copytree(ref, d)
        return d

    assert kr.compare(str(ref), str(copy("same"))) == []

    def changed(key, edit):
        d = copy(key)
        ckpt = torch.load(d / "m_step_3.pt", weights_only=True)
        edit(ckpt[key])
        torch.save(ckpt, d / "m_step_3.pt")
        return kr.compare(str(ref), str(d))

    def one_ulp(t):
        flat = t.view(-1)
        flat[0] = torch.nextafter(flat[0], torch.tensor(float("inf"), dtype=flat.dtype))

    first = next(iter(load_checkpoint(str(ref / "m_step_3.pt"))["model"]))
    diffs = changed("model", lambda m: one_ulp(m[first]))
    assert (
        len(diffs) == 1
        and diffs[0].startswith("m_step_3.pt: model differs (largest |difference| ")
        and diffs[0].endswith(f" in {first})")
    ), diffs
    assert changed("optim", lambda o: one_ulp(o["state"][0]["exp_avg"])) == ["m_step_3.pt: optim differs"]
    assert changed("progress", lambda p: p.update(step=p["step"] + 1)) == ["m_step_3.pt: progress differs"]
    assert changed("rng", lambda r: r["torch"].__setitem__(-1, r["torch"][-1] ^ 1)) == ["m_step_3.pt: rng differs"]
    gone = copy("gone")
    os.remove(gone / "m_step_6.pt")
    (gone / ".tmp-m_step_6.pt").write_bytes(b"half a checkpoint")
    assert kr.compare(str(ref), str(gone)) == [
        f"files differ: {names} vs {[n for n in names if n != 'm_step_6.pt']}",
        "temporary files left: ['.tmp-m_step_6.pt']",
    ]
