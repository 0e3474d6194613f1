"""Pretrained vectors: the streaming reader and embeddings_to_torch.py, on tiny hand-made files."""

import gzip
import os
import random

import numpy as np
import pytest
import torch

from onmt_cont.bin.embeddings_to_torch import main
from onmt_cont.constants import SPECIALS
from onmt_cont.inputters.embeddings import read_embedding_words, read_embeddings
from onmt_cont.inputters.numparse import parse_values
from onmt_cont.inputters.vocab import Vocab, save_vocabs
from onmt_cont.utils.errors import UserError

# dim 3; "zebra" and "yak" are not in the vocabulary, so <unk> = their average = (2, 0, -1).
VEC = """\
6 3
</s> 0.1 0.2 0.3
the 1.0 0.0 0.0
cat 0.0 2.0 0.0
dog 0.00000 0.00000 3.00000
zebra 4.0 0.0 0.0
yak 0.0 0.0 -2.0
"""
ROWS = {"</s>": [0.1, 0.2, 0.3], "the": [1, 0, 0], "cat": [0, 2, 0], "dog": [0, 0, 3]}
TGT_WORDS = ["the", "cat", "dog", "gnu"]  # gnu has no vector
TGT_COUNTS = [10, 5, 3, 2]  # 25 training tokens in all: 5 of them outside the vocabulary


