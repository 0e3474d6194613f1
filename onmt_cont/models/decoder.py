"""The LSTM decoder with Luong global attention and input feeding."""

from argparse import Namespace

import torch
from torch import Tensor, nn

from onmt_cont.models.architecture import ENCODERS, Decoder, State, architecture, register_decoder
from onmt_cont.models.dropout import Dropout
from onmt_cont.models.embeddings import TargetEmbeddings


class GlobalAttention(nn.Module):
    """Luong et al. (2015) "general" attention: score(h_t, h_s) = h_tᵀ W h_s."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear_in = nn.Linear(hidden_size, hidden_size, bias=False)
        self.linear_out = nn.Linear(2 * hidden_size, hidden_size, bias=False)

    def forward(self, query: Tensor, memory_bank: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        """query: [batch, hidden]; memory_bank: [batch, src_len, hidden]; src_mask: [batch, src_len]
        True at real tokens. Returns attentional state [batch, hidden] and weights [batch, src_len]."""
        scores = torch.bmm(memory_bank, self.linear_in(query).unsqueeze(2)).squeeze(2)
        scores = scores.masked_fill(~src_mask, float("-inf"))
        align = torch.softmax(scores, dim=-1)
        context = torch.bmm(align.unsqueeze(1), memory_bank).squeeze(1)
        return torch.tanh(self.linear_out(torch.cat([context, query], dim=-1))), align


@register_decoder("rnn")
class InputFeedRNNDecoder(Decoder):
    """A stacked LSTM whose input at step t is [embedding(y_{t-1}); attentional state at t-1]."""

    summary = "LSTM with Luong attention and input feeding"

    def __init__(
        self,
        embeddings: TargetEmbeddings,
        hidden_size: int,
        num_layers: int = 2,
        dropout: float = 0.0,
        enc_hidden: int | None = None,
        enc_layers: int = 1,
    ):
        super().__init__()
        self.embeddings = embeddings
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = Dropout(dropout)
        self.cells = nn.ModuleList(
            nn.LSTMCell(embeddings.out_size + hidden_size if i == 0 else hidden_size, hidden_size)
            for i in range(num_layers)
        )
        self.attn = GlobalAttention(hidden_size)
        # The paper's encoder has 1 layer and its decoder 2: a bridge maps the encoder's final
        # state (all its layers) to every decoder layer's initial state.
        enc_hidden = enc_hidden or hidden_size
        self.bridge = nn.Linear(2 * enc_layers * enc_hidden, 2 * num_layers * hidden_size)

    @classmethod
    def from_opt(cls, opt: Namespace, embeddings: TargetEmbeddings) -> "InputFeedRNNDecoder":
        """The decoder train.py's options describe (-dec_layers, -rnn_size, -dropout), reading
        ``embeddings`` (a TargetEmbeddings); its bridge takes the encoder's final state."""
        encoder = ENCODERS[architecture(opt)[0]]
        return cls(
            embeddings,
            opt.rnn_size,
            opt.dec_layers,
            opt.dropout,
            enc_hidden=opt.rnn_size,
            enc_layers=encoder.final_layers(opt),
        )

    def init_state(self, enc_final: tuple[Tensor, Tensor]) -> State:
        """enc_final: (h, c), each [enc_layers, batch, enc_hidden] -> decoder state dict with
        h, c: [num_layers, batch, hidden] and input_feed: [batch, hidden]."""
        h, c = enc_final
        batch = h.size(1)
        flat = torch.cat([h, c], dim=0).transpose(0, 1).reshape(batch, -1)
        init = torch.tanh(self.bridge(flat)).view(batch, 2, self.num_layers, self.hidden_size)
        return {
            "h": init[:, 0].transpose(0, 1).contiguous(),
            "c": init[:, 1].transpose(0, 1).contiguous(),
            "input_feed": h.new_zeros(batch, self.hidden_size),
        }

    def reorder_state(self, state: State, index: Tensor, memory: bool = True) -> State:
        """Beam search: the state of the hypotheses ``index`` [n] picks (by batch row) -> new state.
        h and c are [num_layers, batch, hidden], input_feed [batch, hidden]; all of it follows the
        hypotheses, so ``memory`` (False: ``index`` keeps each row within its sentence) changes nothing."""
        return {key: v.index_select(1 if key in ("h", "c") else 0, index) for key, v in state.items()}

    def forward(
        self, tgt_in: Tensor, memory_bank: Tensor, src_mask: Tensor, state: State, need_attn: bool = True
    ) -> tuple[Tensor, Tensor, State]:
        """tgt_in: [batch, tgt_len] ids; memory_bank: [batch, src_len, hidden]; src_mask:
        [batch, src_len]. Returns dec_out [batch, tgt_len, hidden], attn [batch, tgt_len, src_len]
        and the new state (for step-by-step decoding). The attention is part of the step, so it is
        returned whatever ``need_attn`` says."""
        emb = self.dropout(self.embeddings(tgt_in))
        h = list(state["h"].unbind(0))
        c = list(state["c"].unbind(0))
        input_feed = state["input_feed"]
        outs, attns = [], []
        for t in range(emb.size(1)):
            x = torch.cat([emb[:, t], input_feed], dim=-1)
            for i, cell in enumerate(self.cells):
                h[i], c[i] = cell(x, (h[i], c[i]))
                x = self.dropout(h[i]) if i + 1 < self.num_layers else h[i]
            attn_h, align = self.attn(x, memory_bank, src_mask)
            input_feed = self.dropout(attn_h)
            outs.append(input_feed)
            attns.append(align)
        new_state = {"h": torch.stack(h), "c": torch.stack(c), "input_feed": input_feed}
        return torch.stack(outs, 1), torch.stack(attns, 1), new_state
