"""translate.py's decoding flags under OpenNMT-py's names (issue 70.6), on a softmax and a continuous model:
random sampling (-random_sampling_topk/-topp/-temp with -seed) draws from the top-k / nucleus support only and
the same seed draws the same words; -tgt_prefix starts every output; -report_align writes each output's
alignment."""

import math
import subprocess
import sys

import pytest
import torch

from onmt_cont.constants import EOS_ID
from onmt_cont.translate.search import Sampler
from tests.helpers import ROOT, sample_data, sample_table, trained

DATA = ROOT / "data"


def test_sampler_draws_from_the_top_k_and_the_nucleus_only():
    logp = torch.log_softmax(torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0, -1.0]]).repeat(2000, 1), -1)
    logp[:, 0] = float("-inf")  # a banned word (padding) is never drawn
    full = Sampler(-1, seed=1).pick(logp)
    assert set(full.tolist()) == {1, 2, 3, 4, 5} and 0 not in full.tolist()
    assert set(Sampler(2, seed=1).pick(logp).tolist()) == {1, 2}
    # nucleus 0.7: p = 0.665, 0.245, ...: the two most likely words reach it
    assert set(Sampler(topp=0.7, seed=1).pick(logp).tolist()) == {1, 2}
    assert torch.equal(Sampler(-1, seed=3).pick(logp), Sampler(-1, seed=3).pick(logp))
    assert not torch.equal(Sampler(-1, seed=3).pick(logp), Sampler(-1, seed=4).pick(logp))
    cold = Sampler(-1, temp=0.05, seed=1).pick(logp)  # a low temperature is nearly the argmax
    assert (cold == 1).float().mean() > 0.99
    dead = torch.full((1, 6), float("-inf"))
    assert Sampler(-1).pick(dead).tolist() == [EOS_ID]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("sampling")
    prefix = sample_data(d, DATA / "en.vec.gz")
    table = sample_table(d, prefix)
    common = ["-rnn_size", "32", "-word_vec_size", "32", "-train_steps", "60", "-dropout", "0"]
    return {
        "softmax": trained(prefix, str(d / "ce"), "-loss", "ce", *common),
        "continuous": trained(prefix, str(d / "vmf"), "-loss", "nllvmf", "-tie_emb", "-tgt_emb", table, *common),
    }


