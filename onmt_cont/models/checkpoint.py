"""Checkpoints: plain data only, loadable with ``torch.load(..., weights_only=True)``.

    {"format_version": 1, "model": state_dict, "optim": optimizer state_dict,
     "opt": options dict, "vocab": {"src": [tokens], "tgt": [tokens], "lower": bool},
     "progress": {"step", "epoch", "shard", "batch", "best_score", "bad_validations", "valid_metric"},
     "rng": {"torch": ByteTensor, "cuda": [ByteTensor, ...]}}
"""

import argparse
import math

import torch

from onmt_cont.constants import FORMAT_VERSION
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.model import build_model
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import atomic_torch_save, load_checkpoint_data


def save_checkpoint(path, model, optimizer, opt, src_vocab, tgt_vocab, progress, lower=False):
    """Write atomically; refuse to write parameters that are not finite."""
    state = model.state_dict()
    for name, tensor in state.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise RuntimeError(f"refusing to write {path}: parameter {name} holds NaN or inf")
    data = {
        "format_version": FORMAT_VERSION,
        "model": state,
        "optim": optimizer.state_dict() if optimizer is not None else None,
        "opt": {k: v for k, v in vars(opt).items() if isinstance(v, (str, int, float, bool, type(None)))},
        "vocab": {"src": src_vocab.itos, "tgt": tgt_vocab.itos, "lower": bool(lower)},
        "progress": dict(progress),
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        },
    }
    atomic_torch_save(data, path)


def load_checkpoint(path):
    try:
        data = load_checkpoint_data(path)
    except UserError:
        raise
    except Exception as exc:  # not a torch.save file at all: torch.load's errors vary
        raise UserError(f"{path}: not a checkpoint written by train.py ({type(exc).__name__})") from None
    if not isinstance(data, dict) or "model" not in data or "opt" not in data:
        raise UserError(f"{path}: not a checkpoint written by train.py")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{path}: checkpoint format {data.get('format_version')} (this version reads {FORMAT_VERSION})")
    return data


def model_from_checkpoint(data, device="cpu"):
    """Rebuild the model (and vocabularies) a checkpoint was trained with."""
    opt = argparse.Namespace(**data["opt"])
    src_vocab = Vocab(data["vocab"]["src"])
    tgt_vocab = Vocab(data["vocab"]["tgt"])
    table = data["model"].get("generator.table")
    if table is None:
        table = data["model"].get("decoder.embeddings.table.weight") if opt.tie_emb else None
    model = build_model(opt, len(src_vocab), len(tgt_vocab), table)
    model.load_state_dict(data["model"])
    return model.to(device), opt, src_vocab, tgt_vocab


def is_better(score, best, higher=False):
    """Is ``score`` an improvement on ``best`` (None: nothing yet)? Lower is better unless ``higher``."""
    if best is None:
        return True
    return math.isfinite(score) and (score > best if higher else score < best)
