"""Reading parallel text and the shard files preprocess.py writes.

A shard (``PREFIX.train.N.pt``, ``PREFIX.valid.0.pt``; ``weights_only=True``) is plain data::

    {"format_version": 1,
     "src": IntTensor [total_src_tokens], "src_lengths": IntTensor [n],
     "tgt": IntTensor [total_tgt_tokens], "tgt_lengths": IntTensor [n],
     "tgt_text": [str, ...]}   # validation shard only: each kept pair's target line (BLEU references)

Sentences are stored concatenated (no padding) with their lengths; no ``<s>``/``</s>``
is stored: the batcher adds them.
"""

import glob
import gzip
import os
import re

import torch

from onmt_cont.constants import FORMAT_VERSION
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import atomic_torch_save, check_readable, load_checkpoint_data, read_lines


def count_lines(path):
    """Number of lines of a text file (``.gz`` too, as :func:`read_lines` reads it), counted in
    binary chunks (fast, no decoding)."""
    check_readable(path)
    n, last = 0, b"\n"
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError) as exc:  # a directory, no permission, a broken or truncated .gz
        raise UserError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return n + (last != b"\n")


def check_parallel(src_path, tgt_path):
    """Refuse files of different line counts before anything is written; return the count."""
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise UserError(f"parallel files differ in length: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}")
    return n_src


def iter_parallel(src_path, tgt_path, lower=False):
    """Yield ``(line_number, src_tokens, tgt_tokens)`` for aligned lines, streaming."""
    for (lineno, src), (_, tgt) in zip(read_lines(src_path), read_lines(tgt_path), strict=True):
        if lower:
            src, tgt = src.lower(), tgt.lower()
        yield lineno, src.split(), tgt.split()


def pack_shard(examples, tgt_text=None):
    """``examples``: list of ``(src_ids, tgt_ids)`` int lists -> the shard dict; ``tgt_text``: the
    target lines as text (tokens joined by spaces), kept in the validation shard so that
    train.py -valid_metric bleu scores against the real words, not against ``<unk>``."""

    def cat(seqs):
        flat = [i for s in seqs for i in s]
        return torch.tensor(flat, dtype=torch.int32), torch.tensor([len(s) for s in seqs], dtype=torch.int32)

    src, src_len = cat([e[0] for e in examples])
    tgt, tgt_len = cat([e[1] for e in examples])
    shard = {"format_version": FORMAT_VERSION, "src": src, "src_lengths": src_len, "tgt": tgt, "tgt_lengths": tgt_len}
    if tgt_text is not None:
        if len(tgt_text) != len(examples):
            raise ValueError(f"{len(tgt_text)} target lines for {len(examples)} examples")
        shard["tgt_text"] = list(tgt_text)
    return shard


def save_shard(path, examples, tgt_text=None):
    atomic_torch_save(pack_shard(examples, tgt_text), path)


def load_shard_text(path):
    """The target lines stored in a validation shard, or None (shards of older preprocess runs)."""
    text = load_checkpoint_data(path).get("tgt_text")
    return list(text) if text is not None else None


def load_shard(path):
    """Load a shard -> list of ``(src LongTensor [len], tgt LongTensor [len])``."""
    data = load_checkpoint_data(path, "a data shard written by preprocess.py")
    if not isinstance(data, dict) or "src_lengths" not in data:
        raise UserError(f"{path}: not a data shard written by preprocess.py")
    src = torch.split(data["src"].long(), data["src_lengths"].tolist())
    tgt = torch.split(data["tgt"].long(), data["tgt_lengths"].tolist())
    return list(zip(src, tgt, strict=True))


def shard_paths(prefix, split):
    """The shard files of a split, in numeric order; a clear error when there are none."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + rf"\.{split}\.(\d+)\.pt$")
    found = []
    for path in glob.glob(glob.escape(prefix) + f".{split}.*.pt"):
        m = pattern.search(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    if not found:
        raise UserError(
            f"no {split} shards found: expected {prefix}.{split}.0.pt (run preprocess.py -save_data {prefix})"
        )
    return [p for _, p in sorted(found)]
