"""Subword pieces: subword-nmt BPE codes and SentencePiece models, read with errors that name the
flag and the file, and the checks that a model fits a vocabulary or a corpus."""

import os

from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import read_lines


def read_bpe_codes(path):
    """A subword-nmt codes file (``subword-nmt learn-bpe``) -> an object with
    ``process_line(text) -> text``: the pieces, joined by ``@@ `` as translate.py expects."""
    import contextlib
    import io

    from subword_nmt.apply_bpe import BPE  # only when pieces are asked for

    said = io.StringIO()  # subword-nmt prints its complaint on stderr, then calls sys.exit(1)
    try:
        with (
            io.StringIO(path.text) if isinstance(path, CodesText) else open(path, encoding="utf-8") as f,
            contextlib.redirect_stderr(said),
        ):
            return BPE(f)
    except OSError as exc:
        raise UserError(f"{path}: cannot read subword codes ({exc.strerror})") from None
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a subword-nmt codes file ({exc})") from None
    except SystemExit:  # a bad line: a library must not end the process (a server, the API's caller)
        why = " ".join(said.getvalue().split()).removeprefix("Error: ") or "rejected by subword-nmt"
        raise UserError(f"{path}: not a subword-nmt codes file ({why})") from None


class SpmModel:
    """A SentencePiece model given as its bytes (a checkpoint's record), where a model file is expected."""

    def __init__(self, data, name="the checkpoint's SentencePiece model"):
        self.data, self.name = data, name

    def __str__(self):
        return self.name


def read_spm(model, flag="-src_spm"):
    """A SentencePiece model (a path, or :class:`SpmModel`) -> a loaded SentencePieceProcessor; a file
    it cannot load is a UserError naming ``flag``."""
    import sentencepiece  # only when pieces are asked for

    sp = sentencepiece.SentencePieceProcessor()
    try:
        if isinstance(model, SpmModel):
            sp.LoadFromSerializedProto(model.data)
        else:
            if os.path.isdir(model):
                raise UserError(
                    f"{flag} {model}: is a folder; give the SentencePiece model file in it "
                    "(NAME.model, written by spm_train)"
                )
            if not os.path.isfile(model):
                raise UserError(f"{flag} {model}: no such file")
            sp.Load(model)
    except (RuntimeError, OSError) as exc:
        raise UserError(f"{flag} {model}: not a SentencePiece model ({str(exc).splitlines()[0][:120]})") from None
    return sp


SPM_FIT = 0.9  # at least this share of a model's words (or a corpus's lines) must be the SentencePiece model's own


def _spm_words(vocab):
    return [w for w in vocab.itos if w not in ("<blank>", "<unk>", "<s>", "</s>")]


def check_spm_fits(sp, vocab, flag, name, side):
    """UserError unless most of ``vocab``'s words are pieces of the SentencePiece model ``sp`` (issue 77.14): a
    model trained on words, or on another model's pieces, would be fed unseen pieces or have its words glued."""
    words = _spm_words(vocab)
    known = sum(sp.piece_to_id(w) != sp.unk_id() for w in words)
    share = known / max(len(words), 1)
    if words and share < SPM_FIT:
        marked = sum(w.startswith("\u2581") for w in words) / len(words)
        what = (
            "words, not SentencePiece pieces (none starts with \u2581)"
            if marked < 0.01
            else "the pieces of another SentencePiece model"
        )
        raise UserError(
            f"{flag} {name}: only {share:.0%} of the model's {side} vocabulary are pieces of it: the model "
            f"was trained on {what}; give the SentencePiece model its data was cut with, or leave "
            f"{flag} out"
        )


def check_cut_with(sp, path, flag, lower, lines=200):
    """UserError unless ``path`` (a corpus of pieces) reads as ``sp`` cuts it: its first ``lines`` lines, joined
    and cut again, give the same pieces (preprocess.py records ``sp`` as the model the data was cut with)."""
    checked = same = 0
    first_bad = None
    for lineno, line in read_lines(path):
        pieces = line.split()
        if not pieces:
            continue
        text = "".join(pieces).replace("\u2581", " ").strip()
        again = sp.EncodeAsPieces(text)
        ok = (again == pieces) or (lower and [p.lower() for p in again] == [p.lower() for p in pieces])
        same += ok
        checked += 1
        if not ok and first_bad is None:
            first_bad = lineno
        if checked == lines:
            break
    if checked and same / checked < SPM_FIT:
        raise UserError(
            f"{flag}: {path} was not cut with it: {checked - same} of its first {checked} lines cut "
            f"again give other pieces (first: line {first_bad}); give the SentencePiece model the data "
            "was cut with"
        )


class CodesText:
    """BPE codes given as their text (a checkpoint's record), where a codes file's path is expected."""

    def __init__(self, text, name="the checkpoint's codes"):
        self.text, self.name = text, name

    def __str__(self):
        return self.name