def translate(model, src, *args, ok=True):
    """translate.py -model MODEL [more .pt files in ``args``: an ensemble] -src SRC and the other ``args``."""
    more = [str(a) for a in args if str(a).endswith(".pt")]
    flags = [str(a) for a in args if not str(a).endswith(".pt")]
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "translate.py"),
            "-model",
            model,
            *more,
            "-src",
            str(src),
            "-threads",
            "1",
            "-max_length",
            "12",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (res.returncode == 0) == ok, res.stderr
    return res.stdout.splitlines() if ok else res.stderr


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_sampling_is_seeded_and_differs_from_search(models, kind, tmp_path):
    src = tmp_path / "src.fr"
    src.write_text("".join(open(DATA / "test.fr", encoding="utf-8").readlines()[:30]), encoding="utf-8")
    greedy = translate(models[kind], src)
    one = translate(models[kind], src, "-random_sampling_topk", "-1", "-seed", "1")
    assert one == translate(models[kind], src, "-random_sampling_topk", "-1", "-seed", "1")
    assert one != translate(models[kind], src, "-random_sampling_topk", "-1", "-seed", "2")
    assert one != greedy and len(one) == 30
    nucleus = translate(models[kind], src, "-random_sampling_topp", "0.5", "-seed", "1")
    assert len(nucleus) == 30
    err = translate(models[kind], src, "-random_sampling_topk", "-1", "-coverage_penalty", "wu", "-beta", "1", ok=False)
    assert "-coverage_penalty wu re-ranks the finished hypotheses of beam search" in err


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_sampling_with_n_best_and_scores(models, kind, tmp_path):
    """Issue 79: sampling with -n_best / -with_score was refused (OpenNMT-py allows it). -beam_size K draws K
    samples of each sentence, ranked by log-probability / length: the output is the best, -n_best N the N best
    (the default beam under sampling is -n_best's). The draws are the same with or without -n_best."""
    src = tmp_path / "src.fr"
    src.write_text("".join(open(DATA / "test.fr", encoding="utf-8").readlines()[:10]), encoding="utf-8")
    flags = ["-random_sampling_topk", "-1", "-seed", "4", "-beam_size", "4"]
    best = translate(models[kind], src, *flags)
    scored = translate(models[kind], src, *flags, "-n_best", "3", "-with_score")
    assert scored == translate(models[kind], src, *flags, "-n_best", "3", "-with_score")  # seeded
    assert len(scored) == 30 and [line.split("\t")[0] for line in scored[::3]] == best
    for i in range(0, 30, 3):
        scores = [float(line.split("\t")[1]) for line in scored[i : i + 3]]
        assert scores == sorted(scores, reverse=True) and all(math.isfinite(x) and x <= 0 for x in scores)
    one = translate(models[kind], src, "-random_sampling_topk", "-1", "-seed", "4")
    assert len(translate(models[kind], src, "-random_sampling_topk", "-1", "-seed", "4", "-n_best", "2")) == 20
    assert one != best  # the best of four draws is not the first draw everywhere


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_tgt_prefix_starts_every_output(models, kind, tmp_path):
    src, pre = tmp_path / "src.fr", tmp_path / "pre.en"
    src.write_text("".join(open(DATA / "test.fr", encoding="utf-8").readlines()[:4]), encoding="utf-8")
    pre.write_text("a dog\nthe man is\n\ntwo\n", encoding="utf-8")
    out = translate(models[kind], src, "-tgt", pre, "-tgt_prefix")
    assert out[0].startswith("a dog") and out[1].startswith("the man is") and out[3].startswith("two"), out
    sampled = translate(models[kind], src, "-tgt", pre, "-tgt_prefix", "-random_sampling_topk", "-1")
    assert sampled[0].startswith("a dog") and sampled[1].startswith("the man is")
    beam = translate(models[kind], src, "-tgt", pre, "-tgt_prefix", "-beam_size", "3", "-n_best", "3")
    assert len(beam) == 12 and all(h.startswith("a dog") for h in beam[:3]), beam
    assert all(h.startswith("the man is") for h in beam[3:6]) and all(h.startswith("two") for h in beam[9:])
    assert "give -tgt" in translate(models[kind], src, "-tgt_prefix", ok=False)


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
@pytest.mark.parametrize("beam", ["1", "3"])
def test_report_align_gives_one_pair_per_output_token(models, kind, beam, tmp_path):
    src = tmp_path / "src.fr"
    lines = open(DATA / "test.fr", encoding="utf-8").readlines()[:6]
    src.write_text("".join(lines) + "\n", encoding="utf-8")  # and an empty line
    out = translate(models[kind], src, "-report_align", "-beam_size", beam)
    assert len(out) == 7 and out[6] == " ||| "
    plain = translate(models[kind], src, "-beam_size", beam)
    for line, source, words in zip(out, lines, plain, strict=False):
        hyp, align = line.split(" ||| ")
        assert hyp == words
        pairs = [tuple(map(int, p.split("-"))) for p in align.split()]
        assert [t for _, t in pairs] == list(range(len(hyp.split())))
        assert all(0 <= s < len(source.split()) for s, _ in pairs)
    both = translate(models[kind], src, "-report_align", "-n_best", "2", "-beam_size", "2")  # issue 79: allowed
    assert len(both) == 2 * 6 + 1 and all(" ||| " in line for line in both)  # the empty line: one hypothesis


