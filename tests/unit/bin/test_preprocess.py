"""preprocess.py end to end, in-process: vocabularies, filtering, shards, failures that leave nothing behind."""

import gzip
import os
import resource
from collections import Counter
from pathlib import Path

import pytest
import torch

from onmt_cont.bin import preprocess
from onmt_cont.constants import SPECIALS
from onmt_cont.inputters import preprocessing
from onmt_cont.inputters.corpus import count_lines, load_shard, shard_paths
from onmt_cont.inputters.preprocessing import count_corpus, write_train_shards
from onmt_cont.inputters.vocab import Vocab, load_vocabs
from tests.helpers import ROOT

DATA = ROOT / "data"


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def make_corpus(tmp_path, src, tgt, valid_src=("a b",), valid_tgt=("x y",)):
    """Write the four text files under tmp_path/in; the output prefix is tmp_path/out/d."""
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    (tmp_path / "out").mkdir(exist_ok=True)
    return {
        "train_src": write(d / "train.src", src),
        "train_tgt": write(d / "train.tgt", tgt),
        "valid_src": write(d / "valid.src", valid_src),
        "valid_tgt": write(d / "valid.tgt", valid_tgt),
        "save_data": str(tmp_path / "out" / "d"),
    }


def run(paths, *extra):
    argv = [f"-{k}" if i == 0 else v for k, v in paths.items() for i in (0, 1)]
    preprocess.main(argv + [str(x) for x in extra])


def vocab_lines(prefix, side):
    text = Path(f"{prefix}.vocab.{side}.txt").read_text(encoding="utf-8")
    return [tuple(line.split("\t")) for line in text.splitlines()]


def words(prefix, side):
    return [tok for tok, _ in vocab_lines(prefix, side)[len(SPECIALS) :]]


def decoded_shards(prefix, split="train"):
    """All pairs of a split as token lists, in shard order, decoded with the saved vocabularies."""
    src_vocab, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    pairs = []
    for path in shard_paths(prefix, split):
        for s, t in load_shard(path):
            pairs.append((" ".join(src_vocab.decode(s.tolist())), " ".join(tgt_vocab.decode(t.tolist()))))
    return pairs


def assert_fails_cleanly(capsys, out_dir, argv_paths, *extra, needles=()):
    with pytest.raises(SystemExit) as exc:
        run(argv_paths, *extra)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: " in err
    for needle in needles:
        assert needle in err, (needle, err)
    assert os.listdir(out_dir) == []
    return err


# -- vocabulary --------------------------------------------------------------------------------

SRC = ["b a c", "a b", "a d", "e"]
TGT = ["y x", "x z", "w x", "y"]


def test_vocab_specials_first_sorted_by_count_then_token(tmp_path):
    p = make_corpus(tmp_path, SRC, TGT)
    run(p)
    prefix = p["save_data"]
    # counts: a 3, b 2, c/d/e 1 -> ties alphabetically
    assert vocab_lines(prefix, "src") == [(s, "0") for s in SPECIALS] + [
        ("a", "3"),
        ("b", "2"),
        ("c", "1"),
        ("d", "1"),
        ("e", "1"),
    ]
    assert vocab_lines(prefix, "tgt") == [(s, "0") for s in SPECIALS] + [("x", "3"), ("y", "2"), ("w", "1"), ("z", "1")]
    data = torch.load(prefix + ".vocab.pt", weights_only=True)
    assert data["format_version"] == 1 and data["lower"] is False
    assert data["src"]["tokens"] == list(SPECIALS) + ["a", "b", "c", "d", "e"]
    assert data["src"]["counts"] == [0, 0, 0, 0, 3, 2, 1, 1, 1]
    assert data["src"]["total_tokens"] == 8 and data["tgt"]["total_tokens"] == 7
    assert sorted(os.listdir(tmp_path / "out")) == [
        "d.shards.json",
        "d.train.0.pt",
        "d.valid.0.pt",
        "d.vocab.pt",
        "d.vocab.src.txt",
        "d.vocab.tgt.txt",
    ]


