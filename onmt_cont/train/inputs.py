"""What a training run reads, checked before it trains: every shard against the vocabularies of its -data,
and, under torchrun, that every rank reads the same inputs."""

import hashlib
import os

from onmt_cont import distributed
from onmt_cont.inputters.corpus import check_shard, read_shard
from onmt_cont.utils.errors import UserError


def check_ranks_agree(ctx, src_vocab, tgt_vocab, train_paths, valid_path, table):
    """Under torchrun every rank must read the same inputs: a rank with another table of the same
    shape trained on with 'parameters identical on all ranks: yes' (the frozen table is not
    compared), and one with other shards hung the group until -dist_timeout. The ranks compare
    digests of what they read and stop together, naming the ranks and the inputs that differ."""
    if not ctx.distributed:
        return

    def digest(*chunks):
        h = hashlib.sha256()
        for chunk in chunks:
            h.update(chunk if isinstance(chunk, bytes) else str(chunk).encode("utf-8"))
        return h.hexdigest()

    parts = {
        "vocabularies (-data PREFIX.vocab.pt)": digest("\n".join(src_vocab.itos), "\0", "\n".join(tgt_vocab.itos)),
        "training shards (-data PREFIX.train.N.pt: their number and sizes)": digest(
            *[f"{os.path.basename(p)}:{os.path.getsize(p)};" for p in sorted(train_paths)]
        ),
        "validation shard (-data PREFIX.valid.0.pt)": digest(os.path.getsize(valid_path)),
        "target table (-tgt_emb)": digest(table.contiguous().numpy().tobytes()) if table is not None else "none",
    }
    differ = distributed.inputs_differ(parts, ctx)
    if differ:
        said = "; ".join(f"rank {rank}: {', '.join(names)}" for rank, names in sorted(differ.items()))
        raise UserError(
            f"torchrun: ranks read other inputs than rank 0 ({said}): every rank must be given the "
            "same -data and -tgt_emb files (on every node); nothing was written"
        )


def check_shards(data, train_paths, valid_path, src_vocab, tgt_vocab, warnings):
    """Every shard's ids index this -data's vocabularies (corpus.check_shard), before training:
    a shard of another vocabulary is refused, not found at the first validation (an index
    error) or never (ids in range: training on the wrong words). -> the validation shard's data; a note for
    the log goes to ``warnings``."""
    vocab_path = data + ".vocab.pt"
    unmarked = []
    for path in train_paths:
        if not check_shard(path, read_shard(path), src_vocab, tgt_vocab, vocab_path):
            unmarked.append(path)
    valid = read_shard(valid_path)
    if not check_shard(valid_path, valid, src_vocab, tgt_vocab, vocab_path):
        unmarked.append(valid_path)
    if unmarked:
        more = f" and {len(unmarked) - 1} more" if len(unmarked) > 1 else ""
        warnings.append(
            f"{unmarked[0]}{more} record no vocabulary fingerprint (made by an older "
            f"preprocess.py): only their ids' range could be checked against {vocab_path}; "
            "rerun preprocess.py to have them checked"
        )
    return valid