def write(path, text, gz=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture
def vocab_file(tmp_path):
    tgt = Vocab(list(SPECIALS) + TGT_WORDS, [0] * 4 + TGT_COUNTS, total_tokens=25)
    src = Vocab(list(SPECIALS) + ["le", "chat"], [0, 0, 0, 0, 4, 1], total_tokens=6)
    save_vocabs(str(tmp_path / "data"), src, tgt, lower=True)
    return str(tmp_path / "data.vocab.pt")


def run(tmp_path, vocab_file, emb, *extra, out="emb"):
    out = str(tmp_path / out)
    main(["-emb_file_dec", emb, "-dict_file", vocab_file, "-output_file", out, *extra])
    return torch.load(out + ".dec.pt", weights_only=True), out


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_rows_unk_padding_and_report(tmp_path, vocab_file, capsys):
    emb = write(tmp_path / "e.vec", VEC)
    table, out = run(tmp_path, vocab_file, emb)
    assert table.dtype == torch.float32 and tuple(table.shape) == (8, 3)
    itos = list(SPECIALS) + TGT_WORDS
    for word, vec in ROWS.items():
        assert table[itos.index(word)].tolist() == pytest.approx(vec)
    assert table[0].tolist() == [0.0, 0.0, 0.0]  # padding
    assert table[1].tolist() == pytest.approx([2.0, 0.0, -1.0])  # (zebra + yak) / 2
    assert table[2].norm() > 0 and not any(torch.allclose(table[2], table[i]) for i in range(8) if i != 2)
    with open(out + ".dec.missing.txt", encoding="utf-8") as f:
        assert f.read() == "gnu\n"
    report = capsys.readouterr().out
    assert "read 6 vectors of dimension 3" in report
    assert "3 of 4 word types (75.00%)" in report and "18 of 25 training tokens (72.00%)" in report
    assert "malformed lines skipped: 0" in report
    assert "<s>: random, </s>: from the file" in report
    assert "1 vocabulary words without a vector got random vectors" in report
    assert out + ".dec.missing.txt" in report


def test_normalize(tmp_path, vocab_file):
    table, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", VEC), "-normalize")
    norms = table.norm(dim=1)
    assert norms[0] == 0.0
    assert norms[1:].tolist() == pytest.approx([1.0] * 7, abs=1e-6)
    # unit(zebra) = (1, 0, 0), unit(yak) = (0, 0, -1): average (0.5, 0, -0.5), then unit length.
    assert table[1].tolist() == pytest.approx([0.5**0.5, 0.0, -(0.5**0.5)], abs=1e-6)
    assert table[3].tolist() == pytest.approx(unit(ROWS["</s>"]).tolist(), abs=1e-6)
    assert table[6].tolist() == pytest.approx([0.0, 0.0, 1.0])  # dog


def test_random_rows_are_deterministic_and_seeded(tmp_path, vocab_file):
    emb = write(tmp_path / "e.vec", VEC)
    first, _ = run(tmp_path, vocab_file, emb, out="a")
    again, _ = run(tmp_path, vocab_file, emb, out="b")
    other_seed, _ = run(tmp_path, vocab_file, emb, "-seed", "7", out="c")
    assert torch.equal(first, again)
    assert not torch.equal(first[7], other_seed[7]) and torch.equal(first[4:7], other_seed[4:7])
    # Random rows (<s>, gnu) have the RMS length of the file's vectors.
    rms = np.sqrt(np.mean([sum(x * x for x in v) for v in [*ROWS.values(), [4, 0, 0], [0, 0, -2]]]))
    assert first[[2, 7]].norm(dim=1).tolist() == pytest.approx([rms, rms], rel=1e-5)


def test_gzip_and_source_side(tmp_path, vocab_file):
    plain, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", VEC), out="p")
    src_vec = "le 1.5 2.5 3.5\nchat -1.0 -2.0 -3.0\nchien 9.0 9.0 9.0\n"
    zipped, out = run(
        tmp_path,
        vocab_file,
        write(tmp_path / "e.vec.gz", VEC, gz=True),
        "-emb_file_enc",
        write(tmp_path / "src.vec.gz", src_vec, gz=True),
        out="z",
    )
    assert torch.equal(plain, zipped)
    enc = torch.load(out + ".enc.pt", weights_only=True)
    assert enc[4:].tolist() == [[1.5, 2.5, 3.5], [-1.0, -2.0, -3.0]]
    assert enc[1].tolist() == [9.0, 9.0, 9.0]  # chien: the only source word outside the vocab
    assert os.path.getsize(out + ".enc.missing.txt") == 0


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("kind", ["GloVe", "word2vec"])
def test_header_detection(tmp_path, vocab_file, capsys, header, kind):
    text = VEC if header else VEC.split("\n", 1)[1]
    table, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", text), "-type", kind)
    assert table[4].tolist() == [1.0, 0.0, 0.0] and table[1].tolist() == pytest.approx([2.0, 0.0, -1.0])
    report = capsys.readouterr().out
    assert ("header: 6 words, dimension 3" in report) == header
    assert ("no 'COUNT DIM' header line" in report) == (kind == "word2vec" and not header)


def test_malformed_lines_are_skipped_and_reported(tmp_path, vocab_file, capsys):
    text = VEC.replace("6 3\n", "9 3\n") + "owl 1.0 2.0\nemu 1.0 abc 2.0\nbat 1 2 3 4\n"
    table, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", text))
    assert table[1].tolist() == pytest.approx([2.0, 0.0, -1.0])  # bad lines are not averaged
    report = capsys.readouterr().out
    assert "malformed lines skipped: 3" in report
    assert "line 8: expected 3 values after the word, found 2" in report
    assert "line 9: a value is not a number" in report
    assert "line 10: expected 3 values after the word, found 4" in report


def test_reader_edge_cases(tmp_path):
    text = (
        "a 1 2\n"
        "a 5 5\n"  # duplicate: first vector kept, not averaged
        "\xa0 3 4\n"  # a non-breaking-space word is a word
        "  7 8\n"  # the word is a space: the line parses, an empty word
        "nan 1 nan\n"
        "b 1 inf\n"
        "c 0.5\t0.25  \r\n"  # other whitespace between values: read (slow path)
    ).encode() + b"\xff\xfe 1 2\n"
    res = read_embeddings(write(tmp_path / "x.txt", text), {"a": 0, "c": 1, "\xa0": 2})
    assert res.dim == 2 and res.header is None
    assert res.vectors.tolist() == [[1, 2], [0.5, 0.25], [3, 4]] and res.found.all()
    assert res.n_duplicates == 1 and res.duplicate_examples == [(2, "a")]
    assert res.n_malformed == 3
    assert [n for n, _ in res.malformed_examples] == [5, 6, 8]
    assert "not valid UTF-8" in res.malformed_examples[2][1]
    assert res.other_count == 1 and res.other_sum.tolist() == [7, 8]


def test_inconsistent_dimension(tmp_path, vocab_file, capsys):
    text = "4 3\nthe 1 2 3 4\ncat 1 2 3 4\ndog 1 2 3 4\nyak 1 2 3\n"
    with pytest.raises(SystemExit) as exc:
        run(tmp_path, vocab_file, write(tmp_path / "e.vec", text))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "e.vec: inconsistent dimension: the header says 3" in err and "3 lines have 4 values" in err
    assert not (tmp_path / "emb.dec.pt").exists()


def test_no_vocabulary_word_in_file(tmp_path, vocab_file, capsys):
    emb = write(tmp_path / "e.vec", "</s> 1 2 3\nzebra 4 5 6\n")
    with pytest.raises(SystemExit) as exc:
        run(tmp_path, vocab_file, emb, "-emb_file_enc", write(tmp_path / "s.vec", "le 1 2 3\n"))
    assert exc.value.code == 2
    assert "e.vec: none of the 4 target vocabulary words has a vector" in capsys.readouterr().err
    assert not [name for name in os.listdir(tmp_path) if name.startswith(("emb", ".tmp"))]  # nothing written


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing_emb", "nope.vec: no such file"),
        ("not_vocab", "not a vocabulary file"),
        ("text_vocab", "not a vocabulary file"),
        ("empty_emb", "empty file"),
        ("no_vectors", "no valid vector in the file"),
        ("no_out_dir", "does not exist"),
    ],
)
def test_user_errors(tmp_path, vocab_file, capsys, setup, message):
    emb, vocab, out = write(tmp_path / "e.vec", VEC), vocab_file, str(tmp_path / "emb")
    if setup == "missing_emb":
        emb = str(tmp_path / "nope.vec")
    elif setup == "not_vocab":
        torch.save({"weights": torch.zeros(2)}, tmp_path / "x.pt")
        vocab = str(tmp_path / "x.pt")
    elif setup == "text_vocab":
        vocab = write(tmp_path / "v.txt", "the\ncat\n")
    elif setup == "empty_emb":
        emb = write(tmp_path / "e.vec", "")
    elif setup == "no_vectors":
        emb = write(tmp_path / "e.vec", "2 3\nthe 1 2\ncat x y z\n")
    elif setup == "no_out_dir":
        out = str(tmp_path / "no" / "emb")
    with pytest.raises(SystemExit) as exc:
        main(["-emb_file_dec", emb, "-dict_file", vocab, "-output_file", out])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_read_embedding_words(tmp_path):
    path = write(tmp_path / "e.vec.gz", VEC + "caf\xe9 1 2 3\n", gz=True)
    assert read_embedding_words(path) == {"</s>", "the", "cat", "dog", "zebra", "yak", "caf\xe9"}
    assert read_embedding_words(write(tmp_path / "g.txt", "x 1\ny 2\n")) == {"x", "y"}


