"""Readable progress: the training log's cosine and accuracy (hand-made cases, and in a real run's
log), progress bars that stay off when stderr is not a terminal, and the scripts' summaries."""

import io
import math
import re
import sys

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.losses import LOSSES
from onmt_cont.models.generators import ContinuousGenerator, SampledLogits, SoftmaxGenerator
from onmt_cont.train.log import Meter
from onmt_cont.train.step import STATS, batch_stats, summarize
from onmt_cont.utils.progress import progress


def continuous_gen(criterion="cosine"):
    """A generator over a hand-made unit table: padding, <unk>, <s>, </s>, then words 4..6 along
    the three axes of R^3 (the specials point elsewhere)."""
    table = torch.tensor([[0.0, 0, 0], [-1, 0, 0], [0, -1, 0], [0, 0, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    return ContinuousGenerator(2, table, criterion=criterion)


def test_batch_stats_continuous_hand_made():
    """Predictions (2,0,0), (1,1,0), (0,3,4) for gold 4, 5, 6: cosines 1, 1/√2, 4/5; nearest
    neighbours 4, a tie of 4 and 5 (argmax takes the first: 4, wrong), 6: accuracy 2/3."""
    gen = continuous_gen()
    pred = torch.tensor([[2.0, 0, 0], [1, 1, 0], [0, 3, 4]])
    gold = torch.tensor([4, 5, 6])
    s = summarize(batch_stats(gen, pred, gold), continuous=True)
    assert s["cosine"] == pytest.approx((1 + 1 / math.sqrt(2) + 0.8) / 3)
    assert s["accuracy"] == pytest.approx(2 / 3)
    assert (s["tokens"], s["scored"]) == (3, 3)
    # without scoring: the cosine (cheap) is kept, nothing is scored against the table
    cheap = summarize(batch_stats(gen, pred, gold, score=False), continuous=True)
    assert cheap["cosine"] == pytest.approx(s["cosine"]) and cheap["scored"] == 0


def test_batch_stats_chunks_rows(monkeypatch):
    """Scoring in row chunks (here one row at a time) gives the same sums as one [N, vocab] product."""
    import onmt_cont.train.step as trainer

    gen = continuous_gen("vmf")
    pred = torch.randn(11, 3, generator=torch.Generator().manual_seed(0))
    gold = torch.randint(4, 7, (11,), generator=torch.Generator().manual_seed(1))
    whole = batch_stats(gen, pred, gold)
    monkeypatch.setattr(trainer, "SCORE_CHUNK", 1)
    assert torch.equal(batch_stats(gen, pred, gold), whole)
    expected = (gen.scores(pred).argmax(-1) == gold).sum().item()
    assert whole[STATS.index("correct")].item() == expected


def test_batch_stats_softmax_hand_made():
    """Logits log(0.5, 0.25, 0.25) rows: p(gold) 0.5 and 0.25 -> ppl exp(-(log .5 + log .25)/2) = 2√2;
    argmax is word 0 in both rows: accuracy 1/2."""
    gen = SoftmaxGenerator(2, 3)
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25]]))
    s = summarize(batch_stats(gen, logits, torch.tensor([0, 1])), continuous=False)
    assert s["ppl"] == pytest.approx(2 * math.sqrt(2))
    assert s["accuracy"] == pytest.approx(0.5)
    # a sampled softmax (-joint_sample) maps the argmax back through its candidate ids
    sampled = SampledLogits(torch.tensor([[0.0, 3.0], [5.0, 1.0]]), torch.tensor([2, 7]))
    s = summarize(batch_stats(gen, sampled, torch.tensor([7, 7])), continuous=False)
    assert s["accuracy"] == pytest.approx(0.5) and s["sampled"]


def test_meter_line_names_what_was_measured():
    gen = continuous_gen()
    meter = Meter(continuous=True)
    a = batch_stats(gen, torch.tensor([[1.0, 0, 0]]), torch.tensor([5]), score=False)  # cos 0
    b = batch_stats(gen, torch.tensor([[0.0, 1, 0], [0, 0, 1]]), torch.tensor([5, 4]))  # cos 1, 0; acc 1/2
    meter.update(-3.0, 1, 2, a, 1)
    meter.update(-6.0, 2, 2, b, 2)
    line = meter.line(2, 5e-4)
    # loss and cosine over the 3 tokens of the window; accuracy of step 2's 2 tokens only
    assert line.startswith("step 2: loss -3.0000; cosine 0.3333; nn accuracy 50.00% on step 2's batch (2 tokens);")
    meter.reset()
    meter.update(-3.0, 1, 2, a, 3)
    assert "accuracy" not in meter.line(3, 5e-4)  # no scored batch in this window: nothing claimed
    soft = Meter(continuous=False)
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    soft.update(2.0, 1, 1, batch_stats(SoftmaxGenerator(2, 3), logits, torch.tensor([0])), 4)
    assert re.search(r"loss 2\.0000; ppl 2\.00, accuracy 100\.00% on step 4's batch \(1 tokens\);", soft.line(4, 1))


