"""Tests for onmt_cont.align (fast_align's model, symmetrisation, Pharaoh I/O) and build_lexicon."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from onmt_cont.align.fast_align import AlignConfig, DiagonalIBM2, align_corpus, encode
from onmt_cont.align.pharaoh import format_pharaoh, read_pharaoh
from onmt_cont.align.symmetrise import grow_diag_final_and, intersect, union
from onmt_cont.bin.build_lexicon import extract_lexicon, format_lexicon, main
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT

DATA = ROOT / "data"


def links(text: str) -> list[tuple[int, int]]:
    return sorted(tuple(map(int, tok.split("-"))) for tok in text.split())


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# --- a tiny corpus whose alignment is obvious ---------------------------------------------

TOY = [
    ("la maison", "the house"),
    ("la fleur", "the flower"),
    ("une maison", "a house"),
    ("une fleur", "a flower"),
    ("maison", "house"),
    ("bleue", "blue"),
    ("fleur", "flower"),
    ("voiture", "car"),
    ("la voiture", "the car"),
    # Adjective after the noun in French, before it in English: the diagonal prior pulls
    # the wrong way, the lexical table must win.
    ("la maison bleue", "the blue house"),
    ("une fleur bleue", "a blue flower"),
    ("une voiture bleue", "a blue car"),
    # Three words for one: each French word picks "potato"; "potato" picks one French word,
    # and with t tied, the diagonal prior picks the last one (j/n = 3/3 = i/m).
    ("pomme de terre", "potato"),
]
SWAPPED = ["0-0 1-2 2-1"] * 3
EXPECTED = {
    "forward": SWAPPED + ["0-0 1-0 2-0"],
    "reverse": SWAPPED + ["2-0"],
    "intersect": SWAPPED + ["2-0"],
    "union": SWAPPED + ["0-0 1-0 2-0"],
    "grow-diag-final-and": SWAPPED + ["0-0 1-0 2-0"],  # grows from terre-potato along the column
}


@pytest.mark.parametrize("sym", sorted(EXPECTED))
def test_toy_corpus_alignment(sym):
    src = [s.split() for s, _ in TOY]
    tgt = [t.split() for _, t in TOY]
    got = align_corpus(src, tgt, sym)
    straight = [[(i, i) for i in range(len(s))] for s in src[:9]]
    assert got[:9] == straight
    assert got[9:] == [links(x) for x in EXPECTED[sym]]


def test_variational_bayes_agrees_on_obvious_corpus():
    src = [s.split() for s, _ in TOY]
    tgt = [t.split() for _, t in TOY]
    base = align_corpus(src, tgt, "intersect")
    assert align_corpus(src, tgt, "intersect", AlignConfig(vb_alpha=0.01)) == base


def test_tension_optimisation_moves_towards_the_data():
    src = [s.split() for s, _ in TOY]
    tgt = [t.split() for _, t in TOY]
    model = DiagonalIBM2(encode(src), encode(tgt), AlignConfig(optimize_tension=True))
    model.iterate()
    # t starts uniform, so the first posteriors are the prior itself: λ must stay put.
    assert model.tension == pytest.approx(4.0)
    model.iterate()
    # Most toy pairs are word-for-word in order, so the data ask for a sharper diagonal.
    assert model.tension > 4.5


def test_tension_m_step_recovers_the_prior():
    """If the posteriors equal the prior at λ = 7, re-estimating λ must give 7 back."""
    src = [s.split() for s, _ in TOY] + [["a", "b", "c", "d", "e"]] * 3
    tgt = [t.split() for _, t in TOY] + [["v", "w", "x"]] * 3
    model = DiagonalIBM2(encode(src), encode(tgt), AlignConfig(tension=7.0, p0=0.0, optimize_tension=True))
    feature, weight = 0.0, np.zeros(len(model.tri_m) + 1)
    for b in model.batches:
        mask, h = b.geometry()
        w = np.exp(7.0 * h) * mask
        prior = w / np.maximum(w.sum(-1, keepdims=True), 1e-300)
        feature += float((prior * h).sum())
        weight += np.bincount(b.triple.ravel(), weights=prior.sum(-1).ravel(), minlength=len(weight))
    model.tension = 2.0  # start the search elsewhere
    assert model._fit_tension(feature, weight[:-1]) == pytest.approx(7.0, abs=1e-4)


def test_empty_sentences():
    src = [["a", "b"], [], ["a"], []]
    tgt = [["x", "y"], ["x"], [], []]
    got = align_corpus(src, tgt, "grow-diag-final-and")
    assert got[1:] == [[], [], []]


# --- symmetrisation, by hand -----------------------------------------------------------------


def test_symmetrisers_by_hand():
    fwd = links("0-0 1-1 2-3 3-3")
    rev = links("0-0 1-1 1-0 3-2")
    assert intersect(fwd, rev) == links("0-0 1-1")
    assert union(fwd, rev) == links("0-0 1-0 1-1 2-3 3-2 3-3")
    # Nothing to grow: 1-0 joins two aligned words, the others are not adjacent to a link.
    # final-and adds 2-3 (both words unaligned), then 3-3 is refused (target 3 now taken)
    # and 3-2 accepted (source 3 and target 2 still free).
    assert grow_diag_final_and(fwd, rev) == links("0-0 1-1 2-3 3-2")


def test_grow_diag_grows_diagonally_but_not_between_aligned_words():
    fwd = links("0-0 1-1 2-2")
    rev = links("0-0 1-2 2-2")
    # 1-1 is a diagonal neighbour of 0-0 with source 1 free: grown. 1-2 then joins two
    # aligned words: refused.
    assert grow_diag_final_and(fwd, rev) == links("0-0 1-1 2-2")
    assert grow_diag_final_and(links("0-0 2-2"), links("0-0 1-1 2-2")) == links("0-0 1-1 2-2")


def reference_gdfa(fwd, rev):
    """Koehn's pseudocode, transcribed literally: grid scans until nothing is added."""
    both, align = set(fwd) | set(rev), set(fwd) & set(rev)
    rows = max((i for i, _ in both), default=-1) + 1
    cols = max((j for _, j in both), default=-1) + 1
    neighbours = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
    added = True
    while added:
        added = False
        for i in range(rows):
            for j in range(cols):
                if (i, j) in align:
                    for di, dj in neighbours:
                        p = (i + di, j + dj)
                        src_free = all(a != p[0] for a, _ in align)
                        tgt_free = all(b != p[1] for _, b in align)
                        if p in both and p not in align and (src_free or tgt_free):
                            align.add(p)
                            added = True
    for a in (fwd, rev):
        for p in sorted(a):
            if all(x != p[0] for x, _ in align) and all(y != p[1] for _, y in align):
                align.add(p)
    return sorted(align)


