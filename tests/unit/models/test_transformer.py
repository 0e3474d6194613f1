"""The Transformer (models/transformer.py) through train.py and translate.py: every generator x
loss trains and decodes on it, the key/value cache decodes exactly like re-running the prefix,
-train_from resumes bitwise and keeps the architecture, old LSTM checkpoints still load, bad
combinations fail before anything is written, mixed encoder/decoder pairs work, 2 gloo ranks
match one process, and the noam schedule is the formula it claims.

Tiny models (d_model 16, 2 heads, 2 layers) on the memorisation corpus (tests/helpers.py)."""

import copy
import gzip
import math
import os
import random
import re
import subprocess
import sys

import pytest
import torch
from torch import nn

from onmt_cont.bin import train, translate
from onmt_cont.constants import BOS_ID, EOS_ID
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.losses import CONTINUOUS_LOSSES, LOSSES
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.models.model import build_model
from onmt_cont.train.build import load_table
from onmt_cont.train.optim import learning_rate
from onmt_cont.train.step import Trainer
from onmt_cont.translate.beam import beam_search
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.search import greedy_search
from onmt_cont.translate.translator import Translator
from tests.helpers import (
    ROOT,
    TRANSFORMER,
    argv,
    log_values,
    memorisation_data,
    record_steps,
    reported_losses,
    run_train,
    translator,
)
from tests.helpers import train_fails as fails

TABLE_DIM = 16
D = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The memorisation corpus's shards and a random unit table of TABLE_DIM (= d_model: tied
    embeddings feed the decoder without a projection)."""
    return memorisation_data(tmp_path_factory.mktemp("tdata"), TABLE_DIM)


def initial_model(run):
    """The model a Run starts from: the same seeding and build as Run.__init__."""
    table = load_table(run.opt.tgt_emb, run.tgt_vocab) if run.opt.tgt_emb else None
    torch.manual_seed(run.opt.seed)
    random.seed(run.opt.seed)
    return build_model(run.opt, len(run.src_vocab), len(run.tgt_vocab), table)


def assert_trained(run, before):
    """Every trainable tensor of the encoder's and decoder's layers and of the generator moved."""
    after = dict(run.model.named_parameters())
    moved = [name for name, p in before.named_parameters() if p.requires_grad and not torch.equal(p, after[name])]
    for prefix in ("encoder.layers.", "decoder.layers.", "generator."):
        trainable = [n for n, p in before.named_parameters() if p.requires_grad and n.startswith(prefix)]
        # cells / layers of an RNN side have no "layers." prefix: nothing to check there
        assert all(n in moved for n in trainable), sorted(set(trainable) - set(moved))
    assert moved


def decodes(run, lines, beam_size):
    """Greedy (beam 1) or beam outputs of the trained model in memory: one non-empty line each,
    of training target words (or <unk>), no longer than translate's default limit."""
    tr = Translator(run.model, run.src_vocab, run.tgt_vocab, DecodingConfig(beam_size=beam_size, block_ngram_repeat=0))
    with torch.no_grad():
        out = tr.translate_lines(lines)
    assert len(out) == len(lines)
    for src, hyp in zip(lines, out, strict=True):
        words = hyp.split()
        assert 1 <= len(words) <= 2 * len(src.split()) + 10, hyp
        assert all(w in run.tgt_vocab.stoi for w in words), hyp
    return out


# --- 1. every generator x loss the LSTM supports -------------------------------------------------

# (case, generator, tie_emb): each continuous loss once, the four (generator, tie) pairs cycling,
# so every pair and every loss is covered without the full product (the generator and -tie_emb do
# not touch the losses' code; test_train.py runs the product on the LSTM).
_PAIRS = [("linear", True), ("nonlinear", False), ("linear", False), ("nonlinear", True)]
CONTINUOUS = sorted(CONTINUOUS_LOSSES)
CASES = [(loss, *_PAIRS[i % 4]) for i, loss in enumerate(CONTINUOUS)] + [
    ("nllvmf_approx", "nonlinear", True),
    ("ce", "linear", False),
    ("ce_smooth", "linear", True),
    ("ce_rewe", "linear", False),
    ("ce_joint", "joint", False),
    ("ce_joint_sampled", "joint", True),
]
VARIANTS = {
    # NLLvMF unregularised, as in test_train.py's matrix: with the default lambdas its loss can only
    # fall by a few hundredths here, too little to tell learning from noise
    "nllvmf": ("nllvmf", {"lambda1": "0", "lambda2": "1"}),
    "nllvmf_approx": ("nllvmf", {"vmf_approx": True, "lambda1": "0", "lambda2": "1"}),
    "ce_smooth": ("ce", {"label_smoothing": "0.1"}),
    "ce_rewe": ("ce", {"rewe_lambda": "20"}),
    "ce_joint_sampled": ("ce", {"joint_sample": "0.75"}),
    "ce_joint": ("ce", {}),
}


