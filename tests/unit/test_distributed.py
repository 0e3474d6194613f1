"""torchrun with 2 gloo processes on CPU matches single-process training."""

import os
import re
import subprocess
import sys

import pytest
import torch

from onmt_cont.bin import preprocess
from tests import helpers
from tests.helpers import SKEWED_RANKS

ROOT = str(helpers.ROOT)  # a str: the scripts below embed it with !r
COMMON = [
    "-loss",
    "nllvmf",
    "-tie_emb",
    "-rnn_size",
    "32",
    "-word_vec_size",
    "16",
    "-brnn",
    "-dropout",
    "0",
    "-batch_size",
    "16",
    "-train_steps",
    "6",
    "-report_every",
    "1",
    "-valid_steps",
    "100",
    "-save_checkpoint_steps",
    "100",
    "-seed",
    "7",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    src = [" ".join(f"s{(i * 7 + j) % 23}" for j in range(3 + i % 5)) for i in range(96)]
    tgt = [" ".join(f"t{(i * 7 + j) % 23}" for j in range(3 + i % 4)) for i in range(96)]
    for name, lines in (("src", src), ("tgt", tgt)):
        (d / f"train.{name}").write_text("\n".join(lines) + "\n")
    preprocess.main(
        [
            "-train_src",
            str(d / "train.src"),
            "-train_tgt",
            str(d / "train.tgt"),
            "-valid_src",
            str(d / "train.src"),
            "-valid_tgt",
            str(d / "train.tgt"),
            "-save_data",
            str(d / "data"),
        ]
    )
    vocab = torch.load(d / "data.vocab.pt", weights_only=True)
    gen = torch.Generator().manual_seed(0)
    table = torch.nn.functional.normalize(torch.randn(len(vocab["tgt"]["tokens"]), 8, generator=gen), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return d


def _train(data, prefix, nproc, *extra, script="train.py"):
    args = [
        script,
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(data / prefix),
        *COMMON,
        *extra,
    ]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    else:
        cmd = [sys.executable, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    losses = [float(x) for x in re.findall(r"step \d+: loss (-?[\d.]+)", out.stdout)]
    return out.stdout, losses


def _models_equal(a, b, atol=0.0):
    a = torch.load(a, weights_only=True)["model"]
    b = torch.load(b, weights_only=True)["model"]
    assert a.keys() == b.keys()
    for name in a:
        same = torch.equal(a[name], b[name]) if atol == 0 else torch.allclose(a[name], b[name], atol=atol)
        assert same, (name, (a[name] - b[name]).abs().max())


@pytest.fixture(scope="module")
def two_ranks(data):
    """torchrun's 2-rank run of COMMON, which several tests compare with: (log, losses); its
    checkpoint is data / "multi_last.pt"."""
    return _train(data, "multi", 2)


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process(data, two_ranks):
    single_log, single = _train(data, "single", 1)
    multi_log, multi = two_ranks
    assert len(single) == len(multi) == 6
    assert multi == pytest.approx(single, abs=1e-3), (single, multi)
    assert "parameters identical on all 2 ranks: yes" in multi_log
    # the log's cosine and nearest-neighbour accuracy are reduced over the ranks: the global batch's
    metrics = r"cosine (-?[\d.]+); nn accuracy ([\d.]+)% on step \d+'s batch \((\d+) tokens\)"
    single_m, multi_m = re.findall(metrics, single_log), re.findall(metrics, multi_log)
    assert len(single_m) == len(multi_m) == 6
    for (c1, a1, n1), (c2, a2, n2) in zip(single_m, multi_m, strict=True):
        # two ranks split the batch, so their products sum in another order: a near-tie in the
        # nearest-neighbour argmax may flip one token (seen once in a loaded full-suite run)
        assert n2 == n1 and float(c2) == pytest.approx(float(c1), abs=1e-3), (single_m, multi_m)
        assert abs(float(a2) - float(a1)) <= 100 / int(n1) + 0.01, (single_m, multi_m)
    assert multi_log.count("finished at step 6") == 1  # only rank 0 logs
    a = torch.load(data / "single_last.pt", weights_only=True)["model"]
    b = torch.load(data / "multi_last.pt", weights_only=True)["model"]
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-4), name
    assert not [f for f in os.listdir(data) if f.startswith(".tmp-")]


@pytest.mark.slow
def test_resume_two_ranks_onto_one(data, two_ranks):
    # dropout 0 and nllvmf draw nothing at random: one process continues a 2-rank run as the
    # uninterrupted single process does, up to the summation order of the split batch
    _, reference = _train(data, "r1ref", 1, "-train_steps", "8")
    args = [
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(data / "r1"),
        "-train_from",
        str(data / "multi_last.pt"),
        *COMMON,
        "-train_steps",
        "8",
    ]
    out = subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "resumed from step 6" in out.stdout and "finished at step 8" in out.stdout
    # 2 ranks wrote it, 1 reads it: said, since with dropout the draws would differ
    assert "every rank continues from rank 0's random states" in out.stdout
    resumed = [float(x) for x in re.findall(r"step \d+: loss (-?[\d.]+)", out.stdout)]
    assert resumed == pytest.approx(reference[6:], abs=1e-3), (reference, resumed)
    _models_equal(data / "r1_last.pt", data / "r1ref_last.pt", atol=1e-4)


@pytest.mark.slow
def test_two_ranks_resume_with_their_own_random_states(data):
    """A 2-rank run with dropout, resumed by 2 ranks, ends bitwise equal to the uninterrupted one:
    each rank gets its own random states back. On CPU the ranks' generators would stay equal (MKL's
    dropout and the fixed-size negative draws take the same number of values on every rank), and
    a resume that gave every rank rank 0's states would pass too; so rank 1 draws one number more
    per update (SKEWED_RANKS), as a GPU's Philox offset grows with each rank's own tensor sizes. A
    resume from rank 0's states then drops other units on rank 1 than the uninterrupted run did."""
    script = data / "skewed_ranks.py"
    script.write_text(SKEWED_RANKS.format(root=ROOT))
    drop = ["-dropout", "0.3", "-save_checkpoint_steps", "3"]
    _, full = _train(data, "drop_full", 2, *drop, script=str(script))
    _train(data, "drop_cut", 2, *drop, "-train_steps", "3", script=str(script))
    ckpt = torch.load(data / "drop_cut_step_3.pt", weights_only=True)
    ranks = ckpt["rng"]["ranks"]
    assert len(ranks) == 2 and not torch.equal(ranks[0]["torch"], ranks[1]["torch"])
    assert torch.equal(ckpt["rng"]["torch"], ranks[0]["torch"])
    log, resumed = _train(
        data, "drop_cut", 2, *drop, "-train_from", str(data / "drop_cut_step_3.pt"), script=str(script)
    )
    assert "resumed from step 3" in log and "resume is not exact" not in log
    assert resumed == full[3:], (full, resumed)
    _models_equal(data / "drop_cut_last.pt", data / "drop_full_last.pt")


class _FakeCuda:
    """torch.cuda's random-state calls on a machine with ``n`` GPUs, each state a distinct tensor."""

    def __init__(self, monkeypatch, n):
        self.states = {i: torch.tensor([100 + i], dtype=torch.uint8) for i in range(n)}

        def index(device):
            return torch.device(device).index if device is not None else 0

        def set_state(state, device="cuda"):
            i = index(device)
            if i not in self.states:
                raise IndexError(f"no CUDA device {i}")
            self.states[i] = state.clone()

        def set_all(states):
            for i, state in enumerate(states):
                set_state(state, torch.device("cuda", i))

        monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": self.states[index(device)].clone())
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [self.states[i].clone() for i in range(n)])
        monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
        monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_all)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


