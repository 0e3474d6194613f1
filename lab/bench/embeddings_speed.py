"""Speed of the pretrained-vector reader and of embeddings_to_torch.py.

Writes a synthetic fastText-style file (``COUNT DIM`` header, ``</s>`` second, 300 values
with 5 decimals per word, like the real ``.vec`` files) as plain text and as ``.gz`` into a
temporary folder, then times ``read_embeddings`` on both (all lines parsed) and the whole
``embeddings_to_torch`` main with a vocabulary of ~50K of the file's words.

    python lab/bench/embeddings_speed.py            # 200,000 lines
    python lab/bench/embeddings_speed.py -lines 50000 -dim 100
"""

import argparse
import contextlib
import gzip
import io
import os
import sys
import tempfile
import time

import numpy as np

from onmt_cont.bin.embeddings_to_torch import main as embeddings_to_torch
from onmt_cont.constants import SPECIALS
from onmt_cont.inputters.embeddings import read_embeddings
from onmt_cont.inputters.vocab import Vocab, save_vocabs

LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)


def make_words(n, rng):
    """``n`` distinct words: random letters plus a base-36 serial; every 97th is non-ASCII."""
    lengths = rng.integers(2, 9, n)
    letters = LETTERS[rng.integers(0, 26, int(lengths.sum()))].tobytes().decode()
    words, pos = [], 0
    for i, length in enumerate(lengths):
        word = letters[pos : pos + length] + np.base_repr(i, 36).lower()
        pos += length
        words.append(word + "é" if i % 97 == 0 else word)
    words[1] = "</s>"
    return words


def format_rows(values):
    """``[n, dim]`` floats (|v| < 10) -> lines of ``%.5f`` text, vectorised."""
    n, dim = values.shape
    k = np.rint(np.abs(values) * 1e5).astype(np.int64).clip(0, 999_999)
    chars = np.empty((n, dim, 9), np.uint8)
    chars[..., 0] = np.where(values < 0, ord("-"), 0)  # 0 = no sign, removed below
    chars[..., 1] = 48 + k // 100_000
    chars[..., 2] = ord(".")
    for j in range(5):
        chars[..., 3 + j] = 48 + (k // 10 ** (4 - j)) % 10
    chars[..., 8] = ord(" ")
    chars[..., -1, 8] = ord("\n")
    flat = chars.reshape(n, -1)
    keep = flat != 0
    row_len = keep.sum(1)
    data = flat[keep].tobytes()
    return np.split(np.frombuffer(data, np.uint8), np.cumsum(row_len)[:-1])


def write_vec(path, words, dim, rng, batch=5000):
    opener = gzip.open if path.endswith(".gz") else open
    kwargs = {"compresslevel": 1} if path.endswith(".gz") else {}
    with opener(path, "wb", **kwargs) as f:
        f.write(f"{len(words)} {dim}\n".encode())
        for start in range(0, len(words), batch):
            chunk = words[start : start + batch]
            rows = format_rows(rng.normal(0.0, 0.15, (len(chunk), dim)))
            f.write(b"".join(w.encode() + b" " + r.tobytes() for w, r in zip(chunk, rows, strict=True)))


def time_reader(path, wanted, n_lines):
    result = read_embeddings(path, wanted)
    assert result.n_vectors == n_lines and result.n_malformed == 0, (result.n_vectors, result.n_malformed)
    rate = n_lines / result.seconds
    print(f"  read_embeddings {os.path.basename(path):12s} {result.seconds:6.2f} s  {rate:10,.0f} vectors/s")
    return result.seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-lines", type=int, default=200_000, help="number of words in the synthetic file")
    parser.add_argument("-dim", type=int, default=300, help="vector dimension")
    parser.add_argument("-vocab", type=int, default=50_000, help="vocabulary size for the embeddings_to_torch run")
    opt = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"machine: {os.cpu_count()} CPUs; numpy {np.__version__}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        words = make_words(opt.lines, rng)
        plain, gz = os.path.join(tmp, "synth.vec"), os.path.join(tmp, "synth.vec.gz")
        start = time.perf_counter()
        write_vec(plain, words, opt.dim, np.random.default_rng(1))
        write_vec(gz, words, opt.dim, np.random.default_rng(1))
        print(
            f"wrote {opt.lines:,} x {opt.dim} vectors: {os.path.getsize(plain) / 1e6:,.0f} MB plain, "
            f"{os.path.getsize(gz) / 1e6:,.0f} MB gz, in {time.perf_counter() - start:.1f} s"
        )
        n_vocab = min(opt.vocab, opt.lines)
        chosen = [words[i] for i in rng.choice(opt.lines, n_vocab, replace=False) if words[i] not in SPECIALS]
        wanted = {w: i for i, w in enumerate(chosen)}
        time_reader(plain, wanted, opt.lines)
        time_reader(gz, wanted, opt.lines)

        missing = [f"zzmissing{i}" for i in range(n_vocab // 100)]
        tokens = list(SPECIALS) + chosen + missing
        counts = [0] * len(SPECIALS) + [int(c) for c in rng.zipf(1.3, len(tokens) - len(SPECIALS)).clip(1, 10**6)]
        vocab = Vocab(tokens, counts, total_tokens=int(sum(counts) * 1.05))
        prefix = os.path.join(tmp, "data")
        save_vocabs(prefix, vocab, vocab, lower=False)
        out = os.path.join(tmp, "emb")
        start = time.perf_counter()
        report = io.StringIO()
        with contextlib.redirect_stdout(report):
            embeddings_to_torch(["-emb_file_dec", plain, "-dict_file", prefix + ".vocab.pt", "-output_file", out])
        seconds = time.perf_counter() - start
        print(
            f"  embeddings_to_torch (vocab {len(tokens):,}, plain file) {seconds:6.2f} s  "
            f"{opt.lines / seconds:10,.0f} vectors/s end to end"
        )
        print("  its report:\n    " + report.getvalue().strip().replace("\n", "\n    "))


if __name__ == "__main__":
    main()