# Least decrease, first epoch -> mean of the last two: about a third of what each case showed
# (cosine 0.39, infonce 3.2, l2 0.19, margin_random 0.16, maxmargin 0.29, nllvmf 0.66, nllvmf_nce
# 0.38, synmargin_diff 0.39, synmargin_proj 0.47, nllvmf_approx 0.58, ce 0.45, ce_smooth 0.26,
# ReWE 5.7, joint 0.49, sampled joint 0.56).
MIN_DECREASE = {
    "cosine": 0.12,
    "infonce": 1.0,
    "l2": 0.06,
    "margin_random": 0.05,
    "maxmargin": 0.09,
    "nllvmf": 0.2,
    "nllvmf_nce": 0.12,
    "synmargin_diff": 0.12,
    "synmargin_proj": 0.15,
    "nllvmf_approx": 0.2,
    "ce": 0.15,
    "ce_smooth": 0.08,
    "ce_rewe": 1.8,
    "ce_joint": 0.15,
    "ce_joint_sampled": 0.18,
}


def test_cases_cover_every_loss():
    assert {VARIANTS.get(c, (c,))[0] for c, _, _ in CASES} == set(LOSSES)
    assert {(g, t) for c, g, t in CASES if c in CONTINUOUS_LOSSES} == set(_PAIRS)
    assert set(MIN_DECREASE) == {c for c, _, _ in CASES}


@pytest.mark.parametrize("case,generator,tie_emb", CASES, ids=lambda v: {True: "tie", False: "untied"}.get(v, v))
def test_matrix_trains_and_decodes(data, tmp_path, case, generator, tie_emb):
    name, extra = VARIANTS.get(case, (case, {}))
    needs_table = name in CONTINUOUS_LOSSES or tie_emb or "rewe_lambda" in extra
    # 8 epochs; -report_every 4 makes each report the mean over one epoch, the same examples
    run = run_train(
        data,
        tmp_path,
        loss=name,
        generator=generator,
        tie_emb=tie_emb,
        tgt_emb=data["emb"] if needs_table else None,
        **{**TRANSFORMER, "train_steps": None, "report_every": "4", "epochs": "8"},
        **extra,
    )
    losses = reported_losses(tmp_path / "train.log")
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses), losses
    assert (losses[-1] + losses[-2]) / 2 < losses[0] - MIN_DECREASE[case], losses
    assert run.progress["step"] == 32
    assert type(run.model.decoder).__name__ == "TransformerDecoder"
    assert run.model.generator.continuous == (name != "ce")
    assert_trained(run, initial_model(run))
    lines = data["src"][:3]
    decodes(run, lines, 1)
    decodes(run, lines, 3)  # continuous: the k-NN beam over the table


def test_translate_cli_on_a_transformer(data, tmp_path, capsys):
    """translate.py end to end with -replace_unk, beam search and a reference: a line per input."""
    run_train(data, tmp_path, loss="cosine", tie_emb=True, **TRANSFORMER)
    src = tmp_path / "in.fr"
    src.write_text("\n".join(data["src"][:4] + ["", "zorglub le chat"]) + "\n", encoding="utf-8")
    ref = tmp_path / "ref.en"
    ref.write_text("\n".join(data["tgt"][:4] + ["", "zorglub the cat"]) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    translate.main(
        [
            "-model",
            str(tmp_path / "m_last.pt"),
            "-src",
            str(src),
            "-output",
            str(out),
            "-tgt",
            str(ref),
            "-beam_size",
            "2",
            "-replace_unk",
        ]
    )
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 6 and lines[4] == "" and all(lines[i] for i in (0, 1, 2, 3, 5))
    assert "BLEU" in capsys.readouterr().err


def write_vec(path, rows):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(f"{len(rows)} {TABLE_DIM}\n")
        for word, vec in rows:
            f.write(word + " " + " ".join(f"{v:.6f}" for v in vec.tolist()) + "\n")
    return str(path)


@pytest.mark.parametrize("tie_emb", [True, False], ids=["tie", "untied"])
def test_open_vocabulary(data, tmp_path, tie_emb):
    """-tgt_emb_extend: a new word whose vector is the model's first prediction for a sentence is
    what that sentence starts with; training words keep their rows, so a far-away new word
    changes no output."""
    run_train(data, tmp_path, loss="nllvmf", tie_emb=tie_emb, **TRANSFORMER)
    ckpt = str(tmp_path / "m_last.pt")
    closed = translator(ckpt)
    lines = data["src"][:4]
    before = closed.translate_lines(lines)
    model = closed.model
    src = torch.tensor([closed.src_vocab.encode(lines[0].split())])
    with torch.no_grad():
        memory_bank, src_mask, state = model.encode(src, torch.tensor([src.size(1)]))
        dec_out, _, _ = model.decoder(torch.tensor([[BOS_ID]]), memory_bank, src_mask, state)
        first = model.generator(dec_out[:, 0])[0]
    far = -closed.model.generator.table[4:].sum(0)  # opposite every training word
    ext = write_vec(tmp_path / "ext.vec.gz", [("zzfar", far), ("zznew", first)])
    opened = translator(ckpt, tgt_emb_extend=ext)
    assert opened.tgt_vocab.itos[-2:] == ["zzfar", "zznew"]
    after = opened.translate_lines(lines)
    assert after[0].split()[0] == "zznew"
    assert after[1:] == before[1:] or any("zznew" in a for a in after[1:])
    far_only = translator(ckpt, tgt_emb_extend=write_vec(tmp_path / "far.vec.gz", [("zzfar", far)]))
    assert far_only.translate_lines(lines) == before


def test_ann_decoding_matches_exact_search(data, tmp_path):
    """-ann faiss with one IVF cell probed is exact: the same output as exact search."""
    pytest.importorskip("faiss", reason="faiss-cpu is not installed (-ann needs it)")
    run_train(data, tmp_path, loss="cosine", **TRANSFORMER)
    ckpt = str(tmp_path / "m_last.pt")
    lines = data["src"][:4]
    for beam in (1, 3):
        exact = translator(ckpt, beam_size=beam).translate_lines(lines)
        approx = translator(ckpt, beam_size=beam, ann={"kind": "ivf", "nlist": 1, "nprobe": 1}).translate_lines(lines)
        assert approx == exact


# --- 2. the key/value cache -----------------------------------------------------------------------


def tiny_model(data, encoder_type="transformer", loss="cosine", position_encoding="sinusoidal", seed=0):
    """A randomly initialised (untrained) model in eval mode: the cache's exactness does not
    depend on training."""
    opt = train.build_parser().parse_args(
        argv(
            data,
            data["dir"],
            **{
                **TRANSFORMER,
                "encoder_type": encoder_type,
                "loss": loss,
                "position_encoding": position_encoding,
                "max_positions": "6",
                "dropout": "0.1",
                "attention_dropout": "0.1",
                "layers": None,
                "enc_layers": "2",
                "dec_layers": "3",
                "tgt_emb": data["emb"] if loss != "ce" else None,
            },
        )
    )
    from onmt_cont.train.checks import check_options

    check_options(opt)
    src_vocab, tgt_vocab, _ = load_vocabs(data["prefix"] + ".vocab.pt")
    torch.manual_seed(seed)
    table = torch.load(data["emb"], weights_only=True) if loss != "ce" else None
    model = build_model(opt, len(src_vocab), len(tgt_vocab), table)
    return model.eval(), len(src_vocab), len(tgt_vocab)


def padded_batch(n_src, lengths, seed=1):
    gen = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, n_src, (n,), generator=gen)
    return src, torch.tensor(lengths)


