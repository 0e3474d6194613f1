"""Open-vocabulary decoding (-tgt_emb_extend) on hand-set continuous checkpoints: a word outside
the training vocabulary is produced where its vector is the nearest, the training rows (and
</s>) are kept, untied models feed <unk>, and translate.py writes one line per input line."""

import pytest
import torch

from onmt_cont.bin import train, translate
from onmt_cont.constants import EOS_ID, SPECIALS, UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.checkpoint import save_checkpoint
from onmt_cont.models.embeddings import TargetEmbeddings
from onmt_cont.models.model import build_model
from onmt_cont.translate.open_vocab import read_extension
from onmt_cont.utils.errors import UserError
from tests.helpers import NEW_VEC, NEW_WORD, translator, write_vec
from tests.helpers import OV_DIM as DIM
from tests.helpers import OV_TABLE as TRAIN_TABLE
from tests.helpers import OV_WORDS as TGT_WORDS
from tests.helpers import open_vocab_checkpoint as checkpoint


@pytest.fixture(autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture
def extension(tmp_path):
    # fastText's </s> vector differs from the training table's: the training row must stay.
    return write_vec(
        tmp_path / "ext.vec.gz",
        [
            ("</s>", [1] * DIM),
            ("dog", [0, 0, 0, 0, 0, 5, 0, 0]),
            (NEW_WORD, NEW_VEC.tolist()),
            ("cat", [0, 0, 0, 0, 0, 0, 1, 1]),
        ],
    )


@pytest.mark.parametrize("tie_emb", [True, False])
def test_new_word_is_produced_where_its_vector_is_nearest(tmp_path, extension, tie_emb):
    model = checkpoint(tmp_path, tie_emb, NEW_VEC / 3)
    closed = translator(model, max_length=3)
    assert NEW_WORD not in closed.translate_lines(["un chien"])[0]
    opened = translator(model, max_length=3, tgt_emb_extend=extension)
    assert opened.tgt_vocab.itos == list(SPECIALS) + TGT_WORDS + ["cat", NEW_WORD]  # new words sorted
    assert opened.translate_lines(["un chien"]) == [f"{NEW_WORD} {NEW_WORD} {NEW_WORD}"]
    table = opened.model.generator.table
    torch.testing.assert_close(table[: len(TRAIN_TABLE)], TRAIN_TABLE)  # training rows, </s> included
    torch.testing.assert_close(table[-1], NEW_VEC / 3)  # made unit length
    if tie_emb:  # the decoder consumes the new word's own vector
        torch.testing.assert_close(opened.model.decoder.embeddings.table.weight, table)


def test_training_words_decode_as_before(tmp_path, extension):
    model = checkpoint(tmp_path, True, TRAIN_TABLE[EOS_ID + 2])  # "dog"
    for kwargs in ({}, {"tgt_emb_extend": extension}):
        assert translator(model, max_length=2, **kwargs).translate_lines(["chien"]) == ["dog dog"]


def test_untied_decoder_reads_new_words_as_unk():
    emb = TargetEmbeddings(5, 3)
    emb.extend(torch.eye(3)[:2])
    ids = torch.tensor([4, 5, 6])
    torch.testing.assert_close(emb(ids), emb.table(torch.tensor([4, UNK_ID, UNK_ID])))


def test_pt_table_with_its_vocabulary(tmp_path):
    (tmp_path / "v.txt").write_text("a\nzebra\n", encoding="utf-8")
    rows = torch.randn(len(SPECIALS) + 2, DIM)
    torch.save(rows, tmp_path / "t.pt")
    words, vectors = read_extension(str(tmp_path / "t.pt"), str(tmp_path / "v.txt"))
    assert words == ["a", "zebra"]
    torch.testing.assert_close(vectors, rows[len(SPECIALS) :])
    with pytest.raises(UserError, match="-tgt_emb_extend_vocab"):
        read_extension(str(tmp_path / "t.pt"))
    (tmp_path / "v3.txt").write_text("a\nzebra\nokapi\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"expected a \[7, dim\] tensor"):
        read_extension(str(tmp_path / "t.pt"), str(tmp_path / "v3.txt"))


def test_cli_one_line_per_input_line(tmp_path, extension, capsys):
    model = checkpoint(tmp_path, True, NEW_VEC)
    src = tmp_path / "src.txt"
    src.write_text("un chien\n\nchien un un\nxyz\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    for beam in ("1", "3"):
        translate.main(
            [
                "-model",
                model,
                "-src",
                str(src),
                "-output",
                str(out),
                "-tgt_emb_extend",
                extension,
                "-beam_size",
                beam,
                "-max_length",
                "2",
            ]
        )
        assert "+ 2 new words" in capsys.readouterr().err
        lines = out.read_text(encoding="utf-8").split("\n")[:-1]
        assert len(lines) == 4 and lines[1] == ""
        assert all(NEW_WORD in line for i, line in enumerate(lines) if i != 1)


def test_softmax_model_is_refused(tmp_path, extension):
    opt = train.build_parser().parse_args(["-loss", "ce", "-rnn_size", "8", "-word_vec_size", "4"])
    vocab = Vocab(list(SPECIALS) + TGT_WORDS)
    path = str(tmp_path / "ce.pt")
    save_checkpoint(path, build_model(opt, len(vocab), len(vocab)), None, opt, vocab, vocab, {"step": 0})
    with pytest.raises(UserError, match="continuous-output model"):
        translator(path, tgt_emb_extend=extension)
