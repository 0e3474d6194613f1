"""Frequency-bin offsets (translate.py -freq_offsets, tools/calibrate_offsets.py): the bins, the
scores, the fitting loop against a decoder whose answer is known, and end to end."""

import json
import math

import pytest
import torch

from onmt_cont.bin import translate
from onmt_cont.inputters.vocab import Vocab, unigram_log_prior
from onmt_cont.models.checkpoint import load_checkpoint
from onmt_cont.models.generators import ContinuousGenerator
from onmt_cont.translate.calibration import (
    FREQ_BINS,
    bin_index,
    bin_tokens,
    fit_offsets,
    load_offsets,
    offset_vector,
    save_offsets,
)
from onmt_cont.utils.errors import UserError
from tests.helpers import WC, load_tool, run_train, translate_args

calibrate = load_tool("calibrate_offsets")


@pytest.fixture(scope="module")
def data(wc_data):
    """The memorisation corpus with a 16-d table: conftest's, which its trained models share."""
    return wc_data


def test_bin_edges():
    assert [bin_index(c) for c in (0, 1, 2, 4, 5, 9, 10, 99, 100, 999, 1000, 10**7)] == [
        -1,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
        5,
        5,
    ]
    assert [name for name, _, _ in FREQ_BINS] == ["1", "2-4", "5-9", "10-99", "100-999", "1000+"]


VOCAB = Vocab(
    ["<blank>", "<unk>", "<s>", "</s>", "a", "b", "c", "d"],
    [0, 0, 0, 0, 1500, 3, 1, 40],
    total_tokens=1544,
    sentences=100,
)