@pytest.mark.parametrize("encoder_type,position_encoding", [("transformer", "sinusoidal"), ("brnn", "learned")])
def test_cache_steps_equal_the_full_prefix(data, encoder_type, position_encoding):
    """Feeding the target one word at a time through the cache gives the states, the alignment
    layer's attention and the keys/values of one pass over the whole prefix (to 1e-5); 9 steps
    with -max_positions 6 also cross the learned table's end."""
    model, n_src, n_tgt = tiny_model(data, encoder_type, position_encoding=position_encoding)
    src, lengths = padded_batch(n_src, [5, 2, 4])
    tgt = torch.randint(4, n_tgt, (3, 9), generator=torch.Generator().manual_seed(2))
    tgt[:, 0] = BOS_ID
    with torch.no_grad():
        memory_bank, src_mask, state = model.encode(src, lengths)
        full, full_attn, full_state = model.decoder(tgt, memory_bank, src_mask, state)
        outs, attns = [], []
        for t in range(tgt.size(1)):
            out, attn, state = model.decoder(tgt[:, t : t + 1], memory_bank, src_mask, state)
            outs.append(out)
            attns.append(attn)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(attns, 1), full_attn, atol=1e-5, rtol=0)
    assert full_attn[~src_mask.unsqueeze(1).expand_as(full_attn)].abs().max() == 0  # no weight on padding
    assert sorted(state) == sorted(full_state)
    for key in full_state:
        torch.testing.assert_close(state[key], full_state[key], atol=1e-5, rtol=0)


class UncachedDecoder(nn.Module):
    """The reference: keeps only the words fed so far and re-runs the whole prefix every step,
    returning the last positions' outputs."""

    def __init__(self, decoder):
        super().__init__()
        self.inner = decoder

    def init_state(self, enc_final):
        batch = enc_final[0].size(1)
        return {"prefix": torch.zeros(batch, 0, dtype=torch.long)}

    def reorder_state(self, state, index, memory=True):
        return {"prefix": state["prefix"].index_select(0, index)}

    def forward(self, tgt_in, memory_bank, src_mask, state, need_attn=True):
        prefix = torch.cat([state["prefix"], tgt_in], 1)
        out, attn, _ = self.inner(prefix, memory_bank, src_mask, self.inner.init_state(None))
        n = tgt_in.size(1)
        return out[:, -n:], attn[:, -n:], {"prefix": prefix}


