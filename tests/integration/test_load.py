"""Memory bounded by the chunk or shard, not the file: translate.py streams its input and output
(and stays atomic), BLEU accumulates sacreBLEU's statistics, preprocess.py's peak memory does not
grow with the corpus."""

import os
import random
import re
import tracemalloc
from pathlib import Path

import pytest
import sacrebleu

from onmt_cont.bin import preprocess, train, translate
from onmt_cont.evaluate import CorpusBleu, detokenize
from onmt_cont.translate import files
from onmt_cont.translate.translator import Translator
from onmt_cont.utils.errors import UserError
from tests.helpers import ROOT

DATA = ROOT / "data"


def write(path, lines):
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def leftovers(directory):
    return sorted(p for p in os.listdir(directory) if p.startswith(".tmp-"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A ce model trained 5 steps on data/ (its outputs are varied enough to tell lines apart)."""
    d = tmp_path_factory.mktemp("load")
    prefix = str(d / "data")
    preprocess.main(
        [
            "-train_src",
            str(DATA / "train.fr"),
            "-train_tgt",
            str(DATA / "train.en"),
            "-valid_src",
            str(DATA / "valid.fr"),
            "-valid_tgt",
            str(DATA / "valid.en"),
            "-save_data",
            prefix,
        ]
    )
    train.main(
        [
            "-data",
            prefix,
            "-save_model",
            str(d / "ce"),
            "-loss",
            "ce",
            "-train_steps",
            "5",
            "-rnn_size",
            "32",
            "-word_vec_size",
            "16",
            "-batch_size",
            "32",
            "-seed",
            "1",
            "-report_every",
            "5",
        ]
    )
    return str(d / "ce_last.pt")


SRC = [line.rstrip("\n") for line in open(DATA / "test.fr", encoding="utf-8")][:8]
SRC[3] = ""  # an empty line stays an empty line, in place
REF = [line.rstrip("\n") for line in open(DATA / "test.en", encoding="utf-8")][:8]


def run(capsys, model, src, out, *extra):
    translate.main(["-model", model, "-src", src, "-output", str(out), "-max_length", "6", *map(str, extra)])
    return out.read_text(encoding="utf-8"), capsys.readouterr().err


def test_translate_reads_and_writes_chunk_by_chunk(model, capsys, tmp_path, monkeypatch):
    src, ref = write(tmp_path / "src.txt", SRC), write(tmp_path / "ref.txt", REF)
    whole, whole_log = run(capsys, model, src, tmp_path / "whole.txt", "-tgt", ref, "-verbose")

    read = {"lines": 0}
    real_read_lines = files.read_lines

    def counting_read_lines(path):
        for item in real_read_lines(path):
            if path == src:
                read["lines"] += 1
            yield item

    calls = []
    real_translate_lines = Translator.translate_lines

    def spying_translate_lines(self, lines, *args, **kwargs):
        (tmp,) = leftovers(tmp_path)  # the temporary output beside -output holds the chunks before this one
        calls.append((len(lines), read["lines"], (tmp_path / tmp).read_text(encoding="utf-8").count("\n")))
        return real_translate_lines(self, lines, *args, **kwargs)

    monkeypatch.setattr(files, "read_lines", counting_read_lines)
    monkeypatch.setattr(Translator, "translate_lines", spying_translate_lines)
    chunked, chunked_log = run(capsys, model, src, tmp_path / "chunked.txt", "-tgt", ref, "-verbose", "-chunk_size", 3)
    # chunk k is translated when only its lines have been read, after the k-1 before it were written
    assert calls == [(3, 3, 0), (3, 6, 3), (2, 8, 6)]
    assert chunked == whole and len(whole.split("\n")) == len(SRC) + 1 and whole.split("\n")[3] == ""
    timing = re.compile(r"in [0-9.]+s \([0-9.]+ sent/s\)")  # the one line that may differ
    assert timing.sub("", chunked_log.replace("chunked.txt", "whole.txt")) == timing.sub("", whole_log)
    assert "SENT 8: " + SRC[7] in chunked_log and "sacreBLEU (detokenized):" in chunked_log
    assert leftovers(tmp_path) == []


def test_corpus_bleu_in_pieces_equals_sacrebleu_on_the_whole(tmp_path):
    hyps = [line.rstrip("\n") for line in open(DATA / "valid.en", encoding="utf-8")][:60]
    refs = [line.rstrip("\n") for line in open(DATA / "test.en", encoding="utf-8")][:60]
    refs[:30] = hyps[:30]  # a corpus with a middling score
    with CorpusBleu("en") as bleu:
        for i in range(0, 60, 7):
            bleu.add(hyps[i : i + 7], refs[i : i + 7])
        lines, score = bleu.report()
    want = sacrebleu.BLEU().corpus_score(detokenize(hyps, "en"), [detokenize(refs, "en")])
    want_tok = sacrebleu.BLEU(tokenize="none", force=True).corpus_score(hyps, [refs])
    assert 20 < want.score < 90 and score == pytest.approx(want.score, abs=1e-9)
    assert lines[1] == f"  {want}" and lines[2].startswith(f"tokenized BLEU: {want_tok.score:.2f} ")


@pytest.mark.parametrize("shorter", ["src", "tgt"])
def test_read_chunks_names_the_shorter_file(tmp_path, shorter):
    a = write(tmp_path / "a.txt", ["x"] * 3)
    b = write(tmp_path / "b.txt", ["y"] * 5)
    src, tgt = (a, b) if shorter == "src" else (b, a)
    chunks = files.read_chunks(src, tgt, 2)
    assert next(chunks) == ((["x"] * 2, ["y"] * 2) if shorter == "src" else (["y"] * 2, ["x"] * 2))
    with pytest.raises(UserError, match=rf"{a} ends after line 3 but {b} goes on"):
        list(chunks)


def test_bad_line_mid_file_leaves_no_output(model, capsys, tmp_path):
    """Chunks 1-2 are translated and written to the temporary file, then line 5 is not UTF-8."""
    src = tmp_path / "src.txt"
    src.write_bytes(b"un homme .\n" * 4 + b"\xff\xfe\n" + b"un chat .\n")
    out = tmp_path / "out.txt"
    with pytest.raises(SystemExit) as exc:
        translate.main(["-model", model, "-src", str(src), "-output", str(out), "-chunk_size", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{src}, line 5: invalid UTF-8" in err
    assert sorted(os.listdir(tmp_path)) == ["src.txt"]


def test_interrupt_in_a_later_chunk_leaves_the_old_output(model, tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    out.write_text("previous\n", encoding="utf-8")
    src = write(tmp_path / "src.txt", SRC)
    real = Translator.translate_batch
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_batch", interrupted)
    with pytest.raises(SystemExit) as exc:  # Ctrl-C: one line, no traceback, exit 130
        translate.main(["-model", model, "-src", src, "-output", str(out), "-chunk_size", "2", "-batch_size", "2"])
    assert exc.value.code == 130
    assert len(calls) == 3 and out.read_text(encoding="utf-8") == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "src.txt"]


def test_chunk_size_must_be_positive(model, capsys, tmp_path):
    src = write(tmp_path / "src.txt", SRC)
    with pytest.raises(SystemExit):
        translate.main(["-model", model, "-src", src, "-output", str(tmp_path / "o.txt"), "-chunk_size", "0"])
    assert "-chunk_size" in capsys.readouterr().err and sorted(os.listdir(tmp_path)) == ["src.txt"]


# -- preprocess.py -------------------------------------------------------------------------------


def synthetic_corpus(d, n, seed=0):
    """n pairs of 5-12 words drawn from 300 words a side: the counts saturate, only the corpus grows."""
    rng = random.Random(seed)
    src = [" ".join(f"s{rng.randrange(300)}" for _ in range(rng.randint(5, 12))) for _ in range(n)]
    tgt = [" ".join(f"t{rng.randrange(300)}" for _ in range(rng.randint(5, 12))) for _ in range(n)]
    return write(d / f"{n}.src", src), write(d / f"{n}.tgt", tgt)


def test_preprocess_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    """Python-level peak (tracemalloc) with shards of 500 pairs, on 1,500 and 6,000 pairs: holding
    the corpus would make the larger run's peak about 4x (it takes ~1 MB of lists per 1,000 pairs)."""
    valid = synthetic_corpus(tmp_path, 50, seed=1)
    peaks = []
    for n in (1500, 6000):
        src, tgt = synthetic_corpus(tmp_path, n)
        argv = [
            "-train_src",
            src,
            "-train_tgt",
            tgt,
            "-valid_src",
            valid[0],
            "-valid_tgt",
            valid[1],
            "-save_data",
            str(tmp_path / f"p{n}"),
            "-shard_size",
            "500",
        ]
        tracemalloc.start()
        try:
            preprocess.main(argv)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert os.path.exists(tmp_path / f"p{n}.train.{n // 500 - 1}.pt")
    assert peaks[1] < 1.3 * peaks[0], peaks
