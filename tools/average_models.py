#!/usr/bin/env python
"""Average the parameters of several checkpoints of one run (checkpoint averaging, Vaswani et al.
2017; OpenNMT-py's tools/average_models.py) into a checkpoint translate.py reads.

    python tools/average_models.py -models RUN/model_epoch_{18,19,20}.pt -output RUN/model_avg3.pt
    python tools/average_models.py -last 3 -prefix RUN/model -output RUN/model_avg3.pt

Every floating-point tensor of the models' state dicts is averaged in float64 and written in its
own dtype; the others (integer buffers) must be equal. The checkpoints must come from one run:
same model options, vocabularies and frozen target table (every tensor training does not change
must be equal), or the tool refuses, naming both files and what differs. Options, vocabularies
and progress are the last checkpoint's; the optimiser state is dropped (an average has no
optimiser state of its own: -train_from on it starts a fresh optimiser). Written atomically, so
a failure leaves no half-written file.
"""

import argparse
import glob
import os
import re

import torch

from onmt_cont.models.checkpoint import (
    check_finite,
    load_checkpoint,
    model_from_checkpoint,
)
from onmt_cont.train.resume import MODEL_OPTS
from onmt_cont.utils.atomic import atomic_torch_save
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import Prefix, refuse_output_over_inputs


def last_epochs(prefix, n):
    """The ``n`` checkpoints ``PREFIX_epoch_E.pt`` of the highest E, oldest first."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"_epoch_(\d+)\.pt$")
    found = sorted(
        (int(m.group(1)), p)
        for p in glob.glob(glob.escape(prefix) + "_epoch_*.pt")
        if (m := pattern.search(os.path.basename(p)))
    )
    if len(found) < n:
        raise UserError(
            f"-last {n}: found {len(found)} checkpoint(s) {prefix}_epoch_E.pt (train.py writes them with "
            "-save_checkpoint_epochs)"
        )
    return [p for _, p in found[-n:]]


def frozen_keys(ckpt):
    """The state-dict entries training never changes (the frozen target table, the decoder's frozen
    input table under -tie_emb, buffers): checkpoints of one run hold them bit for bit equal."""
    model, *_ = model_from_checkpoint(ckpt)
    trained = {name for name, p in model.named_parameters(remove_duplicate=False) if p.requires_grad}
    return [k for k in ckpt["model"] if k not in trained]


def check_same_run(first, ckpt, path, first_path, frozen):
    """Refuse ``ckpt`` unless it has ``first``'s model options, vocabularies and frozen tensors."""
    one = "only checkpoints of one run can be averaged"
    for key in MODEL_OPTS:
        if first["opt"].get(key) != ckpt["opt"].get(key):
            raise UserError(
                f"{path}: -{key} {ckpt['opt'].get(key)} but {first_path} has -{key} {first['opt'].get(key)}: {one}"
            )
    for side in ("src", "tgt"):
        if list(ckpt["vocab"][side]) != list(first["vocab"][side]):
            raise UserError(f"{path}: another {side} vocabulary than {first_path}: {one}")
    if bool(ckpt["vocab"].get("lower")) != bool(first["vocab"].get("lower")):
        lowered = path if ckpt["vocab"].get("lower") else first_path
        raise UserError(f"{path}, {first_path}: only {lowered} was trained on lowercased text: {one}")
    if set(ckpt["model"]) != set(first["model"]):
        raise UserError(f"{path}: other parameters than {first_path}: {one}")
    for k in frozen:
        a, b = first["model"][k], ckpt["model"][k]
        if a.shape != b.shape or not torch.equal(a, b):
            what = "target table" if "table" in k else "tensor"
            raise UserError(
                f"{path}: its frozen {what} {k} differs from {first_path}'s (trained against another -tgt_emb?): {one}"
            )


def refuse_duplicates(paths):
    """A checkpoint given twice (a shell glob plus a name, a link) would weigh double in the mean."""
    seen = {}
    for path in paths:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise UserError(f"{path} is {seen[key]} again: each checkpoint may be averaged once")
        seen[key] = path


def average(paths):
    """-> the averaged checkpoint (a dict like train.py's)."""
    refuse_duplicates(paths)
    first = load_checkpoint(paths[0])
    frozen = frozen_keys(first)
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first["model"].items()}
    last = first
    for path in paths[1:]:
        ckpt = load_checkpoint(path)
        check_same_run(first, ckpt, path, paths[0], frozen)
        for k, v in ckpt["model"].items():
            if v.is_floating_point():
                sums[k] += v.double()
            elif not torch.equal(v, sums[k]):
                raise UserError(f"{path}: {k} differs from {paths[0]}'s and cannot be averaged")
        last = ckpt
    model = {k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v for k, v in sums.items()}
    # the raw parameters of an -average_decay run (train_model) belong to the last file only: dropped
    rest = {k: v for k, v in last.items() if k != "train_model"}
    return {**rest, "model": model, "optim": None, "averaged": [os.path.basename(p) for p in paths]}


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-models", nargs="+", help="checkpoints to average")
    p.add_argument("-last", type=int, help="average the N latest PREFIX_epoch_E.pt of -prefix instead")
    p.add_argument("-prefix", help="with -last: train.py's -save_model of the run")
    p.add_argument("-output", required=True, help="the averaged checkpoint")
    args = p.parse_args(argv)
    refuse_output_over_inputs(
        {"-output": args.output},
        {"-models": args.models, "-prefix": Prefix(args.prefix, r"_epoch_\d+\.pt") if args.prefix else None},
    )
    if bool(args.models) == (args.last is not None):
        raise UserError("give -models FILE... or -last N -prefix PREFIX")
    if args.last is not None:
        if args.last < 1 or not args.prefix:
            raise UserError("-last N needs N >= 1 and -prefix")
        paths = last_epochs(args.prefix, args.last)
    else:
        paths = args.models
    for path in paths:
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such file")
    averaged = average(paths)
    check_finite(args.output, averaged["model"])  # NaN in any input makes the average NaN: write nothing
    atomic_torch_save(averaged, args.output)
    print(f"averaged {len(paths)} checkpoints ({', '.join(os.path.basename(x) for x in paths)}): wrote {args.output}")


if __name__ == "__main__":
    main()