def test_offset_vector_by_hand():
    vec = offset_vector(VOCAB, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert vec.tolist() == [0, 0, 0, 0, 6.0, 2.0, 1.0, 4.0]  # specials (count 0): no offset
    with pytest.raises(ValueError, match="expected 6 offsets"):
        offset_vector(VOCAB, [1.0])
    with pytest.raises(ValueError, match="no training counts"):
        offset_vector(Vocab(VOCAB.itos, VOCAB.counts), [0.0] * 6)


def test_bin_tokens_counts_only_training_words():
    counts = dict(zip(VOCAB.itos, VOCAB.counts, strict=True))
    assert bin_tokens(["a a b zz </s>", "c d"], counts) == [1, 1, 0, 1, 0, 2]


@pytest.mark.parametrize("beta", [0.0, 0.5, -0.5])
def test_generator_adds_the_offsets(beta):
    torch.manual_seed(0)
    table = torch.nn.functional.normalize(torch.randn(len(VOCAB), 4), dim=-1)
    table[0] = 0
    gen = ContinuousGenerator(4, table, criterion="vmf")
    out = gen(torch.randn(3, 4))
    base = gen.scores(out)
    offsets = offset_vector(VOCAB, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    gen.set_prior(unigram_log_prior(VOCAB), beta)
    with_beta = gen.scores(out)
    gen.set_prior(unigram_log_prior(VOCAB), beta, offsets)
    torch.testing.assert_close(gen.scores(out)[:, 1:], with_beta[:, 1:] + offsets[1:])
    gen.set_prior(None, 0.0, offsets)  # the offsets alone
    torch.testing.assert_close(gen.scores(out)[:, 1:], base[:, 1:] + offsets[1:])
    gen.set_prior(None, 0.0)
    torch.testing.assert_close(gen.scores(out), base)


@pytest.mark.parametrize("kind", ["softmax", "joint"])
def test_softmax_generators_add_the_offsets(kind):
    from onmt_cont.models.generators import SoftmaxGenerator
    from tests.helpers import joint

    torch.manual_seed(0)
    gen = SoftmaxGenerator(4, len(VOCAB)) if kind == "softmax" else joint(vocab=len(VOCAB))[0]
    logits = gen(torch.randn(3, 4))
    offsets = offset_vector(VOCAB, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    gen.set_offsets(offsets)
    torch.testing.assert_close(gen.scores(logits), torch.log_softmax(logits, -1) + offsets)
    torch.testing.assert_close(gen.greedy_scores(logits), logits + offsets)
    gen.set_offsets(None)
    torch.testing.assert_close(gen.scores(logits), torch.log_softmax(logits, -1))


def fake_decoder(ref_tokens, skew):
    """A decoder whose bin k puts out ref_k · exp(offset_k − skew_k) tokens of a word of that bin:
    the offsets that calibrate it are skew_k − skew_last (the last bin is held at 0)."""
    words = ["w1", "w2", "w5", "w10", "w100", "w1000"]

    def decode(offsets):
        n = [round(r * math.exp(o - s)) for r, o, s in zip(ref_tokens, offsets, skew, strict=True)]
        return [" ".join(w for w, k in zip(words, n, strict=True) for _ in range(k))]

    counts = {"w1": 1, "w2": 2, "w5": 5, "w10": 10, "w100": 100, "w1000": 1000}
    ref = [" ".join(w for w, k in zip(words, ref_tokens, strict=True) for _ in range(k))]
    return decode, ref, counts


def test_fit_finds_the_calibrating_offsets():
    ref_tokens = [300, 400, 500, 2000, 3000, 8000]
    skew = [2.0, 1.5, 1.0, 0.3, -0.2, 0.0]  # absolute here: the last bin needs none
    decode, ref, counts = fake_decoder(ref_tokens, skew)
    seen = []
    offsets, outputs, ratios = fit_offsets(
        decode, ref, counts, [1.0] * 6, rounds=12, step=0.5, on_round=lambda i, o, out, r: seen.append(r)
    )
    assert len(seen) == 12 and seen[0][0] < 0.2  # the first round decodes without offsets
    for o, s in zip(offsets, skew, strict=True):
        assert o == pytest.approx(s - skew[-1], abs=0.02)
    assert all(r == pytest.approx(1.0, abs=0.02) for r in ratios)
    assert outputs == decode(offsets)


def test_fit_to_another_systems_ratios_and_thin_bins():
    """Target ratios other than 1 are met; a bin under min_tokens keeps offset 0."""
    ref_tokens = [10, 400, 500, 2000, 3000, 8000]
    skew = [2.0, 1.5, 1.0, 0.3, -0.2, 0.0]
    decode, ref, counts = fake_decoder(ref_tokens, skew)
    target = [1.0, 0.5, 0.8, 1.0, 1.0, 1.0]
    offsets, _, ratios = fit_offsets(decode, ref, counts, target, rounds=12, min_tokens=20)
    assert offsets[0] == 0.0  # 10 reference tokens: not fitted
    assert ratios[1] == pytest.approx(0.5, abs=0.02) and ratios[2] == pytest.approx(0.8, abs=0.02)
    with pytest.raises(ValueError, match="rounds"):
        fit_offsets(decode, ref, counts, target, rounds=0)
    with pytest.raises(ValueError, match="step"):
        fit_offsets(decode, ref, counts, target, step=0)


def test_fit_keeps_the_round_nearest_the_target():
    """A step that overshoots more each round: the kept offsets are the best round's (the first), not the last."""
    ref_tokens = [300, 400, 500, 2000, 3000, 8000]
    decode, ref, counts = fake_decoder(ref_tokens, [1.0, 0, 0, 0, 0, 0])
    seen = []
    offsets, _, ratios = fit_offsets(
        decode,
        ref,
        counts,
        [1.0] * 6,
        rounds=3,
        step=2.5,
        on_round=lambda i, o, out, r: seen.append((abs(math.log(r[0])), o)),
    )
    best = min(seen, key=lambda x: x[0])
    assert offsets == best[1] and offsets != seen[-1][1]


def test_offsets_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "o.json"
    save_offsets(str(path), [1.5, 1.0, 0.5, 0.1, -0.1, 0.0], 0.25, [1.0] * 6, "val.de")
    assert load_offsets(str(path)) == ([1.5, 1.0, 0.5, 0.1, -0.1, 0.0], 0.25)
    good = json.loads(path.read_text())
    cases = [
        ("not json {", "not a JSON file"),
        (json.dumps([1, 2]), "format"),
        (json.dumps({**good, "format": "x"}), "format"),
        (json.dumps({**good, "bins": good["bins"][:3]}), "bins"),
        (json.dumps({**good, "offsets": [1.0] * 5}), "6 finite numbers"),
        (json.dumps({**good, "offsets": [1.0] * 5 + ["x"]}), "6 finite numbers"),
        (json.dumps({**good, "offsets": [True] * 6}), "6 finite numbers"),
        (json.dumps({**good, "decode_prior": None}), "decode_prior"),
        (json.dumps({**good, "decode_prior": False}), "decode_prior"),
    ]
    for text, needle in cases:
        path.write_text(text)
        with pytest.raises(UserError, match=needle):
            load_offsets(str(path))
    with pytest.raises(UserError, match="no such file"):
        load_offsets(str(tmp_path / "missing.json"))


def test_calibrate_and_translate_end_to_end(data, wc_infonce, wc_ce, tmp_path, capsys):
    """The tool fits and writes offsets that translate.py reads; a huge offset on one bin makes
    every word of the output a word of that bin, for a continuous and a softmax model; bad uses are
    refused with the reason, and nothing is written."""
    model = wc_infonce
    src, ref = data["dir"] / "valid.fr", data["dir"] / "valid.en"
    out = tmp_path / "off.json"
    calibrate.main(
        [
            "-model",
            str(model),
            "-src",
            str(src),
            "-tgt",
            str(ref),
            "-output",
            str(out),
            "-decode_prior",
            "0.5",
            "-rounds",
            "2",
            "-min_tokens",
            "1",
            "-batch_size",
            "4",
        ]
    )
    printed = capsys.readouterr().out
    assert "round 0:" in printed and "round 1:" in printed and "kept offsets" in printed
    offsets, beta = load_offsets(str(out))
    assert beta == 0.5 and len(offsets) == 6
    # -keep bleu: the written offsets are those of the round with the highest printed BLEU
    calibrate.main(
        [
            "-model",
            str(model),
            "-src",
            str(src),
            "-tgt",
            str(ref),
            "-output",
            str(tmp_path / "b.json"),
            "-decode_prior",
            "0.5",
            "-rounds",
            "3",
            "-min_tokens",
            "1",
            "-keep",
            "bleu",
        ]
    )
    rounds = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("round ")]
    best = max(rounds, key=lambda ln: float(ln.split()[-1]))  # the first of the highest, as the fit keeps it
    want = [float(v) for v in best.split("offsets")[1].split("|")[0].split()]
    assert load_offsets(str(tmp_path / "b.json"))[0] == pytest.approx(want, abs=0.006)
    translate.main(translate_args(model, data, tmp_path / "cal.txt", "-decode_prior", "0.5", "-freq_offsets", str(out)))
    assert len((tmp_path / "cal.txt").read_text().splitlines()) == 8

    vocab = load_checkpoint(str(model))["vocab"]
    counts = dict(zip(vocab["tgt"], vocab["tgt_counts"], strict=True))
    k = max(range(6), key=lambda b: sum(bin_index(c) == b for c in counts.values()))
    huge = [0.0] * 6
    huge[k] = 1000.0
    save_offsets(str(tmp_path / "huge.json"), huge, 0.0, [1.0] * 6, "hand")
    translate.main(translate_args(model, data, tmp_path / "huge.txt", "-freq_offsets", str(tmp_path / "huge.json")))
    words = (tmp_path / "huge.txt").read_text().split()
    assert words and all(bin_index(counts[w]) == k for w in words)
    translate.main(translate_args(model, data, tmp_path / "plain.txt"))
    assert any(bin_index(counts[w]) != k for w in (tmp_path / "plain.txt").read_text().split())
    # -match: the target is the mean of those outputs' ratios (here the plain output's and the reference's, 1)
    calibrate.main(
        [
            "-model",
            str(model),
            "-src",
            str(src),
            "-tgt",
            str(ref),
            "-output",
            str(tmp_path / "m.json"),
            "-rounds",
            "1",
            "-match",
            str(tmp_path / "plain.txt"),
            str(ref),
        ]
    )
    refs = bin_tokens(ref.read_text().splitlines(), counts)
    plain = bin_tokens((tmp_path / "plain.txt").read_text().splitlines(), counts)
    want = [(p / r + 1) / 2 if r else None for p, r in zip(plain, refs, strict=True)]
    got = json.loads((tmp_path / "m.json").read_text())["target"]
    assert [None if w is None else pytest.approx(w) for w in want] == got
    # -target: those ratios as given (e.g. an earlier -match fit's, read from its file) and a different fit
    given = [0.5, 2.0, 1.5, 1.0, 1.0, 1.0]
    calibrate.main(
        [
            "-model",
            str(model),
            "-src",
            str(src),
            "-tgt",
            str(ref),
            "-output",
            str(tmp_path / "t.json"),
            "-rounds",
            "2",
            "-min_tokens",
            "1",
            "-target",
            *map(str, given),
        ]
    )
    printed = capsys.readouterr().out
    assert "target hyp/ref  0.50  2.00  1.50  1.00  1.00  1.00" in printed
    fitted = json.loads((tmp_path / "t.json").read_text())
    assert fitted["target"] == given and "-target 0.5 2.0" in fitted["fitted_on"]
    calibrate.main(
        [
            "-model",
            str(model),
            "-src",
            str(src),
            "-tgt",
            str(ref),
            "-output",
            str(tmp_path / "t1.json"),
            "-rounds",
            "2",
            "-min_tokens",
            "1",
        ]
    )
    second = [
        next(ln for ln in text.splitlines() if ln.startswith("round 1:")) for text in (printed, capsys.readouterr().out)
    ]
    assert second[0].split("|")[0] != second[1].split("|")[0]  # round 1 moved the offsets elsewhere

    def refused(main, args, needle):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2 and needle in capsys.readouterr().err

    refused(
        translate.main,
        translate_args(model, data, tmp_path / "x.txt", "-decode_prior", "0.25", "-freq_offsets", str(out)),
        "fitted under -decode_prior 0.5",
    )
    # no -decode_prior: the file's (translate.py and load() alike, issue 78)
    translate.main(translate_args(model, data, tmp_path / "own.txt", "-freq_offsets", str(out)))
    translate.main(
        translate_args(model, data, tmp_path / "given.txt", "-decode_prior", "0.5", "-freq_offsets", str(out))
    )
    assert (tmp_path / "own.txt").read_text() == (tmp_path / "given.txt").read_text()
    refused(
        translate.main,
        translate_args(
            model, data, tmp_path / "x.txt", "-decode_prior", "0.5", "-decode_prior_cap", "3", "-freq_offsets", str(out)
        ),
        "-decode_prior_cap",
    )
    (tmp_path / "bad.json").write_text("{}")
    bad = str(tmp_path / "bad.json")
    refused(translate.main, translate_args(model, data, tmp_path / "x.txt", "-freq_offsets", bad), "format")
    assert not (tmp_path / "x.txt").exists()
    # a softmax model: its log-probabilities plus the offsets (the baseline gets the same treatment)
    ce = wc_ce
    translate.main(translate_args(ce, data, tmp_path / "ce_huge.txt", "-freq_offsets", str(tmp_path / "huge.json")))
    words = (tmp_path / "ce_huge.txt").read_text().split()
    assert words and all(bin_index(counts[w]) == k for w in words)
    calibrate.main(
        ["-model", str(ce), "-src", str(src), "-tgt", str(ref), "-output", str(tmp_path / "ce.json"), "-rounds", "1"]
    )
    assert load_offsets(str(tmp_path / "ce.json")) == ([0.0] * 6, 0.0)  # one round: the start
    capsys.readouterr()
    refused(
        translate.main, translate_args(ce, data, tmp_path / "x.txt", "-decode_prior", "0.5"), "this model has a softmax"
    )
    base = ["-model", str(model), "-src", str(src), "-tgt", str(ref), "-output", str(tmp_path / "y.json")]
    refused(calibrate.main, [*base, "-rounds", "0"], "-rounds must be at least 1")
    refused(calibrate.main, [*base, "-step", "0"], "-step must be positive")
    refused(calibrate.main, [*base, "-match", str(data["dir"] / "train.en")], "-match")
    refused(calibrate.main, [*base, "-target", "1", "1", "0", "1", "1", "1"], "6 positive ratios")
    refused(calibrate.main, [*base, "-target", "1", "1", "nan", "1", "1", "1"], "6 positive ratios")
    refused(calibrate.main, [*base, "-target", "1", "1", "1"], "expected 6 arguments")
    refused(calibrate.main, [*base, "-target", *["1"] * 6, "-match", str(ref)], "give one of them")
    refused(calibrate.main, [*base[:-1], str(tmp_path / "nodir" / "y.json")], "does not exist")
    refused(calibrate.main, ["-model", str(ce), *base[2:], "-decode_prior", "0.5"], "this model has a softmax")
    assert not (tmp_path / "y.json").exists()


# --- lab/tools/score_calibration.py ---------------------------------------------------------------------


def ratios_printed(text, label):
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(label))
    return [float(v) for v in line.split()[-len(FREQ_BINS) :]]


def test_score_calibration_and_the_bias_refit(data, tmp_path, capsys):
    """On the training data itself a refit bias (full softmax, model frozen, no dropout here) makes
    the expected tokens of every bin match the reference's, which the contrastive bias does not;
    -output writes a checkpoint with that bias and nothing else changed; misuse is refused."""
    score = load_tool("score_calibration")
    run_train(data, tmp_path, loss="nllvmf_nce", word_bias=True, lambda1="0", lambda2="1", **WC)
    model = str(tmp_path / "m_last.pt")
    # validation = training data here: the first 8 pairs are both, so use the training shard for it
    prefix = tmp_path / "same"
    for f in data["dir"].iterdir():
        if f.name.startswith("d.train."):
            (tmp_path / f.name.replace("d.train.", "same.train.")).write_bytes(f.read_bytes())
            (tmp_path / f.name.replace("d.train.", "same.valid.")).write_bytes(f.read_bytes())
    score.main(["-model", model, "-data", str(prefix)])
    before = capsys.readouterr().out
    assert "refitted" not in before and len(ratios_printed(before, "argmax / ref")) == 6
    out = tmp_path / "refit.pt"
    score.main(
        [
            "-model",
            model,
            "-data",
            str(prefix),
            "-refit_epochs",
            "40",
            "-refit_learning_rate",
            "0.1",
            "-output",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    after = printed.split("validation, refitted bias")[1]
    ref = ratios_printed(after, "reference tokens")
    expected = ratios_printed(after, "expected / ref")
    assert all(abs(e - 1) < 0.1 for e, r in zip(expected, ref, strict=True) if r >= 10), expected
    first = ratios_printed(before, "expected / ref")
    assert any(abs(e - 1) >= 0.1 for e, r in zip(first, ref, strict=True) if r >= 10), first
    old, new = load_checkpoint(model), load_checkpoint(str(out))
    assert not torch.equal(old["model"]["generator.bias"], new["model"]["generator.bias"])
    assert all(torch.equal(v, new["model"][k]) for k, v in old["model"].items() if k != "generator.bias")
    run_train(data, tmp_path / "nobias", loss="nllvmf_nce", **WC)

    def refused(args, needle):
        with pytest.raises(SystemExit) as exc:
            score.main(args)
        assert exc.value.code == 2 and needle in capsys.readouterr().err

    refused(
        ["-model", str(tmp_path / "nobias" / "m_last.pt"), "-data", str(prefix), "-refit_epochs", "1"], "-word_bias"
    )
    refused(["-model", model, "-data", str(prefix), "-output", str(tmp_path / "x.pt")], "give -refit_epochs")
    refused(["-model", model, "-data", str(tmp_path / "none")], "no valid shards")
    assert not (tmp_path / "x.pt").exists()


def test_fit_can_keep_the_round_that_scores_best():
    """score(outputs): the round of the highest score is kept, not the one nearest the target."""
    ref_tokens = [300, 400, 500, 2000, 3000, 8000]
    decode, ref, counts = fake_decoder(ref_tokens, [2.0, 1.5, 1.0, 0.3, -0.2, 0.0])
    seen = []
    fit_offsets(decode, ref, counts, [1.0] * 6, rounds=6, on_round=lambda i, o, out, r: seen.append((o, out)))
    pick = seen[2]  # a middle round: say the held-out score likes it best
    offsets, outputs, _ = fit_offsets(
        decode, ref, counts, [1.0] * 6, rounds=6, score=lambda out: 1.0 if out == pick[1] else 0.0
    )
    assert offsets == pick[0] and outputs == pick[1]
    nearest, _, _ = fit_offsets(decode, ref, counts, [1.0] * 6, rounds=6)
    assert nearest != pick[0]


def test_offsets_are_tied_to_their_search(data, wc_infonce, tmp_path, capsys):
    """Offsets fitted under greedy search are refused under beam search (and the other way); fitted
    with -beam_size, the file records it and translate.py takes it under that beam."""
    src, ref = data["dir"] / "valid.fr", data["dir"] / "valid.en"
    fit = ["-model", str(wc_infonce), "-src", str(src), "-tgt", str(ref), "-rounds", "1", "-min_tokens", "1"]
    calibrate.main([*fit, "-beam_size", "1", "-output", str(tmp_path / "greedy.json")])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        translate.main(
            translate_args(
                wc_infonce, data, tmp_path / "b.txt", "-beam_size", "2", "-freq_offsets", str(tmp_path / "greedy.json")
            )
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "was fitted under greedy search" in err and "-beam_size 2" in err
    assert not (tmp_path / "b.txt").exists()
    calibrate.main([*fit, "-beam_size", "2", "-output", str(tmp_path / "beam.json")])
    assert json.loads((tmp_path / "beam.json").read_text())["model"]["beam_size"] == 2
    translate.main(
        translate_args(
            wc_infonce, data, tmp_path / "b.txt", "-beam_size", "2", "-freq_offsets", str(tmp_path / "beam.json")
        )
    )
    assert len((tmp_path / "b.txt").read_text().splitlines()) == 8
    with pytest.raises(SystemExit):  # and beam offsets under greedy search
        translate.main(
            translate_args(
                wc_infonce, data, tmp_path / "g.txt", "-beam_size", "1", "-freq_offsets", str(tmp_path / "beam.json")
            )
        )
    assert "was fitted under beam search (-beam_size 2)" in capsys.readouterr().err


def test_calibrate_lowercases_the_source_as_translate_does(data, wc_infonce, tmp_path, monkeypatch):
    """A model trained on lowercased text (its vocabulary says so) reads lowercased sources: the tool's
    decodes pass the model's lowercasing as translate.py's do."""
    seen = []

    class Lowered(calibrate.Translator):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.lower = True

        def translate_lines(self, lines, *args, **kwargs):
            seen.append(kwargs.get("lower"))
            return super().translate_lines(lines, *args, **kwargs)

    monkeypatch.setattr(calibrate, "Translator", Lowered)
    src, ref = data["dir"] / "valid.fr", data["dir"] / "valid.en"
    upper = tmp_path / "valid.upper.fr"
    upper.write_text(src.read_text(encoding="utf-8").upper(), encoding="utf-8")
    calibrate.main(
        [
            "-model",
            str(wc_infonce),
            "-src",
            str(upper),
            "-tgt",
            str(ref),
            "-rounds",
            "1",
            "-min_tokens",
            "1",
            "-output",
            str(tmp_path / "o.json"),
        ]
    )
    assert seen == [True]  # -rounds 1: one decode
