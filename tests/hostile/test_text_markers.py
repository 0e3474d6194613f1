"""Text that looks like something else (issue 77.22, 77.23, 77.25): words spelled as the sentence markers,
invisible format characters, and output lines that Moses's detokenizer takes for XML tags."""

import pytest
import torch

from onmt_cont.bin import preprocess
from onmt_cont.inputters.vocab import Vocab, load_vocabs
from onmt_cont.text.pipeline import TextPipeline
from onmt_cont.utils.io import drop_invisible, read_lines

PAIRS = [
    ("un chien court .", "a dog runs ."),
    ("un homme lit .", "a man reads ."),
    ("une femme chante .", "a woman sings ."),
    ("deux chiens jouent .", "two dogs play ."),
] * 5


def _corpus(tmp_path, src_lines, tgt_lines):
    (tmp_path / "s.fr").write_text("\n".join(src_lines) + "\n", encoding="utf-8")
    (tmp_path / "s.en").write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
    files = [
        "-train_src",
        str(tmp_path / "s.fr"),
        "-train_tgt",
        str(tmp_path / "s.en"),
        "-valid_src",
        str(tmp_path / "s.fr"),
        "-valid_tgt",
        str(tmp_path / "s.en"),
        "-save_data",
        str(tmp_path / "d"),
    ]
    return files


def test_words_spelled_as_markers_are_unk_not_markers(tmp_path, capsys):
    """77.22: a target "a </s> man" taught the model to end mid-sentence: </s>, <s> and <blank> in a corpus
    became the end, start and padding ids."""
    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "a", "man"])
    assert vocab.encode(["a", "</s>", "<s>", "<blank>", "<unk>", "man"]) == [4, 1, 1, 1, 1, 5]
    tgt = [t for _, t in PAIRS]
    tgt[6] = "a </s> man <s> runs <blank> ."
    preprocess.main(_corpus(tmp_path, [s for s, _ in PAIRS], tgt))
    err = capsys.readouterr().err
    assert "s.en: 1 <blank>, 1 <s>, 1 </s> in the text (first at line 7)" in err and "read as <unk>" in err
    shard = torch.load(tmp_path / "d.train.0.pt", weights_only=True)
    _, tgt_vocab, _ = load_vocabs(str(tmp_path / "d.vocab.pt"))
    assert tgt_vocab.itos[:4] == ["<blank>", "<unk>", "<s>", "</s>"] and len(set(tgt_vocab.itos)) == len(tgt_vocab)
    ids = shard["tgt"].tolist()  # the targets' words, one after another (the markers are added when batching)
    assert ids.count(0) + ids.count(2) + ids.count(3) == 0 and ids.count(1) == 3
    assert tgt_vocab.encode("a </s> man".split()) == [tgt_vocab.index("a"), 1, tgt_vocab.index("man")]


@pytest.mark.parametrize("mark", ["\u200b", "\ufeff", "\u202e", "\u00ad", "\u2060", "\u200e"])
def test_invisible_format_characters_make_no_new_words(tmp_path, mark):
    """77.23: a BOM past line 1, U+200B or U+202E stuck to its word and made an invisible new word, in
    preprocess.py and in translate.py."""
    src = [s for s, _ in PAIRS]
    src[3] = src[3].replace("chiens", f"chiens{mark}").replace("deux", f"{mark}deux")
    preprocess.main(_corpus(tmp_path, src, [t for _, t in PAIRS]))
    src_vocab, _, _ = load_vocabs(str(tmp_path / "d.vocab.pt"))
    assert not [w for w in src_vocab.itos if mark in w]
    assert set(src_vocab.itos) >= {"deux", "chiens"}
    with TextPipeline() as text:
        assert text.encode(f"un{mark}chien") == ("un chien" if mark == "\u200b" else "unchien")
    (tmp_path / "bom.txt").write_bytes("\ufeffun\n\ufeffdeux\u200btrois\n".encode())
    assert [line for _, line in read_lines(str(tmp_path / "bom.txt"))] == ["un", "deux trois"]
    assert drop_invisible("a\u200cb \u200d") == "a\u200cb \u200d"  # ZWNJ and ZWJ are parts of words: kept


def test_an_output_line_that_looks_like_a_tag_is_detokenized():
    """77.25: "<unk> , a man runs . <unk>" was left tokenized: Moses's detokenizer took it for an XML tag."""
    with TextPipeline(None, "en") as text:
        assert text.decode("<unk> , a man runs . <unk>") == "<unk>, a man runs. <unk>"
        assert text.decode("<unk>") == "<unk>"
        assert text.decode("a man runs .") == "A man runs."
        assert text.decode("<unk> runs .") == "<unk> runs."
