"""Multi-process training with PyTorch's own engine: ``torchrun ... train.py``.

torchrun sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; with ``WORLD_SIZE`` > 1 the process
group uses nccl on GPUs and gloo on CPU. Every rank builds the same global batches (they are a
pure function of the seed and the data position) and takes its share ``indices[rank::world]``,
so an epoch has no duplicated examples and the data position in a checkpoint means the same
thing whatever the number of ranks. DistributedDataParallel averages the gradients; the
trainer scales each rank's loss so that the average equals the single-process gradient of the
global batch.
"""

import inspect
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from onmt_cont.utils.errors import UserError


@dataclass(frozen=True)
class Context:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self):
        return self.rank == 0

    @property
    def distributed(self):
        return self.world > 1


def init(use_gpu, timeout_s=600):
    """Join the process group torchrun describes; a single process needs none. ``timeout_s``: how
    long a rank waits in a collective for the others (train.py -dist_timeout) before it fails."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Context()
    if not dist.is_initialized():
        backend = "nccl" if use_gpu else "gloo"
        rank = int(os.environ["RANK"])
        # torchrun --max-restarts reuses its store across restarts: the keys of the killed attempt
        # (the dead ranks' addresses) are still there, and gloo connected to them ("Connection
        # refused") on the first restart after a SIGKILL. Each attempt gets its own key prefix.
        store, rank, world = next(dist.rendezvous("env://", rank, world))
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        dist.init_process_group(
            backend,
            store=dist.PrefixStore(f"onmt_cont/attempt_{attempt}/", store),
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s),
        )
    return Context(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


@contextmanager
def stop_on_sigterm(ctx):
    """Within this block a SIGTERM ends the rank with one line saying why (a :class:`UserError`:
    train.py prints ``error: ...`` and exits 2). torchrun sends SIGTERM to every rank as soon as one
    has exited on an error, often before they have seen their collective break, and Python's
    default is to die without a word, so whether a rank explained itself was a race. The
    exception unwinds like any other: a checkpoint being written is removed, not left half done.
    A single process keeps the default (nothing to explain it by)."""
    if not ctx.distributed or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise UserError(
            f"rank {ctx.rank}: stopped by SIGTERM (torchrun sends it to every rank once one has "
            "ended: see that rank's error above; otherwise the job was cancelled)"
        )

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# torch 2.13 renamed DDP's broadcast_buffers to forward_sync_buffers (and deprecated the old name);
# the GPU machines' torch 2.11 knows only the old one, and every DDP run there failed on the new one.
def no_forward_sync(ddp_class=DistributedDataParallel):
    """The keyword argument that turns the per-forward buffer broadcast off in this torch's DDP."""
    if "forward_sync_buffers" in inspect.signature(ddp_class.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


_NO_FORWARD_SYNC = no_forward_sync()


def wrap(module, device, find_unused_parameters=False):
    """DistributedDataParallel over ``module``, without DDP's default broadcast of every buffer
    from rank 0 at each forward (torch 2.13's ``forward_sync_buffers=False`` still sends them once,
    when it wraps the module; its deprecation note says ``broadcast_buffers=False``, the only keyword
    of older torch, may not: either way is correct, as follows). The only
    buffers are the frozen target tables (``generator.table`` of the continuous and ReWE
    generators): 50K x 300 floats would be 60 MB sent at every step. They
    cannot drift apart: every rank loads the same file (or the same checkpoint) at start-up, nothing
    writes to them during training (they take no gradient and no optimiser holds them), and the
    parameters, the only state that changes, stay in step through DDP's gradient all-reduce
    (train() checks it at the end)."""
    return DistributedDataParallel(
        module,
        device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=find_unused_parameters,
        **_NO_FORWARD_SYNC,
    )


# What a collective raises when a peer rank has gone (gloo's and nccl's wording) or never came
PEER_FAILURE = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "timed out",
    "Timed out",
    "NCCL communicator was aborted",
    "Socket Timeout",
)


def peer_failed(exc):
    """Is ``exc`` a collective that broke because another rank ended or stopped answering?"""
    return isinstance(exc, RuntimeError) and any(text in str(exc) for text in PEER_FAILURE)


def all_reduce_sum(tensor, ctx):
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def gather_to_main(obj, ctx):
    """Every rank's ``obj`` (picklable), in rank order, on rank 0; None on the others."""
    if not ctx.distributed:
        return [obj]
    out = [None] * ctx.world if ctx.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def from_main(value, ctx):
    """Rank 0's ``value`` (a float) on every rank: decisions that lead into collectives (a
    checkpoint save holds a barrier) must be taken once, not by each rank on its own numbers."""
    if not ctx.distributed:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.broadcast(t, src=0)
    return t.item()


def barrier(ctx):
    if ctx.distributed:
        dist.barrier()


def parameters_identical(model, ctx):
    """True when every rank holds bit-identical trainable parameters (gathers one checksum
    vector per rank: the sum and the sum of squares of each parameter, in float64)."""
    if not ctx.distributed:
        return True
    sums = torch.stack(
        [torch.stack([p.double().sum(), (p.double() ** 2).sum()]) for p in model.parameters() if p.requires_grad]
    ).flatten()
    gathered = [torch.empty_like(sums) for _ in range(ctx.world)]
    dist.all_gather(gathered, sums)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


def inputs_differ(parts, ctx):
    """``parts``: {name: digest string} of what this rank read (vocabularies, table, shards). ->
    {rank: [names that differ from rank 0's]} for the ranks that read other inputs ({} with one
    process). Every rank gets the same answer, so all of them can stop together."""
    if not ctx.distributed:
        return {}
    gathered = [None] * ctx.world
    dist.all_gather_object(gathered, dict(parts))
    return {
        rank: [name for name in parts if got.get(name) != gathered[0].get(name)]
        for rank, got in enumerate(gathered)
        if got != gathered[0]
    }


def cleanup(ctx, failed=False):
    """Leave the process group. ``failed``: this rank is ending on an error, so its peers are
    somewhere else (in a collective it will never join): no barrier, no teardown that could wait
    for them; the process exits, and torchrun stops the other ranks when it sees the exit."""
    if failed:
        return
    if ctx.distributed and dist.is_initialized():
        # every rank leaves its last collective before any tears gloo down: a rank that destroyed
        # the group while its peer was still in one aborted at exit ("terminate called without an
        # active exception", exit -6) in about 1 of 3 full test-suite runs
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()