@pytest.mark.parametrize("loss", ["cosine", "nllvmf", "ce"])
def test_search_with_the_cache_equals_the_uncached_reference(data, loss):
    model, n_src, _ = tiny_model(data, loss=loss, seed=3)
    reference = copy.deepcopy(model)
    reference.decoder = UncachedDecoder(reference.decoder)
    src, lengths = padded_batch(n_src, [6, 3, 5, 2], seed=4)
    max_lengths = torch.full((4,), 7)
    ids, attn = greedy_search(model, src, lengths, max_lengths)
    ref_ids, ref_attn = greedy_search(reference, src, lengths, max_lengths)
    assert ids == ref_ids and sum(map(len, ids)) > 8, (ids, ref_ids)
    for a, b in zip(attn, ref_attn, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    ids, attn = beam_search(model, src, lengths, max_lengths, 3)
    ref_ids, ref_attn = beam_search(reference, src, lengths, max_lengths, 3)
    assert ids == ref_ids, (ids, ref_ids)
    for a, b in zip(attn, ref_attn, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("decoder", ["transformer", "lstm"])
@pytest.mark.parametrize("loss", ["nllvmf", "ce"])
def test_searches_without_attention_write_the_same_words(data, decoder, loss):
    """need_attn False (translate.py without -replace_unk): the same words, greedy and beam, no
    attention kept; the Transformer's step then computes no attention weights at all."""
    if decoder == "transformer":
        model, n_src, _ = tiny_model(data, loss=loss, seed=6)
    else:
        model, n_src = _lstm_model(data, loss, seed=6)
    src, lengths = padded_batch(n_src, [6, 3, 5, 2, 4], seed=7)
    max_lengths = torch.full((5,), 7)
    for search, extra in ((greedy_search, ()), (beam_search, (3,))):
        ids, attn = search(model, src, lengths, max_lengths, *extra)
        bare, none = search(model, src, lengths, max_lengths, *extra, need_attn=False)
        assert bare == ids and sum(map(len, ids)) > 8, (bare, ids)
        assert none == [None] * 5 and all(a.size(0) == len(i) for a, i in zip(attn, ids, strict=True))
    if decoder == "transformer":
        memory, mask, state = model.encode(src, lengths)
        last = torch.full((5,), BOS_ID, dtype=torch.long)
        assert model.decoder(last.unsqueeze(1), memory, mask, state, need_attn=False)[1] is None


def test_a_beam_step_within_the_sentences_keeps_the_source_keys(data):
    """reorder_state(memory=False), for a beam step no sentence left: the self-attention cache
    follows the index, the cross-attention's keys and values (the same for every row of a
    sentence) are the very tensors they were."""
    model, n_src, _ = tiny_model(data, seed=8)
    src, lengths = padded_batch(n_src, [4, 3], seed=9)
    memory, mask, state = model.encode(src, lengths)
    _, _, state = model.decoder(torch.full((2, 1), BOS_ID, dtype=torch.long), memory, mask, state)
    index = torch.tensor([1, 0])
    kept = model.decoder.reorder_state(state, index, memory=False)
    full = model.decoder.reorder_state(state, index)
    for key, value in kept.items():
        if key.startswith("m"):
            assert value is state[key] and not torch.equal(full[key], value)
        else:
            assert torch.equal(value, full[key]) and torch.equal(value, state[key].index_select(0, index))


def _lstm_model(data, loss, seed):
    opt = train.build_parser().parse_args(
        argv(data, data["dir"], loss=loss, brnn=True, tgt_emb=data["emb"] if loss != "ce" else None)
    )
    from onmt_cont.train.checks import check_options

    check_options(opt)
    src_vocab, tgt_vocab, _ = load_vocabs(data["prefix"] + ".vocab.pt")
    torch.manual_seed(seed)
    table = torch.load(data["emb"], weights_only=True) if loss != "ce" else None
    return build_model(opt, len(src_vocab), len(tgt_vocab), table).eval(), len(src_vocab)


@pytest.mark.parametrize("decoder", ["transformer", "lstm"])
@pytest.mark.parametrize("loss", ["nllvmf", "ce"])
def test_finished_sentences_leave_the_batch_without_changing_the_output(data, decoder, loss):
    """Greedy search drops ended sentences from the state (every step on CPU, every 8 on GPU):
    the words equal those of the former search, which kept every row to the batch's end, and of
    each sentence alone, and the attention -replace_unk reads is the same."""
    from tests.search_reference import full_batch_greedy_search

    if decoder == "transformer":
        model, n_src, _ = tiny_model(data, loss=loss, seed=5)
    else:
        model, n_src = _lstm_model(data, loss, seed=5)
    src, lengths = padded_batch(n_src, [6, 3, 5, 2, 4], seed=6)
    max_lengths = torch.tensor([9, 1, 4, 6, 2])  # the forced ends make rows leave at different steps
    sizes = []
    hook = model.decoder.register_forward_pre_hook(lambda module, args: sizes.append(args[0].size(0)))
    ids, attn = greedy_search(model, src, lengths, max_lengths)
    hook.remove()
    assert sizes[0] == 5 and sizes[-1] == 1 and sizes == sorted(sizes, reverse=True), sizes
    kept_ids, kept_attn = full_batch_greedy_search(model, src, lengths, max_lengths)  # the former search
    every8_ids, _ = greedy_search(model, src, lengths, max_lengths, check_every=8)
    assert ids == kept_ids == every8_ids
    for a, b in zip(attn, kept_attn, strict=True):
        assert a.device.type == "cpu"
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    for i in range(5):
        alone, alone_attn = greedy_search(
            model, src[i : i + 1, : lengths[i]], lengths[i : i + 1], max_lengths[i : i + 1]
        )
        assert alone[0] == ids[i]
        torch.testing.assert_close(alone_attn[0], attn[i][:, : lengths[i]], atol=1e-5, rtol=0)
    assert [len(x) for x in ids][1] <= 1 and max(map(len, ids)) > 2


def eos_competes(model, scale=0.05, seed=0):
    """Make </s> compete at every step of ``model``'s searches: its score becomes the best other
    word's plus scale·tanh(w·o), o the generator's output for the step (ê, or the logits) and w
    fixed, so it wins after some prefixes and not others. An untrained model's </s> seldom wins
    before the length limit forces it, and the length penalty then only ever compares hypotheses of
    one length."""
    gen = model.generator
    scores = type(gen).scores

    def competing(out, *args, **kwargs):
        w = torch.randn(out.size(-1), generator=torch.Generator().manual_seed(seed))
        s = scores(gen, out, *args, **kwargs).clone()
        others = s.clone()
        others[..., EOS_ID] = float("-inf")
        s[..., EOS_ID] = others.max(-1).values + scale * torch.tanh(out.float() @ w)
        return s

    gen.scores = competing
    return model


@pytest.mark.parametrize("decoder", ["transformer", "lstm"])
@pytest.mark.parametrize("loss", ["nllvmf", "ce"])
@pytest.mark.parametrize("penalty,alpha", [("avg", 0.0), ("wu", 0.6), ("wu", 3.0), ("none", 0.0)])
def test_batched_beam_equals_the_sentence_at_a_time_beam(data, decoder, loss, penalty, alpha):
    """Issue 24: beam search over the whole batch gives the words of the former one-sentence beam
    (softmax, and the continuous k-NN beam), with the same attention for -replace_unk. The
    reference (tests/search_reference.py) has its own decoder step, banned words and length
    penalties. Run on the untrained model and on it with </s> competing (eos_competes), where
    hypotheses of different lengths end in the same beam: there the length penalty decides, and
    under avg and wu with alpha 3 it picks another hypothesis than the best summed score would."""
    from tests.search_reference import normaliser, sequential_beam_search

    if decoder == "transformer":
        model, n_src, _ = tiny_model(data, loss=loss, seed=7)
    else:
        model, n_src = _lstm_model(data, loss, seed=7)
    src, lengths = padded_batch(n_src, [6, 3, 5, 2, 4, 6], seed=8)
    max_lengths = torch.tensor([9, 1, 4, 6, 0, 7])
    for competing in (False, True):
        if competing:
            eos_competes(model)
        for k in (2, 4):
            ids, attn = beam_search(model, src, lengths, max_lengths, k, penalty, alpha)
            finished = []
            ref_ids, ref_attn = sequential_beam_search(
                model, src, lengths, max_lengths, k, penalty, alpha, finished_log=finished
            )
            assert ids == ref_ids, (competing, k, ids, ref_ids)
            for a, b in zip(attn, ref_attn, strict=True):
                torch.testing.assert_close(a, b.cpu(), atol=1e-5, rtol=0)
            assert ids[4] == [] and len(ids[1]) <= 1  # limits 0 and 1
            if not competing:
                continue
            # the sentences whose limits leave room (all but limits 0 and 1) end hypotheses of different lengths
            assert [len({n for _, n, _ in f}) > 1 for f in finished] == [True, False, True, True, False, True], finished
            by_sum = [max(f, key=lambda h: h[0])[2] for f in finished]
            decided = [max(f, key=lambda h: h[0] / normaliser(max(h[1], 1), penalty, alpha))[2] for f in finished]
            assert decided == ids
            if (penalty, alpha) in (("avg", 0.0), ("wu", 3.0)):
                assert decided != by_sum, finished  # the penalty changed the winner somewhere
            elif penalty == "none":
                assert decided == by_sum


# --- 3. save / resume -----------------------------------------------------------------------------

NOAM = {"decay_method": "noam", "warmup_steps": "4", "learning_rate": "2", "param_init": "0", "param_init_glorot": True}
ARCH = ("encoder_type", "decoder_type", "heads", "transformer_ff", "layers", "position_encoding")


def logged_lrs(path):
    return log_values(path, r"\] step \d+: loss [^\n]*lr ([\d.e+-]+)")


def test_resume_is_exact_and_keeps_the_architecture(data, tmp_path, monkeypatch):
    """10 steps with dropout, attention dropout and noam; resume from step 4 (an epoch's end) and
    step 6 (mid-epoch; also without the schedule's options) without repeating any architecture
    option: every later step's loss, the lr of every step, the final parameters and the progress
    equal the uninterrupted run's."""
    seen = record_steps(monkeypatch)
    lrs = []
    real_step = Trainer.train_step  # record_steps's wrapper

    def recording(self, batch, step):
        lrs.append((step, self.optimizer.param_groups[0]["lr"]))
        return real_step(self, batch, step)

    monkeypatch.setattr(Trainer, "train_step", recording)
    common = {
        "loss": "nllvmf",
        "dropout": "0.3",
        "attention_dropout": "0.2",
        "epochs": "5",
        "train_steps": "10",
        "save_checkpoint_steps": "2",
        "valid_steps": "3",
        "report_every": "1",
        **NOAM,
    }
    full = run_train(data, tmp_path / "full", **{**TRANSFORMER, **common})
    reference, ref_lrs = dict(seen), dict(lrs)
    assert sorted(reference) == list(range(1, 11))
    for step, lr in ref_lrs.items():  # the lr used at step s is the schedule's
        assert lr == pytest.approx(learning_rate(full.opt, step), rel=1e-12), step
    logged = logged_lrs(tmp_path / "full" / "train.log")
    assert logged == [float(f"{learning_rate(full.opt, s):.2e}") for s in range(1, 11)]
    resumed_opts = {k: v for k, v in TRANSFORMER.items() if k not in ARCH}
    for k in (4, 6):
        seen.clear()
        lrs.clear()
        ckpt = tmp_path / "full" / f"m_step_{k}.pt"
        given = dict(common)
        if k == 6:  # the schedule is the checkpoint's when -decay_method etc. are left out
            given.update(decay_method=None, warmup_steps=None, learning_rate=None)  # None drops the flag
        resumed = run_train(data, tmp_path / f"from{k}", train_from=str(ckpt), **{**resumed_opts, **given})
        assert [s for s, _ in seen] == list(range(k + 1, 11))
        for step, value in seen:
            assert value == reference[step], (k, step)
        assert dict(lrs) == {s: ref_lrs[s] for s in range(k + 1, 11)}
        for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
            assert torch.equal(a, b), name
        assert resumed.progress == full.progress
        assert type(resumed.model.encoder).__name__ == "TransformerEncoder"
        assert (resumed.opt.heads, resumed.opt.enc_layers, resumed.opt.dec_layers) == (2, 2, 2)


def test_resume_with_a_conflicting_architecture_option(data, tmp_path, capsys):
    run_train(data, tmp_path / "a", loss="cosine", **TRANSFORMER)
    ckpt = str(tmp_path / "a" / "m_last.pt")
    rest = {k: v for k, v in TRANSFORMER.items() if k not in ARCH}
    b = tmp_path / "b"
    b.mkdir()
    fails(
        capsys,
        argv(data, b, train_from=ckpt, **rest, encoder_type="rnn"),
        "-encoder_type rnn",
        "-encoder_type transformer",
        ckpt,
    )
    fails(capsys, argv(data, b, train_from=ckpt, **rest, heads="4"), "-heads 4", "-heads 2")
    fails(capsys, argv(data, b, train_from=ckpt, **rest, layers="3"), "-enc_layers 3", "-enc_layers 2")
    fails(capsys, argv(data, b, train_from=ckpt, **rest, position_encoding="learned"), "-position_encoding learned")
    assert list(b.iterdir()) == []


def test_alignment_layer_is_carried_to_translation_and_through_resume(data, tmp_path, capsys):
    """-alignment_layer -1 (the last of 2 layers) reaches translate.py through the checkpoint and
    survives a -train_from that does not repeat it; a different one on resume is a conflict."""
    run_train(data, tmp_path / "a", loss="cosine", alignment_layer="-1", **TRANSFORMER)
    ckpt = str(tmp_path / "a" / "m_last.pt")
    assert translator(ckpt).model.decoder.alignment_layer == 1
    rest = {k: v for k, v in TRANSFORMER.items() if k not in ARCH}
    run = run_train(data, tmp_path / "b", train_from=ckpt, **{**rest, "epochs": "2", "train_steps": "5"})
    assert run.opt.alignment_layer == -1 and run.model.decoder.alignment_layer == 1
    assert translator(str(tmp_path / "b" / "m_last.pt")).model.decoder.alignment_layer == 1
    c = tmp_path / "c"
    c.mkdir()
    fails(
        capsys, argv(data, c, train_from=ckpt, alignment_layer="0", **rest), "-alignment_layer 0", "-alignment_layer -1"
    )
    # "mean" spelled out is the default: the same model option as leaving it out
    run_train(data, tmp_path / "d", loss="cosine", alignment_layer="mean", **TRANSFORMER)
    run = run_train(
        data,
        tmp_path / "e",
        train_from=str(tmp_path / "d" / "m_last.pt"),
        alignment_layer="mean",
        **{**rest, "epochs": "2", "train_steps": "5"},
    )
    assert run.opt.alignment_layer is None and run.model.decoder.alignment_layer is None


def test_translate_alignment_layer_overrides_the_checkpoint(data, tmp_path, capsys):
    """translate.py -alignment_layer picks another layer's attention (same words); an LSTM model
    or a layer out of range exits 2 before -output is written."""
    run_train(data, tmp_path, loss="cosine", **TRANSFORMER)
    ckpt = str(tmp_path / "m_last.pt")
    toks = [line.split() for line in data["src"][:3]]
    words, attns = {}, {}
    for layer in (None, "mean", 0, 1, -1):
        tr = translator(ckpt, alignment_layer=layer)
        words[layer], attns[layer] = tr.translate_batch(toks, attention=True)
        assert tr.model.decoder.alignment_layer == (None if layer in (None, "mean") else layer % 2)
    assert words[0] == words[1] == words[None] == words["mean"] == words[-1]
    for a, b, c, d in zip(attns[None], attns["mean"], attns[0], attns[1], strict=True):  # the default: the mean
        assert torch.equal(a, b)
        torch.testing.assert_close(a, (c + d) / 2, atol=1e-6, rtol=0)
    assert all(torch.equal(a, b) for a, b in zip(attns[1], attns[-1], strict=True))
    assert not all(torch.allclose(a, b) for a, b in zip(attns[0], attns[1], strict=True))
    run_train(data, tmp_path / "lstm", loss="cosine", rnn_size="16", word_vec_size="8", train_steps="1")
    src = tmp_path / "in.fr"
    src.write_text(data["src"][0] + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    for model, layer, needle in (
        (ckpt, "2", "-alignment_layer 2: the decoder has 2 layers"),
        (str(tmp_path / "lstm" / "m_last.pt"), "0", "decoder is an LSTM"),
    ):
        with pytest.raises(SystemExit) as exc:
            translate.main(["-model", model, "-src", str(src), "-output", str(out), "-alignment_layer", layer])
        assert exc.value.code == 2 and needle in capsys.readouterr().err
        assert not out.exists()


# --- 4. an LSTM checkpoint written before the Transformer -----------------------------------------

NEW_OPTS = (
    "encoder_type",
    "decoder_type",
    "layers",
    "heads",
    "transformer_ff",
    "position_encoding",
    "max_positions",
    "attention_dropout",
    "alignment_layer",
    "param_init_glorot",
    "decay_method",
    "warmup_steps",
)


def test_old_lstm_checkpoint_loads_translates_and_resumes(data, tmp_path):
    run_train(data, tmp_path, loss="nllvmf", brnn=True, rnn_size="16", word_vec_size="8", train_steps="4")
    ckpt = torch.load(tmp_path / "m_last.pt", weights_only=True)
    for key in NEW_OPTS:
        assert key in ckpt["opt"]
        del ckpt["opt"][key]
    old = tmp_path / "old.pt"
    torch.save(ckpt, old)
    model, opt, _, _ = model_from_checkpoint(load_checkpoint(str(old)))
    assert type(model.encoder).__name__ == "BiRNNEncoder" and model.encoder.rnn.bidirectional
    assert type(model.decoder).__name__ == "InputFeedRNNDecoder"
    src = tmp_path / "in.fr"
    src.write_text("\n".join(data["src"][:5]) + "\n", encoding="utf-8")
    outs = []
    for name in ("m_last.pt", "old.pt"):
        translate.main(
            [
                "-model",
                str(tmp_path / name),
                "-src",
                str(src),
                "-output",
                str(tmp_path / f"{name}.out"),
                "-beam_size",
                "2",
            ]
        )
        outs.append((tmp_path / f"{name}.out").read_text(encoding="utf-8"))
    assert outs[0] == outs[1] and outs[0].count("\n") == 5
    run = run_train(
        data, tmp_path / "resumed", train_from=str(old), train_steps="6", epochs="2", rnn_size=None, word_vec_size=None
    )
    assert run.progress["step"] == 6 and run.opt.brnn and run.opt.rnn_size == 16


# --- 5. clear errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra,needles",
    [
        ({"heads": "3"}, ["-heads 3", "-rnn_size 16"]),
        ({"heads": "0"}, ["-heads", "at least 1"]),
        ({"word_vec_size": "8"}, ["-encoder_type transformer", "-rnn_size 16", "not 8", "-src_word_vec_size 16"]),
        ({"tgt_word_vec_size": "8"}, ["-decoder_type transformer", "not 8", "-tgt_word_vec_size 16"]),
        ({"brnn": True}, ["-brnn", "-encoder_type transformer"]),
        ({"alignment_layer": "2"}, ["-alignment_layer 2", "2 layers"]),
        ({"alignment_layer": "-3"}, ["-alignment_layer -3", "2 layers"]),
        ({"alignment_layer": "0", "decoder_type": "rnn"}, ["-alignment_layer", "-decoder_type rnn"]),
        ({"alignment_layer": "last"}, ["-alignment_layer", "expected 'mean' or a layer number, got 'last'"]),
        ({"enc_layers": "3"}, ["-layers", "-enc_layers"]),
        ({"layers": "0"}, ["-layers", "at least 1"]),
        ({"label_smoothing": "0.1"}, ["-label_smoothing", "-loss cosine"]),
        ({"decay_method": "noam", "warmup_steps": "0"}, ["-warmup_steps", "0"]),
        ({"attention_dropout": "1"}, ["-attention_dropout", "[0, 1)"]),
        ({"transformer_ff": "0"}, ["-transformer_ff", "at least 1"]),
    ],
)
def test_bad_transformer_options(data, tmp_path, capsys, extra, needles):
    err = fails(capsys, argv(data, tmp_path, loss="cosine", **{**TRANSFORMER, **extra}), *needles)
    assert err.startswith("error: ") or "\nerror: " in err, err
    assert list(tmp_path.iterdir()) == []


# --- 6. mixed encoder / decoder pairs -------------------------------------------------------------


@pytest.mark.parametrize("enc,dec", [("transformer", "rnn"), ("rnn", "transformer"), ("brnn", "transformer")])
def test_mixed_pairs_train_and_decode(data, tmp_path, enc, dec):
    run = run_train(
        data, tmp_path, loss="nllvmf", tie_emb=True, **{**TRANSFORMER, "encoder_type": enc, "decoder_type": dec}
    )
    losses = reported_losses(tmp_path / "train.log")
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    names = {"transformer": "TransformerEncoder", "rnn": "RNNEncoder", "brnn": "BiRNNEncoder"}
    assert type(run.model.encoder).__name__ == names[enc]
    assert type(run.model.decoder).__name__ == ("TransformerDecoder" if dec == "transformer" else "InputFeedRNNDecoder")
    assert_trained(run, initial_model(run))
    lines = data["src"][:3]
    assert decodes(run, lines, 1) and decodes(run, lines, 3)
    # and through the checkpoint, as translate.py loads it
    assert translator(str(tmp_path / "m_last.pt")).translate_lines(lines) == decodes(run, lines, 1)


# --- 7. DDP and -amp --------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process(data, tmp_path):
    """tests/unit/test_distributed.py's check on the Transformer: 4 steps of 2 gloo ranks (each taking
    half of every 4-sentence batch) end with the parameters of one in-process run."""
    opts = {"loss": "nllvmf", "tie_emb": True, "batch_size": "4", "dropout": "0", "seed": "7", **TRANSFORMER}
    single = run_train(data, tmp_path / "one", **opts)
    multi = tmp_path / "two"
    multi.mkdir()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "train.py",
        *argv(data, multi, **opts),
    ]
    out = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "parameters identical on all 2 ranks: yes" in out.stdout
    multi_losses = [float(x) for x in re.findall(r"step \d+: loss (-?[\d.]+)", out.stdout)]
    assert multi_losses == pytest.approx(reported_losses(tmp_path / "one" / "train.log"), abs=1e-3)
    b = torch.load(multi / "m_last.pt", weights_only=True)["model"]
    for name, a in single.model.state_dict().items():
        assert torch.allclose(a, b[name], atol=1e-4), name


def test_amp_bf16_transformer_loss_is_finite(data, tmp_path):
    from onmt_cont.losses import build_loss
    from onmt_cont.train.step import TrainingForward
    from onmt_cont.utils.amp import probe_autocast

    model, _, _ = tiny_model(data, loss="nllvmf")
    opt = train.build_parser().parse_args(argv(data, tmp_path, loss="nllvmf", **TRANSFORMER))
    from onmt_cont.train.checks import check_options

    check_options(opt)
    error = probe_autocast(
        TrainingForward(model.train()), build_loss(opt, model.generator.table), torch.device("cpu"), torch.bfloat16
    )
    if error is not None:
        pytest.skip(f"this CPU cannot run the Transformer in bfloat16 under autocast: {error[:100]}")
    run = run_train(data, tmp_path, loss="nllvmf", amp=True, amp_dtype="bf16", **TRANSFORMER)
    losses = reported_losses(tmp_path / "train.log")
    assert run.progress["step"] == 4 and len(losses) == 4 and all(math.isfinite(x) for x in losses), losses


# --- 8. noam ----------------------------------------------------------------------------------------


def test_noam_formula():
    """lr(s) = factor · d^-0.5 · min(s^-0.5, s · w^-1.5): linear warm-up to the peak at s = w,
    then inverse square root decay; constant without -decay_method."""
    from argparse import Namespace

    opt = Namespace(decay_method="noam", learning_rate=2.0, rnn_size=512, warmup_steps=4000)
    for step, expected in (
        (1, 2.0 / (512**0.5 * 4000**1.5)),
        (400, 2.0 * 400 / (512**0.5 * 4000**1.5)),
        (4000, 2.0 / (512**0.5 * 4000**0.5)),
        (16000, 2.0 / (512**0.5 * 16000**0.5)),
    ):
        assert learning_rate(opt, step) == pytest.approx(expected, rel=1e-12), step
    base = Namespace(decay_method="noam", learning_rate=1.0, rnn_size=512, warmup_steps=4000)
    assert learning_rate(base, 4000) == pytest.approx(6.9877e-4, rel=1e-4)  # the peak of Vaswani et al.'s base model
    assert learning_rate(opt, 2000) == pytest.approx(learning_rate(opt, 4000) / 2)
    assert learning_rate(opt, 16000) == pytest.approx(learning_rate(opt, 4000) / 2)
    assert learning_rate(Namespace(decay_method="none", learning_rate=0.01), 7) == 0.01