@pytest.mark.parametrize("beam", ["1", "4"])
def test_an_ensemble_of_softmax_and_continuous_models(models, beam, tmp_path):
    """-model A.pt B.pt: an ensemble of one model with itself decodes as the model; a softmax and a continuous model
    of one vocabulary decode together (the mean of their log-probabilities), with -n_best under beam search; a
    member of another vocabulary is refused."""
    src = tmp_path / "src.fr"
    src.write_text("".join(open(DATA / "test.fr", encoding="utf-8").readlines()[:12]), encoding="utf-8")
    for kind in ("softmax", "continuous"):
        alone = translate(models[kind], src, "-beam_size", beam)
        assert translate(models[kind], src, models[kind], "-beam_size", beam) == alone
    both = translate(models["softmax"], src, models["continuous"], "-beam_size", beam)
    assert len(both) == 12 and all(both)
    assert both != translate(models["softmax"], src, "-beam_size", beam) or both != translate(
        models["continuous"], src, "-beam_size", beam
    )
    if beam != "1":
        nbest = translate(models["softmax"], src, models["continuous"], "-beam_size", beam, "-n_best", "2")
        assert len(nbest) == 24 and nbest[::2] == both
    other = tmp_path / "other"
    other.mkdir()
    from onmt_cont.bin import preprocess

    head = tmp_path / "head"
    for lang in ("fr", "en"):
        (tmp_path / f"head.{lang}").write_text(
            "".join(open(DATA / f"train.{lang}", encoding="utf-8").readlines()[:50]), encoding="utf-8"
        )
    preprocess.main(
        [
            "-train_src",
            f"{head}.fr",
            "-train_tgt",
            f"{head}.en",
            "-valid_src",
            f"{head}.fr",
            "-valid_tgt",
            f"{head}.en",
            "-save_data",
            str(other / "d"),
        ]
    )
    small = trained(
        str(other / "d"), str(other / "m"), "-loss", "ce", "-rnn_size", "8", "-word_vec_size", "8", "-train_steps", "1"
    )
    err = translate(models["softmax"], src, small, ok=False)
    assert "an ensemble's members share one vocabulary" in err


def test_the_api_takes_ensembles_and_sampling(models, tmp_path):
    """onmt_cont.load(ensemble=[...], random_sampling_topk=..., seed=...) decodes as translate.py's flags do."""
    import onmt_cont

    src = tmp_path / "src.fr"
    lines = [line.strip() for line in open(DATA / "test.fr", encoding="utf-8").readlines()[:10]]
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    with onmt_cont.load(models["softmax"], ensemble=[models["continuous"]], beam_size=3, max_length=12) as m:
        assert m.translate(lines) == translate(models["softmax"], src, models["continuous"], "-beam_size", "3")
    with onmt_cont.load(models["continuous"], random_sampling_topk=-1, seed=5, max_length=12) as m:
        assert m.translate(lines) == translate(models["continuous"], src, "-random_sampling_topk", "-1", "-seed", "5")


@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_attn_debug_prints_each_sentences_attention(models, kind, tmp_path):
    """-attn_debug (OpenNMT-py's flag): on stderr, a row per output token and a column per source token, '*' at
    each row's largest weight; the translations on stdout are unchanged."""
    src = tmp_path / "src.fr"
    lines = open(DATA / "test.fr", encoding="utf-8").readlines()[:3]
    src.write_text("".join(lines), encoding="utf-8")
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "translate.py"),
            "-model",
            models[kind],
            "-src",
            str(src),
            "-threads",
            "1",
            "-max_length",
            "12",
            "-attn_debug",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == translate(models[kind], src)
    blocks = res.stderr.split("ATTN ")[1:]
    assert len(blocks) == 3
    for block, line, out in zip(blocks, lines, res.stdout.splitlines(), strict=True):
        head, *rows = block.splitlines()[1 : 1 + 1 + len(out.split())]
        assert head.split() == line.split()
        assert len(rows) == len(out.split()) and all(row.count("*") == 1 for row in rows)
