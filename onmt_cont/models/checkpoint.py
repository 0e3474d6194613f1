"""Checkpoints: plain data only, loadable with ``torch.load(..., weights_only=True)``.

    {"format_version": 1, "model": state_dict, "optim": optimizer state_dict,
     "opt": options dict, "vocab": {"src": [tokens], "tgt": [tokens], "lower": bool, "tgt_counts": [int],
                                   "tgt_total_tokens": int, "tgt_sentences": int},
     "progress": {"step", "epoch", "shard", "batch", "best_score", "bad_validations", "valid_metric",
                  "recent_scores", "best_window"},
     "rng": {"torch": ByteTensor, "cuda": [ByteTensor] or [], "python": random.getstate(),
             "ranks": [{"torch", "cuda", "python"} of each rank] (only under torchrun)},
     "scaler": GradScaler state_dict (only with -amp -amp_dtype fp16)}

Everything a resumed run needs to take the same steps as an uninterrupted one: the data
position (the batch order is a function of the seed and the position), the random states
(dropout, sampled negatives; Python's ``random`` too, though training draws nothing from it
today), the optimiser's moments and the early-stopping counters. The random states are each
process's own: under torchrun every rank's (its CPU generator and its one GPU's) is gathered to
rank 0, and a resume with the same number of ranks gives each rank back its own; "cuda" holds the
state of the device the process trained on, not of every GPU it could see (checkpoints written
before held one state per visible GPU, and :func:`restore_rng` reads those too).
"""

import argparse
import glob
import os
import random
import re
from collections.abc import Mapping
from typing import Any, Literal, overload

import torch
from torch import Tensor, nn

from onmt_cont.constants import FORMAT_VERSION
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.model import NMTModel, build_model
from onmt_cont.opts import upgrade
from onmt_cont.utils.atomic import atomic_torch_save
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.loading import load_checkpoint_data

# a loaded checkpoint: the plain-data dict the module docstring describes
Checkpoint = dict[str, Any]


def rng_state(device: str | torch.device | None = None) -> dict[str, Any]:
    """This process's random states: the CPU generator, Python's, and (on a GPU) its own device's."""
    cuda = [torch.cuda.get_rng_state(device)] if device is not None and torch.device(device).type == "cuda" else []
    return {"torch": torch.get_rng_state(), "cuda": cuda, "python": random.getstate()}


def restore_rng(
    saved: Mapping[str, Any], device: str | torch.device | None = None, rank: int = 0, world: int = 1
) -> str | None:
    """Set this process's random states from a checkpoint's ``rng``. Returns None when the resume is
    exact, else why not (for the log). The same number of ranks: each rank gets its own states back.
    Another number (or a checkpoint without per-rank states): every rank takes rank 0's, the way a
    single process resumes, and dropout draws differ from the uninterrupted run from there on."""
    ranks = saved.get("ranks")
    note = None
    if ranks and len(ranks) == world:
        state = ranks[rank]
    else:
        state = saved
        written = len(ranks) if ranks else 1
        if written != world:
            note = (
                f"the checkpoint was written by {written} process(es) and this run has {world}: every rank "
                "continues from rank 0's random states (dropout and sampled negatives differ from an "
                "uninterrupted run)"
            )
        elif world > 1:
            note = "the checkpoint holds one process's random states: every rank continues from them"
    torch.set_rng_state(state["torch"])
    if "python" in state:  # checkpoints before it was saved: nothing drew from it then either
        random.setstate(state["python"])
    if device is not None and torch.device(device).type == "cuda":
        cuda = state.get("cuda") or []
        index = torch.device(device).index or 0
        if len(cuda) == 1:
            torch.cuda.set_rng_state(cuda[0], device)
        elif index < len(cuda):  # an older checkpoint: one state per GPU the saving process could see
            torch.cuda.set_rng_state(cuda[index], device)
        else:
            note = note or f"the checkpoint holds no random state for {device}: it starts from its seeded state"
    return note


