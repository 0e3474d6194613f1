"""Target tables: embeddings_to_torch.py -init/-alpha/-center/-center_pcs/-unk_vector, and
tools/table_stats.py on hand-made tables with known neighbourhoods."""

import importlib.util

import numpy as np
import pytest
import scipy.stats
import torch

from onmt_cont.bin.embeddings_to_torch import main
from onmt_cont.constants import PAD_ID, SPECIALS, UNK_ID
from onmt_cont.inputters.vocab import Vocab, save_vocabs
from tests.helpers import ROOT

# dim 4; zebra and yak are outside the vocabulary: <unk> = unit(unit(zebra) + unit(yak)) with -normalize
VEC = """\
7 4
</s> 0.1 0.2 0.3 0.1
the 1.0 0.0 0.0 0.5
cat 0.0 2.0 0.0 0.2
dog 0.0 0.0 3.0 -0.4
owl 0.5 0.5 0.5 0.9
zebra 4.0 0.0 0.0 0.0
yak 0.0 0.0 -2.0 0.0
"""
WORDS = ["the", "cat", "dog", "owl", "gnu"]  # gnu has no vector: a random row
PRE = {"the": [1, 0, 0, 0.5], "cat": [0, 2, 0, 0.2], "dog": [0, 0, 3, -0.4], "owl": [0.5, 0.5, 0.5, 0.9]}


@pytest.fixture
def files(tmp_path):
    tgt = Vocab(list(SPECIALS) + WORDS, [0] * 4 + [9, 7, 5, 3, 1], total_tokens=25)
    save_vocabs(str(tmp_path / "data"), tgt, tgt, lower=True)
    (tmp_path / "e.vec").write_text(VEC)
    return str(tmp_path / "data.vocab.pt"), str(tmp_path / "e.vec")


def build(tmp_path, files, *flags, out="t", emb=True):
    vocab, vec = files
    prefix = str(tmp_path / out)
    main([*(["-emb_file_dec", vec] if emb else []), "-dict_file", vocab, "-output_file", prefix, *flags])
    return torch.load(prefix + ".dec.pt", weights_only=True).double().numpy()


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def norms(table):
    return np.linalg.norm(table, axis=1)


@pytest.mark.parametrize("init", ["random_sphere", "random_cube", "mixed"])
def test_random_inits_are_seeded_and_unit_length(tmp_path, files, init):
    flags = ["-init", init] + (["-normalize"] if init == "mixed" else [])
    a = build(tmp_path, files, *flags, "-seed", "3", out="a")
    b = build(tmp_path, files, *flags, "-seed", "3", out="b")
    c = build(tmp_path, files, *flags, "-seed", "4", out="c")
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[1:], c[1:])
    assert (a[PAD_ID] == 0).all()
    np.testing.assert_allclose(norms(a[1:]), 1.0, atol=1e-6)
    if init == "random_cube":  # corners of the cube, scaled by 1/sqrt(dim)
        np.testing.assert_allclose(np.abs(a[1:]), 0.5, atol=1e-7)
    if init == "random_sphere":  # no file vector survives
        assert not any(np.allclose(a[4 + i], unit(PRE[w])) for i, w in enumerate(WORDS[:4]))


def test_mixed_is_the_papers_combination(tmp_path, files):
    pre = build(tmp_path, files, "-normalize", out="pre")
    rnd = build(tmp_path, files, "-init", "random_sphere", out="rnd")
    # alpha 0: the random_sphere table itself; alpha 1: the normalised pretrained table
    np.testing.assert_allclose(
        build(tmp_path, files, "-init", "mixed", "-normalize", "-alpha", "0", out="m0"), rnd, atol=1e-6
    )
    np.testing.assert_allclose(
        build(tmp_path, files, "-init", "mixed", "-normalize", "-alpha", "1", out="m1"), pre, atol=1e-6
    )
    mixed = build(tmp_path, files, "-init", "mixed", "-normalize", "-alpha", "0.3", out="m3")
    for row in range(1, len(SPECIALS) + len(WORDS)):  # <unk> too: its average is mixed like a word
        np.testing.assert_allclose(mixed[row], unit(0.3 * pre[row] + 0.7 * rnd[row]), atol=1e-6)


