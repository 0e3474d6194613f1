"""The encoder-decoder, and building it from options."""

from argparse import Namespace

import torch
from torch import Tensor, nn

# the architectures register themselves (models/architecture.py) as their modules are imported
import onmt_cont.models.decoder  # noqa: F401
import onmt_cont.models.encoder  # noqa: F401
import onmt_cont.models.transformer  # noqa: F401
from onmt_cont.constants import PAD_ID
from onmt_cont.losses import LOSSES, decode_criterion
from onmt_cont.models.architecture import DECODERS, ENCODERS, Decoder, Encoder, State, architecture
from onmt_cont.models.embeddings import TargetEmbeddings
from onmt_cont.models.generators import (
    ContinuousGenerator,
    JointGenerator,
    ReWEGenerator,
    SoftmaxGenerator,
    normalize_table,
)
from onmt_cont.opts import upgrade

# what turns the decoder's states into the model's output and word scores (generators.py)
Generator = SoftmaxGenerator | ReWEGenerator | JointGenerator | ContinuousGenerator


class NMTModel(nn.Module):
    encoder: Encoder
    decoder: Decoder
    generator: Generator

    def __init__(self, encoder: Encoder, decoder: Decoder, generator: Generator):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.generator = generator

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor, State]:
        """-> memory_bank [batch, src_len, hidden], src_mask [batch, src_len], decoder state."""
        memory_bank, enc_final = self.encoder(src, src_lengths)
        src_mask = src != PAD_ID
        return memory_bank, src_mask, self.decoder.init_state(enc_final)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """src: [batch, src_len]; tgt_in: [batch, tgt_len] (starting with <s>).
        Returns the decoder's states [batch, tgt_len, hidden] (the trainer gives those of the real
        target positions to the generator) and attention [batch, tgt_len, src_len]."""
        memory_bank, src_mask, state = self.encode(src, src_lengths)
        dec_out, attn, _ = self.decoder(tgt_in, memory_bank, src_mask, state)
        return dec_out, attn


def generator_kind(opt: Namespace) -> str:
    """Check that -generator, -loss and -rewe_lambda fit together; return 'softmax', 'rewe',
    'joint' or 'continuous'."""
    opt = upgrade(opt)
    if LOSSES[opt.loss].continuous:
        if opt.generator not in ("linear", "nonlinear"):
            raise ValueError(
                f"-loss {opt.loss} needs a continuous generator (-generator linear|nonlinear), "
                f"not -generator {opt.generator}"
            )
        kind = "continuous"
    elif opt.generator == "joint":
        kind = "joint"
    elif opt.generator == "linear":
        kind = "softmax"
    else:
        raise ValueError(
            f"-loss {opt.loss} is a softmax loss: use -generator linear or joint (got -generator {opt.generator})"
        )
    if opt.rewe_lambda is not None:
        if kind != "softmax":
            raise ValueError(
                "-rewe_lambda adds a ReWE head to a softmax model: it needs -loss ce -generator linear "
                f"(got -loss {opt.loss} -generator {opt.generator})"
            )
        kind = "rewe"
    return kind


def _initialised_here(model: nn.Module) -> list[nn.Parameter]:
    """The trainable parameters, in registration order, except those of modules that initialise
    themselves from their own generator (``self_initialised``, the ReWE head): adding such a
    module changes no other initial value; nor a trained target table (-train_table), which
    starts from the pretrained vectors."""
    own = {id(p) for m in model.modules() if getattr(m, "self_initialised", False) for p in m.parameters()}
    own |= {id(m.table) for m in model.modules() if getattr(m, "trains_table", False)}
    return [p for p in model.parameters() if p.requires_grad and id(p) not in own]


def init_uniform(model: nn.Module, scale: float) -> None:
    """Every parameter of :func:`_initialised_here` uniform in [-scale, scale] from the global RNG."""
    for p in _initialised_here(model):
        torch.nn.init.uniform_(p, -scale, scale)


def init_glorot(model: nn.Module) -> None:
    """-param_init_glorot: Xavier-uniform for every matrix of :func:`_initialised_here`. Vectors keep
    PyTorch's initial values: LayerNorm's ones and zeros, and nn.Linear's biases uniform in ±1/√fan_in
    (OpenNMT-py's -param_init_glorot sets those biases to zero: one of the ways its early steps differ
    from ours)."""
    for p in _initialised_here(model):
        if p.dim() > 1:
            torch.nn.init.xavier_uniform_(p)


def build_generator(
    opt: Namespace, kind: str, embeddings: TargetEmbeddings, tgt_vocab_size: int, tgt_table: Tensor | None
) -> Generator:
    opt = upgrade(opt)
    if kind == "continuous":
        return ContinuousGenerator(
            opt.rnn_size,
            _needs(kind, tgt_table),
            opt.generator == "nonlinear",
            decode_criterion(opt.loss),
            word_bias=opt.word_bias,
            train_table=opt.train_table,
        )
    if kind == "joint":
        dropout = opt.dropout if opt.joint_dropout is None else opt.joint_dropout
        return JointGenerator(opt.rnn_size, embeddings, tgt_vocab_size, opt.joint_dim, dropout, opt.joint_sample)
    if kind == "rewe":
        hidden = opt.rewe_hidden or opt.rnn_size
        return ReWEGenerator(opt.rnn_size, tgt_vocab_size, _needs(kind, tgt_table), hidden, opt.param_init, opt.seed)
    return SoftmaxGenerator(opt.rnn_size, tgt_vocab_size)


