"""The interface every architecture implements, and the registries that -encoder_type / -decoder_type name.

An architecture is an :class:`Encoder` and a :class:`Decoder`, each registered under the name train.py's flag
takes (``@register_encoder("transformer")``). build_model, train.py's checks and the searches read only this
interface: a new architecture is one module under models/ that subclasses them, registers them, and is imported
once (docs/extending.md shows one). Which options a class reads (``reads``) lets train.py warn about those the
chosen architecture never reads, as the loss registry does for losses.
"""

from abc import ABCMeta, abstractmethod
from argparse import Namespace
from collections.abc import Callable
from typing import ClassVar, TypeVar

from torch import Tensor, nn

from onmt_cont.models.embeddings import TargetEmbeddings
from onmt_cont.opts import upgrade

# a decoder's state between steps: the LSTM's h, c and input feed, the Transformer's key/value cache
State = dict[str, Tensor]


class Encoder(nn.Module, metaclass=ABCMeta):
    """Reads the source. ``forward(src [batch, src_len] ids, lengths [batch])`` returns the memory bank
    [batch, src_len, hidden] (zero or ignored at padding) and the final state: (h, c), each
    [layers, batch, hidden], which an RNN decoder's bridge starts from."""

    # one line for -encoder_type's help
    summary: ClassVar[str] = ""
    # the train.py options only this kind of encoder reads (train.py warns when they are given without it)
    reads: ClassVar[frozenset[str]] = frozenset()
    # -amp auto: bfloat16 was measured to train it at float32's learning curve on CPUs that have bf16
    auto_bf16: ClassVar[bool] = False
    # it attends through torch's scaled_dot_product_attention (whose GPU backends -amp tunes)
    sdpa: ClassVar[bool] = False
    # the source word table (-share_embeddings makes it the target's too)
    embeddings: nn.Embedding

    @classmethod
    @abstractmethod
    def from_opt(cls, opt: Namespace, vocab_size: int, pad_id: int = 0) -> "Encoder":
        """The encoder train.py's options describe, over a source vocabulary of ``vocab_size`` words."""

    @classmethod
    def check_opt(cls, opt: Namespace) -> None:
        """Raise ValueError, in train.py's words, where the options cannot build one (before anything is built)."""

    @classmethod
    def final_layers(cls, opt: Namespace) -> int:
        """How many layers the final state has (an RNN decoder's bridge is sized by it)."""
        return opt.enc_layers

    @abstractmethod
    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]: ...


class Decoder(nn.Module, metaclass=ABCMeta):
    """Writes the target one step or a whole teacher-forced sequence at a time, from a state the searches
    carry: ``forward(tgt_in [batch, tgt_len] ids, memory_bank, src_mask [batch, src_len], state)`` returns the
    outputs [batch, tgt_len, hidden] the generator reads, the attention over the source [batch, tgt_len,
    src_len] (for -replace_unk; None when not asked for) and the next state."""

    summary: ClassVar[str] = ""
    reads: ClassVar[frozenset[str]] = frozenset()
    auto_bf16: ClassVar[bool] = False
    sdpa: ClassVar[bool] = False
    embeddings: TargetEmbeddings  # the target words it reads
    hidden_size: int

    @classmethod
    @abstractmethod
    def from_opt(cls, opt: Namespace, embeddings: TargetEmbeddings) -> "Decoder":
        """The decoder train.py's options describe, reading the target through ``embeddings``
        (models.embeddings.TargetEmbeddings)."""

    @classmethod
    def check_opt(cls, opt: Namespace) -> None:
        """Raise ValueError, in train.py's words, where the options cannot build one."""

    @abstractmethod
    def init_state(self, enc_final: tuple[Tensor, Tensor]) -> State:
        """The state before the first target word, from the encoder's final state."""

    @abstractmethod
    def reorder_state(self, state: State, index: Tensor, memory: bool = True) -> State:
        """Beam search: the state of the rows ``index`` [n] picks. ``memory`` False: ``index`` keeps every row
        within its sentence, so what depends on the source alone may stay as it is."""

    @abstractmethod
    def forward(
        self, tgt_in: Tensor, memory_bank: Tensor, src_mask: Tensor, state: State, need_attn: bool = True
    ) -> tuple[Tensor, Tensor | None, State]: ...


def architecture(opt: Namespace | dict) -> tuple[str, str]:
    """-> (encoder name, decoder name) of the options: -encoder_type / -decoder_type, where
    -encoder_type defaults to brnn with -brnn and rnn without (checkpoints written before these
    options existed have neither, and are LSTMs)."""
    full = upgrade(opt)
    enc = full.encoder_type or ("brnn" if full.brnn else "rnn")
    dec = full.decoder_type or "rnn"
    if full.brnn and enc != "brnn":
        raise ValueError(f"-brnn makes the RNN encoder bidirectional: it does not go with -encoder_type {enc}")
    return enc, dec


ENCODERS: dict[str, type[Encoder]] = {}
DECODERS: dict[str, type[Decoder]] = {}

C = TypeVar("C", bound=type)


def _register(table: dict, kind: str, name: str) -> Callable[[C], C]:
    def add(cls: C) -> C:
        if name in table:
            raise ValueError(f"{kind} is already registered as {name!r}: {table[name].__name__}")
        table[name] = cls
        return cls

    return add


def register_encoder(name: str) -> Callable[[C], C]:
    """Class decorator: -encoder_type ``name`` builds this encoder."""
    return _register(ENCODERS, "an encoder", name)


def register_decoder(name: str) -> Callable[[C], C]:
    """Class decorator: -decoder_type ``name`` builds this decoder."""
    return _register(DECODERS, "a decoder", name)