def test_meter_matches_validation_numbers():
    """The training meter and validation share batch_stats: the same output gives the same values."""
    gen = continuous_gen()
    pred = F.normalize(torch.randn(20, 3, generator=torch.Generator().manual_seed(3)), dim=-1)
    gold = torch.randint(4, 7, (20,), generator=torch.Generator().manual_seed(4))
    meter = Meter(continuous=True)
    meter.update(0.0, 20, 20, batch_stats(gen, pred, gold), 7)
    s = summarize(batch_stats(gen, pred, gold), True)
    assert f"cosine {s['cosine']:.4f}; nn accuracy {s['accuracy']:.2%}" in meter.line(7, 1.0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 24-pair corpus and a random unit table of its target vocabulary."""
    from onmt_cont.bin import preprocess

    d = tmp_path_factory.mktemp("progress")
    src = [" ".join(f"s{(i * 5 + j) % 13}" for j in range(2 + i % 4)) for i in range(24)]
    tgt = [" ".join(f"t{(i * 5 + j) % 13}" for j in range(2 + i % 3)) for i in range(24)]
    for name, lines in (("src", src), ("tgt", tgt)):
        (d / f"train.{name}").write_text("\n".join(lines) + "\n")
    preprocess.main(
        [
            "-train_src",
            str(d / "train.src"),
            "-train_tgt",
            str(d / "train.tgt"),
            "-valid_src",
            str(d / "train.src"),
            "-valid_tgt",
            str(d / "train.tgt"),
            "-save_data",
            str(d / "data"),
        ]
    )
    vocab = torch.load(d / "data.vocab.pt", weights_only=True)
    table = F.normalize(torch.randn(len(vocab["tgt"]["tokens"]), 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    table[0] = 0
    torch.save(table, d / "emb.pt")
    return d


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_training_log_reports_cosine_and_accuracy(tiny, loss, capsys, monkeypatch):
    """Every loss of the registry: each logged step shows its metrics; only logged steps are scored."""
    from onmt_cont.bin import train
    from onmt_cont.train.step import Trainer

    scored_steps = []
    real = batch_stats

    def spy(gen, output, gold, score=True):
        if score:
            scored_steps.append(gold.numel())
        return real(gen, output, gold, score)

    monkeypatch.setattr("onmt_cont.train.step.batch_stats", spy)
    run = train.main(
        [
            "-data",
            str(tiny / "data"),
            "-save_model",
            str(tiny / loss),
            "-tgt_emb",
            str(tiny / "emb.pt"),
            "-loss",
            loss,
            "-rnn_size",
            "16",
            "-word_vec_size",
            "8",
            "-batch_size",
            "6",
            "-train_steps",
            "6",
            "-report_every",
            "3",
            "-valid_steps",
            "100",
            "-dropout",
            "0",
        ]
    )
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if re.search(r"\] step \d+: loss", line)]
    assert len(lines) == 2, out
    assert isinstance(run.trainer, Trainer) and run.trainer.measure_every == 3
    if loss == "ce":
        pattern = r"step (\d+): loss [\d.]+; ppl [\d.]+, accuracy [\d.]+% on step (\d+)'s batch \((\d+) tokens\); lr"
    else:
        pattern = (
            r"step (\d+): loss -?[\d.]+; cosine -?[01]\.\d{4}; nn accuracy [\d.]+% "
            r"on step (\d+)'s batch \((\d+) tokens\); lr"
        )
    found = [re.search(pattern, line) for line in lines]
    assert all(found), lines
    assert [(m.group(1), m.group(2)) for m in found] == [("3", "3"), ("6", "6")]
    # training scored the vocabulary at steps 3 and 6 only; validation (at the epoch's end, step 4)
    # once per batch in between
    assert len(scored_steps) == 2 + len(run.valid)
    assert [int(m.group(3)) for m in found] == [scored_steps[0], scored_steps[-1]]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    assert list(progress(range(3), "not shown")) == [0, 1, 2]
    assert capsys.readouterr().err == ""  # pytest's stderr is no terminal: no bar, no carriage return
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert list(progress(range(3), "shown", total=3)) == [0, 1, 2]
    assert "shown:" in term.getvalue() and "/3" in term.getvalue()


SUMMARY = r"^\S.* in \d+\.\ds( \([\d,.]+ \w+/s\))?: wrote \S"


def test_long_jobs_show_bars_and_end_with_a_summary(tiny, tmp_path, monkeypatch, capsys):
    """preprocess, embeddings_to_torch, build_lexicon and translate draw a bar on a terminal and none
    otherwise, and end with '<done> in <T>s: wrote <files, with what they hold>'."""
    from onmt_cont.bin import build_lexicon, embeddings_to_torch, preprocess, train, translate

    words = [f"t{i}" for i in range(13)] + ["</s>", "other"]
    vec = tmp_path / "tgt.vec"
    vec.write_text(f"{len(words)} 4\n" + "".join(f"{w} {i % 3} 1 {i} 0.5\n" for i, w in enumerate(words)))
    src, tgt = str(tiny / "train.src"), str(tiny / "train.tgt")
    prefix = str(tmp_path / "d")
    runs = {
        "preprocess": lambda: preprocess.main(
            [
                "-train_src",
                src,
                "-train_tgt",
                tgt,
                "-valid_src",
                src,
                "-valid_tgt",
                tgt,
                "-save_data",
                prefix,
                "-tgt_emb",
                str(vec),
            ]
        ),
        "embeddings": lambda: embeddings_to_torch.main(
            [
                "-emb_file_dec",
                str(vec),
                "-dict_file",
                prefix + ".vocab.pt",
                "-output_file",
                str(tmp_path / "emb"),
                "-normalize",
            ]
        ),
        "lexicon": lambda: build_lexicon.main(["-src", src, "-tgt", tgt, "-output", str(tmp_path / "lex.txt")]),
    }
    outs = {}
    for terminal in (False, True):
        if terminal:
            monkeypatch.setattr(sys, "stderr", Terminal())
        for name, run in runs.items():
            run()
            outs[name, terminal] = capsys.readouterr().out.splitlines()
        err = sys.stderr.getvalue() if terminal else capsys.readouterr().err
        if terminal:
            for bar in (f"counting {src}", f"writing {src}", f"reading {vec}", "forward EM", "reverse EM"):
                assert bar in err, bar
        else:
            assert err == ""
    last = {name: outs[name, False][-1] for name in runs}
    assert re.match(rf"preprocessed 48 pairs {SUMMARY[4:]}", last["preprocess"])
    assert f"{prefix}.train.0.pt (24 pairs in 1 shard(s)" in last["preprocess"]
    assert re.match(rf"read 15 vectors from {vec} {SUMMARY[4:]}", last["embeddings"])
    assert f"{tmp_path / 'emb'}.dec.pt [17, 4] float32" in last["embeddings"]
    assert re.match(rf"aligned 24 pairs {SUMMARY[4:]}", last["lexicon"]) and "lex.txt (lexicon: " in last["lexicon"]
    for name in runs:  # the bar's output never reaches stdout (the lines differ only in timings)
        same = [[re.sub(r"[\d.,]+", "N", line) for line in outs[name, t]] for t in (True, False)]
        assert same[0] == same[1], name

    train.main(
        [
            "-data",
            prefix,
            "-save_model",
            str(tmp_path / "m"),
            "-tgt_emb",
            str(tmp_path / "emb.dec.pt"),
            "-loss",
            "cosine",
            "-rnn_size",
            "16",
            "-word_vec_size",
            "8",
            "-train_steps",
            "2",
        ]
    )
    (tmp_path / "in.txt").write_text("s1 s2\n\ns3\n")
    capsys.readouterr()
    translate.main(
        [
            "-model",
            str(tmp_path / "m_last.pt"),
            "-src",
            str(tmp_path / "in.txt"),
            "-output",
            str(tmp_path / "out.txt"),
            "-batch_size",
            "1",
        ]
    )
    assert capsys.readouterr().out == ""  # the summary is on standard error, beside the bar
    lines = sys.stderr.getvalue().splitlines()
    assert any(re.match(rf"translated 3 lines {SUMMARY[4:]}\S*out\.txt$", line) for line in lines), lines
    assert "translating" in sys.stderr.getvalue()


def test_translate_lines_reports_every_line_done(tiny):
    """The progress hook counts every line once, empty ones included, so a bar ends at its total."""
    from onmt_cont.bin import train
    from tests.helpers import translator

    train.main(
        [
            "-data",
            str(tiny / "data"),
            "-save_model",
            str(tiny / "hook"),
            "-tgt_emb",
            str(tiny / "emb.pt"),
            "-loss",
            "cosine",
            "-rnn_size",
            "16",
            "-word_vec_size",
            "8",
            "-train_steps",
            "1",
        ]
    )
    done = []
    translator = translator(str(tiny / "hook_last.pt"))
    out = translator.translate_lines(["s1 s2", "", "s3", "s4 s5 s6"], batch_size=2, on_batch=done.append)
    assert len(out) == 4 and sum(done) == 4 and done[0] == 1