def save_checkpoint(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    opt: argparse.Namespace,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    progress: Mapping[str, Any],
    lower: bool = False,
    scaler: torch.amp.GradScaler | None = None,
    rng: Mapping[str, Any] | None = None,
    train_params: Mapping[str, Tensor] | None = None,
    text: Mapping[str, Any] | None = None,
) -> None:
    """Write atomically; refuse to write parameters that are not finite. ``scaler``: the fp16
    GradScaler, whose loss scale a resumed run must start from. ``rng``: the random states to keep
    (default: this process's, :func:`rng_state`; under torchrun, rank 0's with "ranks" added).
    ``train_params`` (-average_decay, where ``model`` holds the average): the raw trainable
    parameters {name: tensor} that training goes on from, kept as "train_model". ``text``: the raw
    text the data was made from (preprocess.py's record), kept as vocab["text"]."""
    state = model.state_dict()
    for name, tensor in state.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise RuntimeError(f"refusing to write {path}: parameter {name} holds NaN or inf")
    data: Checkpoint = {
        "format_version": FORMAT_VERSION,
        "model": state,
        "optim": optimizer.state_dict() if optimizer is not None else None,
        "opt": {k: v for k, v in vars(opt).items() if isinstance(v, (str, int, float, bool, type(None)))},
        # the target counts give translate.py -decode_prior its log p_train(w)
        "vocab": {
            "src": src_vocab.itos,
            "tgt": tgt_vocab.itos,
            "lower": bool(lower),
            "tgt_counts": tgt_vocab.counts,
            "tgt_total_tokens": tgt_vocab.total_tokens,
            "tgt_sentences": tgt_vocab.sentences,
        },
        "progress": dict(progress),
        "rng": rng if rng is not None else rng_state(),
    }
    if text is not None:
        data["vocab"]["text"] = text
    if scaler is not None:
        data["scaler"] = scaler.state_dict()
    if train_params is not None:
        data["train_model"] = train_params
    atomic_torch_save(data, path)


def load_checkpoint(path: str) -> Checkpoint:
    what = "a checkpoint written by train.py"
    data = load_checkpoint_data(path, what)
    if not isinstance(data, dict) or "model" not in data or "opt" not in data:
        found = _describe(data)
        raise UserError(f"{path}: not {what}" + (f" (it looks like {found})" if found else ""))
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise UserError(
            f"{path}: checkpoint format {version} (this version of onmt_cont reads {FORMAT_VERSION}"
            + ("; the file was written by a newer one)" if newer else ")")
        )
    check_finite(path, data["model"])
    return data


def check_finite(path: str, state: object) -> None:
    """A model whose parameters hold NaN or inf translates into empty lines: refuse it, naming the
    first such tensor (train.py never writes one; a file from elsewhere or an average of one may)."""
    if not isinstance(state, dict):
        return  # the loader's own checks say what is wrong
    for name, tensor in state.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise UserError(
                f"{path}: parameter {name} holds {bad:,} NaN or infinite value(s): the model cannot "
                "translate (take an earlier checkpoint)"
            )


def _describe(data: object) -> str | None:
    """Name the other file kinds of the toolkit, for the error when one is given as a checkpoint."""
    if isinstance(data, torch.Tensor):
        return "an embedding table written by embeddings_to_torch.py"
    if isinstance(data, dict) and "src_lengths" in data:
        return "a data shard written by preprocess.py"
    if isinstance(data, dict) and "src" in data and "tgt" in data:
        return "a vocabulary file written by preprocess.py"
    return None