def test_min_frequency_and_size_limits(tmp_path):
    p = make_corpus(tmp_path, SRC, TGT)
    run(p, "-src_words_min_frequency", 2, "-tgt_vocab_size", 2)
    assert words(p["save_data"], "src") == ["a", "b"]
    assert words(p["save_data"], "tgt") == ["x", "y"]  # the size excludes the 4 specials
    run(p, "-tgt_vocab_size", 3)
    assert words(p["save_data"], "tgt") == ["x", "y", "w"]  # w and z tie at 1: w first
    # -src_vocab_size 0 keeps no word: every source token would be <unk> (0 is not "no limit")
    with pytest.raises(SystemExit):
        run(p, "-src_vocab_size", 0)


def test_tie_breaking_does_not_depend_on_corpus_order(tmp_path):
    src = ["d c", "b a", "c d a b", "e f"]
    tgt = ["1", "2", "3", "4"]
    p = make_corpus(tmp_path, src, tgt)
    run(p, "-src_vocab_size", 3)
    first = words(p["save_data"], "src")
    assert first == ["a", "b", "c"]
    p = make_corpus(tmp_path, src[::-1], tgt[::-1])
    run(p, "-src_vocab_size", 3)
    assert words(p["save_data"], "src") == first


def test_lower(tmp_path):
    p = make_corpus(tmp_path, ["Hello World", "hello"], ["Bonjour", "BONJOUR le Monde"])
    run(p)
    assert words(p["save_data"], "src") == ["Hello", "World", "hello"]
    run(p, "-lower")
    assert words(p["save_data"], "src") == ["hello", "world"]
    assert vocab_lines(p["save_data"], "tgt")[4:] == [("bonjour", "2"), ("le", "1"), ("monde", "1")]
    assert torch.load(p["save_data"] + ".vocab.pt", weights_only=True)["lower"] is True
    assert decoded_shards(p["save_data"])[0] == ("hello world", "bonjour")


def test_tgt_emb_restricts_target_vocabulary(tmp_path, capsys):
    vec = write(tmp_path / "tiny.vec", ["3 2", "x 0.1 0.2", "z 0.3 0.4", "unused 0.5 0.6"])
    p = make_corpus(tmp_path, SRC, TGT)
    run(p, "-tgt_emb", vec)
    assert words(p["save_data"], "tgt") == ["x", "z"]  # y (count 2) and w have no vector
    assert words(p["save_data"], "src") == ["a", "b", "c", "d", "e"]  # the source side is not restricted
    assert f"restricted to the 3 words of {vec}" in capsys.readouterr().out
    # a .gz vector file works the same
    with gzip.open(tmp_path / "tiny.vec.gz", "wt", encoding="utf-8") as f:
        f.write((tmp_path / "tiny.vec").read_text())
    run(p, "-tgt_emb", tmp_path / "tiny.vec.gz", "-tgt_vocab_size", 1)
    assert words(p["save_data"], "tgt") == ["x"]


def test_tgt_emb_on_the_sample_vectors(tmp_path):
    with gzip.open(DATA / "en.vec.gz", "rt", encoding="utf-8") as f:
        next(f)  # the "count dim" header
        vec_words = {line.split(" ", 1)[0] for line in f}
    p = make_corpus(tmp_path, ["a"] * 3, ["a man", "a zzzznovector", "the zzzznovector"])
    assert "zzzznovector" not in vec_words
    run(p, "-tgt_emb", DATA / "en.vec.gz")
    assert words(p["save_data"], "tgt") == ["a", "man", "the"]


