"""What depends on the CPU: -amp's start-up probe (oneDNN's bf16 LSTM needs AVX-512) and -threads."""

import os
import platform
import subprocess
import sys

import pytest
import torch

from onmt_cont.bin import train, translate
from onmt_cont.losses import build_loss
from onmt_cont.models.model import build_model
from onmt_cont.train import checks as training
from onmt_cont.train.step import TrainingForward
from onmt_cont.utils import threads
from onmt_cont.utils.amp import avoid_per_shape_attention, probe_autocast, require_autocast
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT, TRANSFORMER_CE, sample_subset

TINY = [
    "-loss",
    "nllvmf",
    "-tie_emb",
    "-rnn_size",
    "32",
    "-word_vec_size",
    "16",
    "-brnn",
    "-dropout",
    "0.1",
    "-batch_size",
    "16",
    "-train_steps",
    "2",
    "-valid_steps",
    "100",
    "-save_checkpoint_steps",
    "100",
]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The first 100 pairs of the shipped sample (data/), preprocessed, and a random unit target table."""
    return sample_subset(tmp_path_factory.mktemp("portability"))


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
            raise RuntimeError(
                "could not create a primitive descriptor for the LSTM forward propagation primitive. "
                "Run workload with environment variable ONEDNN_VERBOSE=all to get additional "
                "diagnostic information."
            )
        return self.inner(*args)


def test_probe_failure_names_the_limitation_and_the_flags(sample):
    model, loss_fn = tiny_model(sample)
    with pytest.raises(UserError) as exc:
        require_autocast(_FailingUnderAutocast(model), loss_fn, torch.device("cpu"), torch.bfloat16)
    msg = str(exc.value)
    for part in (
        "-amp",
        "cannot run the LSTM in bfloat16",
        "could not create a primitive descriptor",
        "AVX-512",
        "Drop -amp",
        "-gpu",
    ):
        assert part in msg, msg
    assert "ONEDNN_VERBOSE" not in msg


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available(),
    reason="ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN on x86 CPUs only",
)
def test_amp_with_onednn_capped_at_avx2_refuses_cleanly(sample, tmp_path):
    """oneDNN reads ONEDNN_MAX_CPU_ISA once, at start-up: hence a subprocess. On x86 CPUs oneDNN's
    bf16 LSTM needs AVX-512, so capped at AVX2 train.py -amp refuses, before writing anything."""
    out = tmp_path / "out"
    out.mkdir()
    cmd = [
        sys.executable,
        "train.py",
        "-data",
        str(sample / "data"),
        "-tgt_emb",
        str(sample / "emb.pt"),
        "-save_model",
        str(out / "m"),
        "-log_file",
        str(out / "train.log"),
        *TINY,
        "-amp",
        "-threads",
        "1",
    ]
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("error: -amp: this CPU cannot run the LSTM in bfloat16 under autocast")
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in res.stderr and "Drop -amp" in res.stderr
    assert os.listdir(out) == []  # no log file, no checkpoint, no temporary file


@pytest.fixture
def keep_threads(monkeypatch):
    saved = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(saved)


def test_threads_need_no_shared_state(keep_threads, tmp_path):
    """Choosing threads reads the environment and the core count only: nothing is written to the temp
    folder (the home-made cross-process claims are gone)."""
    keep_threads.setenv("TMPDIR", str(tmp_path))
    keep_threads.delenv("OMP_NUM_THREADS", raising=False)
    import tempfile

    keep_threads.setattr(tempfile, "tempdir", None)
    assert threads.apply_threads(None) >= 1 and threads.apply_threads(2) == 2
    assert os.listdir(tmp_path) == []


def test_threads_flag_values(keep_threads):
    """-threads N; else OMP_NUM_THREADS; else the cores divided among torchrun's local processes; 0 leaves
    PyTorch's count; nothing is written anywhere (no state shared between processes)."""
    keep_threads.delenv("OMP_NUM_THREADS", raising=False)
    keep_threads.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads.apply_threads(1) == 1 and torch.get_num_threads() == 1
    keep_threads.setattr(threads.os, "cpu_count", lambda: 8)
    assert threads.default_threads() == 8
    assert threads.apply_threads(None) == 8
    keep_threads.setenv("LOCAL_WORLD_SIZE", "2")
    assert threads.apply_threads(None) == 4
    keep_threads.setenv("LOCAL_WORLD_SIZE", "16")  # more processes than cores: one thread each
    assert threads.apply_threads(None) == 1
    keep_threads.setenv("OMP_NUM_THREADS", "3")  # an explicit setting wins over the cores
    assert threads.apply_threads(None) == 3
    torch.set_num_threads(2)
    assert threads.apply_threads(0) == 2  # PyTorch's own count, untouched
    with pytest.raises(UserError, match="-threads must be from 0"):
        threads.apply_threads(-1)
    with pytest.raises(UserError, match="-threads must be from 0"):
        threads.apply_threads(threads.MAX_REQUEST + 1)