def test_chunk_boundaries(tmp_path, vocab_file):
    rng = np.random.default_rng(0)
    values = np.array([[float(f"{v:.5f}") for v in row] for row in rng.normal(0, 1, (60, 5))])
    lines = [f"w{i}\xe9 " + " ".join(f"{v:.5f}" for v in row) + " " for i, row in enumerate(values)]
    path = write(tmp_path / "big.vec", "60 5\n" + "\n".join(lines) + "\n")
    wanted = {f"w{i}\xe9": i // 3 for i in range(0, 60, 3)}  # ~45-byte lines: many chunks per line
    ref = read_embeddings(path, wanted)
    assert ref.vectors.tolist() == values[::3].astype(np.float32).tolist()
    for chunk in (1, 7, 50, 333):
        res = read_embeddings(path, wanted, chunk_bytes=chunk)
        assert np.array_equal(res.vectors, ref.vectors) and res.n_vectors == 60 and res.n_malformed == 0
        assert np.allclose(res.other_sum, values.sum(0) - values[::3].sum(0))
    # The same through the script's (hidden) chunk size flag.
    small, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", VEC), "-chunk_bytes", "5", out="s")
    default, _ = run(tmp_path, vocab_file, write(tmp_path / "e.vec", VEC), out="d")
    assert torch.equal(small, default)


@pytest.mark.parametrize(
    "fmt",
    ["{:.5f}", "{:.4f}", "{:.1f}", "{:.6f}", "{:.7f}", "{:g}", "{:.3e}", "{:.9g}", "{:.0f}"],
)
def test_parse_values_equals_float(fmt):
    rng = np.random.default_rng(1)
    values = rng.normal(0, 4, (40, 16)) * rng.choice([0.001, 1, 30], (40, 1))
    values[0, :3] = [0.0, -0.0, 99.5]
    rests = [" ".join(fmt.format(v) for v in row).encode() for row in values]
    parsed, bad = parse_values(rests, 16)
    expected = np.array([[float(t) for t in r.split()] for r in rests])
    assert bad == [] and np.array_equal(parsed, expected)
    assert np.array_equal(np.signbit(parsed), np.signbit(expected))


def test_gzip_variants(tmp_path):
    data = VEC.encode()
    two_members = gzip.compress(data[:40]) + gzip.compress(data[40:]) + b"\0" * 8
    res = read_embeddings(write(tmp_path / "m.vec.gz", two_members), {"yak": 0}, chunk_bytes=16)
    assert res.n_vectors == 6 and res.vectors.tolist() == [[0, 0, -2]]
    # gzip data is recognised by its first bytes, whatever the file is called
    assert read_embeddings(write(tmp_path / "named.vec", gzip.compress(data)), {}).n_vectors == 6
    truncated = gzip.compress(data)[:-12]
    with pytest.raises(UserError, match="t.vec.gz: cannot read"):
        read_embeddings(write(tmp_path / "t.vec.gz", truncated), {})
    corrupt = bytearray(gzip.compress(data * 50))
    corrupt[len(corrupt) // 2] ^= 0xFF
    with pytest.raises(UserError, match="c.vec.gz: cannot read"):
        read_embeddings(write(tmp_path / "c.vec.gz", bytes(corrupt)), {})


def test_byte_order_mark_and_no_final_newline(tmp_path):
    text = b"\xef\xbb\xbf2 2\nthe 1.5 2\ncat -3 4.25"
    res = read_embeddings(write(tmp_path / "b.vec", text), {"the": 0, "cat": 1}, chunk_bytes=2)
    assert res.header == (2, 2) and res.vectors.tolist() == [[1.5, 2], [-3, 4.25]]
    assert read_embedding_words(write(tmp_path / "b.vec", text)) == {"the", "cat"}


def reference_read(data, wanted, n_rows):
    """The reading rules of the module docstring, line by line in plain Python."""
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    first = lines[0].split()
    header = len(first) == 2 and all(t.isdigit() for t in first)
    dim = int(first[1]) if header else len(lines[0].partition(b" ")[2].split())
    vectors, seen, others, bad, dups = np.zeros((n_rows, dim), np.float32), set(), [], [], 0
    for lineno, line in enumerate(lines[header:], 1 + header):
        word, _, rest = line.partition(b" ")
        try:
            values = [float(t) for t in rest.split()]
            text = word.decode("utf-8") if word not in seen else None
        except (ValueError, UnicodeDecodeError):
            values = []
        if len(values) != dim or not np.isfinite(values).all():
            bad.append(lineno)
        elif text is None:
            dups += 1
        else:
            seen.add(word)
            if text in wanted:
                vectors[wanted[text]] = values
            else:
                others.append(values)
    return vectors, np.sum(others, axis=0), len(others), bad, dups


def test_reader_matches_reference_on_random_files(tmp_path):
    """Random small files in every number format we meet, with damaged lines, CRLF, odd words,
    gzip, and chunk sizes that cut lines anywhere."""
    rnd, rng = random.Random(0), np.random.default_rng(0)
    for case in range(60):
        dim, n = rnd.randint(1, 6), rnd.randint(2, 25)
        fmt = rnd.choice(["%.5f", "%.4f", "%g", "%.2f", "%.6f"])
        words = [
            rnd.choice(["a", "b", "\xe9", "x.y", "1.5", "</s>", "\xa0", f"w{rnd.randint(0, 30)}"]) for _ in range(n)
        ]
        lines = [f"{n} {dim}"] if case % 2 else []
        for word in words:
            line = word + " " + " ".join(fmt % v for v in rng.normal(0, rnd.choice([0.1, 5, 50]), dim))
            line += rnd.choice(["", " ", "  ", "\r", " \r"])
            if rnd.random() < 0.15:  # damage: a stray character somewhere
                i = rnd.randrange(len(line) + 1)
                line = line[:i] + rnd.choice([" ", "x", ".", "-", "\t", "5", "nan"]) + line[i:]
            lines.append(line)
        data = "\n".join(lines).encode() + (b"\n" if case % 3 else b"")
        if case % 7 == 0:
            data = data.replace("\xe9".encode(), b"\xe9")  # invalid UTF-8 words
        wanted = {w: i for i, w in enumerate(sorted(set(words))[:4])}
        vectors, other_sum, other_count, bad, dups = reference_read(data, wanted, 4)
        path = write(tmp_path / f"r{case}.vec{'.gz' if case % 4 == 0 else ''}", data, gz=case % 4 == 0)
        try:
            res = read_embeddings(path, wanted, 4, chunk_bytes=rnd.choice([1, 5, 64, 1 << 18]))
        except UserError:  # the reference agrees: no vector, or mostly the wrong count
            assert other_count + int(vectors.any(axis=1).sum()) == 0 or len(bad) * 2 > len(lines)
            continue
        assert np.array_equal(res.vectors, vectors), data
        assert np.allclose(res.other_sum, other_sum) and res.other_count == other_count, data
        assert (res.n_malformed, [line for line, _ in res.malformed_examples]) == (len(bad), bad[:5]), data
        assert res.n_duplicates == dups, data