def test_reused_vocabularies_give_the_same_indices(tmp_path):
    first = tmp_path / "first"
    first.mkdir()
    common = ["-valid_src", DATA / "valid.fr", "-valid_tgt", DATA / "valid.en"]
    preprocess.main(
        [
            str(x)
            for x in [
                "-train_src",
                DATA / "train.fr",
                "-train_tgt",
                DATA / "train.en",
                *common,
                "-save_data",
                first / "d",
            ]
        ]
    )
    second = tmp_path / "second"
    second.mkdir()
    # another training corpus (the validation set), whose own vocabulary would be much smaller
    preprocess.main(
        [
            str(x)
            for x in [
                "-train_src",
                DATA / "valid.fr",
                "-train_tgt",
                DATA / "valid.en",
                *common,
                "-save_data",
                second / "d",
                "-src_vocab",
                first / "d.vocab.src.txt",
                "-tgt_vocab",
                first / "d.vocab.tgt.txt",
            ]
        ]
    )
    s1, t1, _ = load_vocabs(str(first / "d.vocab.pt"))
    s2, t2, _ = load_vocabs(str(second / "d.vocab.pt"))
    assert s1.itos == s2.itos and t1.itos == t2.itos
    v1, v2 = load_shard(str(first / "d.valid.0.pt")), load_shard(str(second / "d.valid.0.pt"))
    assert len(v1) == len(v2) == 200
    assert all(a.equal(c) and b.equal(d) for (a, b), (c, d) in zip(v1, v2, strict=True))
    # the counts in the reused vocabulary describe the new corpus
    counts = {tok: int(c) for tok, c in vocab_lines(str(second / "d"), "tgt")}
    valid_counts = Counter(tok for line in (DATA / "valid.en").open(encoding="utf-8") for tok in line.split())
    assert counts["a"] == valid_counts["a"] > 0
    assert counts == {tok: valid_counts[tok] if i >= 4 else 0 for i, tok in enumerate(t1.itos)}


def test_plain_word_list_as_vocabulary(tmp_path):
    p = make_corpus(tmp_path, SRC, TGT)
    wl = write(tmp_path / "words.txt", ["e", "a"])
    run(p, "-src_vocab", wl)
    assert vocab_lines(p["save_data"], "src") == [(s, "0") for s in SPECIALS] + [("e", "1"), ("a", "3")]
    assert decoded_shards(p["save_data"])[0] == ("<unk> a <unk>", "y x")


# -- filtering ---------------------------------------------------------------------------------


def test_length_filter_and_empty_lines_are_counted(tmp_path, capsys):
    src = ["a b c", "", "a", "a b c d", "a b", "   ", "a"]
    tgt = ["x", "x y", "", "x", "x y z w", "x", "x y z"]
    p = make_corpus(tmp_path, src, tgt, valid_src=["a", "a b c d e", ""], valid_tgt=["x", "x", "x"])
    run(p, "-src_seq_length", 3, "-tgt_seq_length", 3)
    out = capsys.readouterr().out
    assert "train: 7 pairs read, 2 kept, dropped: 3 with an empty side, 2 too long (> 3 source or > 3 target" in out
    assert "valid: 3 pairs read, 1 kept, dropped: 1 with an empty side, 1 too long" in out
    assert decoded_shards(p["save_data"]) == [("a b c", "x"), ("a", "x y z")]
    assert decoded_shards(p["save_data"], "valid") == [("a", "x")]
    # dropped pairs do not count towards the vocabulary
    assert dict(vocab_lines(p["save_data"], "src"))["a"] == "2"


def test_nothing_survives_filtering_is_an_error(tmp_path, capsys):
    p = make_corpus(tmp_path, ["a b c"], ["x"])
    assert_fails_cleanly(capsys, tmp_path / "out", p, "-src_seq_length", 2, needles=("survives filtering",))


# -- shards ------------------------------------------------------------------------------------

PAIRS = [(f"s{i} w{i % 3}", f"t{i} v{i % 2} u") for i in range(5)]


