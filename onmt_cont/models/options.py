"""train.py's "Model" options: the architecture, its sizes, dropout, embeddings and the output layer, as one typed
configuration (:class:`ModelConfig`) from which the group's flags are built and their ranges checked
(:mod:`onmt_cont.config`). The checks that combine options are in :mod:`onmt_cont.train.checks`."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Mapping
from dataclasses import dataclass, fields

from onmt_cont.config import add_flags, option
from onmt_cont.models.architecture import Decoder, Encoder
from onmt_cont.models.model import DECODERS, ENCODERS
from onmt_cont.models.transformer import parse_alignment_layer

MAX_LAYERS = 1000  # the deepest Transformers trained (DeepNet, 2022) have 1,000 layers


def _kinds(table: Mapping[str, type[Encoder] | type[Decoder]]) -> str:
    """-encoder_type / -decoder_type's help: each registered name and its class's summary."""
    return "; ".join(f"{name}: {table[name].summary}" for name in sorted(table))


@dataclass
class ModelConfig:
    """train.py's "Model" flags, each field with its help, default and range; the choices and help of
    -encoder_type / -decoder_type are read from the registries when the parser is built."""

    encoder_type: str | None = option(
        None,
        choices=lambda: sorted(ENCODERS),
        help=lambda: f"{_kinds(ENCODERS)} (default: brnn with -brnn, else rnn)",
    )
    decoder_type: str = option("rnn", choices=lambda: sorted(DECODERS), help=lambda: _kinds(DECODERS))
    rnn_size: int = option(
        1024,
        type=int,
        low=1,
        help="LSTM hidden size (paper: 1024); the Transformer's "
        "model size d_model (its embeddings must be as wide: -word_vec_size)",
    )
    layers: int | None = option(None, type=int, low=1, high=MAX_LAYERS, help="set both -enc_layers and -dec_layers")
    word_vec_size: int = option(512, type=int, low=1, help="input embedding size (paper: 512)")
    src_word_vec_size: int | None = option(None, type=int, low=1, help="source embedding size (default -word_vec_size)")
    tgt_word_vec_size: int | None = option(
        None, type=int, low=1, help="target input embedding size (default -word_vec_size)"
    )
    enc_layers: int = option(1, type=int, low=1, high=MAX_LAYERS, help="encoder LSTM layers (paper: 1)")
    dec_layers: int = option(2, type=int, low=1, high=MAX_LAYERS, help="decoder LSTM layers (paper: 2)")
    brnn: bool = option(False, help="bidirectional encoder (the paper's)")
    heads: int = option(8, type=int, help="transformer: attention heads (must divide -rnn_size)")
    transformer_ff: int = option(2048, type=int, help="transformer: inner size of the feed-forward blocks")
    position_encoding: str = option(
        "sinusoidal",
        choices=["sinusoidal", "learned"],
        help="transformer: fixed sinusoids (any length) or a learned table of -max_positions rows",
    )
    max_positions: int = option(
        1024,
        type=int,
        help="transformer, -position_encoding learned: "
        "positions with a vector of their own (longer sentences reuse the last one)",
    )
    attention_dropout: float = option(0.1, type=float, help="transformer: dropout on the attention probabilities")
    ff_dropout: float | None = option(
        None,
        type=float,
        low=0.0,
        high=1.0,
        high_open=True,
        help="transformer: dropout between the two layers of "
        "each feed-forward block (fairseq's --activation-dropout; default: -dropout)",
    )
    layer_norm: str = option(
        "pre",
        choices=["pre", "post"],
        help="transformer: pre (a LayerNorm "
        "before every sublayer and after the last layer) or post (after every residual sum, none at the "
        "end: the original Transformer's and fairseq's layout)",
    )
    share_embeddings: bool = option(
        False,
        help="one word table for the encoder and the "
        "decoder's input; needs one vocabulary for both sides (preprocess.py -share_vocab)",
    )
    share_decoder_embeddings: bool = option(
        False,
        help="-loss ce: the softmax's output "
        "matrix is the decoder's input table (with -share_embeddings: fairseq's "
        "--share-all-embeddings); the softmax keeps its own bias",
    )
    emb_init: str = option(
        "default",
        choices=["default", "normal"],
        help="trained word tables: "
        "default: as -param_init / -param_init_glorot; normal: N(0, 1/d), d their width (fairseq's "
        "Transformer)",
    )
    alignment_layer: int | str | None = option(
        None,
        type=parse_alignment_layer,
        help="Transformer decoder: "
        "the attention -replace_unk reads: mean (default: the cross-attention of every layer and head, "
        "averaged) or one layer's, averaged over its heads (0-based, -1 the last); translate.py can "
        "override it",
    )
    dropout: float = option(
        0.3,
        type=float,
        help="dropout probability (on the CPU rounded to a multiple of 1/65536: onmt_cont/models/dropout.py)",
    )
    param_init: float = option(
        0.1,
        type=float,
        low=0,
        low_note="0: PyTorch's init",
        help="uniform init in [-x, x]; 0 keeps PyTorch's init",
    )
    param_init_glorot: bool = option(
        False,
        help="Xavier-uniform init of every trainable matrix instead of -param_init (OpenNMT's Transformer setting)",
    )
    generator: str = option(
        "linear",
        choices=["linear", "nonlinear", "joint"],
        help="output layer: with -loss ce a softmax over the vocabulary (linear), or Pappas et al.'s "
        "structure-aware joint input-output layer (joint); with a continuous loss a layer to the "
        "embedding size (linear, or nonlinear: Linear-ReLU-Linear)",
    )
    joint_dim: int = option(
        512,
        type=int,
        low=1,
        help="joint: size d_j of the joint input-output space (paper: chosen on validation data among 512, 2048, 4096)",
    )
    joint_sample: float | None = option(
        None,
        type=float,
        low=0.0,
        low_open=True,
        high=1.0,
        help="joint: in training, each batch's softmax covers its target words plus uniform negatives, "
        "this fraction of the vocabulary in all (paper: 0.25 for |V| ~ 128K, or d_j >= 2048 at 64K); "
        "validation and decoding use the full softmax. Default: the full softmax throughout",
    )
    joint_dropout: float | None = option(
        None,
        type=float,
        low=0.0,
        high=1.0,
        high_open=True,
        help="joint: dropout after both joint-space "
        "projections (default: -dropout; the paper drops 0.3 after each layer)",
    )
    rewe_hidden: int | None = option(
        None,
        type=int,
        low=1,
        help="ReWE: hidden size of the head W2·ReLU(W1·s + b1) + b2 (default: -rnn_size, the size of s)",
    )
    tie_emb: bool = option(
        False,
        help="decoder input embeddings = the frozen pretrained target "
        "vectors (-tgt_emb), mapped to -tgt_word_vec_size by a trainable linear layer if sizes differ",
    )


def add_model_options(p: ArgumentParser) -> None:
    """Add the "Model" group to train.py's parser ``p``, a flag per :class:`ModelConfig` field."""
    add_flags(p.add_argument_group("Model"), ModelConfig, [f.name for f in fields(ModelConfig)])