def test_rng_state_per_cuda_device(monkeypatch):
    from onmt_cont.models.checkpoint import restore_rng, rng_state

    # 4 ranks, one GPU each: each saves its own device's state, and gets it back by rank
    gpus = _FakeCuda(monkeypatch, 4)
    saved = [rng_state(torch.device("cuda", r)) for r in range(4)]
    assert [s["cuda"][0].item() for s in saved] == [100, 101, 102, 103]
    rng = dict(saved[0], ranks=saved)
    for r in range(4):
        gpus.states[r] = torch.tensor([0], dtype=torch.uint8)
    for r in range(4):
        assert restore_rng(rng, torch.device("cuda", r), r, 4) is None
    assert [gpus.states[r].item() for r in range(4)] == [100, 101, 102, 103]
    # the same checkpoint resumed on one visible GPU: no IndexError, rank 0's state, and a note
    gpus = _FakeCuda(monkeypatch, 1)
    note = restore_rng(rng, torch.device("cuda", 0), 0, 1)
    assert "written by 4 process(es)" in note and gpus.states[0].item() == 100
    # an older checkpoint: one state per GPU that the saving process could see
    old = {"torch": torch.get_rng_state(), "cuda": [torch.tensor([7 + i], dtype=torch.uint8) for i in range(4)]}
    assert restore_rng(old, torch.device("cuda", 0), 0, 1) is None and gpus.states[0].item() == 7
    # a CPU run resuming a GPU checkpoint takes the CPU generator's state and leaves the devices' alone
    gpus = _FakeCuda(monkeypatch, 4)
    one = dict(saved[2], torch=torch.Generator().manual_seed(3).get_state())
    assert restore_rng(one, torch.device("cpu"), 0, 1) is None  # one writer, one reader: exact
    assert torch.equal(torch.get_rng_state(), one["torch"])
    assert [gpus.states[r].item() for r in range(4)] == [100, 101, 102, 103]
    assert "written by 4 process(es)" in restore_rng(rng, torch.device("cpu"), 0, 1)
    assert [gpus.states[r].item() for r in range(4)] == [100, 101, 102, 103]