def test_shard_round_trip(tmp_path):
    p = make_corpus(tmp_path, [s for s, _ in PAIRS], [t for _, t in PAIRS])
    run(p, "-shard_size", 2)
    prefix = p["save_data"]
    paths = shard_paths(prefix, "train")
    assert [os.path.basename(x) for x in paths] == ["d.train.0.pt", "d.train.1.pt", "d.train.2.pt"]
    src_vocab, tgt_vocab, _ = load_vocabs(prefix + ".vocab.pt")
    got = [load_shard(x) for x in paths]
    assert [len(s) for s in got] == [2, 2, 1]
    flat = [(s.tolist(), t.tolist()) for shard in got for s, t in shard]
    assert flat == [(src_vocab.encode(s.split()), tgt_vocab.encode(t.split())) for s, t in PAIRS]
    assert all(x.dtype == torch.long for s, t in got[0] for x in (s, t))
    raw = torch.load(paths[0], weights_only=True)
    assert raw["format_version"] == 1 and raw["src_lengths"].tolist() == [2, 2]


def test_shuffle_is_a_seeded_permutation_across_shards(tmp_path):
    pairs = [(f"s{i} a", f"t{i} b") for i in range(40)]
    p = make_corpus(tmp_path, [s for s, _ in pairs], [t for _, t in pairs])
    run(p, "-shard_size", 7, "-shuffle")
    prefix = p["save_data"]
    shuffled = decoded_shards(prefix)
    assert len(shard_paths(prefix, "train")) == 6
    assert Counter(shuffled) == Counter(pairs) and shuffled != pairs
    run(p, "-shard_size", 7, "-shuffle")
    assert decoded_shards(prefix) == shuffled
    run(p, "-shard_size", 7, "-shuffle", "-seed", 1)
    other = decoded_shards(prefix)
    assert Counter(other) == Counter(pairs) and other != shuffled
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".")]  # no temporary bucket directory left


def test_shuffle_flushes_give_the_same_shards(tmp_path):
    """Buckets are written in several flushes on big corpora; the result must not depend on that."""
    pairs = [(f"s{i}", f"t{i}") for i in range(23)]
    p = make_corpus(tmp_path, [s for s, _ in pairs], [t for _, t in pairs])
    opt = preprocess.build_parser().parse_args(
        [f"-{k}" if i == 0 else v for k, v in p.items() for i in (0, 1)] + ["-shard_size", "4", "-shuffle"]
    )
    src_counts, tgt_counts, stats = count_corpus(opt.train_src, opt.train_tgt, opt)
    sv = Vocab(list(SPECIALS) + sorted(src_counts))
    tv = Vocab(list(SPECIALS) + sorted(tgt_counts))
    results = []
    for flush_every in (1, 5, 10**6):
        written = []
        assert write_train_shards(opt, sv, tv, stats["kept"], written, flush_every=flush_every) == 6
        results.append([[(s.tolist(), t.tolist()) for s, t in load_shard(x)] for x in written])
    assert results[0] == results[1] == results[2]


def test_shuffle_with_many_shards_stays_under_the_open_files_limit(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(150)]
    p = make_corpus(tmp_path, [s for s, _ in pairs], [t for _, t in pairs])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 64
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(in_use + 60, hard), hard))
    try:
        run(p, "-shard_size", 1, "-shuffle")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert Counter(decoded_shards(p["save_data"])) == Counter(pairs)