def _needs(kind: str, table: Tensor | None) -> Tensor:
    if table is None:  # build_model says it first, in train.py's words
        raise ValueError(f"a {kind} generator needs the target table (-tgt_emb)")
    return table


def check_sharing(opt: Namespace, kind: str, src_vocab_size: int, tgt_vocab_size: int) -> None:
    """-share_embeddings / -share_decoder_embeddings: what they need of the model. Raises ValueError."""
    opt = upgrade(opt)
    emb = opt.tgt_word_vec_size or opt.word_vec_size
    if opt.share_embeddings:
        src_emb = opt.src_word_vec_size or opt.word_vec_size
        if opt.tie_emb:
            raise ValueError(
                "-share_embeddings makes the source embeddings the decoder's trained input table: "
                "it does not go with -tie_emb's frozen pretrained table"
            )
        if src_vocab_size != tgt_vocab_size or src_emb != emb:
            raise ValueError(
                f"-share_embeddings needs one vocabulary for both sides (preprocess.py -share_vocab) "
                f"and one embedding size: the source has {src_vocab_size} words x {src_emb}, the target "
                f"{tgt_vocab_size} x {emb}"
            )
    if opt.share_decoder_embeddings:
        if kind != "softmax":
            raise ValueError(
                "-share_decoder_embeddings makes the softmax's output matrix the decoder's input table: "
                f"it needs -loss ce -generator linear (got -loss {opt.loss} -generator {opt.generator}"
                f"{' -rewe_lambda' if kind == 'rewe' else ''})"
            )
        if opt.tie_emb:
            raise ValueError(
                "-share_decoder_embeddings shares the decoder's trained input table: it does not go with -tie_emb"
            )
        if emb != opt.rnn_size:
            raise ValueError(
                f"-share_decoder_embeddings needs target embeddings as wide as the decoder's output: "
                f"-tgt_word_vec_size {emb} against -rnn_size {opt.rnn_size}"
            )


def build_model(opt: Namespace, src_vocab_size: int, tgt_vocab_size: int, tgt_table: Tensor | None = None) -> NMTModel:
    """Build the model from options (a Namespace or anything with the same attributes).

    ``tgt_table`` [tgt_vocab, m]: the pretrained target vectors (normalised here), needed by
    continuous losses, by ``-tie_emb`` and by ``-rewe_lambda``. Options a checkpoint predates take their
    :data:`~onmt_cont.opts.LEGACY` values."""
    opt = upgrade(opt)
    kind = generator_kind(opt)
    if tgt_table is not None:
        tgt_table = normalize_table(tgt_table)
    if (kind in ("continuous", "rewe") or opt.tie_emb) and tgt_table is None:
        needs = "-rewe_lambda" if kind == "rewe" else f"-loss {opt.loss}{' -tie_emb' if opt.tie_emb else ''}"
        raise ValueError(f"{needs} needs -tgt_emb")
    check_sharing(opt, kind, src_vocab_size, tgt_vocab_size)
    enc_name, dec_name = architecture(opt)
    tgt_emb = opt.tgt_word_vec_size or opt.word_vec_size
    encoder = ENCODERS[enc_name].from_opt(opt, src_vocab_size, PAD_ID)
    embeddings = TargetEmbeddings(tgt_vocab_size, tgt_emb, tgt_table if opt.tie_emb else None, PAD_ID)
    decoder = DECODERS[dec_name].from_opt(opt, embeddings)
    generator = build_generator(opt, kind, embeddings, tgt_vocab_size, tgt_table)
    if opt.share_embeddings:
        encoder.embeddings.weight = embeddings.table.weight
    if opt.share_decoder_embeddings:
        assert isinstance(generator, SoftmaxGenerator)  # check_sharing asked for -generator linear
        generator.proj.weight = embeddings.table.weight
    model = NMTModel(encoder, decoder, generator)
    if opt.param_init_glorot:
        init_glorot(model)
    elif opt.param_init:
        init_uniform(model, opt.param_init)
    if opt.emb_init == "normal":  # fairseq's: N(0, 1/d) for every trained word table
        for table in (encoder.embeddings, None if opt.tie_emb else embeddings.table):
            if table is not None:
                torch.nn.init.normal_(table.weight, 0.0, table.weight.size(1) ** -0.5)
    with torch.no_grad():
        encoder.embeddings.weight[PAD_ID].zero_()
        if not opt.tie_emb:
            embeddings.table.weight[PAD_ID].zero_()
        if isinstance(generator, ContinuousGenerator) and generator.bias is not None:
            generator.bias.zero_()  # -word_bias starts as plain nearest-neighbour search
    return model
