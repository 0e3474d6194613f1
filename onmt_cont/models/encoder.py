"""The LSTM encoder."""

from argparse import Namespace

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from onmt_cont.models.architecture import Encoder, register_encoder
from onmt_cont.models.dropout import Dropout

# Devices whose LSTM runs in float32, outside autocast, when autocast asks for bfloat16. On CUDA,
# PyTorch's autocast wrapper for cuDNN RNNs casts to float16 whatever autocast's dtype is, and
# -amp_dtype bf16 has no GradScaler: the loss is divided by the batch's token count, so fp16
# gradients could underflow to zero. Running the LSTM in float32 costs its speed-up but keeps the
# run exact; -amp_dtype fp16 (scaled) keeps the cuDNN fp16 LSTM. On CPU, oneDNN's bf16 LSTM is
# bf16 (train.py probes that the CPU has it), so the CPU stays under autocast.
FP32_LSTM_UNDER_BF16 = {"cuda"}


def fp32_lstm(device_type: str) -> bool:
    """Whether the LSTM should leave autocast on ``device_type`` now (see FP32_LSTM_UNDER_BF16)."""
    return (
        device_type in FP32_LSTM_UNDER_BF16
        and torch.is_autocast_enabled(device_type)
        and torch.get_autocast_dtype(device_type) == torch.bfloat16
    )


@register_encoder("rnn")
class RNNEncoder(Encoder):
    """Embeds the source and runs a (bi)LSTM over it (-encoder_type rnn: one direction).

    With ``bidirectional`` each direction has ``hidden_size // 2`` units, so the memory bank
    is ``hidden_size`` wide either way (OpenNMT's convention).
    """

    summary = "LSTM"
    bidirectional_type = False  # what -encoder_type builds under this class's name

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = True,
        dropout: float = 0.0,
        pad_id: int = 0,
    ):
        super().__init__()
        if bidirectional and hidden_size % 2:
            raise ValueError(f"-rnn_size must be even with -brnn, got {hidden_size}")
        self.embeddings = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.rnn = nn.LSTM(
            emb_size,
            hidden_size // 2 if bidirectional else hidden_size,
            num_layers=num_layers,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
            batch_first=True,
        )
        self.bidirectional = bidirectional
        self.num_layers = num_layers

    @classmethod
    def from_opt(cls, opt: Namespace, vocab_size: int, pad_id: int = 0) -> "RNNEncoder":
        """The encoder train.py's options describe (-enc_layers, -rnn_size, -dropout), over a
        source vocabulary of ``vocab_size`` words; one direction, two for -encoder_type brnn (or -brnn)."""
        emb_size = opt.src_word_vec_size or opt.word_vec_size
        return cls(vocab_size, emb_size, opt.rnn_size, opt.enc_layers, cls.bidirectional_type, opt.dropout, pad_id)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """src: [batch, src_len] ids; lengths: [batch] (on CPU or the same device).

        Returns memory_bank [batch, src_len, hidden] and final (h, c), each
        [num_layers, batch, hidden] (the two directions concatenated)."""
        emb = self.dropout(self.embeddings(src))
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        if fp32_lstm(emb.device.type):
            with torch.autocast(emb.device.type, enabled=False):
                out, (h, c) = self.rnn(
                    PackedSequence(
                        packed.data.float(), packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices
                    )
                )
        else:
            out, (h, c) = self.rnn(packed)
        memory_bank, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        if self.bidirectional:
            h = torch.cat([h[0::2], h[1::2]], dim=2)
            c = torch.cat([c[0::2], c[1::2]], dim=2)
        return memory_bank, (h, c)


@register_encoder("brnn")
class BiRNNEncoder(RNNEncoder):
    """-encoder_type brnn (or -brnn): the LSTM encoder reading the source in both directions."""

    summary = "bidirectional LSTM (same as -brnn)"
    bidirectional_type = True
