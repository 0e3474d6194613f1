"""One writer per prefix (onmt_cont/utils/locks.py): a second train.py on a -save_model, or a
second preprocess.py on a -save_data, that another live process is writing is refused at once,
naming that process, and writes nothing; a finished run leaves no lock file; a lock file a killed
run left behind (unlocked) does not stop the next run."""

import os
import signal
import subprocess
import sys
import time

import pytest

from onmt_cont.bin import preprocess, train
from tests.helpers import ROOT, argv, memorisation_data

HOLD = """
import sys, time
from onmt_cont.utils.locks import prefix_lock
with prefix_lock(sys.argv[1], "-x"):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return memorisation_data(tmp_path_factory.mktemp("lockdata"), 8)


def holder(prefix):
    """A live process holding the lock on ``prefix``, as a training in progress does."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(prefix)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_training_on_a_prefix_in_use_is_refused(data, tmp_path, capsys):
    p = holder(tmp_path / "m")
    try:
        with pytest.raises(SystemExit) as exc:
            train.main(argv(data, tmp_path, loss="cosine"))
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"another run (PID {p.pid}) is writing this prefix" in err and "-save_model" in err
        assert sorted(x.name for x in tmp_path.iterdir()) == ["m.lock"]  # the holder's, nothing of ours
    finally:
        p.kill()
        p.wait()
    train.main(argv(data, tmp_path, loss="cosine"))  # the holder is gone: its lock went with it
    assert (tmp_path / "m_last.pt").exists()
    assert not (tmp_path / "m.lock").exists()  # a finished run removes its lock file


def test_a_second_preprocess_on_a_prefix_in_use_is_refused(data, tmp_path, capsys):
    d = data["dir"]
    args = [
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
    ]
    p = holder(tmp_path / "p")
    try:
        with pytest.raises(SystemExit) as exc:
            preprocess.main(args)
        assert exc.value.code == 2
        assert f"PID {p.pid}" in capsys.readouterr().err
        assert sorted(x.name for x in tmp_path.iterdir()) == ["p.lock"]
    finally:
        p.kill()
        p.wait()
    preprocess.main(args)
    assert (tmp_path / "p.vocab.pt").exists() and not (tmp_path / "p.lock").exists()


def test_a_killed_runs_lock_file_does_not_stop_the_next(data, tmp_path):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "m")], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline().strip() == "held"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert (tmp_path / "m.lock").exists()  # SIGKILL: nothing ran to remove it
    train.main(argv(data, tmp_path, loss="cosine"))
    assert (tmp_path / "m_last.pt").exists() and not (tmp_path / "m.lock").exists()


def test_two_trainings_started_together_one_runs(data, tmp_path):
    """Two train.py processes on one -save_model at the same moment: one trains, the other exits 2."""
    cmd = [sys.executable, str(ROOT / "train.py"), *argv(data, tmp_path, loss="cosine", epochs="3", threads="1")]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(2)
    ]
    deadline = time.time() + 300
    results = [(p.wait(max(1, deadline - time.time())), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    assert "is writing this prefix now" in next(err for code, err in results if code == 2)


# --- the shard set as a unit (PREFIX.shards.json) --------------------------------------------------


def _prep(d, prefix, *extra):
    preprocess.main(
        [
            "-train_src",
            str(d / "train.fr"),
            "-train_tgt",
            str(d / "train.en"),
            "-valid_src",
            str(d / "valid.fr"),
            "-valid_tgt",
            str(d / "valid.en"),
            "-save_data",
            str(prefix),
            *extra,
        ]
    )


def test_train_refuses_the_shards_of_two_preprocess_runs(data, tmp_path, capsys):
    """A re-run with another -shard_size killed after its first shard left new and old shards side by
    side, and train.py trained on the mix because the vocabularies matched (was: 24 of 20 pairs)."""
    import json

    from onmt_cont.inputters.corpus import shard_paths

    d = data["dir"]
    _prep(d, tmp_path / "p", "-shard_size", "5")
    listed = json.loads((tmp_path / "p.shards.json").read_text())
    assert [e["file"] for e in listed["train"]] == [f"p.train.{i}.pt" for i in range(4)]
    assert shard_paths(str(tmp_path / "p"), "train") == [str(tmp_path / f"p.train.{i}.pt") for i in range(4)]
    # the killed re-run with -shard_size 8: its first shard written, nothing after it
    _prep(d, tmp_path / "q", "-shard_size", "8")
    (tmp_path / "p.train.0.pt").write_bytes((tmp_path / "q.train.0.pt").read_bytes())
    with pytest.raises(SystemExit) as exc:
        train.main(argv({**data, "prefix": str(tmp_path / "p")}, tmp_path, loss="cosine"))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "p.train.0.pt is not the shard" in err and "mixed" in err


def test_a_finished_rerun_lists_only_its_own_shards(data, tmp_path):
    from onmt_cont.inputters.corpus import shard_paths

    d = data["dir"]
    _prep(d, tmp_path / "p", "-shard_size", "5")
    _prep(d, tmp_path / "p", "-shard_size", "8")
    assert shard_paths(str(tmp_path / "p"), "train") == [str(tmp_path / f"p.train.{i}.pt") for i in range(3)]


def test_a_killed_shuffle_runs_work_folder_is_removed_by_the_next_run(data, tmp_path):
    """(was: a SIGKILLed -shuffle run's .preprocess-* copy of the corpus stayed for ever)"""
    d = data["dir"]
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    p.kill()
    p.wait()
    dead = tmp_path / f".preprocess-{p.pid}-abcd"
    dead.mkdir()
    (dead / "0.txt").write_text("0\t1 2\t3 4\n")
    live = tmp_path / f".preprocess-{os.getpid()}-efgh"
    live.mkdir()
    _prep(d, tmp_path / "p", "-shuffle")
    assert not dead.exists() and live.exists()
