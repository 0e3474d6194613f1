"""What the Transformer-Tiny presets (configs/transformer_tiny_*.yaml) need beyond the small
Transformer: post-norm layers, the inverse-sqrt schedule at a peak learning rate, a joint
vocabulary with every word table shared, fairseq's embedding init, no dropout inside the
feed-forward blocks, and validation BLEU logged beside a loss-based stopping rule."""

import math
from argparse import Namespace

import pytest
import torch

from onmt_cont.bin import preprocess, translate
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.models.transformer import TransformerEncoder
from onmt_cont.models.transformer_layers import DecoderLayer, EncoderLayer
from onmt_cont.train.optim import learning_rate
from tests.helpers import TRANSFORMER, log_values, run_train
from tests.helpers import train_fails as fails


def corpus(d):
    src = [f"le chat {i % 7} mange la souris {i % 5}" for i in range(40)]
    tgt = [f"the cat {i % 7} eats the mouse {i % 5}" for i in range(40)]
    for name, lines in (("train.fr", src), ("train.en", tgt), ("valid.fr", src[:6]), ("valid.en", tgt[:6])):
        (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(d / n) for n in ("train.fr", "train.en", "valid.fr", "valid.en")]


def preprocessed(d, *extra):
    ts, tt, vs, vt = corpus(d)
    preprocess.main(
        ["-train_src", ts, "-train_tgt", tt, "-valid_src", vs, "-valid_tgt", vt, "-save_data", str(d / "d"), *extra]
    )
    return {"prefix": str(d / "d"), "emb": None, "valid_src": vs, "valid_tgt": vt}


@pytest.fixture(scope="module")
def joint(tmp_path_factory):
    return preprocessed(tmp_path_factory.mktemp("joint"), "-share_vocab")


@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    return preprocessed(tmp_path_factory.mktemp("separate"))


TINY = {
    **TRANSFORMER,
    "tgt_emb": None,
    "layer_norm": "post",
    "share_embeddings": True,
    "share_decoder_embeddings": True,
    "emb_init": "normal",
    "ff_dropout": "0",
    "dropout": "0.1",
    "decay_method": "inverse_sqrt",
    "learning_rate": "0.005",
    "warmup_steps": "3",
    "train_steps": "8",
    "batch_type": "tokens",
    "batch_size": "120",
}


def test_share_vocab_is_one_vocabulary_with_each_sides_counts(joint, separate):
    src, tgt, _ = load_vocabs(joint["prefix"] + ".vocab.pt")
    assert src.itos == tgt.itos
    assert "chat" in tgt.stoi and "cat" in src.stoi
    assert src.counts[src.stoi["chat"]] == 40 and tgt.counts[tgt.stoi["chat"]] == 0
    assert tgt.counts[tgt.stoi["cat"]] == 40
    s_src, s_tgt, _ = load_vocabs(separate["prefix"] + ".vocab.pt")
    assert set(src.itos) == set(s_src.itos) | set(s_tgt.itos)


def test_share_vocab_refuses_reused_vocabularies(tmp_path, capsys):
    ts, tt, vs, vt = corpus(tmp_path)
    (tmp_path / "v.txt").write_text("the\ncat\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        preprocess.main(
            [
                "-train_src",
                ts,
                "-train_tgt",
                tt,
                "-valid_src",
                vs,
                "-valid_tgt",
                vt,
                "-save_data",
                str(tmp_path / "d"),
                "-share_vocab",
                "-tgt_vocab",
                str(tmp_path / "v.txt"),
            ]
        )
    assert exc.value.code == 2
    assert "-share_vocab" in capsys.readouterr().err
    assert not list(tmp_path.glob("d.*"))


def test_all_embeddings_shared_train_save_and_reload(joint, tmp_path):
    run_train(joint, tmp_path, **TINY)
    ckpt = load_checkpoint(str(tmp_path / "m_last.pt"))
    model = model_from_checkpoint(ckpt)[0]
    table = model.decoder.embeddings.table.weight
    assert model.encoder.embeddings.weight is table
    assert model.generator.proj.weight is table
    assert not torch.equal(table, torch.zeros_like(table))
    # one tensor in the saved state: the three names hold equal values, and the model trained them as one
    state = ckpt["model"]
    assert torch.equal(state["encoder.embeddings.weight"], state["generator.proj.weight"])
    assert torch.equal(state["decoder.embeddings.table.weight"], state["generator.proj.weight"])
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == sum(
        t.numel() for k, t in state.items() if k not in ("encoder.embeddings.weight", "generator.proj.weight")
    )
    out = tmp_path / "out.en"
    translate.main(
        ["-model", str(tmp_path / "m_last.pt"), "-src", joint["valid_src"], "-output", str(out), "-beam_size", "3"]
    )
    assert len(out.read_text(encoding="utf-8").splitlines()) == 6


def test_share_embeddings_needs_one_vocabulary(separate, tmp_path, capsys):
    from tests.helpers import argv

    fails(capsys, argv(separate, tmp_path, **TINY), "-share_embeddings", "-share_vocab")
    assert not list(tmp_path.glob("m*"))


@pytest.mark.parametrize(
    "extra, needle",
    [
        (
            {"share_decoder_embeddings": True, "share_embeddings": None, "loss": "cosine", "tgt_emb": "EMB"},
            "-share_decoder_embeddings",
        ),
        ({"share_embeddings": True, "tie_emb": True, "tgt_emb": "EMB"}, "-tie_emb"),
        ({"decay_method": "inverse_sqrt", "learning_rate": None}, "inverse_sqrt needs -learning_rate"),
        ({"ff_dropout": "1.5"}, "-ff_dropout"),
    ],
)
def test_bad_combinations(joint, tmp_path, capsys, extra, needle):
    from tests.helpers import argv

    emb = tmp_path / "emb.pt"
    src, tgt, _ = load_vocabs(joint["prefix"] + ".vocab.pt")
    table = torch.nn.functional.normalize(torch.randn(len(tgt), 16), dim=-1)
    table[0] = 0
    torch.save(table, emb)
    opts = {**TINY, **{k: (str(emb) if v == "EMB" else v) for k, v in extra.items()}}
    fails(capsys, argv(joint, tmp_path, **opts), needle)