def _bf16_probe_error(data):
    """None when this CPU runs the COMMON model under bf16 autocast, else why not (train.py's own
    start-up probe: oneDNN's bf16 LSTM needs AVX-512)."""
    from onmt_cont.bin import train
    from onmt_cont.losses import build_loss
    from onmt_cont.models.model import build_model
    from onmt_cont.train import checks as training
    from onmt_cont.train.step import TrainingForward
    from onmt_cont.utils.amp import probe_autocast

    opt = train.build_parser().parse_args([*COMMON, "-tgt_emb", str(data / "emb.pt")])
    training.check_options(opt)
    vocab = torch.load(data / "data.vocab.pt", weights_only=True)
    model = build_model(
        opt, len(vocab["src"]["tokens"]), len(vocab["tgt"]["tokens"]), torch.load(data / "emb.pt", weights_only=True)
    )
    return probe_autocast(
        TrainingForward(model), build_loss(opt, model.generator.table), torch.device("cpu"), torch.bfloat16
    )


def test_amp_bf16_keeps_the_vmf_loss_finite(data, capsys):
    from onmt_cont.bin import train

    error = _bf16_probe_error(data)
    if error is not None:
        pytest.skip(
            f"this CPU cannot run the LSTM in bfloat16 under autocast (oneDNN's bf16 LSTM needs AVX-512; "
            f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}): {error[:100]}"
        )
    args = [
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(data / "amp"),
        *COMMON,
        "-amp",
        "-amp_dtype",
        "bf16",
    ]
    run = train.main(args)
    losses = [float(x) for x in re.findall(r"step \d+: loss (-?[\d.]+)", capsys.readouterr().out)]
    assert run.progress["step"] == 6 and len(losses) == 6
    assert all(map(lambda x: x == x and abs(x) < 1e6, losses))


def test_amp_fp16_needs_a_gpu(data, capsys):
    from onmt_cont.bin import train

    with pytest.raises(SystemExit) as exc:
        train.main(
            [
                "-data",
                str(data / "data"),
                "-tgt_emb",
                str(data / "emb.pt"),
                "-save_model",
                str(data / "fp16"),
                *COMMON,
                "-amp",
                "-amp_dtype",
                "fp16",
            ]
        )
    assert exc.value.code == 2
    assert "needs a GPU" in capsys.readouterr().err