def test_sample_data_three_shards_then_stale_shards_removed(tmp_path):
    """Acceptance: -shard_size 1000 on the 3,000-pair sample writes exactly these seven files."""
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        str(x)
        for x in [
            "-train_src",
            DATA / "train.fr",
            "-train_tgt",
            DATA / "train.en",
            "-valid_src",
            DATA / "valid.fr",
            "-valid_tgt",
            DATA / "valid.en",
            "-save_data",
            out / "sample",
        ]
    ]
    preprocess.main(argv + ["-shard_size", "1000"])
    assert sorted(os.listdir(out)) == [
        "sample.shards.json",
        "sample.train.0.pt",
        "sample.train.1.pt",
        "sample.train.2.pt",
        "sample.valid.0.pt",
        "sample.vocab.pt",
        "sample.vocab.src.txt",
        "sample.vocab.tgt.txt",
    ]
    sizes = [len(load_shard(str(out / f"sample.train.{i}.pt"))) for i in range(3)]
    assert sizes == [1000, 1000, 1000]
    assert len(load_shard(str(out / "sample.valid.0.pt"))) == 200
    for name in os.listdir(out):
        if name.endswith(".pt"):
            torch.load(out / name, weights_only=True)
    src, tgt, _ = load_vocabs(str(out / "sample.vocab.pt"))
    assert src.itos[:4] == tgt.itos[:4] == list(SPECIALS)
    assert vocab_lines(str(out / "sample"), "tgt")[4] == ("a", "5178")

    preprocess.main(argv + ["-shard_size", "5000"])
    assert sorted(os.listdir(out)) == [
        "sample.shards.json",
        "sample.train.0.pt",
        "sample.valid.0.pt",
        "sample.vocab.pt",
        "sample.vocab.src.txt",
        "sample.vocab.tgt.txt",
    ]
    assert len(load_shard(str(out / "sample.train.0.pt"))) == 3000


def test_gzipped_input(tmp_path):
    p = make_corpus(tmp_path, SRC, TGT)
    for key in ("train_src", "train_tgt"):
        with open(p[key], "rb") as f, gzip.open(p[key] + ".gz", "wb") as g:
            g.write(f.read())
    plain = dict(p)
    assert count_lines(p["train_src"] + ".gz") == count_lines(p["train_src"]) == 4
    run(p)
    expected = decoded_shards(p["save_data"])
    p.update(train_src=plain["train_src"] + ".gz", train_tgt=plain["train_tgt"] + ".gz")
    run(p)
    assert decoded_shards(p["save_data"]) == expected


# -- bad input: exit 2, a message naming the input, nothing written --------------------------


def test_mismatched_line_counts(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT[:-1])
    assert_fails_cleanly(
        capsys, tmp_path / "out", p, needles=(f"{p['train_src']} has 4 lines", f"{p['train_tgt']} has 3")
    )


def test_mismatched_validation_line_counts(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT, valid_src=["a", "b"], valid_tgt=["x"])
    assert_fails_cleanly(capsys, tmp_path / "out", p, needles=(p["valid_src"], p["valid_tgt"], "2 lines"))


@pytest.mark.parametrize("key", ["train_src", "train_tgt", "valid_tgt"])
def test_invalid_utf8_names_file_and_line(tmp_path, capsys, key):
    p = make_corpus(tmp_path, SRC, TGT)
    lines = Path(p[key]).read_bytes().split(b"\n")
    lines[-2] = b"caf\xe9 " + lines[-2]  # latin-1, on the last line of the file
    Path(p[key]).write_bytes(b"\n".join(lines))
    n = len(lines) - 1
    assert_fails_cleanly(capsys, tmp_path / "out", p, needles=(f"{p[key]}, line {n}: invalid UTF-8",))


@pytest.mark.parametrize("key", ["train_src", "valid_tgt"])
def test_missing_input_file(tmp_path, capsys, key):
    p = make_corpus(tmp_path, SRC, TGT)
    os.remove(p[key])
    assert_fails_cleanly(capsys, tmp_path / "out", p, needles=(f"{p[key]}: no such file",))


def test_missing_vocabulary_file(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT)
    assert_fails_cleanly(
        capsys,
        tmp_path / "out",
        p,
        "-tgt_vocab",
        tmp_path / "nope.txt",
        needles=(f"{tmp_path / 'nope.txt'}: no such file",),
    )


def test_directory_as_input_is_a_clear_error(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT)
    p["train_src"] = str(tmp_path / "in")
    needle = f"{tmp_path / 'in'}: is a directory, expected a text file"
    assert_fails_cleanly(capsys, tmp_path / "out", p, needles=(needle,))


