"""Matrix-multiply FLOPs of one training step, forward and backward, for any model train.py builds.

The decoder, generator and loss are run once on PyTorch's ``meta`` device (shapes only, no
data, no time) under ``torch.utils.flop_counter.FlopCounterMode``, which counts 2·m·n·k per
matrix product of the forward pass and of the backward pass as autograd really runs it: a
frozen table gets no weight gradient, a loss's no-grad search (maxmargin's most informative
negative) is counted once. So a new generator or loss is counted without changes here.

The counter has no formula for the fused LSTM of the encoder (``nn.LSTM``), so an LSTM encoder is
counted by hand: per source token, direction and layer, forward 2·4h·(in + h); the backward
(gradients of the inputs and of the weights) twice that. A Transformer encoder is counted by the
counter, forward and backward, on its own (its gradient from the decoder stands in as given).
On ``meta`` ``scaled_dot_product_attention`` runs its math path (two batched products forward,
four backward), which the counter sees; the CPU's fused kernel it would not.

Elementwise work, the embedding gradients and the optimiser step are not FLOPs here: they are
memory-bound, and docs/benchmarks.md says where they matter.
"""

import math
from contextlib import contextmanager
from unittest import mock

import torch
from torch.utils.flop_counter import FlopCounterMode

from lab.bench.benchlib import synthetic_prior
from onmt_cont.losses import build_loss, contrastive, negatives
from onmt_cont.losses.token_dots import _TokenDots
from onmt_cont.models import generators
from onmt_cont.models.architecture import architecture
from onmt_cont.models.model import build_model

META = torch.device("meta")


def encoder_flops(opt, src_tokens):
    """Forward + backward matmul FLOPs of the LSTM encoder over ``src_tokens`` real tokens."""
    directions = 2 if opt.brnn else 1
    h = opt.rnn_size // directions
    size_in = opt.src_word_vec_size or opt.word_vec_size
    total = 0
    for _ in range(opt.enc_layers):
        total += directions * 2 * 4 * h * (size_in + h)
        size_in = h * directions
    return 3 * total * src_tokens


def counted_encoder_flops(model, batch):
    """Forward + backward matmul FLOPs of a (non-LSTM) encoder on ``batch``'s shapes, on meta: the
    memory bank's gradient (what the decoder sends back) is an input here, not counted work."""
    src = torch.ones(batch["src"].shape, dtype=torch.long, device=META)  # no padding: every token is real
    counter = FlopCounterMode(display=False)
    with counter:
        memory_bank, _ = model.encoder(src, batch["src_lengths"].to(META))
        memory_bank.backward(torch.empty_like(memory_bank))
    return counter.get_total_flops()


@contextmanager
def _meta_sampling():
    """The sampled joint softmax draws its candidate words with torch.unique, whose output size
    depends on the data, which the meta device has not got. Its size is ceil(fraction·vocab) (the
    gold words plus uniform negatives up to that count), so counting uses a stand-in of that size."""

    def candidates(gold, vocab_size, fraction):
        return torch.arange(max(1, math.ceil(fraction * vocab_size)), device=gold.device)

    # The contrastive losses' faiss searches (negatives.py) run in faiss, not torch, and cannot
    # run on meta tensors: stand-ins of their output shapes; those searches are not counted.
    def neighbours(table, k, threads=None):
        return torch.zeros(table.size(0), k + 1, dtype=torch.long, device=table.device)

    class PredictionIndex:
        def __init__(self, table, threads=None):
            pass

        def search(self, unit, k):
            return torch.zeros(unit.size(0), k, dtype=torch.long, device=unit.device)

    # -sampling_correction's expected counts find shared ids in per-token lists (a data-dependent
    # size); they are elementwise work, which the counter does not count: a stand-in of their shape.
    def log_expected_counts(self, target, shared, per_token):
        width = (0 if shared is None else shared.numel()) + (0 if per_token is None else per_token.size(1))
        return torch.zeros(target.numel(), width, device=target.device)

    # The per-token candidate products' sparse backward (a trained table) has no meta kernel: the
    # same products by gathering, whose backward does the same multiply-adds.
    def token_dots(vec, table, ids):
        return torch.einsum("nm,ncm->nc", vec, table[ids])

    # The contrastive losses score each shared candidate word once (torch.unique: a data-dependent
    # size): counted here as the list was drawn, repeats included, an upper bound.
    def unique_shared(shared, n_per_token):
        return shared, None

    with (
        mock.patch.object(contrastive, "unique_shared", unique_shared),
        mock.patch.object(_TokenDots, "apply", token_dots),
        mock.patch.object(generators, "sample_candidates", candidates),
        mock.patch.object(negatives, "table_neighbours", neighbours),
        mock.patch.object(negatives, "PredictionIndex", PredictionIndex),
        mock.patch.object(negatives.Negatives, "log_expected_counts", log_expected_counts),
    ):
        yield


def step_flops(opt, src_vocab, tgt_vocab, batch, with_table, emb_dim=300):
    """FLOPs of one training step on ``batch`` (collate's dict, any device): returns a dict with
    ``encoder``, ``decoder+generator+loss`` and ``total``."""
    B, S = batch["src"].shape
    T = batch["tgt"].size(1) - 1
    n = int((batch["tgt"][:, 1:] != 0).sum())
    src_tokens = int(batch["src_lengths"].sum())
    with torch.device(META):
        table = torch.empty(tgt_vocab, emb_dim) if with_table else None
        # to_empty: a module that builds its parameters on the CPU itself (the ReWE head) joins the rest.
        model = build_model(opt, src_vocab, tgt_vocab, table).to_empty(device=META)
        with _meta_sampling():  # the contrastive losses' neighbour tables are built with the loss
            prior = synthetic_prior(opt, tgt_vocab, META)
            loss_fn = build_loss(opt, getattr(model.generator, "table", None), prior)
        model.train()
        H = opt.rnn_size
        memory_bank = torch.empty(B, S, H, requires_grad=True)
        enc_h = torch.empty(opt.enc_layers, B, H, requires_grad=True)
        enc_c = torch.empty(opt.enc_layers, B, H, requires_grad=True)
        src_mask = torch.ones(B, S, dtype=torch.bool)
        tgt_in = torch.zeros(B, T, dtype=torch.long)
        gold = torch.zeros(n, dtype=torch.long)
        counter = FlopCounterMode(display=False)
        with counter, _meta_sampling():
            state = model.decoder.init_state((enc_h, enc_c))
            dec_out, _, _ = model.decoder(tgt_in, memory_bank, src_mask, state)
            # The trainer gives the generator the real target positions only (dec_out[mask]).
            output = model.generator(dec_out.reshape(-1, H)[:n], gold)
            loss_fn(output, gold).sum().backward()
    rest = counter.get_total_flops()
    if architecture(opt)[0] == "transformer":
        with torch.device(META):
            enc = counted_encoder_flops(model, batch)
    else:
        enc = encoder_flops(opt, src_tokens)
    return {"encoder": enc, "decoder+generator+loss": rest, "total": enc + rest}