@pytest.mark.parametrize("keyword", ["this torch's", "broadcast_buffers"])
def test_ddp_does_not_broadcast_the_frozen_table_each_step(tmp_path, monkeypatch, keyword):
    """distributed.wrap turns DDP's per-forward buffer broadcast off (the table is the only
    buffer, and it is frozen); plain DDP, as train.py wrapped it before, sends it at every step.
    "broadcast_buffers" is the keyword torch before 2.13 knows (the GPU machines' 2.11)."""
    import warnings

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from onmt_cont import distributed
    from onmt_cont.models.generators import ContinuousGenerator

    if keyword == "broadcast_buffers":
        monkeypatch.setattr(distributed, "_NO_FORWARD_SYNC", {"broadcast_buffers": False})
        warnings.filterwarnings("ignore", "`broadcast_buffers` is deprecated", FutureWarning)
        warnings.filterwarnings("ignore", "`broadcast_buffers` is deprecated", UserWarning)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        table = torch.nn.functional.normalize(torch.randn(50, 8), dim=-1)
        gen = ContinuousGenerator(16, table)
        assert [name for name, _ in gen.named_buffers()] == ["table"]
        counts = {}
        for name, ddp in (
            ("wrap", distributed.wrap(gen, torch.device("cpu"))),
            ("default", DistributedDataParallel(gen)),
        ):
            calls = []
            original = ddp._distributed_broadcast_coalesced
            monkeypatch.setattr(
                ddp,
                "_distributed_broadcast_coalesced",
                lambda *a, _o=original, _c=calls, **k: _c.append(1) or _o(*a, **k),
            )
            for _ in range(3):
                ddp(torch.randn(4, 16)).sum().backward()
            counts[name] = len(calls)
        assert counts == {"wrap": 0, "default": 3}
    finally:
        dist.destroy_process_group()


def test_no_forward_sync_keyword_follows_the_torch_version():
    """DDP's keyword for "no buffer broadcast at each forward" is the one this torch accepts: torch
    2.11's DDP has no forward_sync_buffers, and every DDP run on the GPU machines failed on it."""
    from onmt_cont.distributed import no_forward_sync

    class Torch211DDP:
        def __init__(self, module, device_ids=None, broadcast_buffers=True, find_unused_parameters=False):
            pass

    class Torch213DDP(Torch211DDP):
        def __init__(
            self,
            module,
            device_ids=None,
            broadcast_buffers=None,
            find_unused_parameters=False,
            forward_sync_buffers=True,
        ):
            pass

    assert no_forward_sync(Torch211DDP) == {"broadcast_buffers": False}
    assert no_forward_sync(Torch213DDP) == {"forward_sync_buffers": False}


def test_lstm_encoder_leaves_bf16_autocast_where_told(monkeypatch):
    """On CUDA the encoder LSTM runs in float32 under bf16 autocast (cuDNN's autocast wrapper would
    run it in unscaled fp16). CPU exercises the same path by adding "cpu" to the devices."""
    from onmt_cont.models import encoder as enc_mod

    enc = enc_mod.RNNEncoder(20, 8, 16)
    src = torch.randint(1, 20, (3, 5))
    lengths = torch.tensor([5, 4, 2])
    assert not enc_mod.fp32_lstm("cpu")  # the CPU's bf16 LSTM is bf16: it stays under autocast
    monkeypatch.setattr(enc_mod, "FP32_LSTM_UNDER_BF16", {"cpu"})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert enc_mod.fp32_lstm("cpu")
        memory, (h, c) = enc(src, lengths)
    assert memory.dtype == h.dtype == c.dtype == torch.float32
    reference, _ = enc(src, lengths)  # no autocast at all: the same float32 computation
    assert torch.equal(memory, reference)
    with torch.autocast("cpu", dtype=torch.float16):
        assert not enc_mod.fp32_lstm("cpu")  # fp16 has its GradScaler: left to autocast