def test_random_init_without_a_vector_file(tmp_path, files, capsys):
    table = build(tmp_path, files, "-init", "random_cube", "-dim", "16", emb=False)
    assert table.shape == (len(SPECIALS) + len(WORDS), 16)
    np.testing.assert_allclose(np.abs(table[1:]), 0.25, atol=1e-7)
    assert not (tmp_path / "t.dec.missing.txt").exists()  # no file: no word can be missing from it
    assert "no vector file" in capsys.readouterr().out


def test_center_removes_the_mean_and_the_top_directions(tmp_path, files):
    raw = build(tmp_path, files, out="raw")
    centred = build(tmp_path, files, "-center", out="c")
    words = slice(len(SPECIALS), None)
    mean = raw[words].mean(0)
    np.testing.assert_allclose(centred[words].mean(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(centred[1:], raw[1:] - mean, atol=1e-6)  # <unk>, <s>, </s> too
    assert (centred[PAD_ID] == 0).all()

    pcs = build(tmp_path, files, "-center_pcs", "2", out="p")  # implies -center
    _, _, vt = np.linalg.svd(raw[words] - mean, full_matrices=False)
    np.testing.assert_allclose(pcs[1:] @ vt[:2].T, 0.0, atol=1e-5)  # orthogonal to the removed directions
    np.testing.assert_allclose(pcs[words].mean(0), 0.0, atol=1e-6)
    # what is left is untouched: the projections on the other directions stay those of the centred rows
    np.testing.assert_allclose(pcs[1:] @ vt[2:].T, (raw[1:] - mean) @ vt[2:].T, atol=1e-5)

    unit_pcs = build(tmp_path, files, "-center_pcs", "1", "-normalize", out="pn")
    np.testing.assert_allclose(norms(unit_pcs[1:]), 1.0, atol=1e-6)


def test_unk_vector_options(tmp_path, files):
    average = build(tmp_path, files, "-normalize", out="avg")
    np.testing.assert_allclose(average[UNK_ID], unit(unit([4, 0, 0, 0]) + unit([0, 0, -2, 0])), atol=1e-6)

    zero = build(tmp_path, files, "-normalize", "-unk_vector", "zero", out="zero")
    assert (zero[UNK_ID] == 0).all()
    np.testing.assert_array_equal(np.delete(zero, UNK_ID, 0), np.delete(average, UNK_ID, 0))
    # a zero <unk> stays zero through centring (it is not moved to -mean)
    assert (build(tmp_path, files, "-unk_vector", "zero", "-center", out="zc")[UNK_ID] == 0).all()

    rand = build(tmp_path, files, "-normalize", "-unk_vector", "random", out="r1")
    again = build(tmp_path, files, "-normalize", "-unk_vector", "random", out="r2")
    np.testing.assert_array_equal(rand, again)
    assert np.linalg.norm(rand[UNK_ID]) == pytest.approx(1.0, abs=1e-6)
    assert not np.allclose(rand[UNK_ID], average[UNK_ID])
    np.testing.assert_array_equal(np.delete(rand, UNK_ID, 0), np.delete(average, UNK_ID, 0))
    # without -normalize it gets the RMS length of the word rows
    raw = build(tmp_path, files, "-unk_vector", "random", out="r3")
    rms = np.sqrt((raw[len(SPECIALS) :] ** 2).sum(1).mean())
    assert np.linalg.norm(raw[UNK_ID]) == pytest.approx(rms, rel=1e-5)

    vmean = build(tmp_path, files, "-normalize", "-unk_vector", "vocab_mean", out="vm")
    np.testing.assert_allclose(vmean[UNK_ID], unit(average[len(SPECIALS) :].mean(0)), atol=1e-6)

    # random inits: <unk> is the init's own draw of row 1 by default
    sphere = build(tmp_path, files, "-init", "random_sphere", out="s")
    assert np.linalg.norm(sphere[UNK_ID]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["-init", "random_sphere", "-unk_vector", "average"], "-unk_vector average is the mean of pretrained"),
        (["-alpha", "0.5"], "-alpha is the weight of -init mixed"),
        (["-init", "mixed", "-alpha", "1.5"], "-alpha must be in [0, 1], got 1.5"),
        (["-init", "mixed"], "-init mixed combines the unit-length pretrained rows: add -normalize"),
        (["-init", "random_cube", "-dim", "8"], "the vectors have dimension 4, but -dim says 8"),
        (["-center_pcs", "-1"], "-center_pcs must be at least 0, got -1"),
        (["-center_pcs", "4"], "-center_pcs 4: expected fewer than"),
    ],
)
def test_conflicting_table_options(tmp_path, files, capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        build(tmp_path, files, *flags)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("t.dec.*"))  # nothing half-written


