"""-encoder_type bow: a bag-of-words encoder, the source's word embeddings projected to the model size with no
recurrence and no attention between source words. A new architecture in one file: subclass models.architecture's
Encoder, say what it reads of the options, and register it under the name -encoder_type takes."""

from argparse import Namespace

import torch
from torch import Tensor, nn

from onmt_cont.models.architecture import Encoder, register_encoder


@register_encoder("bow")
class BagOfWordsEncoder(Encoder):
    """Each source word's embedding, projected to -rnn_size (the memory bank the decoder attends to); the final
    state is their mean, as one layer."""

    summary = "bag of words: projected word embeddings, no recurrence"

    def __init__(self, vocab_size: int, emb_size: int, hidden_size: int, pad_id: int = 0):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.proj = nn.Linear(emb_size, hidden_size)
        self.pad_id = pad_id

    @classmethod
    def from_opt(cls, opt: Namespace, vocab_size: int, pad_id: int = 0) -> "BagOfWordsEncoder":
        return cls(vocab_size, opt.src_word_vec_size or opt.word_vec_size, opt.rnn_size, pad_id)

    @classmethod
    def final_layers(cls, opt: Namespace) -> int:
        return 1

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        real = (src != self.pad_id).unsqueeze(-1)
        memory_bank = torch.tanh(self.proj(self.embeddings(src))) * real
        mean = (memory_bank.sum(1) / real.sum(1).clamp(min=1)).unsqueeze(0)  # [1, batch, hidden]
        return memory_bank, (mean, mean)