@pytest.mark.slow
def test_ranks_with_different_validation_results_do_not_hang(data, tmp_path):
    """Rank 1's validation loss is made worse at every second validation, so it alone would judge
    "no new best" and skip the save's barrier that rank 0 enters: before rank 0 decided for all,
    the group hung until the timeout. Now the run finishes and saves each new best once."""
    script = tmp_path / "skewed_train.py"
    script.write_text(f"""import os, sys
sys.path.insert(0, {ROOT!r})
from onmt_cont.train import step as trainer
from onmt_cont.bin import train

original, calls = trainer.Trainer.validate, []

def validate(self, batches):
    stats = original(self, batches)
    calls.append(1)
    if os.environ["RANK"] == "1" and len(calls) % 2 == 0:
        stats["loss"] += 1000.0
    return stats

trainer.Trainer.validate = validate
train.main(sys.argv[1:])
""")
    args = [
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(tmp_path / "skew"),
        *COMMON,
        "-valid_steps",
        "2",
    ]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script), *args]
    out = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "finished at step 6" in out.stdout
    assert out.stdout.count("new best validation loss") == 3  # rank 0's losses fall: 3 of 3 are new bests


FAILING_WRITE = """import errno, os, sys
sys.path.insert(0, {root!r})
from onmt_cont.bin import train
from onmt_cont.utils import atomic

Writer, made = atomic._ErrorKeepingWriter, [0]


class Failing(Writer):  # rank 0's third checkpoint write meets a full disk
    def __init__(self, f):
        super().__init__(f)
        made[0] += 1
        self.fail = os.environ["RANK"] == "0" and made[0] == 3

    def write(self, data):
        if self.fail:
            self.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise self.error
        return super().write(data)


atomic._ErrorKeepingWriter = Failing
train.main(sys.argv[1:])
"""


