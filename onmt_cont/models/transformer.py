"""The Transformer encoder and decoder (Vaswani et al., 2017) with ``scaled_dot_product_attention``:
pre-norm (a LayerNorm before every sublayer and one after the last layer, the default) or post-norm
(``-layer_norm post``: a LayerNorm after every residual sum and none at the end, the original
Transformer's and fairseq's default layout).

The decoder keeps a key/value cache in its state: a step of greedy, beam or k-NN search feeds
one word and attends to the cached keys and values of the words before it, so decoding a
sentence of n words costs O(n) projections instead of O(n²). The encoder's keys and values for
the cross-attention are computed once, at the first step, and kept in the state as well.

The attention the decoder returns (for ``-replace_unk``) is the cross-attention averaged over
heads, and by default over every layer as well (``-alignment_layer mean``), or one layer's
(``-alignment_layer N``). Garg et al. (2019) find the penultimate layer of a 6-layer model the
best aligner; on our 2-layer Multi30k models the better layer differs between the softmax and
the continuous model, and the mean is the better compromise for the continuous models that
``-replace_unk`` serves (lab/tools/replacement_accuracy.py measures it on the validation set).
"""

import argparse
import math
from collections.abc import Iterable
from typing import cast

import torch
from torch import Tensor, nn

from onmt_cont.models.architecture import Decoder, Encoder, State, register_decoder, register_encoder
from onmt_cont.models.dropout import Dropout
from onmt_cont.models.embeddings import TargetEmbeddings
from onmt_cont.models.transformer_layers import DecoderLayer, EncoderLayer, PositionalEncoding, compute_input
from onmt_cont.opts import upgrade


def parse_alignment_layer(text: str) -> int | str:
    """The -alignment_layer option: ``mean`` (the cross-attention of every decoder layer, averaged)
    or a layer number (0-based, negative from the last)."""
    if text == "mean":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'mean' or a layer number, got {text!r}") from None


def check_sizes(dim: int, heads: int, emb_sizes: Iterable[tuple[str, str, int]] = ()) -> None:
    """The Transformer's size constraints, as train.py words them: ``heads`` divides ``dim``
    (-rnn_size) and each of ``emb_sizes`` ((side, option name, width), e.g. ("encoder",
    "src_word_vec_size", 512)) equals it. Raises ValueError."""
    if heads < 1 or dim % heads:
        raise ValueError(
            f"-heads {heads} must divide -rnn_size {dim} (the Transformer's model size): each head "
            "attends over rnn_size / heads dimensions"
        )
    for side, key, size in emb_sizes:
        if size != dim:
            raise ValueError(
                f"-{side}_type transformer adds position vectors to the word embeddings, so they must "
                f"be -rnn_size {dim} wide, not {size}: give -{key} {dim} (or -word_vec_size {dim})"
            )


def _norm_opts(opt: argparse.Namespace) -> tuple[str, float | None]:
    """(-layer_norm, -ff_dropout) of the options; checkpoints written before them are pre-norm, with
    -dropout inside the feed-forward blocks."""
    opt = upgrade(opt)
    return opt.layer_norm, opt.ff_dropout


# the train.py options both Transformer sides read, and no other architecture
READS = frozenset(
    {"heads", "transformer_ff", "position_encoding", "max_positions", "attention_dropout", "ff_dropout", "layer_norm"}
)


def check_opt(opt: argparse.Namespace, side: str, emb_key: str) -> None:
    """The options a Transformer ``side`` ("encoder" or "decoder") is built from, as train.py words them: its
    sizes positive, -attention_dropout in [0, 1), and :func:`check_sizes` with that side's embedding width
    (-``emb_key`` or -word_vec_size). Raises ValueError."""
    for name in ("heads", "transformer_ff", "max_positions"):
        if getattr(opt, name) < 1:
            raise ValueError(f"-{name} must be at least 1, got {getattr(opt, name)}")
    if not 0.0 <= opt.attention_dropout < 1.0:
        raise ValueError(f"-attention_dropout must be in [0, 1), got {opt.attention_dropout}")
    check_sizes(opt.rnn_size, opt.heads, [(side, emb_key, getattr(opt, emb_key) or opt.word_vec_size)])