def resume_problem(data: Mapping[str, Any], fine_tune: bool = False) -> str | None:
    """Why a loaded checkpoint cannot be resumed (-train_from refuses it, -resume auto passes it
    over), or None: the parts a resume reads are missing or not what train.py writes. ``fine_tune``
    (-reset_optim all): only the weights, options and vocabularies are read, so a release will do."""
    if data.get("release") and not fine_tune:
        return (
            "it is a release (onmt_cont_release): it holds the model without the optimiser and random states, "
            "so it translates but cannot go on training; resume from the run's own checkpoint"
        )
    missing = [k for k in ("model", "opt", "progress", "vocab") if not isinstance(data.get(k), dict)]
    if not missing:
        missing = [
            f"progress's {k}" for k in ("step", "epoch", "shard", "batch") if type(data["progress"].get(k)) is not int
        ]
        missing += [
            f"the {side} vocabulary" for side in ("src", "tgt") if not isinstance(data["vocab"].get(side), list)
        ]
    if fine_tune:
        missing = [m for m in missing if not m.startswith("progress")]
    if missing:
        return f"it holds no {', '.join(missing)}, which train.py needs to go on from it"
    return None


def inexact_resume(data: Mapping[str, Any]) -> list[str]:
    """What a resume from the checkpoint ``data`` would not restore, as phrases (empty: nothing):
    -resume auto passes such files over, -train_from goes on and says so."""
    notes = []
    if data.get("averaged"):
        notes.append(
            f"it is an average of {len(data['averaged'])} checkpoints (tools/average_models.py): its "
            "parameters are the average, and the raw parameters of any one run are not in it"
        )
    if not data.get("optim"):
        notes.append("it holds no optimiser state: the optimiser (Adam's moments) would start afresh")
    if not isinstance(data.get("rng"), dict) or "torch" not in data["rng"]:
        notes.append("it holds no random states: dropout and sampled words would not follow the run's")
    return notes