def test_missing_output_directory_is_made(tmp_path, capsys):
    """-save_data in folders that do not exist yet: made, as mkdir -p (issue 70.7: was an error); a run
    that fails leaves none of them behind; a file where the folder should be is an error."""
    p = make_corpus(tmp_path, SRC, TGT)
    p["save_data"] = str(tmp_path / "new" / "deeper" / "d")
    run(p)
    assert (tmp_path / "new" / "deeper" / "d.vocab.pt").exists()
    bad = dict(p, save_data=str(tmp_path / "other" / "d"), src_vocab=str(tmp_path / "no_such_vocab.txt"))
    with pytest.raises(SystemExit) as exc:
        run(bad)
    assert exc.value.code == 2
    assert not (tmp_path / "other").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        run(dict(p, save_data=str(tmp_path / "afile" / "d")))
    assert exc.value.code == 2 and "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra", [["-shard_size", "0"], ["-tgt_vocab_size", "-1"], ["-shard_size", "x"], ["-seed", "-1", "-shuffle"]]
)
def test_bad_option_values(tmp_path, capsys, extra):
    p = make_corpus(tmp_path, SRC, TGT)
    assert_fails_cleanly(capsys, tmp_path / "out", p, *extra, needles=(extra[0],))


def test_tgt_vocab_and_tgt_emb_conflict(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT)
    wl = write(tmp_path / "words.txt", ["x"])
    assert_fails_cleanly(
        capsys, tmp_path / "out", p, "-tgt_vocab", wl, "-tgt_emb", wl, needles=("-tgt_vocab or -tgt_emb, not both",)
    )


def test_missing_required_option(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT)
    del p["valid_tgt"]
    assert_fails_cleanly(capsys, tmp_path / "out", p, needles=("-valid_tgt",))


def test_bad_vocabulary_file(tmp_path, capsys):
    p = make_corpus(tmp_path, SRC, TGT)
    bad = write(tmp_path / "bad.txt", ["a\t3", "b\tmany"])
    assert_fails_cleanly(capsys, tmp_path / "out", p, "-src_vocab", bad, needles=(f"{bad}, line 2",))


# -- a failure while writing leaves nothing behind ---------------------------------------------


def fail_on_call(n, real):
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise RuntimeError("disk full (simulated)")
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("shuffle", [[], ["-shuffle"]])
def test_failing_save_shard_leaves_nothing(tmp_path, monkeypatch, shuffle):
    p = make_corpus(tmp_path, [s for s, _ in PAIRS], [t for _, t in PAIRS])
    failing = fail_on_call(2, preprocess.save_shard)  # the training shards are written by inputters.preprocessing
    monkeypatch.setattr(preprocess, "save_shard", failing)
    monkeypatch.setattr(preprocessing, "save_shard", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        run(p, "-shard_size", 2, *shuffle)
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("n", [2, 4, 5])  # 2nd train shard, valid shard, vocab.pt (after the text files)
def test_failing_torch_save_leaves_nothing(tmp_path, monkeypatch, n):
    p = make_corpus(tmp_path, [s for s, _ in PAIRS], [t for _, t in PAIRS])
    monkeypatch.setattr(torch, "save", fail_on_call(n, torch.save))
    with pytest.raises(RuntimeError, match="simulated"):
        run(p, "-shard_size", 2)
    assert os.listdir(tmp_path / "out") == []


def test_failing_vocab_text_write_leaves_nothing(tmp_path, monkeypatch):
    import onmt_cont.inputters.vocab as vocab_module

    p = make_corpus(tmp_path, SRC, TGT)
    monkeypatch.setattr(vocab_module, "atomic_write_text", fail_on_call(2, vocab_module.atomic_write_text))
    with pytest.raises(RuntimeError, match="simulated"):
        run(p)
    assert os.listdir(tmp_path / "out") == []


def test_interrupt_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C in the middle of a shuffled run: no shard, no bucket directory, no temporary file."""
    p = make_corpus(tmp_path, [s for s, _ in PAIRS], [t for _, t in PAIRS])
    real, calls = torch.save, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(p, "-shard_size", 2, "-shuffle")
    assert os.listdir(tmp_path / "out") == []
