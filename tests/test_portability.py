"""What depends on the CPU: -amp's start-up probe (oneDNN's bf16 LSTM needs AVX-512) and -threads."""

import os
import platform
import shutil
import subprocess
import sys
import time

import pytest
import torch

from onmt_cont import training
from onmt_cont.bin import preprocess, train, translate
from onmt_cont.losses import build_loss
from onmt_cont.models.model import build_model
from onmt_cont.trainer import TrainingForward
from onmt_cont.utils import threads
from onmt_cont.utils.amp import avoid_per_shape_attention, probe_autocast, require_autocast
from onmt_cont.utils.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["-loss", "nllvmf", "-tie_emb", "-rnn_size", "32", "-word_vec_size", "16", "-brnn", "-dropout", "0.1",
        "-batch_size", "16", "-train_steps", "2", "-valid_steps", "100", "-save_checkpoint_steps", "100"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The first 100 pairs of the shipped sample (data/), preprocessed, and a random unit target table."""
    d = tmp_path_factory.mktemp("portability")
    for lang in ("fr", "en"):
        with open(os.path.join(ROOT, "data", f"train.{lang}"), encoding="utf-8") as f:
            lines = [next(f) for _ in range(100)]
        (d / f"train.{lang}").write_text("".join(lines), encoding="utf-8")
    preprocess.main(["-train_src", str(d / "train.fr"), "-train_tgt", str(d / "train.en"), "-valid_src",
                     str(d / "train.fr"), "-valid_tgt", str(d / "train.en"), "-save_data", str(d / "data")])
    n = len(torch.load(d / "data.vocab.pt", weights_only=True)["tgt"]["tokens"])
    table = torch.nn.functional.normalize(torch.randn(n, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return d


def tiny_model(sample):
    """The model and loss train.py builds from TINY on the sample."""
    opt = train.build_parser().parse_args(TINY + ["-tgt_emb", str(sample / "emb.pt")])
    training.check_options(opt)
    vocab = torch.load(sample / "data.vocab.pt", weights_only=True)
    table = torch.load(sample / "emb.pt", weights_only=True)
    model = build_model(opt, len(vocab["src"]["tokens"]), len(vocab["tgt"]["tokens"]), table)
    return model, build_loss(opt, model.generator.table)


def test_probe_leaves_no_trace_and_is_cheap(sample):
    """Cheap: one forward (and backward) of two 3-word sentences, whatever the model and data; a
    count, not a wall-clock limit, which a busy machine would break."""
    model, loss_fn = tiny_model(sample)
    forward = TrainingForward(model).eval()
    rng = torch.get_rng_state()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    shapes = []
    hook = forward.register_forward_pre_hook(lambda module, args: shapes.append([tuple(a.shape) for a in args]))
    probe_autocast(forward, loss_fn, torch.device("cpu"), torch.bfloat16)  # works or not: no trace either way
    hook.remove()
    assert shapes == [[(2, 3), (2,), (2, 5)]]  # src, its lengths, tgt (<s> + 3 words + </s>)
    assert torch.equal(torch.get_rng_state(), rng)  # dropout ran, but training's random stream is untouched
    assert not forward.training and not model.training
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


class _FailingUnderAutocast(torch.nn.Module):
    """Raises what oneDNN raises on an AVX2-only CPU, but only under autocast."""

    def __init__(self, model):
        super().__init__()
        self.inner = TrainingForward(model)

    def forward(self, *args):
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive. "
                               "Run workload with environment variable ONEDNN_VERBOSE=all to get additional "
                               "diagnostic information.")
        return self.inner(*args)


def test_probe_failure_names_the_limitation_and_the_flags(sample):
    model, loss_fn = tiny_model(sample)
    with pytest.raises(UserError) as exc:
        require_autocast(_FailingUnderAutocast(model), loss_fn, torch.device("cpu"), torch.bfloat16)
    msg = str(exc.value)
    for part in ("-amp", "cannot run the LSTM in bfloat16", "could not create a primitive descriptor",
                 "AVX-512", "Drop -amp", "-gpu"):
        assert part in msg, msg
    assert "ONEDNN_VERBOSE" not in msg


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available(),
                    reason="ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN on x86 CPUs only")
def test_amp_with_onednn_capped_at_avx2_refuses_cleanly(sample, tmp_path):
    """oneDNN reads ONEDNN_MAX_CPU_ISA once, at start-up: hence a subprocess. On x86 CPUs oneDNN's
    bf16 LSTM needs AVX-512, so capped at AVX2 train.py -amp refuses, before writing anything."""
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "train.py", "-data", str(sample / "data"), "-tgt_emb", str(sample / "emb.pt"),
           "-save_model", str(out / "m"), "-log_file", str(out / "train.log"), *TINY, "-amp", "-threads", "1"]
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("error: -amp: this CPU cannot run the LSTM in bfloat16 under autocast")
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in res.stderr and "Drop -amp" in res.stderr
    assert os.listdir(out) == []  # no log file, no checkpoint, no temporary file


@pytest.fixture
def keep_threads(monkeypatch, tmp_path):
    saved = torch.get_num_threads()
    monkeypatch.setenv(threads.CLAIMS_ENV, str(tmp_path / "claims"))  # this test's claims only
    yield monkeypatch
    if threads._share is not None:
        threads._share.release()
        threads._share = None
    torch.set_num_threads(saved)


def test_threads_flag_values(keep_threads):
    keep_threads.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.apply_threads(1) == 1 and torch.get_num_threads() == 1
    keep_threads.setattr(threads, "busy_cores", lambda: 0.0)
    keep_threads.setattr(threads.os, "cpu_count", lambda: 8)
    assert threads.auto_threads() == 8
    keep_threads.setattr(threads, "busy_cores", lambda: 3.0)  # three other processes hold three cores
    assert threads.auto_threads() == 5
    assert threads.auto_threads(processes=2) == 2
    keep_threads.setenv("LOCAL_WORLD_SIZE", "2")
    assert threads.apply_threads(None) == 2
    keep_threads.setenv("OMP_NUM_THREADS", "3")  # an explicit setting wins over the guess
    assert threads.apply_threads(None) == 3
    with pytest.raises(UserError, match="-threads must be from 0"):
        threads.apply_threads(-1)


def test_claims_folder_default_and_the_suites_own(monkeypatch):
    """Without ONMT_CONT_THREAD_CLAIMS the claims go to one folder per user in the temp folder; "off"
    turns them off. The suite itself claims in a temporary folder of its own (conftest.py), never in
    that default one, which the user's own jobs share."""
    import tempfile

    suites = os.environ[threads.CLAIMS_ENV]
    default = os.path.join(tempfile.gettempdir(), f"onmt_cont-threads-{os.getuid()}")
    assert threads.claims_dir() == suites != default and os.path.basename(suites).startswith("onmt_cont-test-claims-")
    monkeypatch.delenv(threads.CLAIMS_ENV)
    assert threads.claims_dir() == default
    monkeypatch.setenv(threads.CLAIMS_ENV, "off")
    assert threads.claims_dir() is None


def claim(directory, pid, n, started=None, ppid=1):
    os.makedirs(directory, exist_ok=True)
    started = threads.start_time(pid) if started is None else started
    with open(os.path.join(directory, str(pid)), "w", encoding="utf-8") as f:
        f.write(f"{n} {started or '-'} {ppid}\n")


@pytest.mark.skipif(threads.fcntl is None, reason="claims need flock()")
def test_default_threads_follow_other_jobs_claims(keep_threads, tmp_path):
    """The default counts threads other live jobs have claimed as busy (even while they sleep), drops claims of
    dead processes, lowers a training run's threads to its share while others claim theirs and restores them when
    they finish; an explicit count is claimed and kept."""
    keep_threads.delenv("OMP_NUM_THREADS", raising=False)
    keep_threads.setattr(threads, "busy_cores", lambda: 0.0)  # the other jobs are asleep, as when starting
    keep_threads.setattr(threads.os, "cpu_count", lambda: 4)
    claims = tmp_path / "claims"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        claim(claims, dead.pid, 3)
        claim(claims, other.pid, 3, started="1")  # a live process that is not the claimant (its pid reused)
        assert threads.apply_threads(None) == 4  # neither claim counts
        assert sorted(os.listdir(claims)) == [".lock", str(os.getpid())]
        assert (claims / str(os.getpid())).read_text().split()[0] == "4"
        claim(claims, other.pid, 3)
        assert threads.refresh_threads() is None  # read at most every REFRESH_S seconds
        assert threads._share.refresh(now=time.monotonic() + threads.REFRESH_S) == (4, 1)
        assert torch.get_num_threads() == 1 and (claims / str(os.getpid())).read_text().split()[0] == "1"
        assert threads.apply_threads(None) == 1  # a job starting now: the sleeping claimant's 3 are busy
        other.kill()
        other.wait()
        assert threads._share.refresh(now=time.monotonic() + 2 * threads.REFRESH_S) is None  # its start-up choice: 1
        assert threads.apply_threads(None) == 4  # the dead claimant's claim is dropped
        assert sorted(os.listdir(claims)) == [".lock", str(os.getpid())]
        claim(claims, os.getppid(), 2)
        share = threads._share
        assert share.refresh(now=time.monotonic() + 3 * threads.REFRESH_S) == (4, 2)
        os.remove(claims / str(os.getppid()))
        assert share.refresh(now=time.monotonic() + 4 * threads.REFRESH_S) == (2, 4)  # back up to its choice
        claim(claims, dead.pid, 3)
        assert threads.apply_threads(2) == 2  # an explicit count is claimed too, so default jobs count it
        assert (claims / str(os.getpid())).read_text().split()[0] == "2"
        assert not (claims / str(dead.pid)).exists()  # and a killed process's claim is cleared
        claim(claims, os.getppid(), 3)
        assert threads._share.refresh(now=time.monotonic() + 5 * threads.REFRESH_S) is None  # and never changes
        assert torch.get_num_threads() == 2
    finally:
        other.kill()
        other.wait()


@pytest.mark.skipif(threads.fcntl is None, reason="claims need flock()")
def test_thread_claims_of_torchrun_siblings_and_a_lost_folder(keep_threads, tmp_path):
    """With torchrun's LOCAL_WORLD_SIZE the cores are already divided among the job's processes (which share a
    parent), so their claims are not counted again; other jobs' are. A claims folder that becomes unusable
    mid-run stops the following and keeps the count, it does not end the run."""
    keep_threads.setattr(threads, "busy_cores", lambda: 0.0)
    keep_threads.setattr(threads.os, "cpu_count", lambda: 8)
    claims = tmp_path / "siblings"
    share = threads.ThreadShare(str(claims), processes=2)
    claim(claims, os.getppid(), 4, ppid=share.ppid)  # a sibling: the same parent (a live process to stand for it)
    assert share.start() == 4  # 8 cores / 2 processes; the sibling's 4 are not counted again
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim(claims, other.pid, 4, ppid=other.pid)  # another job
        assert share.refresh(now=time.monotonic() + threads.REFRESH_S) == (4, 2)  # (8 - 4) / 2
    finally:
        other.kill()
        other.wait()
    share.release()
    blocker = tmp_path / "gone"
    lost = threads.ThreadShare(str(blocker), processes=1)
    assert lost.start() >= 1
    shutil.rmtree(blocker)
    blocker.write_text("a file where the folder was")  # makedirs and open now fail with OSError
    assert lost.refresh(now=time.monotonic() + threads.REFRESH_S) is None and lost.fixed
    keep_threads.setenv(threads.CLAIMS_ENV, str(blocker / "claims"))  # unusable from the start: the guess alone
    keep_threads.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.apply_threads(None) == 8 and threads._share is None
    keep_threads.setenv(threads.CLAIMS_ENV, "off")
    assert threads.apply_threads(3) == 3 and threads._share is None


RACER = """
import os, sys, time
sys.path.insert(0, {root!r})
from onmt_cont.utils import threads
threads.os.cpu_count = lambda: 2
threads.busy_cores = lambda: 0.0  # as when both start in the same second: neither sees the other run
first = threads.apply_threads(None)


def meet(name):  # wait for the other job to get here too
    open(os.path.join({out!r}, f"{{name}}.{{os.getpid()}}"), "w").close()
    while len([n for n in os.listdir({out!r}) if n.startswith(name)]) < 2:
        time.sleep(0.01)


meet("chosen")
threads._share.refresh(now=time.monotonic() + threads.REFRESH_S)
meet("refreshed")  # both claims stay until both have refreshed
print(first, threads.torch.get_num_threads())
"""


@pytest.mark.slow
@pytest.mark.skipif(threads.fcntl is None, reason="claims need flock()")
def test_two_jobs_started_together_share_the_cores(tmp_path):
    """Two default jobs started at once on 2 cores: they take turns choosing, the second sees the first's claim
    and takes 1, and the first drops to 1 at its next refresh (without claims both took 2 and crawled)."""
    out = tmp_path / "ready"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env[threads.CLAIMS_ENV] = str(tmp_path / "claims")
    code = RACER.format(root=ROOT, out=str(out))
    jobs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = sorted(tuple(map(int, job.communicate(timeout=120)[0].split())) for job in jobs)
    assert [job.returncode for job in jobs] == [0, 0]
    assert results == [(1, 1), (2, 1)]
    assert sorted(os.listdir(tmp_path / "claims")) == [".lock"]  # each removed its claim at exit


def test_training_logs_a_thread_change(sample, tmp_path, keep_threads, monkeypatch):
    changes = iter([(2, 1)])
    monkeypatch.setattr(training, "refresh_threads", lambda: next(changes, None))
    train.main(["-data", str(sample / "data"), "-tgt_emb", str(sample / "emb.pt"), "-save_model",
                str(tmp_path / "m"), *TINY, "-log_file", str(tmp_path / "train.log")])
    assert "threads 2 -> 1: other jobs now claim more cores" in (tmp_path / "train.log").read_text()


def test_translate_follows_claims_per_batch(sample, tmp_path, keep_threads, monkeypatch):
    train.main(["-data", str(sample / "data"), "-tgt_emb", str(sample / "emb.pt"), "-save_model",
                str(tmp_path / "m"), *TINY])
    calls = []
    monkeypatch.setattr(translate, "refresh_threads", lambda: calls.append(1))
    translate.main(["-model", str(tmp_path / "m_last.pt"), "-src", str(sample / "train.fr"), "-output",
                    str(tmp_path / "pred.en"), "-max_length", "3", "-batch_size", "30"])
    # once for the empty lines (none here: done at once) and once per batch: 100 sentences in batches of 30, 30, 30, 10
    assert len(calls) == 5


def test_train_and_translate_take_threads(sample, tmp_path, keep_threads, capsys):
    run = train.main(["-data", str(sample / "data"), "-tgt_emb", str(sample / "emb.pt"), "-save_model",
                      str(tmp_path / "m"), *TINY, "-threads", "2"])
    assert run.progress["step"] == 2 and "device cpu (2 threads)" in capsys.readouterr().out
    translate.main(["-model", str(tmp_path / "m_last.pt"), "-src", str(sample / "train.fr"), "-output",
                    str(tmp_path / "pred.en"), "-threads", "1", "-max_length", "3"])
    assert torch.get_num_threads() == 1
    with pytest.raises(SystemExit) as exc:
        translate.main(["-model", str(tmp_path / "m_last.pt"), "-src", str(sample / "train.fr"), "-output",
                        str(tmp_path / "pred2.en"), "-threads", "-2"])
    assert exc.value.code == 2 and not (tmp_path / "pred2.en").exists()


def test_amp_on_a_gpu_switches_off_cudnn_attention():
    """Under -amp on a GPU, cuDNN's attention (a plan built per new batch shape: 503 ms against 22 per update on an
    H100) is switched off, and the log says so; in float32 or on the CPU nothing changes."""
    cuda = torch.device("cuda", 0)
    assert torch.backends.cuda.cudnn_sdp_enabled()
    try:
        assert avoid_per_shape_attention(torch.device("cpu"), torch.bfloat16) is None
        assert avoid_per_shape_attention(cuda, None) is None
        assert torch.backends.cuda.cudnn_sdp_enabled()
        note = avoid_per_shape_attention(cuda, torch.bfloat16)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert note.startswith("-amp: cuDNN's attention is switched off")
        assert avoid_per_shape_attention(cuda, torch.float16) is None  # already off: said once
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