def _run_checkpoints(prefix: str) -> dict[str, list[tuple[int | None, str]]]:
    """A run's ``PREFIX_step_N.pt``, ``PREFIX_epoch_N.pt`` and ``PREFIX_last.pt`` -> {"step": [(N, path)],
    "epoch": [(N, path)], "last": [(None, path)]}, the numbered ones by N, highest first."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"_(step|epoch)_(\d+)\.pt$")
    found: dict[str, list[tuple[int | None, str]]] = {"step": [], "epoch": [], "last": []}
    for path in glob.glob(glob.escape(prefix) + "_*.pt"):
        name = os.path.basename(path)
        m = pattern.fullmatch(name)
        if m:
            found[m.group(1)].append((int(m.group(2)), path))
        elif name == os.path.basename(prefix) + "_last.pt":
            found["last"].append((None, path))
    for files in found.values():
        files.sort(key=lambda f: f[0] or 0, reverse=True)
    return found


def find_resumable(prefix: str) -> tuple[str | None, Checkpoint | None, list[str]]:
    """Where a killed run goes on (train.py -resume auto): of the run's ``PREFIX_step_N.pt``,
    ``PREFIX_epoch_N.pt`` and ``PREFIX_last.pt``, the one whose progress is furthest, by the step
    it records (never by file time: a copied or touched file is not newer for it). Of each kind the
    highest N that can be resumed is read; a file that does not load, lacks a part a resume needs,
    or would not resume exactly (no optimiser state or random states, an average of checkpoints)
    is passed over. ``PREFIX_best.pt`` is never resumed from (it is not the latest state).
    -> (path or None, its data or None, [lines for the log: what was found, passed over, chosen])."""
    found = _run_checkpoints(prefix)
    names = [os.path.basename(p) for files in found.values() for _, p in files]
    passed: list[str] = []
    chosen: list[tuple[int, str, Checkpoint]] = []
    for files in found.values():
        for _, path in files:
            try:
                data = load_checkpoint(path)
                why = resume_problem(data) or "; ".join(inexact_resume(data)) or None
            except UserError as exc:
                why = str(exc).removeprefix(f"{path}: ")
            if why is None:
                chosen.append((data["progress"]["step"], path, data))
                break  # the highest N of this kind that resumes
            passed.append(f"{os.path.basename(path)} ({why})")
    if not names:
        return None, None, []
    lines = [f"-resume auto: found {len(names)} checkpoint(s) of {prefix}: {', '.join(sorted(names))}"]
    if passed:
        lines.append(f"-resume auto: passed over {'; '.join(passed)}")
    if not chosen:
        return None, None, lines
    step, path, data = max(chosen, key=lambda c: c[0])
    lines.append(
        f"-resume auto: continuing from {path}, step {step}, the furthest of them (chosen by the step "
        "each one records, not by file time)"
    )
    return path, data, lines


@overload
def newest_checkpoint(prefix: str, with_data: Literal[False] = False) -> str | None: ...


@overload
def newest_checkpoint(prefix: str, with_data: Literal[True]) -> tuple[str | None, Checkpoint | None]: ...


def newest_checkpoint(prefix: str, with_data: bool = False) -> str | None | tuple[str | None, Checkpoint | None]:
    """The checkpoint :func:`find_resumable` chooses (its path), or None. ``with_data``: (path,
    its loaded data), or (None, None), so that it is not read twice."""
    path, data, _ = find_resumable(prefix)
    return (path, data) if with_data else path


def model_from_checkpoint(
    data: Mapping[str, Any], device: str | torch.device = "cpu", path: str = "the checkpoint"
) -> tuple[NMTModel, argparse.Namespace, Vocab, Vocab]:
    """Rebuild the model (and vocabularies) a checkpoint was trained with. A checkpoint whose parts do
    not fit together (no vocabulary, an option missing or of the wrong type, parameters of other
    shapes, a target vocabulary shorter than its table) is a UserError naming ``path`` and the part,
    not a KeyError or a size-mismatch traceback (translate.py, onmt_cont.load())."""

    def bad(what: str) -> UserError:
        return UserError(f"{path}: not a usable checkpoint of train.py: {what}")

    vocab, options, state = data.get("vocab"), data.get("opt"), data.get("model")
    if not isinstance(vocab, dict) or not all(isinstance(vocab.get(k), (list, tuple)) for k in ("src", "tgt")):
        raise bad("it holds no source and target vocabulary ('vocab': {'src': [...], 'tgt': [...]})")
    if not isinstance(options, dict) or not isinstance(state, dict):
        raise bad("its options ('opt') or parameters ('model') are missing")
    try:
        opt = upgrade(options)  # options this checkpoint predates take the values it was trained with
        src_vocab = Vocab(vocab["src"])
        tgt_vocab = Vocab(
            vocab["tgt"], vocab.get("tgt_counts"), vocab.get("tgt_total_tokens", 0), vocab.get("tgt_sentences", 0)
        )
    except (TypeError, ValueError) as exc:
        raise bad(f"its vocabulary ({exc})") from None
    table = state.get("generator.table")
    if table is None:
        table = state.get("decoder.embeddings.table.weight") if opt.tie_emb else None
    if table is not None and (not isinstance(table, torch.Tensor) or table.dim() != 2 or len(table) != len(tgt_vocab)):
        rows = f"{len(table)} rows" if isinstance(table, torch.Tensor) and table.dim() == 2 else "no [words, dim] table"
        raise bad(f"its target table has {rows}, its target vocabulary {len(tgt_vocab)} words")
    if opt.encoder_type == "brnn" and not opt.brnn and "encoder.rnn.weight_ih_l0_reverse" not in state:
        # up to 0.2.0, -encoder_type brnn without -brnn trained a one-directional LSTM: load it as it was trained
        opt = argparse.Namespace(**{**vars(opt), "encoder_type": "rnn"})
    try:
        model = build_model(opt, len(src_vocab), len(tgt_vocab), table)
    except AttributeError as exc:  # an option the model needs is missing
        raise bad(f"an option is missing ({exc.name or exc})") from None
    except (TypeError, ValueError, KeyError, RuntimeError) as exc:
        raise bad(f"its options do not build a model ({str(exc).splitlines()[0][:200]})") from None
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, KeyError) as exc:
        first = next((line.strip() for line in str(exc).splitlines()[1:] if line.strip()), str(exc))
        raise bad(f"its parameters do not fit the model its options describe ({first[:200]})") from None
    return model.to(device), opt, src_vocab, tgt_vocab