def check_alignment_layer(layer: int | str | None, num_layers: int) -> None:
    """-alignment_layer: "mean", None, or a layer of a ``num_layers``-layer decoder. Raises ValueError."""
    if layer in (None, "mean"):
        return
    if not isinstance(layer, int) or not -num_layers <= layer < num_layers:
        raise ValueError(
            f"-alignment_layer {layer}: the decoder has {num_layers} layers (0..{num_layers - 1}, or -1 for the last)"
        )


@register_encoder("transformer")
class TransformerEncoder(Encoder):
    """Word embeddings · √d + positions, ``num_layers`` self-attention layers, a final LayerNorm
    (pre-norm; post-norm layers end in their own). Its "final state" (for an RNN decoder's bridge) is the mean
    of the memory bank over the real source tokens, as one layer: ([1, batch, dim], same)."""

    summary = "self-attention layers (pre- or post-norm: -layer_norm)"
    reads = READS
    auto_bf16 = True  # lab/bench/tiny_step.py: the Tiny presets' first 1,000 updates, two seeds a side
    sdpa = True

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        heads: int,
        ff: int,
        num_layers: int,
        dropout: float = 0.1,
        attn_dropout: float = 0.1,
        position_encoding: str = "sinusoidal",
        max_positions: int = 1024,
        pad_id: int = 0,
        norm: str = "pre",
        ff_dropout: float | None = None,
    ):
        super().__init__()
        check_sizes(dim, heads)
        self.embeddings = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.positions = PositionalEncoding(dim, position_encoding, max_positions)
        self.layers = nn.ModuleList(
            EncoderLayer(dim, heads, ff, dropout, attn_dropout, norm, ff_dropout) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(dim) if norm == "pre" else nn.Identity()
        self.dropout = Dropout(dropout)
        self.scale = math.sqrt(dim)
        self.pad_id = pad_id

    @classmethod
    def check_opt(cls, opt: argparse.Namespace) -> None:
        check_opt(opt, "encoder", "src_word_vec_size")

    @classmethod
    def final_layers(cls, opt: argparse.Namespace) -> int:
        return 1  # the mean of the memory bank

    @classmethod
    def from_opt(cls, opt: argparse.Namespace, vocab_size: int, pad_id: int = 0) -> "TransformerEncoder":
        emb_size = opt.src_word_vec_size or opt.word_vec_size
        check_sizes(opt.rnn_size, opt.heads, [("encoder", "src_word_vec_size", emb_size)])
        return cls(
            vocab_size,
            opt.rnn_size,
            opt.heads,
            opt.transformer_ff,
            opt.enc_layers,
            opt.dropout,
            opt.attention_dropout,
            opt.position_encoding,
            opt.max_positions,
            pad_id,
            *_norm_opts(opt),
        )

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """src: [batch, src_len]; lengths: unused (the padding mask comes from the ids).
        Returns memory_bank [batch, src_len, dim] (zero at padding) and the final state."""
        real = src != self.pad_id
        x = self.embeddings(src) * self.scale + self.positions(src.size(1), 0, src.device)
        x = self.dropout(x)
        mask = real[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        x = self.norm(x) * real.unsqueeze(-1)
        mean = (x.sum(1) / real.sum(1, keepdim=True).clamp(min=1)).unsqueeze(0)
        return x, (mean, mean)


@register_decoder("transformer")
class TransformerDecoder(Decoder):
    """Target embeddings (a TargetEmbeddings: trained, or -tie_emb's frozen table) · √d +
    positions, ``num_layers`` layers of causal self-attention, cross-attention and a feed-forward
    block, a final LayerNorm (pre-norm; post-norm layers end in their own). The state is the key/value cache:
    ``k{i}``/``v{i}`` [batch, heads, steps, head_dim] of layer i's self-attention and ``mk{i}``/``mv{i}`` of its
    cross-attention over the memory bank; the initial state is empty."""

    summary = "causal self-attention + cross-attention layers, decoded with a key/value cache"
    reads = READS | {"alignment_layer"}
    auto_bf16 = True
    sdpa = True

    alignment_layer: int | None

    def __init__(
        self,
        embeddings: TargetEmbeddings,
        dim: int,
        heads: int,
        ff: int,
        num_layers: int,
        dropout: float = 0.1,
        attn_dropout: float = 0.1,
        position_encoding: str = "sinusoidal",
        max_positions: int = 1024,
        alignment_layer: int | str | None = None,
        norm: str = "pre",
        ff_dropout: float | None = None,
    ):
        super().__init__()
        check_sizes(dim, heads, [("decoder", "tgt_word_vec_size", embeddings.out_size)])
        self.embeddings = embeddings
        self.positions = PositionalEncoding(dim, position_encoding, max_positions)
        self.layers = nn.ModuleList(
            DecoderLayer(dim, heads, ff, dropout, attn_dropout, norm, ff_dropout) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(dim) if norm == "pre" else nn.Identity()
        self.dropout = Dropout(dropout)
        self.scale = math.sqrt(dim)
        self.hidden_size = dim
        self.set_alignment_layer(alignment_layer)

    @classmethod
    def check_opt(cls, opt: argparse.Namespace) -> None:
        check_opt(opt, "decoder", "tgt_word_vec_size")
        check_alignment_layer(opt.alignment_layer, opt.dec_layers)

    @classmethod
    def from_opt(cls, opt: argparse.Namespace, embeddings: TargetEmbeddings) -> "TransformerDecoder":
        return cls(
            embeddings,
            opt.rnn_size,
            opt.heads,
            opt.transformer_ff,
            opt.dec_layers,
            opt.dropout,
            opt.attention_dropout,
            opt.position_encoding,
            opt.max_positions,
            upgrade(opt).alignment_layer,
            *_norm_opts(opt),
        )

    def set_alignment_layer(self, layer: int | str | None) -> None:
        """The layer whose cross-attention (mean over heads) is returned; None or "mean": the mean
        over every layer (``self.alignment_layer`` is then None)."""
        check_alignment_layer(layer, len(self.layers))
        self.alignment_layer = layer % len(self.layers) if isinstance(layer, int) else None

    def init_state(self, enc_final: tuple[Tensor, Tensor]) -> State:
        """The Transformer decoder starts from nothing but the memory bank: an empty cache."""
        return {}

    def reorder_state(self, state: State, index: Tensor, memory: bool = True) -> State:
        """The cache of the rows ``index`` picks. ``memory`` False: ``index`` maps every row to a row of
        the same sentence (a beam step that no sentence left), so the cross-attention's keys and values,
        which depend on the source alone, stay as they are and only the self-attention's are selected."""
        return {key: v if not memory and key.startswith("m") else v.index_select(0, index) for key, v in state.items()}

    def forward(
        self, tgt_in: Tensor, memory_bank: Tensor, src_mask: Tensor, state: State, need_attn: bool = True
    ) -> tuple[Tensor, Tensor | None, State]:
        """tgt_in: [batch, tgt_len] ids following the cached steps (all of them in training, one
        per step in decoding). Returns dec_out [batch, tgt_len, dim], the alignment layer's
        cross-attention [batch, tgt_len, src_len] (mean over heads, and over layers unless
        ``alignment_layer`` picks one; None in training mode or without ``need_attn``: its
        weights are a computation of their own, which a search skips when nothing reads them)
        and the state with the new positions' keys and values appended."""
        past_len = state["k0"].size(2) if "k0" in state else 0
        length = tgt_in.size(1)
        x = self.embeddings(tgt_in) * self.scale + self.positions(length, past_len, tgt_in.device)
        x = self.dropout(x)
        causal = None
        if length > 1:  # query i (position past_len + i) sees keys 0 .. past_len + i
            keys = torch.arange(past_len + length, device=x.device)
            causal = keys.unsqueeze(0) <= (past_len + torch.arange(length, device=x.device)).unsqueeze(1)
        ctx_mask = src_mask[:, None, None, :]
        new_state, weights_seen = {}, []
        memory_in = None  # the memory bank in the products' dtype, cast once for every layer
        for i, module in enumerate(self.layers):
            layer = cast(DecoderLayer, module)  # nn.ModuleList's items are typed as Module
            if f"mk{i}" in state:
                memory = state[f"mk{i}"], state[f"mv{i}"]
            else:
                memory_in = compute_input(memory_bank) if memory_in is None else memory_in
                memory = layer.ctx_attn.keys_values(memory_in)
            past = (state[f"k{i}"], state[f"v{i}"]) if past_len else None
            need = need_attn and not self.training and self.alignment_layer in (None, i)
            x, (k, v), weights = layer(x, past, memory, causal, ctx_mask, need)
            new_state.update({f"k{i}": k, f"v{i}": v, f"mk{i}": memory[0], f"mv{i}": memory[1]})
            if need:
                weights_seen.append(weights)
        attn = torch.stack(weights_seen).mean(0) if weights_seen else None
        return self.norm(x), attn, new_state