@pytest.mark.parametrize(
    "flags, message",
    [
        (["-init", "mixed"], "-init mixed reads the pretrained vectors: give -emb_file_dec"),
        (["-init", "random_sphere"], "give the dimension with -dim"),
    ],
)
def test_a_vector_file_is_needed(tmp_path, files, capsys, flags, message):
    with pytest.raises(SystemExit):
        build(tmp_path, files, *flags, emb=False)
    assert message in capsys.readouterr().err


# -- tools/table_stats.py --------------------------------------------------------------------------------

spec = importlib.util.spec_from_file_location("table_stats", ROOT / "tools/table_stats.py")
ts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ts)


def hub_table(m=30):
    """Row 0 padding, row 1 (<unk>) the hub c = e_0, rows 2.. u_i = unit(e_0 + s_i e_i) with s_i
    increasing. cos(u_i, c) = 1/sqrt(1+s_i^2) beats cos(u_i, u_j) = cos(u_i, c) cos(u_j, c), so
    every u_i's nearest neighbours are c, then the u_j of smallest s_j; c's are the first u_j."""
    s = np.linspace(0.5, 3.0, m)
    table = np.zeros((m + 2, m + 1))
    table[1:, 0] = 1.0
    table[2 + np.arange(m), 1 + np.arange(m)] = s
    table[1:] = unit(table[1:])
    return torch.tensor(table)


def expected_counts(m, k):
    """N_k of [c, u_1..u_m] from the construction above."""
    counts = np.zeros(m + 1, dtype=int)
    counts[0] = m  # every u_i has c first
    for i in range(m):  # u_i's other k-1: the smallest-s rows but itself
        for j in [j for j in range(m) if j != i][: k - 1]:
            counts[1 + j] += 1
    counts[1 : 1 + k] += 1  # c's k nearest
    return counts


@pytest.mark.parametrize("k, chunk", [(10, 1024), (10, 7), (3, 5)])
def test_table_stats_on_a_known_hub(k, chunk):
    m = 30
    stats = ts.table_stats(hub_table(m), k=k, chunk=chunk, top=3)
    counts = expected_counts(m, k)
    assert stats["analysed"] == m + 1 and stats["zero_rows"] == [PAD_ID]
    assert stats["unk_nk"] == m and stats["unk_rank"] == 1 and stats["max_nk"] == m
    assert stats["skew"] == pytest.approx(scipy.stats.skew(counts), rel=1e-9)
    assert stats["antihubs"] == int((counts == 0).sum())
    assert stats["hubs"][0] == (UNK_ID, m)


def test_table_stats_matches_brute_force_on_a_random_table():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((60, 8))
    table[PAD_ID] = 0.0
    u = unit(table[1:])
    sim = u @ u.T
    mean_cos = (sim.sum() - len(u)) / (len(u) * (len(u) - 1))
    np.fill_diagonal(sim, -np.inf)
    knn = np.argsort(-sim, axis=1)[:, :10]
    counts = np.bincount(knn.ravel(), minlength=len(u))
    stats = ts.table_stats(torch.tensor(table), k=10, chunk=16)
    assert stats["mean_cos"] == pytest.approx(mean_cos, abs=1e-9)
    assert stats["mean_nn_cos"] == pytest.approx(sim.max(1).mean(), abs=1e-6)
    assert stats["skew"] == pytest.approx(scipy.stats.skew(counts), rel=1e-9)
    assert stats["unk_nk"] == counts[0] and stats["unk_rank"] == 1 + int((counts > counts[0]).sum())


def test_table_stats_cli(tmp_path, files, capsys):
    vocab, _ = files
    a = tmp_path / "a.pt"
    torch.save(torch.tensor(np.r_[np.zeros((1, 4)), np.random.default_rng(1).standard_normal((8, 4))]).float(), a)
    ts.main([str(a), str(a), "-vocab", vocab, "-k", "2"])
    out = capsys.readouterr().out
    assert "1 zero rows left out: <blank>" in out and "<unk>: N_2" in out
    assert out.count("| " + str(a) + " |") == 2  # the comparison table
    short = tmp_path / "short.pt"
    torch.save(torch.ones(3, 4), short)
    with pytest.raises(SystemExit) as exc:
        ts.main([str(short), "-vocab", vocab])
    assert exc.value.code == 2
    assert "short.pt has 3 rows but the target vocabulary" in capsys.readouterr().err