def test_inverse_sqrt_is_noam_at_the_matching_factor():
    """fairseq's inverse_sqrt (warm-up from 0) at peak p is noam at factor p x sqrt(d x warmup); the
    peak is reached at the warm-up's last step."""
    d, warmup, peak = 128, 2000, 0.005
    inv = Namespace(decay_method="inverse_sqrt", learning_rate=peak, rnn_size=d, warmup_steps=warmup)
    noam = Namespace(decay_method="noam", learning_rate=peak * math.sqrt(d * warmup), rnn_size=d, warmup_steps=warmup)
    for step in (1, 2, 999, 1999, 2000, 2001, 4000, 8000, 10**6):
        assert learning_rate(inv, step) == pytest.approx(learning_rate(noam, step), rel=1e-12)
    assert learning_rate(inv, warmup) == pytest.approx(peak, rel=1e-15)
    assert learning_rate(inv, 8000) == pytest.approx(peak * math.sqrt(warmup / 8000), rel=1e-15)
    assert learning_rate(inv, 500) == pytest.approx(peak * 500 / warmup, rel=1e-15)


def test_post_norm_layers_are_the_original_transformers():
    """A post-norm encoder layer is LN(x + attn(x)) then LN(y + ff(y)); a post-norm stack has no final
    LayerNorm; the decoder layer likewise around its three sublayers."""
    torch.manual_seed(0)
    dim = 8
    layer = EncoderLayer(dim, 2, 16, 0.0, 0.0, norm="post").eval()
    x = torch.randn(2, 5, dim)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    k, v = layer.attn.keys_values(x)
    y = layer.norm_attn(x + layer.attn.attend(x, k, v, mask)[0])
    expected = layer.norm_ff(y + layer.ff(y))
    assert torch.allclose(layer(x, mask), expected, atol=1e-6)
    pre = EncoderLayer(dim, 2, 16, 0.0, 0.0, norm="pre").eval()
    pre.load_state_dict(layer.state_dict())
    assert not torch.allclose(pre(x, mask), expected, atol=1e-3)

    dec = DecoderLayer(dim, 2, 16, 0.0, 0.0, norm="post").eval()
    mem = dec.ctx_attn.keys_values(torch.randn(2, 4, dim))
    src_mask = torch.ones(2, 1, 1, 4, dtype=torch.bool)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    out, _, _ = dec(x, None, mem, causal, src_mask, False)
    k, v = dec.self_attn.keys_values(x)
    a = dec.norm_self(x + dec.self_attn.attend(x, k, v, causal)[0])
    b = dec.norm_ctx(a + dec.ctx_attn.attend(a, mem[0], mem[1], src_mask)[0])
    assert torch.allclose(out, dec.norm_ff(b + dec.ff(b)), atol=1e-6)

    enc = TransformerEncoder(20, dim, 2, 16, 2, norm="post")
    assert isinstance(enc.norm, torch.nn.Identity)
    assert isinstance(TransformerEncoder(20, dim, 2, 16, 2).norm, torch.nn.LayerNorm)


def test_post_norm_decodes_with_the_cache_as_without(joint, tmp_path):
    """Step-by-step decoding through the key/value cache equals re-running the whole prefix."""
    run_train(joint, tmp_path, **{**TINY, "train_steps": "3"})
    model = model_from_checkpoint(load_checkpoint(str(tmp_path / "m_last.pt")))[0]
    model.eval()
    src = torch.tensor([[5, 6, 7, 8, 9]])
    memory, src_mask, state = model.encode(src, torch.tensor([5]))
    prefix = torch.tensor([[2, 10, 11, 12]])
    full, _, _ = model.decoder(prefix, memory, src_mask, {})
    steps = []
    for i in range(prefix.size(1)):
        out, _, state = model.decoder(prefix[:, i : i + 1], memory, src_mask, state)
        steps.append(out)
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


def test_ff_dropout_is_the_feed_forward_blocks_own():
    layer = EncoderLayer(8, 2, 16, 0.3, 0.0, ff_dropout=0.0)
    assert layer.ff.dropout.p == 0.0 and layer.dropout.p == 0.3
    assert EncoderLayer(8, 2, 16, 0.3, 0.0).ff.dropout.p == 0.3


def test_emb_init_normal_has_fairseqs_spread(joint, tmp_path):
    run_train(joint, tmp_path, **{**TINY, "train_steps": "1", "learning_rate": "1e-9", "warmup_steps": "1"})
    model = model_from_checkpoint(load_checkpoint(str(tmp_path / "m_last.pt")))[0]
    table = model.encoder.embeddings.weight[4:]
    assert table.std().item() == pytest.approx(16**-0.5, rel=0.1)


def test_valid_bleu_beside_a_loss_metric(joint, tmp_path):
    run_train(joint, tmp_path, **{**TINY, "valid_metric": "loss", "valid_bleu": True, "valid_steps": "2"})
    bleus = log_values(tmp_path / "train.log", r"greedy BLEU (\d+\.\d+)")
    assert len(bleus) >= 2
    assert "new best validation loss" in (tmp_path / "train.log").read_text(encoding="utf-8")