def test_train_and_translate_take_threads(sample, tmp_path, keep_threads, capsys):
    run = train.main(
        [
            "-data",
            str(sample / "data"),
            "-tgt_emb",
            str(sample / "emb.pt"),
            "-save_model",
            str(tmp_path / "m"),
            *TINY,
            "-threads",
            "2",
        ]
    )
    assert run.progress["step"] == 2 and "device cpu (2 threads)" in capsys.readouterr().out
    translate.main(
        [
            "-model",
            str(tmp_path / "m_last.pt"),
            "-src",
            str(sample / "train.fr"),
            "-output",
            str(tmp_path / "pred.en"),
            "-threads",
            "1",
            "-max_length",
            "3",
        ]
    )
    assert torch.get_num_threads() == 1
    with pytest.raises(SystemExit) as exc:
        translate.main(
            [
                "-model",
                str(tmp_path / "m_last.pt"),
                "-src",
                str(sample / "train.fr"),
                "-output",
                str(tmp_path / "pred2.en"),
                "-threads",
                "-2",
            ]
        )
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


def _amp_choice(argv, device="cpu"):
    from onmt_cont.train.build import amp_dtype

    opt = train.build_parser().parse_args(argv)
    training.check_options(opt)
    return amp_dtype(opt, torch.device(device))


def test_amp_auto_picks_bfloat16_only_where_it_was_measured_to_pay(monkeypatch):
    from onmt_cont.train import build

    monkeypatch.setattr(build, "fast_bf16_cpu", lambda: (True, "this CPU has avx512_bf16"))
    dtype, note = _amp_choice(TRANSFORMER_CE)
    assert dtype == torch.bfloat16 and note.startswith("-amp auto: bfloat16 autocast (this CPU has avx512_bf16)")
    assert _amp_choice(TRANSFORMER_CE + ["-amp", "false"]) == (None, None)
    assert _amp_choice(TRANSFORMER_CE, "meta") == (None, None)  # not a CPU: float32, as before
    assert _amp_choice(TINY + ["-tgt_emb", "x"]) == (None, None)  # an LSTM: not measured
    continuous = [a for a in TRANSFORMER_CE if a not in ("-loss", "ce", "-label_smoothing", "0.1")] + ["-tgt_emb", "x"]
    assert _amp_choice(continuous + ["-loss", "nllvmf_nce"])[0] == torch.bfloat16  # the continuous presets' loss
    assert _amp_choice(continuous + ["-loss", "nllvmf"]) == (None, None)  # not measured: float32
    monkeypatch.setattr(build, "fast_bf16_cpu", lambda: (False, "ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN from it"))
    dtype, note = _amp_choice(TRANSFORMER_CE)
    assert dtype is None and "float32 (ONEDNN_MAX_CPU_ISA=AVX2 keeps" in note
    assert _amp_choice(TRANSFORMER_CE + ["-amp"]) == (torch.bfloat16, None)  # asked for: whatever the speed
    # ... with a warning in the log where the CPU makes bfloat16 slow
    warning = build.slow_amp_warning(torch.bfloat16, torch.device("cpu"))
    assert warning.startswith("-amp true: bfloat16 autocast although ONEDNN_MAX_CPU_ISA=AVX2")
    assert build.slow_amp_warning(None, torch.device("cpu")) is None
    assert build.slow_amp_warning(torch.bfloat16, torch.device("meta")) is None
    monkeypatch.setattr(build, "fast_bf16_cpu", lambda: (True, "this CPU has avx512_bf16"))
    assert build.slow_amp_warning(torch.bfloat16, torch.device("cpu")) is None


def test_amp_values_from_the_command_line_and_yaml(tmp_path):
    from onmt_cont import opts

    parse = train.build_parser().parse_args
    assert parse([]).amp == "auto" and parse(["-amp"]).amp is True and parse(["-amp", "off"]).amp is False
    with pytest.raises((SystemExit, UserError)):
        parse(["-amp", "maybe"])
    config = tmp_path / "c.yaml"
    config.write_text("amp: true\n", encoding="utf-8")
    assert opts.parse(train.build_parser(), ["-config", str(config)]).amp is True


def test_fast_bf16_reads_the_cpu_flags_and_the_isa_cap(monkeypatch):
    from onmt_cont.utils import amp

    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(amp, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert amp.fast_bf16_cpu() == (True, "this CPU has avx512_bf16")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert amp.fast_bf16_cpu()[0] is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_amx")
    assert amp.fast_bf16_cpu()[0] is True
    monkeypatch.setattr(amp, "cpu_flags", lambda: {"avx2"})
    assert amp.fast_bf16_cpu()[0] is False


@pytest.mark.parametrize("amp", ["true", "false", "auto"])
def test_transformer_ce_trains_on_both_paths(sample, tmp_path, amp):
    """The float32 and the bfloat16 paths both train a Transformer -loss ce on this CPU (bfloat16 runs, if slowly,
    under ONEDNN_MAX_CPU_ISA=AVX2 too); the log names -amp auto's choice."""
    out = tmp_path / amp
    out.mkdir()
    train.main(
        [
            "-data",
            str(sample / "data"),
            "-save_model",
            str(out / "m"),
            "-log_file",
            str(out / "train.log"),
            *TRANSFORMER_CE,
            "-amp",
            amp,
            "-threads",
            "1",
        ]
    )
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "finished at step 2" in log
    fast = fast_bf16_cpu()[0]  # this CPU's bfloat16 dot products, unless ONEDNN_MAX_CPU_ISA caps them
    assert ("-amp auto: bfloat16 autocast" in log) == (amp == "auto" and fast)
    assert ("-amp auto: float32" in log) == (amp == "auto" and not fast)
    assert ("warning: -amp true: bfloat16 autocast although" in log) == (amp == "true" and not fast)


def fast_bf16_cpu():
    from onmt_cont.utils.amp import fast_bf16_cpu

    return fast_bf16_cpu()