def _run_failing_write(data, tmp_path, source):
    """Train 2 ranks under torchrun with ``source`` (FAILING_WRITE, perhaps changed) as the script, a
    checkpoint every step: the run fails without hanging; its stdout and stderr together.

    "Without hanging": a rank left waiting for the failed one would wait -dist_timeout, set here
    to 600 s (the default), before failing; the whole run is given 180 s. It takes about 5 s on an
    idle machine; a wall-clock limit near that would fail on a busy one."""
    script = tmp_path / "failing_write.py"
    script.write_text(source)
    args = [
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(tmp_path / "m"),
        *COMMON,
        "-save_checkpoint_steps",
        "1",
        "-dist_timeout",
        "600",
    ]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--monitor-interval=0.2",
        str(script),
        *args,
    ]
    try:
        out = subprocess.run(
            cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=180
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the group hung after rank 0's failed write: {exc.stdout}{exc.stderr}")
    assert out.returncode != 0
    return out.stdout + out.stderr


@pytest.mark.slow
def test_a_failed_rank_ends_the_group_quickly(data, tmp_path):
    """Rank 0 cannot write a checkpoint (disk full) while rank 1 waits in the save's barrier: every
    rank ends within seconds (before, rank 0 met rank 1 in a barrier on its way out and the group
    hung), rank 0's error line is printed once, rank 1 says in one line why it stopped (no
    traceback), and the last good checkpoints are intact."""
    text = _run_failing_write(data, tmp_path, FAILING_WRITE.format(root=ROOT))
    assert text.count("error: cannot write") == 1 and "no space left on device" in text
    # rank 1 either sees its barrier break ("another rank ended") or is first ended by torchrun's
    # SIGTERM ("stopped by SIGTERM"); which comes first is a race, so both are one line here
    assert text.count("error: rank 1: stopped") == 1, text
    assert ("error: rank 1: stopped, another rank ended" in text) != ("error: rank 1: stopped by SIGTERM" in text)
    assert "[rank1]: Traceback" not in text and "[rank0]: Traceback" not in text
    left = sorted(f.name for f in tmp_path.iterdir() if f.name.startswith(("m_", ".tmp-")))
    assert left == ["m_step_1.pt", "m_step_2.pt"], left
    for name in left:
        assert "model" in torch.load(tmp_path / name, weights_only=True)


@pytest.mark.slow
def test_a_rank_ended_by_torchrun_says_why(data, tmp_path):
    """The other side of that race, made certain: rank 1 is slow to look at its broken barrier, so
    torchrun's SIGTERM reaches it first. It stops with one error line naming the signal (before,
    Python's default ended it without a word), no traceback, within seconds."""
    slow = (
        "from onmt_cont import distributed\nimport time\n"
        "if os.environ['RANK'] == '1':\n    distributed.peer_failed = lambda exc: time.sleep(60)\n"
    )
    text = _run_failing_write(
        data,
        tmp_path,
        FAILING_WRITE.format(root=ROOT).replace(
            "atomic._ErrorKeepingWriter = Failing\n", "atomic._ErrorKeepingWriter = Failing\n" + slow
        ),
    )
    assert text.count("error: cannot write") == 1
    assert text.count("error: rank 1: stopped by SIGTERM") == 1, text
    assert "another rank ended" not in text
    assert "[rank1]: Traceback" not in text and text.count("Traceback") == 1, text  # torchrun's own ChildFailedError


def test_a_full_disk_stops_the_log_file_with_one_line(tmp_path, capsys):
    """logging's FileHandler prints a traceback for every record it cannot write; -log_file's
    handler says it once and stops writing the file, while stdout goes on."""
    import errno

    from onmt_cont.train import log as training

    training.setup_logging(str(tmp_path / "train.log"))
    handler = next(h for h in training.logger.handlers if isinstance(h, training.LogFileHandler))

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self):
            pass

        def close(self):
            pass

    handler.stream = Full()
    for i in range(5):
        training.logger.info(f"line {i}")
    out, err = capsys.readouterr()
    assert err.count("warning: cannot write the log file") == 1 and "No space left on device" in err
    assert "Traceback" not in err and "Logging error" not in err
    assert out.count("line ") == 5 and handler not in training.logger.handlers
    training.setup_logging(None)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_on_one_machine_match_two_processes(data, two_ranks, tmp_path):
    """Two torchrun agents of one process each (--nnodes 2, a c10d rendezvous on 127.0.0.1), as on
    two machines, train exactly as one agent with two processes: the same losses and a bitwise
    equal model (the README's multi-node section runs these commands)."""
    _, two_procs = two_ranks
    port = _free_port()
    args = [
        "train.py",
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(tmp_path / "m"),
        *COMMON,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc_per_node=1",
                "--rdzv_backend=c10d",
                f"--rdzv_endpoint=127.0.0.1:{port}",
                "--rdzv_id=onmt_test",
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [a.communicate(timeout=240)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outs
    log = next(o for o in outs if "finished at step 6" in o)
    assert "distributed: 2 processes (gloo)" in log and "parameters identical on all 2 ranks: yes" in log
    losses = [float(x) for x in re.findall(r"step \d+: loss (-?[\d.]+)", log)]
    assert losses == two_procs
    _models_equal(tmp_path / "m_last.pt", data / "multi_last.pt")


@pytest.mark.slow
def test_two_ranks_keep_the_same_parameter_average(data):
    """-average_decay under torchrun: every rank averages its (identical) parameters; rank 0's
    checkpoint holds the average and the raw parameters, as one process's does."""
    _, single = _train(data, "avg1", 1, "-average_decay", "0.3")
    multi_log, multi = _train(data, "avg2", 2, "-average_decay", "0.3")
    assert multi == pytest.approx(single, abs=1e-3)
    assert "parameters identical on all 2 ranks: yes" in multi_log
    a = torch.load(data / "avg1_last.pt", weights_only=True)
    b = torch.load(data / "avg2_last.pt", weights_only=True)
    assert a["train_model"].keys() == b["train_model"].keys()
    for name in a["train_model"]:
        assert torch.allclose(a["model"][name], b["model"][name], atol=1e-4), name
        assert torch.allclose(a["train_model"][name], b["train_model"][name], atol=1e-4), name
    assert any(not torch.equal(b["model"][n], b["train_model"][n]) for n in b["train_model"])


@pytest.mark.slow
def test_two_ranks_train_the_same_table(data):
    """-train_table under torchrun: the table's gradient (used by the loss, outside DDP's forward)
    is reduced like the others', so both ranks keep the same table; it moved and has unit rows."""
    log, losses = _train(data, "tt2", 2, "-loss", "nllvmf_nce", "-train_table")
    assert len(losses) == 6 and "parameters identical on all 2 ranks: yes" in log
    table = torch.load(data / "tt2_last.pt", weights_only=True)["model"]["generator.table"]
    start = torch.load(data / "emb.pt", weights_only=True)
    assert not torch.allclose(table, start, atol=1e-3)
    torch.testing.assert_close(table[1:].norm(dim=-1), torch.ones(len(table) - 1))


@pytest.mark.slow
def test_two_ranks_train_with_sequence_unlikelihood(data):
    """-seq_unlikelihood under torchrun: each rank decodes its half of the batch and runs one joined
    forward through DDP, so the ranks stay identical, and the run matches one process (the same
    decodes, the unlikelihood summed over both halves and normalised by the global tokens)."""
    extra = ("-seq_unlikelihood", "1", "-seq_unlikelihood_ngram", "1")
    single_log, single = _train(data, "ul1", 1, *extra)
    multi_log, multi = _train(data, "ul2", 2, *extra)
    assert "parameters identical on all 2 ranks: yes" in multi_log
    share = r"own decodes: ([\d.]+)% of tokens in a repeated n-gram"
    assert re.findall(share, multi_log) == re.findall(share, single_log) != []
    assert any(float(x) > 0 for x in re.findall(share, multi_log))  # something was pushed down
    assert multi == pytest.approx(single, abs=1e-3), (single, multi)
    _models_equal(data / "ul1_last.pt", data / "ul2_last.pt", atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["table", "shards"])
def test_ranks_that_read_other_inputs_stop_together_and_say_which(data, tmp_path, what):
    """Rank 1 is given another target table of the same shape (was: exit 0, 'parameters identical on
    all ranks: yes') or other shards over the same vocabularies (was: a hang until -dist_timeout)."""
    other = tmp_path / "other"
    other.mkdir()
    if what == "table":
        table = torch.load(data / "emb.pt", weights_only=True)
        torch.save(torch.roll(table, 1, dims=1), other / "emb.pt")
        swap = ("-tgt_emb", str(other / "emb.pt"))
        needle = "rank 1: target table (-tgt_emb)"
    else:
        lines = (data / "train.src").read_text().splitlines()
        tgt = (data / "train.tgt").read_text().splitlines()
        (other / "train.src").write_text("\n".join(lines[:60]) + "\n")
        (other / "train.tgt").write_text("\n".join(tgt[:60]) + "\n")
        for suffix in ("vocab.pt", "vocab.src.txt", "vocab.tgt.txt", "valid.0.pt"):
            (other / f"data.{suffix}").write_bytes((data / f"data.{suffix}").read_bytes())
        preprocess.main(
            [
                "-train_src",
                str(other / "train.src"),
                "-train_tgt",
                str(other / "train.tgt"),
                "-valid_src",
                str(data / "train.src"),
                "-valid_tgt",
                str(data / "train.tgt"),
                "-save_data",
                str(other / "fresh"),
                "-src_vocab",
                str(data / "data.vocab.src.txt"),
                "-tgt_vocab",
                str(data / "data.vocab.tgt.txt"),
            ]
        )
        (other / "data.train.0.pt").write_bytes((other / "fresh.train.0.pt").read_bytes())
        swap = ("-data", str(other / "data"))
        needle = "rank 1: training shards"
    script = tmp_path / "per_rank.py"
    script.write_text(f"""import os, sys
sys.path.insert(0, {ROOT!r})
if os.environ.get("RANK") == "1":
    i = sys.argv.index({swap[0]!r})
    sys.argv[i + 1] = {swap[1]!r}
from onmt_cont.bin import train
train.main()
""")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(script),
        "-data",
        str(data / "data"),
        "-tgt_emb",
        str(data / "emb.pt"),
        "-save_model",
        str(tmp_path / "m"),
        *COMMON,
        "-dist_timeout",
        "60",
    ]
    out = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=200
    )
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "torchrun: ranks read other inputs than rank 0" in text and needle in text, text
    assert not list(tmp_path.glob("m_*.pt"))
