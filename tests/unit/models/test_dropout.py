"""models/dropout.py: the CPU dropout mask drawn four 16-bit lanes per 64-bit draw."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from onmt_cont.models.dropout import LANES, Dropout, dropout
from onmt_cont.models.transformer_layers import MultiHeadAttention

N = 1 << 20  # elements per statistical check


def used(p):
    """The drop probability the mask uses: p rounded to a multiple of 1/65536."""
    return round(p * LANES) / LANES


def within(count, n, q, sigmas=5.0):
    return abs(count - n * q) <= sigmas * math.sqrt(n * q * (1 - q))


@pytest.mark.parametrize("p", [1e-4, 0.01, 0.1, 0.3, 0.5, 0.9])
def test_drop_rate_and_scale(p):
    """Each element is dropped with probability used(p) (binomial, 5 sigma), in each of the four
    lanes of a draw; kept ones are scaled by exactly 1 / (1 - used(p))."""
    torch.manual_seed(0)
    out = dropout(torch.ones(N), p)
    q = used(p)
    dropped = out == 0
    assert within(int(dropped.sum()), N, q)
    for lane in range(4):
        assert within(int(dropped[lane::4].sum()), N // 4, q)
    scale = torch.tensor(LANES / (LANES - round(p * LANES)), dtype=torch.float32)
    assert torch.equal(out[~dropped], scale.expand(int((~dropped).sum())))


def test_lanes_are_independent():
    """Neighbouring lanes (of one draw and across draws) are dropped together with probability q²."""
    torch.manual_seed(1)
    dropped = dropout(torch.ones(N), 0.5) == 0
    for shift in (1, 2, 3, 4):
        both = int((dropped[:-shift] & dropped[shift:]).sum())
        assert within(both, N - shift, 0.25)


def test_gradient_is_the_scaled_mask():
    torch.manual_seed(2)
    x = torch.randn(64, 7, 33, requires_grad=True)
    out = dropout(x, 0.2)
    g = torch.randn_like(x)
    out.backward(g)
    mask = torch.where(out == 0, 0.0, LANES / (LANES - round(0.2 * LANES)))
    torch.testing.assert_close(out, x.detach() * mask)
    torch.testing.assert_close(x.grad, g * mask)


def test_seeded_and_identity_where_it_should_be():
    x = torch.randn(5, 1000)
    torch.manual_seed(3)
    a = dropout(x, 0.1)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.1), a)
    assert not torch.equal(dropout(x, 0.1), a)  # the generator moved on
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0) is x
    module = Dropout(0.1).eval()
    assert module(x) is x
    assert "p=0.1" in repr(module)


def test_odd_sizes_and_strides():
    """Element counts that are not a multiple of four, and a transposed (non-contiguous) input."""
    torch.manual_seed(4)
    for shape in [(1,), (3,), (5, 3), (7, 1, 2)]:
        x = torch.ones(shape)
        out = dropout(x, 0.5)
        assert out.shape == x.shape and set(out.unique().tolist()) <= {0.0, 2.0}
    x = torch.randn(6, 9).t()
    out = dropout(x, 0.3)
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] * (LANES / (LANES - round(0.3 * LANES))))


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_bad_probability(p):
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        Dropout(p)
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        dropout(torch.ones(3), p)


def test_bfloat16_input():
    """bfloat16 (-amp): kept elements are x · 1/(1 - q) rounded once, not x times a rounded factor; the
    gradient likewise."""
    torch.manual_seed(5)
    out = dropout(torch.ones(4096, dtype=torch.bfloat16), 0.5)
    assert out.dtype == torch.bfloat16 and set(out.unique().tolist()) == {0.0, 2.0}
    x = torch.randn(4096).bfloat16().requires_grad_()
    out = dropout(x, 0.1)
    kept = out != 0
    scale = LANES / (LANES - round(0.1 * LANES))
    assert torch.equal(out[kept], (x.detach()[kept].float() * scale).bfloat16())
    out.backward(torch.ones_like(out))
    assert torch.equal(x.grad[kept], torch.full((int(kept.sum()),), scale).bfloat16())
    assert x.grad[~kept].abs().max() == 0


def test_cpu_attention_with_dropout_is_sdpa_math():
    """The CPU training path of MultiHeadAttention.attend (its own dropout) gives SDPA's context when
    nothing is dropped, a query with no key to attend included (SDPA: a zero context)."""
    torch.manual_seed(6)
    attn = MultiHeadAttention(16, 4, dropout=1e-6).train()  # rounds to no drop at all
    x = torch.randn(3, 5, 16)
    k, v = attn.keys_values(torch.randn(3, 6, 16))
    mask = torch.rand(3, 1, 5, 6) > 0.3
    mask[..., 0] = True
    mask[1, 0, 2] = False  # query 2 of sentence 1 may attend nowhere
    q = attn._split(attn.query(x))
    ours = attn._attend_cpu_training(q, k, v, mask)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, sdpa, atol=1e-6, rtol=1e-5)
    assert ours[1, :, 2].abs().max() == 0


def test_cpu_attention_dropout_drops_probabilities():
    torch.manual_seed(7)
    attn = MultiHeadAttention(16, 4, dropout=0.5).train()
    x = torch.randn(2, 40, 16)
    k, v = attn.keys_values(x)
    v = torch.ones_like(v)  # the context is then the sum of the kept (scaled) probabilities
    q = attn._split(attn.query(x))
    ctx = attn._attend_cpu_training(q, k, v, None)
    assert not torch.allclose(ctx, torch.ones_like(ctx))
    assert abs(ctx.mean().item() - 1.0) < 0.05


def test_models_draw_no_bernoulli_on_the_cpu():
    """A Transformer encoder-decoder's training step on the CPU uses this dropout everywhere: the
    profile holds no aten::bernoulli_ (nn.Dropout and SDPA's dropout both call it)."""
    from onmt_cont.models.embeddings import TargetEmbeddings
    from onmt_cont.models.transformer import TransformerDecoder, TransformerEncoder

    torch.manual_seed(8)
    enc = TransformerEncoder(50, 16, 4, 32, 2, dropout=0.1, attn_dropout=0.1).train()
    dec_emb = TargetEmbeddings(50, 16)
    dec = TransformerDecoder(dec_emb, 16, 4, 32, 2, dropout=0.1, attn_dropout=0.1).train()
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 5))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        memory, _ = enc(src, None)
        out = dec(tgt, memory, src != 0, {})[0]
        out.sum().backward()
    names = {e.key for e in prof.key_averages()}
    assert "aten::bernoulli_" not in names
    assert "aten::random_" in names
