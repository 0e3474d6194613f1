"""embeddings_to_torch.py's options: the vector files, the vocabulary they are aligned with, the output and the
target table's initialisation, as one typed configuration (:class:`TableConfig`) from which the parser's flags are
built and their ranges checked (:mod:`onmt_cont.config`). The checks that combine options (-alpha only with -init
mixed, -from_model only with -init softmax, -dim with or without -emb_file_dec) are tables.check_table_args."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from onmt_cont.config import add_flags, option
from onmt_cont.inputters.embeddings import DEFAULT_CHUNK_BYTES, MAX_DIM
from onmt_cont.inputters.tables import DEFAULT_ALPHA, INITS, UNK_VECTORS
from onmt_cont.utils import numbers

UNK_HELP = (
    "the <unk> row (row 1). average: the mean of the file's vectors that are not in the vocabulary (the "
    "vMF paper's choice; default for -init pretrained and mixed, where it is mixed like any word row); it "
    "sits near the centre of the cloud, a hub that uncertain predictions fall on. random: a random unit "
    "vector, nearly orthogonal to every row in high dimension, so <unk> is predicted only when meant "
    "(default for random_sphere/random_cube, where it is the init's own draw; for pretrained and mixed a "
    "fresh unit Gaussian direction, scaled to the RMS word-row length without -normalize). zero: zeros: "
    "never a nearest neighbour of a prediction with a positive cosine to any row, and training on a "
    "<unk> target gets no direction from the loss. vocab_mean: the mean of the vocabulary-word rows, "
    "the direction of highest mean cosine to the words: a control that should be the worst hub (zero after "
    "-center, so it stays zero)"
)


@dataclass
class TableConfig:
    """embeddings_to_torch.py's flags, each field with its help, default and range."""

    emb_file_dec: str | None = option(
        None,
        help="vector file for the target vocabulary (may be left out with -init random_sphere|random_cube -dim N)",
    )
    emb_file_enc: str | None = option(None, help="vector file for the source vocabulary (optional)")
    dict_file: str | None = option(None, required=True, help="PREFIX.vocab.pt written by preprocess.py")
    output_file: str | None = option(
        None, required=True, help="output prefix: writes OUT.dec.pt (and OUT.enc.pt) plus OUT.*.missing.txt"
    )
    type: str = option(
        "GloVe",
        choices=["GloVe", "word2vec"],
        help="file format: GloVe ('word v1 ... vd' per line) or word2vec/fastText (the same after a "
        "'COUNT DIM' line); such a header line is detected by itself either way",
    )
    normalize: bool = option(False, help="make every row unit length (see below for <unk>); padding stays zero")
    # its range (0 to 2^32 - 1) is numbers.seed's, checked as the flag is read
    seed: int = option(
        1,
        type=numbers.seed,
        help="seed of the random vectors: rows the file lacks, -init and -unk_vector draws: 0 to 2^32 - 1 (default 1)",
    )
    # The target table (tables.py)
    init: str = option("pretrained", choices=INITS, help="how the target rows are made")
    alpha: float | None = option(
        None,  # None: DEFAULT_ALPHA under -init mixed
        type=float,
        low=0.0,
        high=1.0,
        help=f"-init mixed: weight of the pretrained direction, in [0, 1] (default {DEFAULT_ALPHA})",
    )
    dim: int | None = option(
        None,
        type=int,
        low=1,
        high=MAX_DIM,  # the table is allocated [vocabulary, dim]
        help="dimension of a random table made without -emb_file_dec",
    )
    from_model: str | None = option(
        None,
        help="-init softmax: a checkpoint of train.py with a softmax output layer (-loss ce -generator linear)",
    )
    unk_vector: str | None = option(None, choices=UNK_VECTORS, help=UNK_HELP)  # None: the -init's own
    center: bool = option(False, help="remove the mean word row from every non-zero row")
    center_pcs: int = option(
        0,
        type=int,
        low=0,
        help="also remove the top K principal directions of the centred word rows (implies -center)",
    )
    # the size of the blocks a vector file is read in (tests make it small); not in -h
    chunk_bytes: int = option(DEFAULT_CHUNK_BYTES, type=int, help=argparse.SUPPRESS)


# -h's order: the parser's own flags (under "options"), the target table's group, then the hidden -chunk_bytes
OPTIONS = ("emb_file_dec", "emb_file_enc", "dict_file", "output_file", "type", "normalize", "seed")
TABLE_GROUP = (
    "target table (see the end of -h)",
    ("init", "alpha", "dim", "from_model", "unk_vector", "center", "center_pcs"),
)


def add_table_options(p: argparse.ArgumentParser) -> None:
    """Add embeddings_to_torch.py's flags to its parser ``p``, one per :class:`TableConfig` field."""
    add_flags(p, TableConfig, OPTIONS)
    title, names = TABLE_GROUP
    add_flags(p.add_argument_group(title), TableConfig, names)
    add_flags(p, TableConfig, ("chunk_bytes",))
