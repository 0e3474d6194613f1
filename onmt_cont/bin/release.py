"""release: a trained checkpoint as a model to ship, without what only training needs.

    onmt_cont_release -model run/model_best.pt -output model.release.pt

A train.py checkpoint holds the optimiser's state (two moments per parameter: twice the model's
size with Adam), the random states and, with -average_decay, the raw parameters beside the average.
The release keeps the model (the averaged parameters where there are any, as translate.py uses),
its options, vocabularies and progress, so translate.py and onmt_cont.load() read it and decode
exactly as from the checkpoint; -train_from resumes no run from it, but fine-tunes its weights with -reset_optim all."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any

from onmt_cont.config import add_flags, option
from onmt_cont.models.checkpoint import load_checkpoint
from onmt_cont.utils.atomic import atomic_torch_save
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs

# what a release keeps of a checkpoint; the rest (optimiser, random states, raw parameters, loss scaler)
# serves only a resumed training
KEPT = ("format_version", "model", "opt", "vocab", "progress")


def release(data: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's dict -> its release: KEPT only, marked as a release."""
    out = {k: data[k] for k in KEPT if k in data}
    out["optim"] = None
    out["release"] = True
    return out


@dataclass
class ReleaseConfig:
    """onmt_cont_release's flags, each field with its help (:mod:`onmt_cont.config` builds the flags)."""

    model: str | None = option(None, required=True, help="a checkpoint written by train.py")
    output: str | None = option(None, required=True, help="where to write the release")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onmt_cont_release",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(p, ReleaseConfig, [f.name for f in fields(ReleaseConfig)])
    return p


@cli_main
def main(argv: list[str] | None = None) -> None:
    opt = build_parser().parse_args(argv)
    refuse_output_over_inputs({"-output": opt.output}, {"-model": opt.model})
    if os.path.isdir(opt.output):
        raise UserError(f"-output {opt.output}: is a directory, expected a file name")
    data = load_checkpoint(opt.model)
    out = release(data)
    atomic_torch_save(out, opt.output)
    before, after = os.path.getsize(opt.model), os.path.getsize(opt.output)
    print(
        f"wrote {opt.output}: {after:,} bytes ({after / max(before, 1):.0%} of {opt.model}'s {before:,}); "
        "no optimiser or random state: it translates, it does not resume training"
    )


if __name__ == "__main__":
    main()
