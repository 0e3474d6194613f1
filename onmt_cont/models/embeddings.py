"""The decoder's input table: the target words' embeddings, trained, or -tie_emb's frozen pretrained table
(which -tgt_emb_extend can grow)."""

import torch
from torch import Tensor, nn

from onmt_cont.constants import UNK_ID


class TargetEmbeddings(nn.Module):
    """Decoder input embeddings: trainable, or (``-tie_emb``) the frozen pretrained target table
    mapped to the decoder's input size by a trainable linear layer when the sizes differ."""

    table: nn.Embedding
    proj: nn.Linear | None
    known: int | None

    def __init__(self, vocab_size: int, emb_size: int, pretrained: Tensor | None = None, pad_id: int = 0):
        super().__init__()
        if pretrained is None:
            self.table = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
            self.proj = None
        else:
            self.table = nn.Embedding.from_pretrained(pretrained, freeze=True, padding_idx=pad_id)
            dim = pretrained.size(1)
            self.proj = nn.Linear(dim, emb_size) if dim != emb_size else None
        self.out_size = emb_size
        self.known = None  # untied and extended (open vocabulary): ids >= known are read as <unk>

    def extend(self, extra: Tensor) -> None:
        """Open-vocabulary decoding: words appended after the training vocabulary, with unit
        vectors ``extra`` [n, dim]. Tied: their own vectors are appended to the frozen table;
        untied (trained rows for the training words only): they are consumed as ``<unk>``."""
        if self.proj is not None or not self.table.weight.requires_grad:
            weight = torch.cat([self.table.weight, extra.to(self.table.weight)], 0)
            self.table = nn.Embedding.from_pretrained(weight, freeze=True, padding_idx=self.table.padding_idx)
        elif self.known is None:
            self.known = self.table.num_embeddings

    def forward(self, ids: Tensor) -> Tensor:
        if self.known is not None:
            ids = ids.masked_fill(ids >= self.known, UNK_ID)
        emb = self.table(ids)
        return self.proj(emb) if self.proj is not None else emb

    def matrix(self, ids: Tensor | None = None) -> Tensor:
        """The vectors the decoder consumes for ``ids`` [K] (all words when None): [K or vocab, out_size].
        Looked up like the decoder's input, so the padding row gets no gradient."""
        if ids is None:
            ids = torch.arange(self.table.num_embeddings, device=self.table.weight.device)
        return self(ids)
