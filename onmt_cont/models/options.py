"""train.py's "Model" options: the architecture, its sizes, dropout, embeddings and the output layer.
What the parser cannot check is in :mod:`onmt_cont.train.checks`."""

from argparse import ArgumentParser
from collections.abc import Mapping

from onmt_cont.models.architecture import Decoder, Encoder
from onmt_cont.models.model import DECODERS, ENCODERS
from onmt_cont.models.transformer import parse_alignment_layer


def _kinds(table: Mapping[str, type[Encoder] | type[Decoder]]) -> str:
    """-encoder_type / -decoder_type's help: each registered name and its class's summary."""
    return "; ".join(f"{name}: {table[name].summary}" for name in sorted(table))


def add_model_options(p: ArgumentParser) -> None:
    """Add the "Model" group to train.py's parser ``p``."""
    g = p.add_argument_group("Model")
    g.add_argument(
        "-encoder_type",
        choices=sorted(ENCODERS),
        default=None,
        help=f"{_kinds(ENCODERS)} (default: brnn with -brnn, else rnn)",
    )
    g.add_argument("-decoder_type", choices=sorted(DECODERS), default="rnn", help=_kinds(DECODERS))
    g.add_argument(
        "-rnn_size",
        type=int,
        default=1024,
        help="LSTM hidden size (paper: 1024); the Transformer's "
        "model size d_model (its embeddings must be as wide: -word_vec_size)",
    )
    g.add_argument("-layers", type=int, default=None, help="set both -enc_layers and -dec_layers")
    g.add_argument("-word_vec_size", type=int, default=512, help="input embedding size (paper: 512)")
    g.add_argument("-src_word_vec_size", type=int, default=None, help="source embedding size (default -word_vec_size)")
    g.add_argument(
        "-tgt_word_vec_size", type=int, default=None, help="target input embedding size (default -word_vec_size)"
    )
    g.add_argument("-enc_layers", type=int, default=1, help="encoder LSTM layers (paper: 1)")
    g.add_argument("-dec_layers", type=int, default=2, help="decoder LSTM layers (paper: 2)")
    g.add_argument("-brnn", action="store_true", help="bidirectional encoder (the paper's)")
    g.add_argument("-heads", type=int, default=8, help="transformer: attention heads (must divide -rnn_size)")
    g.add_argument("-transformer_ff", type=int, default=2048, help="transformer: inner size of the feed-forward blocks")
    g.add_argument(
        "-position_encoding",
        choices=["sinusoidal", "learned"],
        default="sinusoidal",
        help="transformer: fixed sinusoids (any length) or a learned table of -max_positions rows",
    )
    g.add_argument(
        "-max_positions",
        type=int,
        default=1024,
        help="transformer, -position_encoding learned: "
        "positions with a vector of their own (longer sentences reuse the last one)",
    )
    g.add_argument(
        "-attention_dropout", type=float, default=0.1, help="transformer: dropout on the attention probabilities"
    )
    g.add_argument(
        "-ff_dropout",
        type=float,
        default=None,
        help="transformer: dropout between the two layers of "
        "each feed-forward block (fairseq's --activation-dropout; default: -dropout)",
    )
    g.add_argument(
        "-layer_norm",
        choices=["pre", "post"],
        default="pre",
        help="transformer: pre (a LayerNorm "
        "before every sublayer and after the last layer) or post (after every residual sum, none at the "
        "end: the original Transformer's and fairseq's layout)",
    )
    g.add_argument(
        "-share_embeddings",
        action="store_true",
        help="one word table for the encoder and the "
        "decoder's input; needs one vocabulary for both sides (preprocess.py -share_vocab)",
    )
    g.add_argument(
        "-share_decoder_embeddings",
        action="store_true",
        help="-loss ce: the softmax's output "
        "matrix is the decoder's input table (with -share_embeddings: fairseq's "
        "--share-all-embeddings); the softmax keeps its own bias",
    )
    g.add_argument(
        "-emb_init",
        choices=["default", "normal"],
        default="default",
        help="trained word tables: "
        "default: as -param_init / -param_init_glorot; normal: N(0, 1/d), d their width (fairseq's "
        "Transformer)",
    )
    g.add_argument(
        "-alignment_layer",
        type=parse_alignment_layer,
        default=None,
        help="Transformer decoder: "
        "the attention -replace_unk reads: mean (default: the cross-attention of every layer and head, "
        "averaged) or one layer's, averaged over its heads (0-based, -1 the last); translate.py can "
        "override it",
    )
    g.add_argument(
        "-dropout",
        type=float,
        default=0.3,
        help="dropout probability (on the CPU rounded to a multiple of 1/65536: onmt_cont/models/dropout.py)",
    )
    g.add_argument("-param_init", type=float, default=0.1, help="uniform init in [-x, x]; 0 keeps PyTorch's init")
    g.add_argument(
        "-param_init_glorot",
        action="store_true",
        help="Xavier-uniform init of every trainable matrix instead of -param_init (OpenNMT's Transformer setting)",
    )
    g.add_argument(
        "-generator",
        choices=["linear", "nonlinear", "joint"],
        default="linear",
        help="output layer: with -loss ce a softmax over the vocabulary (linear), or Pappas et al.'s "
        "structure-aware joint input-output layer (joint); with a continuous loss a layer to the "
        "embedding size (linear, or nonlinear: Linear-ReLU-Linear)",
    )
    g.add_argument(
        "-joint_dim",
        type=int,
        default=512,
        help="joint: size d_j of the joint input-output space (paper: chosen on validation data among 512, 2048, 4096)",
    )
    g.add_argument(
        "-joint_sample",
        type=float,
        default=None,
        help="joint: in training, each batch's softmax covers its target words plus uniform negatives, "
        "this fraction of the vocabulary in all (paper: 0.25 for |V| ~ 128K, or d_j >= 2048 at 64K); "
        "validation and decoding use the full softmax. Default: the full softmax throughout",
    )
    g.add_argument(
        "-joint_dropout",
        type=float,
        default=None,
        help="joint: dropout after both joint-space "
        "projections (default: -dropout; the paper drops 0.3 after each layer)",
    )
    g.add_argument(
        "-rewe_hidden",
        type=int,
        default=None,
        help="ReWE: hidden size of the head W2·ReLU(W1·s + b1) + b2 (default: -rnn_size, the size of s)",
    )
    g.add_argument(
        "-tie_emb",
        action="store_true",
        help="decoder input embeddings = the frozen pretrained target "
        "vectors (-tgt_emb), mapped to -tgt_word_vec_size by a trainable linear layer if sizes differ",
    )
