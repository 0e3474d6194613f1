"""Can this machine run the model under ``-amp``? A probe that answers before training starts.

On CPU, autocast in bfloat16 sends the LSTMs to oneDNN, whose bf16 LSTM primitives exist only
for AVX-512 CPUs: on an AVX2-only CPU (or with the ISA capped by ``ONEDNN_MAX_CPU_ISA``) the
first forward fails deep inside the LSTM with "could not create a primitive descriptor".
:func:`require_autocast` runs one tiny forward and backward of the real model under the same
autocast on a synthetic batch of two 3-word sentences, so train.py can refuse ``-amp`` with a
message that says why and what to change, before it writes a log file or a checkpoint. It
costs a few milliseconds on the small models (see tests/integration/test_portability.py).
"""

import contextlib
import os

import torch

from onmt_cont.constants import BOS_ID, EOS_ID, UNK_ID
from onmt_cont.utils.errors import UserError

DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


def outside_autocast(device_type):
    """A context that computes in the tensors' own dtype even under -amp: autocast disabled on
    ``device_type`` (nothing to disable on devices without autocast, e.g. ``meta``)."""
    if not torch.amp.is_autocast_available(device_type):
        return contextlib.nullcontext()
    return torch.autocast(device_type, enabled=False)


def autocast_dtype(device_type):
    """The dtype autocast computes in on ``device_type`` right now, or None where it is off (or has no autocast)."""
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (an empty set where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_isa_note():
    """What limits oneDNN here, in words: the ISA cap from the environment, and the CPU's AVX-512 flags."""
    flags = cpu_flags()
    parts = []
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if cap:
        parts.append(f"ONEDNN_MAX_CPU_ISA={cap} caps oneDNN's instruction set")
    if flags:
        have = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags]
        parts.append("this CPU has " + (", ".join(have) if have else "no AVX-512 (no avx512f in /proc/cpuinfo)"))
    return "; ".join(parts) if parts else "CPU features unknown"


# oneDNN's ISA caps (ONEDNN_MAX_CPU_ISA) at which its bfloat16 products run on the CPU's bfloat16 dot products;
# below them (AVX2, AVX512_CORE, ...) a bfloat16 product is converted and runs 2-6x slower than float32
BF16_ISAS = {
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX10_1_512",
    "AVX512_CORE_AMX",
    "AVX10_1_512_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512_AMX_FP16",
    "ALL",
    "DEFAULT",
}


def fast_bf16_cpu():
    """-> (whether this CPU runs oneDNN's bfloat16 products on bfloat16 dot-product instructions, why, in words)."""
    flags = cpu_flags()
    have = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    if not have:
        return False, "this CPU has no bfloat16 dot products (no avx512_bf16 or amx_bf16 in /proc/cpuinfo)"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if cap and cap.strip().upper() not in BF16_ISAS:
        return False, f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN from this CPU's {', '.join(have)}"
    return True, f"this CPU has {', '.join(have)}"


def _probe_batch(device):
    """Two 3-word sentences of <unk> (an id every vocabulary has): src [2, 3], tgt [2, 5]."""
    src = torch.full((2, 3), UNK_ID, dtype=torch.long, device=device)
    tgt = torch.tensor([[BOS_ID, UNK_ID, UNK_ID, UNK_ID, EOS_ID]] * 2, device=device)
    return src, torch.tensor([3, 3]), tgt


def probe_autocast(forward, loss_fn, device, dtype):
    """Run ``loss_fn(*forward(src, src_lengths, tgt)).sum().backward()`` once under autocast(``dtype``).

    ``forward`` is a :class:`onmt_cont.train.step.TrainingForward` (not a DistributedDataParallel
    wrapper: its gradient hooks would fire). Leaves no trace: gradients are reset to None, the
    train/eval mode and the random state (dropout, sampling) are restored.
    Returns None when it works, else the error message of the failing operation."""
    model_mode = forward.training
    rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if device.type == "cuda" else None
    src, lengths, tgt = _probe_batch(device)
    try:
        forward.train()
        with torch.autocast(device.type, dtype=dtype):
            output, gold = forward(src, lengths, tgt)
            loss = loss_fn(output, gold).float().sum()
        loss.backward()
    except RuntimeError as exc:
        return str(exc).split("\n")[0]
    finally:
        forward.train(model_mode)
        for p in forward.parameters():
            p.grad = None
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
    return None


def avoid_per_shape_attention(device, dtype):
    """Under -amp on a GPU, switch off PyTorch's cuDNN attention backend. Returns a note for the log, or None.

    For bfloat16 (and float16) inputs on Hopper, ``scaled_dot_product_attention`` picks cuDNN's fused
    attention, and cuDNN builds an execution plan for every new shape. Training batches bring new
    lengths at almost every step, and building a plan costs many times a small model's update, so
    training pays it again and again (``lab/bench/amp_shapes.py`` times updates on new and on known
    shapes). PyTorch's memory-efficient kernels need no plan per shape. The switch is process-wide;
    the CPU has no cuDNN attention."""
    if device.type != "cuda" or dtype is None or not torch.backends.cuda.cudnn_sdp_enabled():
        return None
    torch.backends.cuda.enable_cudnn_sdp(False)
    return (
        "-amp: cuDNN's attention is switched off (it builds a plan for every new batch shape, about 0.5 s "
        "each on an H100); attention runs PyTorch's memory-efficient kernels"
    )


def require_autocast(forward, loss_fn, device, dtype, flag="-amp"):
    """:func:`probe_autocast`, raising a UserError that names the limitation and the flags to change."""
    error = probe_autocast(forward, loss_fn, device, dtype)
    if error is None:
        return
    name = DTYPE_NAMES.get(dtype, str(dtype))
    what = "the LSTM" if "LSTM" in error else "the model"
    if device.type == "cpu":
        error = error.split(" Run workload with")[0].rstrip(".")  # oneDNN's hint about ONEDNN_VERBOSE
        raise UserError(
            f"{flag}: this CPU cannot run {what} in {name} under autocast ({error}); oneDNN's {name} LSTM "
            f"needs AVX-512 (here: {cpu_isa_note()}). Drop {flag} to train in float32 on this CPU, or train "
            "on a GPU with -gpu"
        )
    raise UserError(
        f"{flag}: {device} cannot run {what} in {name} under autocast ({error}); drop {flag}, or try another -amp_dtype"
    )
