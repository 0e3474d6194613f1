"""preprocess.py's two passes over a parallel corpus: counting the words of the pairs it keeps (and
finding bad input before anything is written), then writing their ids to shards of at most -shard_size
examples (with -shuffle, through one bucket file per shard); and the leftovers of earlier runs it removes."""

import os
import re
import shutil
import sys
import tempfile
from collections import Counter

import numpy as np

from onmt_cont.inputters.corpus import iter_parallel, save_shard, vocab_fingerprint
from onmt_cont.inputters.vocab import RESERVED
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.process import pid_alive
from onmt_cont.utils.progress import progress


def _keep(src, tgt, opt, stats):
    if not src or not tgt:
        stats["empty"] += 1
        return False
    if len(src) > opt.src_seq_length or len(tgt) > opt.tgt_seq_length:
        stats["too_long"] += 1
        return False
    return True


def count_corpus(src_path, tgt_path, opt, total=None):
    """One pass: token counts of the kept pairs and filtering statistics (``total``: the number of
    lines, for the progress bar)."""
    stats = Counter()
    src_counts, tgt_counts = Counter(), Counter()
    pairs = progress(iter_parallel(src_path, tgt_path, opt.lower), f"counting {src_path}", total, "pairs")
    for _, src, tgt in pairs:
        stats["read"] += 1
        if _keep(src, tgt, opt, stats):
            stats["kept"] += 1
            src_counts.update(src)
            tgt_counts.update(tgt)
    for path, counts in ((src_path, src_counts), (tgt_path, tgt_counts)):
        found = {t: counts[t] for t in RESERVED if counts[t]}
        if found:
            first = _first_line_with(path, found, opt.lower)
            print(
                f"warning: {path}: {', '.join(f'{n:,} {t}' for t, n in found.items())} in the text (first at line "
                f"{first}): spelled as the start, end and padding markers, they are read as <unk>, not as markers",
                file=sys.stderr,
            )
    return src_counts, tgt_counts, stats


def _first_line_with(path, tokens, lower):
    for lineno, line in read_lines(path):
        if any(t in tokens for t in (line.lower() if lower else line).split()):
            return lineno
    return "?"


def kept_ids(src_path, tgt_path, opt, src_vocab, tgt_vocab, total=None, text=None):
    """Yield the ids of the kept pairs; append each kept target line to ``text`` when given."""
    stats = Counter()
    pairs = progress(iter_parallel(src_path, tgt_path, opt.lower), f"writing {src_path}", total, "pairs")
    for _, src, tgt in pairs:
        if _keep(src, tgt, opt, stats):
            if text is not None:
                text.append(" ".join(tgt))
            yield src_vocab.encode(src), tgt_vocab.encode(tgt)


def write_train_shards(opt, src_vocab, tgt_vocab, n_kept, written, flush_every=100_000, n_lines=None):
    """Write PREFIX.train.N.pt; with -shuffle every pair goes to a random position of a
    permutation, via one temporary bucket file per shard, so memory stays bounded by one shard
    (plus ``flush_every`` buffered pairs); only one bucket file is open at a time, so thousands
    of shards do not run into the open-files limit."""
    size = opt.shard_size
    n_shards = max(1, -(-n_kept // size))
    fingerprint = vocab_fingerprint(src_vocab, tgt_vocab)
    examples = kept_ids(opt.train_src, opt.train_tgt, opt, src_vocab, tgt_vocab, n_lines)
    if not opt.shuffle:
        shard, index = [], 0
        for ex in examples:
            shard.append(ex)
            if len(shard) == size:
                written.append(f"{opt.save_data}.train.{index}.pt")
                save_shard(written[-1], shard, fingerprint=fingerprint)
                shard, index = [], index + 1
        if shard or index == 0:
            written.append(f"{opt.save_data}.train.{index}.pt")
            save_shard(written[-1], shard, fingerprint=fingerprint)
        return n_shards
    perm = np.random.default_rng(opt.seed).permutation(n_kept)
    tmpdir = tempfile.mkdtemp(prefix=f".preprocess-{os.getpid()}-", dir=os.path.dirname(os.path.abspath(opt.save_data)))
    buffers = [[] for _ in range(n_shards)]

    def flush():
        for i, rows in enumerate(buffers):
            if rows:
                path = os.path.join(tmpdir, f"{i}.txt")
                try:
                    with open(path, "a") as f:
                        f.writelines(rows)
                except OSError as exc:  # a full disk: name the file, no traceback (the caller removes the shards)
                    raise UserError(f"cannot write {path}: {(exc.strerror or str(exc)).lower()}") from None
                rows.clear()

    try:
        for k, (s, t) in enumerate(examples):
            pos = int(perm[k])
            buffers[pos // size].append(f"{pos}\t{' '.join(map(str, s))}\t{' '.join(map(str, t))}\n")
            if (k + 1) % max(size, flush_every) == 0:
                flush()
        flush()
        for i in range(n_shards):
            with open(os.path.join(tmpdir, f"{i}.txt")) as f:
                rows = sorted((line.rstrip("\n").split("\t") for line in f), key=lambda r: int(r[0]))
            shard = [([int(x) for x in r[1].split()], [int(x) for x in r[2].split()]) for r in rows]
            written.append(f"{opt.save_data}.train.{i}.pt")
            save_shard(written[-1], shard, fingerprint=fingerprint)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return n_shards


def remove_dead_work_folders(folder):
    """-shuffle's bucket folders (.preprocess-PID-XXXX) whose run is gone (SIGKILLed: nothing removed
    them; one held a full copy of the corpus)."""
    for name in os.listdir(folder):
        m = re.match(r"\.preprocess-(\d+)-", name)
        path = os.path.join(folder, name)
        if m and not pid_alive(int(m.group(1))) and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)


def remove_stale_shards(prefix, n_shards):
    """A previous run with more shards would leave PREFIX.train.K.pt (K >= n) to be picked up by train.py."""
    k = n_shards
    while os.path.exists(f"{prefix}.train.{k}.pt"):
        os.remove(f"{prefix}.train.{k}.pt")
        k += 1