def test_grow_diag_final_and_matches_pseudocode():
    rng = random.Random(0)
    for _ in range(300):
        m, n = rng.randint(1, 7), rng.randint(1, 7)
        fwd = sorted((i, rng.randrange(n)) for i in range(m) if rng.random() < 0.8)
        rev = sorted((rng.randrange(m), j) for j in range(n) if rng.random() < 0.8)
        assert grow_diag_final_and(fwd, rev) == reference_gdfa(fwd, rev), (fwd, rev)


# --- Pharaoh I/O and the command line --------------------------------------------------------


def test_pharaoh_round_trip(tmp_path):
    al = [links("0-0 1-2 2-1"), [], links("0-1")]
    path = tmp_path / "a.txt"
    path.write_text(format_pharaoh(al), encoding="utf-8")
    assert path.read_text(encoding="utf-8") == "0-0 1-2 2-1\n\n0-1\n"
    assert read_pharaoh(str(path), [3, 0, 1], [3, 2, 2]) == al


@pytest.fixture
def toy_files(tmp_path):
    src = write(tmp_path / "src.txt", ["la maison", "", "Une Fleur"])
    tgt = write(tmp_path / "tgt.txt", ["the house", "a", "a Flower"])
    return tmp_path, src, tgt


@pytest.mark.parametrize(
    "line, message",
    [
        ("0-x", "expected links 'i-j'"),
        ("0-0 1:1", "expected links 'i-j'"),
        ("0-0 2-1", "link 2-1 is outside the sentence pair (source has 2 words, target 2"),
        ("0-2", "link 0-2 is outside"),
    ],
)
def test_bad_pharaoh_exits_2(toy_files, capsys, line, message):
    tmp, src, tgt = toy_files
    al = write(tmp / "al.txt", ["0-0 1-1", "", line])
    out = tmp / "lex.txt"
    with pytest.raises(SystemExit) as exc:
        main(["-src", src, "-tgt", tgt, "-alignments", al, "-output", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{al}, line 3: " in err and message in err
    assert not out.exists()


def test_pharaoh_line_count_must_match(toy_files):
    tmp, src, tgt = toy_files
    al = write(tmp / "al.txt", ["0-0 1-1", ""])
    with pytest.raises(UserError, match="2 lines, but the corpus has 3 sentence pairs"):
        read_pharaoh(al, [2, 0, 2], [2, 1, 2])


def test_mismatched_line_counts_exit_2(toy_files, capsys):
    tmp, src, _ = toy_files
    tgt = write(tmp / "short.txt", ["the house"])
    out, saved = tmp / "lex.txt", tmp / "al.txt"
    with pytest.raises(SystemExit) as exc:
        main(["-src", src, "-tgt", tgt, "-output", str(out), "-save_alignments", str(saved)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{src} has 3 lines but {tgt} has 1" in err
    assert not out.exists() and not saved.exists()
    assert not [f for f in os.listdir(tmp) if f.startswith(".tmp-")]


def test_options_that_conflict_with_alignments(toy_files, capsys):
    tmp, src, tgt = toy_files
    al = write(tmp / "al.txt", ["0-0 1-1", "", "0-0 1-1"])
    with pytest.raises(SystemExit):
        main(["-src", src, "-tgt", tgt, "-alignments", al, "-sym", "union", "-output", str(tmp / "l")])
    assert "-sym only apply when training" in capsys.readouterr().err


def test_cli_with_alignments_and_lower(toy_files, capsys):
    tmp, src, tgt = toy_files
    al = write(tmp / "al.txt", ["0-0 1-1", "", "0-0 1-1"])
    out = tmp / "lex.txt"
    main(["-src", src, "-tgt", tgt, "-alignments", al, "-output", str(out), "-lower"])
    assert out.read_text(encoding="utf-8") == "fleur flower\nla the\nmaison house\nune a\n"
    assert "lexicon: 4 entries" in capsys.readouterr().out


def test_cli_trains_saves_and_reuses_alignments(tmp_path, capsys):
    src = write(tmp_path / "src.txt", [s for s, _ in TOY])
    tgt = write(tmp_path / "tgt.txt", [t for _, t in TOY])
    lex, al = tmp_path / "lex.txt", tmp_path / "al.txt"
    main(["-src", src, "-tgt", tgt, "-output", str(lex), "-save_alignments", str(al), "-sym", "intersect"])
    report = capsys.readouterr().out
    assert "pairs: 13, tokens: 26 source, 24 target" in report and "reverse iteration 5: " in report
    assert al.read_text(encoding="utf-8").splitlines()[9:] == SWAPPED + ["2-0"]
    assert "bleue blue\n" in lex.read_text(encoding="utf-8") and "terre potato\n" in lex.read_text(encoding="utf-8")
    again = tmp_path / "again.txt"
    main(["-src", src, "-tgt", tgt, "-output", str(again), "-alignments", str(al)])
    assert again.read_text(encoding="utf-8") == lex.read_text(encoding="utf-8")


# --- the lexicon -----------------------------------------------------------------------------


def test_lexicon_ties_and_min_count():
    src = [["a", "a", "b"], ["b", "c"], ["b"]]
    tgt = [["y", "x", "z"], ["z", "w"], ["q"]]
    al = [links("0-0 1-1 2-2"), links("0-0 1-1"), links("0-0")]
    # a: x once, y once -> tie, "x" sorts first. b: z twice beats q once. c: w once.
    assert extract_lexicon(src, tgt, al) == {"a": "x", "b": "z", "c": "w"}
    assert extract_lexicon(src, tgt, al, min_count=2) == {"b": "z"}
    assert format_lexicon({"b": "z", "a": "x"}) == "a x\nb z\n"


# --- real data: Multi30k fr->en sample -------------------------------------------------------

# Hand-checked gold for lines of data/train.{fr,en} (0-based), annotated by reading the
# sentences: sure links between content words; possible links inside multiword
# correspondences (the compound "arc @-@ en @-@ ciel" -> "rainbow", "à tâches" -> "spotted",
# French verbs against English "is/are V-ing").
GOLD = [
    (0, "deux jeunes hommes blancs", "two young , white males", "0-0 1-1 2-4 3-3 5-6 8-9", ""),
    (3, "un homme dans une chemise bleue", "a man in a blue shirt", "1-1 4-5 5-4 7-7 10-10 12-11 14-13", "6-6 6-7 7-6"),
    (5, "un homme en vert tient", "a man in green holds", "1-1 3-3 4-4 6-6 10-9 11-10 12-11 14-13", ""),
    (8, "une femme avec un gros sac", "a woman with a large purse", "1-1 4-4 5-5 6-7 9-10", "6-6"),
    (12, "un chien noir et un chien", "a black dog and a spotted dog", "1-2 2-1 5-6 7-5 9-8", "6-5 8-7 8-8 9-7"),
    (13, "un homme en uniforme orange", "a man in a neon green", "1-1 3-8 4-7 6-5 7-4 8-10 10-14 11-13", "8-9"),
    (14, "plusieurs femmes attendent", "several women wait", "0-0 1-1 2-2 3-3 6-6", ""),
    (
        16,
        "une petite fille est assise",
        "a little girl is sitting",
        "1-1 2-2 4-4 7-9 13-10",
        "3-3 3-4 4-3 8-11 9-11 10-11 11-11 12-11",
    ),
]


def aer(predicted: list[list[tuple[int, int]]]) -> float:
    """AER (Och & Ney 2003) over the gold sentences, counting only predicted links that touch
    an annotated word (function words were not annotated, so links between them are not judged)."""
    a_s = a_p = n_a = n_s = 0
    for (*_, sure, possible), pred in zip(GOLD, predicted, strict=True):
        s = set(links(sure))
        p = s | set(links(possible))
        src_words, tgt_words = {i for i, _ in p}, {j for _, j in p}
        judged = {(i, j) for i, j in pred if i in src_words or j in tgt_words}
        a_s, a_p = a_s + len(judged & s), a_p + len(judged & p)
        n_a, n_s = n_a + len(judged), n_s + len(s)
    return 1.0 - (a_s + a_p) / (n_a + n_s)


@pytest.fixture(scope="module")
def multi30k():
    src = [line.split() for line in (DATA / "train.fr").read_text(encoding="utf-8").splitlines()]
    tgt = [line.split() for line in (DATA / "train.en").read_text(encoding="utf-8").splitlines()]
    return src, tgt, align_corpus(src, tgt, "grow-diag-final-and")


def test_multi30k_alignment_quality(multi30k):
    src, tgt, al = multi30k
    for line, fr, en, *_ in GOLD:
        assert " ".join(src[line]).startswith(fr) and " ".join(tgt[line]).startswith(en)
    # Measured 0.068 with the defaults (5 iterations, p0 0.08, tension 4, grow-diag-final-and):
    # precision 0.88, recall 1.00 on the judged links.
    assert aer([al[line] for line, *_ in GOLD]) <= 0.2


def test_multi30k_lexicon(multi30k):
    src, tgt, al = multi30k
    lex = extract_lexicon(src, tgt, al)
    for fr, en in [
        ("homme", "man"),
        ("chien", "dog"),
        ("rouge", "red"),
        ("femme", "woman"),
        ("maison", "house"),
        ("fille", "girl"),
        ("noir", "black"),
        ("eau", "water"),
    ]:
        assert lex[fr] == en, (fr, lex[fr])
