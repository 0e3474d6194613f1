"""translate.py and onmt_cont.load() decode alike: both build their translator with build_translator, so the same
decoding options on the same sentences give the same lines, scores and alignments, whichever option is given."""

import pytest

import onmt_cont
from onmt_cont.bin import translate
from tests.helpers import corpus

# (translate.py's flags, load()'s keywords, translate()'s keywords)
OPTIONS = {
    "greedy": (["-beam_size", "1"], {"beam_size": 1}, {}),
    "defaults": ([], {}, {}),
    "beam_n_best_score": (
        ["-beam_size", "3", "-n_best", "2", "-with_score"],
        {"beam_size": 3},
        {"n_best": 2, "with_score": True},
    ),
    "with_score": (["-beam_size", "2", "-with_score"], {"beam_size": 2}, {"with_score": True}),
    "replace_unk": (["-replace_unk", "-beam_size", "2"], {"replace_unk": True, "beam_size": 2}, {}),
    "length_penalty_wu": (
        ["-length_penalty", "wu", "-alpha", "0.6", "-beam_size", "3"],
        {"length_penalty": "wu", "alpha": 0.6, "beam_size": 3},
        {},
    ),
    "block_ngram_repeat": (
        ["-block_ngram_repeat", "1", "-beam_size", "2"],
        {"block_ngram_repeat": 1, "beam_size": 2},
        {},
    ),
    "min_max_length": (["-min_length", "3", "-max_length", "4"], {"min_length": 3, "max_length": 4}, {}),
    "ban_unk": (["-ban_unk_token", "-beam_size", "1"], {"ban_unk": True, "beam_size": 1}, {}),
    "coverage": (
        ["-coverage_penalty", "summary", "-beta", "0.2", "-beam_size", "3"],
        {"coverage_penalty": "summary", "beta": 0.2, "beam_size": 3},
        {},
    ),
    "report_align": (["-report_align", "-beam_size", "2"], {"beam_size": 2}, {"report_align": True}),
    "sampling": (["-random_sampling_topk", "-1", "-seed", "3"], {"random_sampling_topk": -1, "seed": 3}, {}),
    "sampling_n_best": (
        [
            "-random_sampling_topk",
            "3",
            "-random_sampling_temp",
            "0.7",
            "-seed",
            "5",
            "-beam_size",
            "3",
            "-n_best",
            "2",
            "-with_score",
        ],
        {"random_sampling_topk": 3, "random_sampling_temp": 0.7, "seed": 5, "beam_size": 3},
        {"n_best": 2, "with_score": True},
    ),
    "nucleus": (["-random_sampling_topp", "0.8", "-seed", "7"], {"random_sampling_topp": 0.8, "seed": 7}, {}),
    "decode_prior_csls": (
        ["-decode_prior", "0.5", "-csls", "2", "-beam_size", "2"],
        {"decode_prior": 0.5, "csls": 2, "beam_size": 2},
        {},
    ),
}
CONTINUOUS_ONLY = {"decode_prior_csls"}  # they re-score a continuous model's nearest-neighbour search


def api_lines(outputs, call):
    """load().translate()'s answers as translate.py writes them: a line per hypothesis with -n_best /
    -with_score (then a tab and the score), " ||| " and the alignment with -report_align."""
    if call.get("n_best") or call.get("with_score"):
        return [f"{text}\t{score:.6f}" for hyps in outputs for text, score in hyps]
    if call.get("report_align"):
        return [f"{text} ||| {align}" for text, align in outputs]
    return list(outputs)


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("kind", ["softmax", "continuous"])
def test_translate_py_and_the_api_give_the_same_output(name, kind, wc_ce, wc_infonce, tmp_path):
    flags, load_options, call = OPTIONS[name]
    if kind == "softmax" and name in CONTINUOUS_ONLY:
        pytest.skip("a continuous model's option")
    model = wc_ce if kind == "softmax" else wc_infonce
    src, _ = corpus(12, seed=3)
    # an empty line, and a source word the model never saw (what -replace_unk and -ban_unk_token act on)
    lines = [*src[:6], "", f"{src[6]} zzunseen", *src[7:]]
    path = tmp_path / "src.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    translate.main(["-model", str(model), "-src", str(path), "-output", str(out), *flags])
    written = out.read_text(encoding="utf-8").splitlines()
    with onmt_cont.load(str(model), **load_options) as m:
        assert api_lines(m.translate(lines, **call), call) == written
    n_best = call.get("n_best") or 1  # an empty line has one (empty) hypothesis
    assert len(written) == sum(n_best if line else 1 for line in lines)
