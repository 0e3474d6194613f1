"""lab/tools/rare_word_f1.py and lab/tools/accuracy_at_k.py on hand-made inputs."""

import math
import os
import subprocess

import pytest
import sacrebleu
import torch
from torch import nn

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.generators import ContinuousGenerator, SoftmaxGenerator
from tests.helpers import ROOT, load_tool

rwf = load_tool("rare_word_f1")
acc = load_tool("accuracy_at_k")


def test_bins():
    assert [rwf.bin_of(n) for n in (0, 1, 2, 3, 4, 5, 9, 10, 99, 100, 999, 1000, 10**6)] == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5-9",
        "5-9",
        "10-99",
        "10-99",
        "100-999",
        "100-999",
        "1000+",
        "1000+",
    ]


def test_rare_word_f1_by_hand():
    train = ["the cat"] * 10 + ["a zebra"]  # the, cat: 10; a, zebra: 1
    ref = ["the cat sat", "the zebra"]  # sat: unseen (bin 0)
    hyp = ["the the dog", "a zebra"]  # dog: bin 0
    t = rwf.rare_word_f1(train, ref, hyp)
    # bin 10-99: ref the,cat,the (3); hyp the,the (2); matches clipped per sentence: the min(2,1)=1, cat 0,
    # then the min(0,1)=0 -> 1; P 1/2, R 1/3, F1 0.4
    assert (t["10-99"]["ref"], t["10-99"]["hyp"], t["10-99"]["match"]) == (3, 2, 1)
    assert t["10-99"]["precision"] == 0.5 and t["10-99"]["recall"] == pytest.approx(1 / 3)
    assert t["10-99"]["f1"] == pytest.approx(0.4)
    # bin 1: ref zebra (1); hyp a, zebra (2); match 1 -> P 1/2, R 1, F1 2/3
    assert (t["1"]["ref"], t["1"]["hyp"], t["1"]["match"]) == (1, 2, 1)
    assert t["1"]["f1"] == pytest.approx(2 / 3)
    # bin 0: ref sat, hyp dog: no match
    assert (t["0"]["ref"], t["0"]["hyp"], t["0"]["match"], t["0"]["f1"]) == (1, 1, 0, 0.0)
    assert t["1000+"]["hyp"] == 0 and math.isnan(t["1000+"]["ratio"])
    assert {k: v for k, v in t["1000+"].items() if k != "ratio"} == {
        "ref": 0,
        "hyp": 0,
        "match": 0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    # calibration: hypothesis / reference occurrences per bin
    assert (t["10-99"]["ratio"], t["1"]["ratio"], t["0"]["ratio"]) == (pytest.approx(2 / 3), 2.0, 1.0)


def test_calibration_bins(tmp_path, capsys):
    train = ["a b b c c c d d d d"]  # a 1, b 2, c 3, d 4
    t = rwf.rare_word_f1(train, ["a b c d", "d"], ["a a b c", "a"], rwf.CALIBRATION_BINS)
    assert list(t) == ["0", "1", "2-4", "5-9", "10-99", "100-999", "1000+"]
    assert (t["1"]["ref"], t["1"]["hyp"], t["1"]["ratio"]) == (1, 3, 3.0)
    assert (t["2-4"]["ref"], t["2-4"]["hyp"], t["2-4"]["ratio"]) == (4, 2, 0.5)
    for name, lines in (("train", train), ("ref", ["a b c d", "d"]), ("hyp", ["a a b c", "a"])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    rwf.main(
        [
            "-train",
            str(tmp_path / "train"),
            "-ref",
            str(tmp_path / "ref"),
            "-hyp",
            str(tmp_path / "hyp"),
            "-bins",
            "calibration",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("\thyp/ref") and out[2].startswith("1\t1\t3\t") and out[2].endswith("\t3.00")


def test_rare_word_f1_perfect_and_mismatch(tmp_path, capsys):
    train, ref = ["a b b c c c"], ["a b c", "c c"]
    t = rwf.rare_word_f1(train, ref, ref)
    assert all(t[b]["f1"] == 1.0 for b in ("1", "2", "3"))
    with pytest.raises(ValueError):
        rwf.rare_word_f1(train, ref, ref[:1])
    for name, lines in (("train", train), ("ref", ref), ("hyp", ref)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    rwf.main(["-train", str(tmp_path / "train"), "-ref", str(tmp_path / "ref"), "-hyp", str(tmp_path / "hyp")])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bin\t") and "3\t3\t3\t3\t1.0000\t1.0000\t1.0000" in out[4]


def test_substitutions_by_hand(tmp_path, capsys):
    train = ["man " * 200 + "guy " * 20 + "dog " * 20 + "cat " * 20 + "pup"]  # man 200, guy/dog/cat 20, pup 1
    ref = ["a guy and a dog", "the dog", "cat"]
    hyp = ["a man and a pup", "the man sat", "cat"]  # guy->man, dog->pup (1:1); "dog"->"man sat" is 1:2
    into, pairs = rwf.substitutions(train, ref, hyp, "10-99")
    assert into == {"100-999": 1, "1": 1} and pairs == {("guy", "man"): 1, ("dog", "pup"): 1}
    into, _ = rwf.substitutions(train, ref, hyp, "1")
    assert not into  # no reference word seen once was replaced
    with pytest.raises(ValueError, match="no bin"):
        rwf.substitutions(train, ref, hyp, "7")
    for name, lines in (("train", train), ("ref", ref), ("hyp", hyp)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = ["-train", str(tmp_path / "train"), "-ref", str(tmp_path / "ref"), "-hyp", str(tmp_path / "hyp")]
    rwf.main(files + ["-bins", "calibration", "-substitutions", "10-99", "-top", "1"])
    out = capsys.readouterr().out
    assert "bin 10-99 replaced one for one: 2" in out and "\n1\t1\t0.50\n" in out and "100-999\t1\t0.50" in out
    assert out.rstrip().endswith("count): guy -> man 1")
    with pytest.raises(SystemExit) as e:  # a bin of the other bin set
        rwf.main(files + ["-bins", "calibration", "-substitutions", "2"])
    assert e.value.code == 2 and "no such bin in -bins calibration" in capsys.readouterr().err


class FakeModel(nn.Module):
    """Decoder state at position t = a fixed vector per previous token, so the scores are hand-made."""

    def __init__(self, states, generator):
        super().__init__()
        self.states = states  # [vocab, hidden]: state after reading token id
        self.generator = generator

    def forward(self, src, src_lengths, tgt_in):
        return self.states[tgt_in], None


def words():
    return Vocab(["<blank>", "<unk>", "<s>", "</s>", "a", "b", "c"])


def test_accuracy_at_k_continuous():
    # table rows: pad 0, unk, <s>, </s>, a, b, c in 3-d; cosine criterion; projection = identity.
    table = torch.tensor(
        [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0.6, 0.8, 0], [0.8, 0.6, 0], [0, 0.6, 0.8]], dtype=torch.float
    )
    table = torch.nn.functional.normalize(table, dim=-1)
    table[0] = 0
    gen = ContinuousGenerator(3, table, criterion="cosine")
    with torch.no_grad():
        gen.proj.weight.copy_(torch.eye(3))
        gen.proj.bias.zero_()
    # after <s> predict exactly e(a) -> "a" ranks 1; after "a" predict e(</s>) -> ranks of </s> 1, of b 2.
    states = torch.zeros(7, 3)
    states[BOS_ID] = table[4]
    states[4] = table[3]
    model = FakeModel(states, gen)
    v = words()
    # sentence 1: "a" -> positions: a (rank 1), </s> (rank 1)
    # sentence 2: "a b" -> a (1), b after a: prediction e(</s>): cos with b = .8 > a .6; </s> 1.0 -> b rank 2;
    #             </s> after b: state 0 -> all scores 0 -> rank 1 (ties do not count against gold)
    r = acc.accuracy_at_k(model, v, v, ["x", "x y"], ["a", "a b"], ks=(1, 2, 5))
    assert r["positions"] == 5 and r["unk_positions"] == 0
    assert r["acc@1"] == pytest.approx(4 / 5) and r["acc@2"] == 1.0 and r["acc@5"] == 1.0


def test_accuracy_at_k_softmax_and_unk():
    gen = SoftmaxGenerator(7, 7)
    with torch.no_grad():
        gen.proj.weight.copy_(torch.eye(7))
        gen.proj.bias.zero_()
    logits = torch.zeros(7, 7)
    logits[BOS_ID] = torch.tensor([0, 0.5, 0, 0, 3, 2, 1])  # after <s>: a > b > c > unk
    logits[UNK_ID] = torch.tensor([0, 0, 0, 9, 0, 0, 0])  # after <unk>: </s>
    model = FakeModel(logits, gen)
    v = words()
    # "zzz" is <unk>: rank 4 after <s> (a, b, c beat it); </s> after <unk>: rank 1
    r = acc.accuracy_at_k(model, v, v, ["x"], ["zzz"], ks=(1, 2, 5, 10))
    assert r["positions"] == 2 and r["unk_positions"] == 1
    assert r["acc@1"] == 0.5 and r["acc@2"] == 0.5 and r["acc@5"] == 1.0
    assert r["known_acc@1"] == 1.0
    # gold ranks directly
    v2 = acc.collate([(torch.tensor([4]), torch.tensor([6]))], [0])
    ranks, gold = acc.gold_ranks(model, v2)
    assert ranks.tolist() == [3, 1] and gold.tolist() == [6, EOS_ID]
    assert PAD_ID not in gold.tolist()


def test_report_seed_table(tmp_path):
    """lab/tools/m30k_report.py: mean ± sample std over seeds, only for rows with two or more seeds."""
    report = load_tool("m30k_report")
    sig = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    scores = {"ce.s1": (10.0, 20.0), "ce.s2": (12.0, 23.0), "joint.s1": (30.0, 31.0)}
    for run, pair in scores.items():
        (tmp_path / run).mkdir()
        for t, b in zip(report.TESTS, pair, strict=True):
            (tmp_path / run / f"{t}.beam1.en.bleu.txt").write_text(
                f"sacreBLEU (detokenized): {b:.2f}  {sig}\ntokenized BLEU: {b:.2f}  {sig}\n", encoding="utf-8"
            )
    lines = report.seed_table(sorted(str(tmp_path / r) for r in scores))
    rows = [line for line in lines if line.startswith("| ce ")]
    assert rows == ["| ce | greedy | 2 | 11.00 ± 1.41 | 21.50 ± 2.12 |"]
    assert not any(line.startswith("| joint") for line in lines)
    assert report.seed_table([str(tmp_path / "joint.s1")]) == []


def test_open_vocab_eval_buckets_and_new_words():
    ove = load_tool("open_vocab_eval")
    train = [["a", "cat", "a"], ["a", "dog"]]  # a: 3, cat: 1, dog: 1
    refs = [["a", "zebra", "cat"]]
    hyps = [["a", "zebra", "zebra", "okapi"]]  # zebra, okapi: never seen as targets
    rows = {label: (nr, nh, f) for label, nr, nh, _, _, f in ove.word_f1(hyps, refs, train)}
    assert rows["0"][:2] == (1, 3)  # zebra once in the reference; zebra twice + okapi in the output
    assert rows["0"][2] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert rows["1-4"][:2] == (2, 1)  # a and cat in the reference; a in the output
    total, types, correct = ove.new_words(hyps, refs, {"a", "cat", "dog"})
    assert (total, correct) == (3, 1) and types == {"zebra": 2, "okapi": 1}


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_check_refuses_without_cuda(tmp_path):
    """docs/gpu_check.sh says why and exits 2 on a machine without a GPU, and writes nothing."""
    root = ROOT
    out = subprocess.run(
        ["bash", str(root / "docs" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        env=dict(os.environ, OUT=str(tmp_path / "gc")),
        timeout=120,
    )
    assert out.returncode == 2
    assert "PyTorch sees no CUDA device" in out.stderr and out.stdout == ""
    assert not (tmp_path / "gc").exists()


lbp = load_tool("length_by_final_punct")


def test_length_by_final_punct_by_hand(tmp_path, capsys):
    """Sources ending with . ! ? against the rest: token ratios and outputs over -over x the reference."""
    src = [["ein", "hund", "."], ["ein", "hund"], ["wer", "?"], []]
    ref = [["a", "dog", "."], ["a", "dog"], ["who", "?"], ["x"]]
    hyp = [["a", "dog", "."], ["a", "dog", "a", "dog", "a"], ["who"], ["x", "x"]]
    t = lbp.length_table(src, ref, hyp, over=2.0)
    assert (t["with"]["sentences"], t["with"]["ref"], t["with"]["hyp"], t["with"]["over"]) == (2, 5, 4, 0)
    assert t["with"]["ratio"] == 0.8
    assert (t["without"]["sentences"], t["without"]["ref"], t["without"]["hyp"], t["without"]["over"]) == (2, 3, 7, 1)
    for name, lines in (("src", src), ("ref", ref), ("hyp", hyp), ("short", hyp[:3])):
        (tmp_path / name).write_text("".join(" ".join(words) + "\n" for words in lines))
    assert lbp.main(["-src", str(tmp_path / "src"), "-ref", str(tmp_path / "ref"), "-hyp", str(tmp_path / "hyp")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "\twith final ./!/?\t2\t5\t4\t0.80\t0\t" in out[1] and "\t2\t3\t7\t2.33\t1\t" in out[2]
    assert t["with"]["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(["a dog .", "who"], [["a dog .", "who ?"]], tokenize="none").score
    )
    same = "a dog runs on the grass".split()
    assert lbp.length_table([["ein", "hund"]], [same], [same])["without"]["bleu"] == pytest.approx(100.0)
    assert (
        lbp.main(
            [
                "-src",
                str(tmp_path / "src"),
                "-ref",
                str(tmp_path / "ref"),
                "-hyp",
                str(tmp_path / "hyp"),
                str(tmp_path / "short"),
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert captured.out == "" and "short: 4 source, 4 reference and 3 hypothesis lines" in captured.err


rep = load_tool("repeats")


def test_repeats_by_hand(tmp_path, capsys):
    """Repeats of words seen fewer than -max_count times, per sentence; frequent words are left out."""
    counts = {"a": 5, "dog": 1, "cat": 2}
    sentences = [["a", "dog", "a", "dog", "dog"], ["a", "cat"], ["zebra", "zebra"], []]
    assert rep.repeats(sentences, counts, 5) == (9, 3, 2)  # dog twice more, zebra (unseen) once more
    assert rep.repeats(sentences, counts, 6) == (9, 4, 2)  # a (seen 5 times) now counts too
    (tmp_path / "train").write_text("a a a a a dog cat cat\n")
    (tmp_path / "hyp").write_text("".join(" ".join(w) + "\n" for w in sentences))
    assert rep.main(["-train", str(tmp_path / "train"), "-files", str(tmp_path / "hyp"), "-max_count", "5"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("\t9\t3\t2\t333.3")
    assert rep.main(["-train", str(tmp_path / "train"), "-files", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "missing" in captured.err


sfp = load_tool("strip_final_punct")


def test_strip_final_punct_by_hand(tmp_path, capsys):
    """A source ending with . ! ? (and holding another token) loses it, and its reference its own
    final mark; a source without one keeps its reference as it is; a lone mark stays."""
    src = [["ein", "hund", "."], ["ein", "hund"], ["!"], ["was", "?"]]
    tgt = [["a", "dog", "."], ["a", "dog", "."], ["!"], ["what"]]
    new_src, new_tgt, changed = sfp.strip_pairs(src, tgt)
    assert new_src == [["ein", "hund"], ["ein", "hund"], ["!"], ["was"]]
    assert new_tgt == [["a", "dog"], ["a", "dog", "."], ["!"], ["what"]]
    assert changed == 2
    (tmp_path / "s").write_text("ein hund .\nein hund\n")
    (tmp_path / "t").write_text("a dog .\na dog .\n")
    out = ["-out_src", str(tmp_path / "os"), "-out_tgt", str(tmp_path / "ot")]
    assert sfp.main(["-src", str(tmp_path / "s"), "-tgt", str(tmp_path / "t"), *out]) == 0
    assert (tmp_path / "os").read_text() == "ein hund\nein hund\n"
    assert (tmp_path / "ot").read_text() == "a dog\na dog .\n"
    assert "1 of 2 sources lost their final" in capsys.readouterr().out
    (tmp_path / "short").write_text("a dog\n")
    (tmp_path / "os").unlink()
    assert sfp.main(["-src", str(tmp_path / "s"), "-tgt", str(tmp_path / "short"), *out]) == 2
    err = capsys.readouterr().err
    assert "has 2 lines" in err and "1" in err and not (tmp_path / "os").exists()


def test_bin_bootstrap(tmp_path, capsys):
    """lab/tools/bin_bootstrap.py: the quotient of two systems' bin ratios, its interval over resampled
    sentences, and the share of resamples beyond the tolerance."""
    bb = load_tool("bin_bootstrap")
    train = ["zebra"] + ["dog cat"] * 20  # zebra seen once; dog, cat 20 times
    ref = [f"the zebra {i}" if i % 2 else "the dog" for i in range(40)]  # 20 once-seen tokens
    twice = [f"zebra zebra {i}" if i % 2 else "dog" for i in range(40)]  # 40 of them
    once = [f"zebra {i}" if i % 2 else "cat" for i in range(40)]  # 20
    r = bb.bin_bootstrap(train, ref, [twice], [once], 1, 1, n=300)
    assert r["ref"] == 20 and r["a"] == [2.0] and r["b"] == [1.0] and r["quotient"] == 2.0
    assert r["low"] == r["high"] == 2.0 and r["beyond"] == 1.0  # every resample keeps the 2:1 per sentence
    mean = bb.bin_bootstrap(train, ref, [twice, once], [once], 1, 1, n=50)  # A's mean ratio over its seeds
    assert mean["a"] == [2.0, 1.0] and mean["quotient"] == 1.5
    # A writes the bin in other sentences than B: the quotient moves between resamples
    scattered = [f"zebra zebra {i}" if i % 4 == 1 else "dog" for i in range(40)]  # 20 tokens, half the lines
    wide = bb.bin_bootstrap(train, ref, [scattered], [once], 1, 1, n=500, seed=2)
    assert wide["quotient"] == 1.0 and wide["low"] < 1.0 < wide["high"] and 0.0 < wide["beyond"] < 0.5
    with pytest.raises(ValueError, match="the reference has no token of the bin"):
        bb.bin_bootstrap(train, ["the dog"] * 3, [["a"] * 3], [["b"] * 3], 1, 1)
    with pytest.raises(ValueError, match="system B writes no token of the bin"):
        bb.bin_bootstrap(train, ref, [twice], [["dog"] * 40], 1, 1)
    for name, lines in (("train", train), ("ref", ref), ("a", twice), ("b", once), ("short", once[:39])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = ["-train", str(tmp_path / "train"), "-ref", str(tmp_path / "ref")]
    bb.main([*files, "-a", str(tmp_path / "a"), "-b", str(tmp_path / "b"), "-n", "20"])
    out = capsys.readouterr().out
    assert "bin 1: 20 reference tokens in 40 sentences" in out and "A / B: 2.00 (2.00x over)" in out
    with pytest.raises(SystemExit) as exc:  # an error line and exit 2, as every script
        bb.main([*files, "-a", str(tmp_path / "a"), "-b", str(tmp_path / "short")])
    assert exc.value.code == 2 and "short: 39 lines, but the reference has 40" in capsys.readouterr().err


def test_paired_bootstrap(tmp_path, capsys):
    pb = load_tool("paired_bootstrap")
    ref = [f"a man number {i} rides a red bike down the hill" for i in range(60)]
    good = list(ref)
    bad = [f"a woman number {i} walks a dog" for i in range(60)]
    half = [r if i % 2 else b for i, (r, b) in enumerate(zip(ref, bad, strict=True))]
    r = pb.paired_bootstrap(ref, [good, half], [bad], n=200)
    full = [sacrebleu.corpus_bleu(h, [ref], tokenize="none", force=True).score for h in (good, half, bad)]
    assert r["a"] == pytest.approx(full[:2]) and r["b"] == pytest.approx(full[2:])  # sacreBLEU's scores
    assert r["delta"] == pytest.approx((full[0] + full[1]) / 2 - full[2])
    assert r["p"] == 0.0 and 0 < r["low"] < r["delta"] < r["high"]
    same = pb.paired_bootstrap(ref, [half], [half], n=50)  # one system against itself: no difference at all
    assert same["delta"] == same["low"] == same["high"] == 0.0 and same["p"] == 1.0
    # swapped half the time: the interval is wide and straddles 0
    flip = [b if i % 2 else r for i, (r, b) in enumerate(zip(ref, bad, strict=True))]
    mixed = pb.paired_bootstrap(ref, [half], [flip], n=500, seed=3)
    assert mixed["low"] < 0 < mixed["high"] and 0.05 < mixed["p"] < 0.95
    for name, lines in (("ref", ref), ("a", good), ("b", bad[:59])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    pb.main(["-ref", str(tmp_path / "ref"), "-a", str(tmp_path / "a"), "-b", str(tmp_path / "a"), "-n", "20"])
    assert "A - B: +0.00" in capsys.readouterr().out
    (tmp_path / "empty").write_text("")
    for args, needle in (
        ([str(tmp_path / "empty")] * 3, "the reference is empty"),
        ([str(tmp_path / x) for x in ("ref", "a", "b")], "b: 59 lines, but the reference has 60"),
    ):
        with pytest.raises(SystemExit) as exc:  # an error line and exit 2, as every script
            pb.main(["-ref", args[0], "-a", args[1], "-b", args[2]])
        assert exc.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "tool, args",
    [
        ("accuracy_at_k", ["-model", "MISSING", "-src", "MISSING", "-tgt", "MISSING"]),
        ("bin_bootstrap", ["-train", "MISSING", "-ref", "MISSING", "-a", "MISSING", "-b", "MISSING"]),
        ("m30k_report", ["-results", "MISSING"]),
        ("open_vocab_eval", ["-train_tgt", "MISSING", "-vocab", "MISSING", "-ref", "MISSING", "-hyp", "MISSING"]),
        ("output_norms", ["-model", "MISSING", "-src", "MISSING"]),
        ("paired_bootstrap", ["-ref", "MISSING", "-a", "MISSING", "-b", "MISSING"]),
        ("rare_word_f1", ["-train", "MISSING", "-ref", "MISSING", "-hyp", "MISSING"]),
        ("replacement_accuracy", ["-model", "MISSING", "-src", "MISSING", "-lookup_dict", "MISSING"]),
        ("make_sample", ["-shared", "MISSING", "-out", "OUT"]),
    ],
)
def test_tools_name_a_missing_input(tool, args, tmp_path, monkeypatch, capsys):
    """A missing input is an 'error:' line naming it and exit 2, not a traceback, and nothing is
    written: the missing file is in an existing folder, the tool runs in it, and it stays empty
    but for the missing input's absence (make_sample's -out could be created there)."""
    missing, out = str(tmp_path / "no_such_input"), str(tmp_path / "out")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        load_tool(tool).main([{"MISSING": missing, "OUT": out}.get(a, a) for a in args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: " in err and missing in err and "Traceback" not in err, err
    assert os.listdir(tmp_path) == []


def test_rare_word_f1_refuses_files_of_different_lengths(tmp_path, capsys):
    (tmp_path / "train.en").write_text("a b\n")
    (tmp_path / "ref.en").write_text("a\nb\n")
    (tmp_path / "hyp.en").write_text("a\n")
    with pytest.raises(SystemExit) as exc:
        rwf.main(
            ["-train", str(tmp_path / "train.en"), "-ref", str(tmp_path / "ref.en"), "-hyp", str(tmp_path / "hyp.en")]
        )
    assert exc.value.code == 2 and "hyp.en: 1 lines, but -ref" in capsys.readouterr().err


def test_report_tools_read_a_gzipped_train_log_as_the_plain_one(tmp_path, capsys):
    """lab/results keeps each run's train.log gzipped (train.log.gz): quality_report.py, m30k_report.py,
    time_to_quality.py and stopping_rule.py print the same from it as from the plain log the recipes write,
    whether given the .gz or the plain name it replaced."""
    import gzip

    log = [
        "[10:00:00] start",
        "[10:00:01] parameters: encoder 1,000; decoder 2,000",
        "[10:00:30] validation at step 1: greedy BLEU 12.5",
        "[10:00:31] new best validation BLEU",
        "[10:01:30] validation at step 2: greedy BLEU 14.0",
        "[10:01:31] new best validation BLEU",
        "[10:02:30] validation at step 3: greedy BLEU 13.0",
    ]
    run = tmp_path / "m" / "t_x.s1"
    run.mkdir(parents=True)
    (run / "train.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    (run / "train_time.txt").write_text("train_wall_s 150 epochs 0-3\n")

    def outputs(name):
        got = []
        for tool, argv in (
            ("quality_report", [str(run)]),
            ("m30k_report", ["-results", str(tmp_path / "m")]),
            ("time_to_quality", ["-ref", str(run / name), "-runs", str(run / name)]),
            ("stopping_rule", ["-patience", "1", "-windows", "1", "-runs", str(run / name)]),
        ):
            load_tool(tool).main(argv)
            got.append(capsys.readouterr())
        return got

    plain = outputs("train.log")
    assert "| t_x.s1 | – | – | – / – | – | 2 | 91 | 150 |" in plain[0].out  # best epoch and its seconds: the log
    assert "| t_x.s1 | 0 | step None | – | 150 | – | 1,000 | 2,000 |" in plain[1].out  # parameters: the log
    assert "| t_x.s1 | 14.00 |" in plain[2].out and not any(o.err for o in plain)
    with open(run / "train.log", "rb") as f, gzip.open(run / "train.log.gz", "wb") as g:
        g.write(f.read())
    (run / "train.log").unlink()
    assert outputs("train.log.gz") == plain
    assert outputs("train.log") == plain  # a command naming the plain log reads its .gz
