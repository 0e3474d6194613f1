"""preprocess.py's options: the corpus, the raw text it was made from, the vocabularies and the length filter, as
one typed configuration (:class:`DataConfig`) from which the parser's flags are built, group by group
(:data:`GROUPS`), and their ranges checked (:mod:`onmt_cont.config`). The checks that combine options, or that
read the files, are in preprocess.py's main()."""

from __future__ import annotations

from argparse import ArgumentParser
from dataclasses import dataclass

from onmt_cont.config import add_flags, option
from onmt_cont.utils import numbers


@dataclass
class DataConfig:
    """preprocess.py's flags, each field with its help, default and range."""

    # Data
    train_src: str | None = option(None, help="tokenized source training text, one sentence per line")
    train_tgt: str | None = option(None, help="tokenized target training text, aligned with -train_src")
    valid_src: str | None = option(None, help="tokenized source validation text")
    valid_tgt: str | None = option(None, help="tokenized target validation text")
    save_data: str | None = option(
        None, help="output prefix: PREFIX.vocab.pt, PREFIX.train.N.pt, PREFIX.valid.0.pt, ..."
    )
    shard_size: int = option(1_000_000, type=int, low=1, help="training examples per shard file")
    shuffle: bool = option(False, help="shuffle the training pairs (a full shuffle across shards)")
    # its range (0 to 2^32 - 1) is numbers.seed's, checked as the flag is read
    seed: int = option(3435, type=numbers.seed, help="random seed for -shuffle: 0 to 2^32 - 1")
    lower: bool = option(False, help="lowercase both sides")
    # Raw text the data was made from
    src_lang: str | None = option(
        None,
        help="the source was raw text in this language, Moses-tokenized (no escaping) and "
        "lowercased as tools/moses_tok.py does",
    )
    tgt_lang: str | None = option(None, help="the target likewise: translations are Moses-detokenized in this language")
    src_bpe_codes: str | None = option(
        None, help="the subword-nmt codes the source was cut with: embedded, with its sha256"
    )
    src_spm: str | None = option(
        None, help="or the SentencePiece model the (Moses-tokenized) source was cut with: embedded"
    )
    tgt_spm: str | None = option(
        None,
        help="the SentencePiece model the target was cut with (softmax models: a continuous "
        "model predicts the vectors of words): embedded; translations' pieces are joined with it",
    )
    # Vocabulary; a negative size would slice words off the end of the list
    src_vocab_size: int = option(50000, type=int, low=0, help="most frequent source words kept")
    tgt_vocab_size: int = option(50000, type=int, low=0, help="most frequent target words kept")
    src_words_min_frequency: int = option(1, type=int, help="drop source words seen fewer times")
    tgt_words_min_frequency: int = option(1, type=int, help="drop target words seen fewer times")
    src_vocab: str | None = option(None, help="reuse this source vocabulary (text: token[TAB count] per line)")
    tgt_vocab: str | None = option(None, help="reuse this target vocabulary (text: token[TAB count] per line)")
    share_vocab: bool = option(
        False,
        help="one vocabulary for both sides, from their counts "
        "together (-tgt_vocab_size words at most), as train.py -share_embeddings needs (fairseq's "
        "--joined-dictionary)",
    )
    tgt_emb: str | None = option(
        None,
        help="pretrained target vectors (.vec/.txt, optionally .gz): build the target vocabulary only from "
        "words that have a vector (the vMF paper's setup: every target word can then be produced)",
    )
    # Filtering; below 1 would drop every pair
    src_seq_length: int = option(100, type=int, low=1, help="drop pairs whose source is longer")
    tgt_seq_length: int = option(100, type=int, low=1, help="drop pairs whose target is longer")


# the parser's groups, their titles and flags in -h's order
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Data",
        ("train_src", "train_tgt", "valid_src", "valid_tgt", "save_data", "shard_size", "shuffle", "seed", "lower"),
    ),
    (
        "Raw text the data was made from (recorded in the vocabulary and every checkpoint, so "
        "that translate.py and onmt_cont.load() read and write raw text with no flags)",
        ("src_lang", "tgt_lang", "src_bpe_codes", "src_spm", "tgt_spm"),
    ),
    (
        "Vocabulary",
        (
            "src_vocab_size",
            "tgt_vocab_size",
            "src_words_min_frequency",
            "tgt_words_min_frequency",
            "src_vocab",
            "tgt_vocab",
            "share_vocab",
            "tgt_emb",
        ),
    ),
    ("Filtering", ("src_seq_length", "tgt_seq_length")),
)

# what a run cannot go without, from the command line or -config (argparse's required= would refuse a config's)
REQUIRED = ("train_src", "train_tgt", "valid_src", "valid_tgt", "save_data")


def add_data_options(p: ArgumentParser) -> None:
    """Add preprocess.py's groups to its parser ``p``, a flag per :class:`DataConfig` field."""
    for title, names in GROUPS:
        add_flags(p.add_argument_group(title), DataConfig, names)
