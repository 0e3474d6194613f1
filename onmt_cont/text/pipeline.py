"""Raw text to the model's tokens and back, the whole way: :class:`TextPipeline` (see the package's
docstring)."""

import re
import threading

from mosestokenizer import MosesDetokenizer, MosesTokenizer

from onmt_cont.text.moses import DETOK_SENTINEL, started
from onmt_cont.text.subwords import check_spm_fits, read_bpe_codes, read_spm
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.io import drop_invisible


def capitalize_first(line):
    """The first letter in upper case: lowercased output becomes a sentence again. A first word
    that is a special token (``<unk>``, left by a run without -replace_unk) is left as it is."""
    if re.match(r"<[^<>\s]+>", line):
        return line
    for i, ch in enumerate(line):
        if ch.isalpha():
            return line[:i] + ch.upper() + line[i + 1 :]
    return line


class TextPipeline:
    """Raw source text -> model tokens (``encode``), model output -> running text (``decode``).

    ``src_lang``: Moses tokenizer language of the raw input (None: the input is tokenized
    already); ``lower``: lowercase what it tokenizes (the shared vectors and the recipes' models are
    lowercase);
    ``bpe_codes``: a subword-nmt codes file for the source side (None: whole words); ``src_spm``: a
    SentencePiece model instead, applied to the tokenized source; ``tgt_spm``: the target's, whose
    output pieces :meth:`join_pieces` joins;
    ``tgt_lang``: Moses detokenizer language of the output (None: keep the output tokenized);
    ``capitalize``: with ``tgt_lang``, upper-case each output's first letter.

    Moses runs as Perl processes, one line in and one line out: use it as a context manager, or call
    :meth:`close`. Each call holds a lock, so threads sharing one pipeline take turns at the pipes
    (two writers on one pipe read each other's answers, or wait for ever); a line break inside a
    sentence, which would split it in two on the pipe, is refused, and a carriage return is a space."""

    def __init__(
        self, src_lang=None, tgt_lang=None, bpe_codes=None, lower=True, capitalize=True, src_spm=None, tgt_spm=None
    ):
        self._lock = threading.Lock()
        self.lower, self.capitalize = lower, capitalize
        self._bpe = read_bpe_codes(bpe_codes) if bpe_codes else None
        self._src_spm = read_spm(src_spm, "-src_spm") if src_spm else None
        self._tgt_spm = read_spm(tgt_spm, "-tgt_spm") if tgt_spm else None
        self._spm_names = (str(src_spm), str(tgt_spm))
        self._tok = self._detok = None
        try:
            self._tok = started(MosesTokenizer, src_lang, "tokenizer", "a .", no_escape=True) if src_lang else None
            self._detok = started(MosesDetokenizer, tgt_lang, "detokenizer", ["a", "."]) if tgt_lang else None
        except BaseException:
            self.close()
            raise

    def encode(self, line):
        """One raw source line -> the tokenized (and, with codes, segmented) line the model reads."""
        if not isinstance(line, str):
            raise UserError(f"a sentence must be a string, got {type(line).__name__}: {line!r:.60}")
        if "\n" in line.strip():
            raise UserError(
                f"a sentence holds a line break ({line.strip()!r:.60}): give one sentence per string "
                "(split the text at its line breaks first)"
            )
        line = drop_invisible(line.replace("\r", " ")).strip()
        if not line:
            return ""
        with self._lock:
            if self._tok is not None:
                line = " ".join(self._tok(line))
                if self.lower:
                    line = line.lower()
            if self._bpe is not None:
                line = self._bpe.process_line(line)
            if self._src_spm is not None:
                line = " ".join(self._src_spm.EncodeAsPieces(line))
        return line

    @property
    def reads_raw_text(self):
        """Whether ``encode`` Moses-tokenizes its input (a source language is set)."""
        return self._tok is not None

    def check_fits(self, src_vocab, tgt_vocab):
        """The SentencePiece models against the model's vocabularies (:func:`check_spm_fits`)."""
        for sp, vocab, flag, name, side in (
            (self._src_spm, src_vocab, "-src_spm", self._spm_names[0], "source"),
            (self._tgt_spm, tgt_vocab, "-tgt_spm", self._spm_names[1], "target"),
        ):
            if sp is not None:
                check_spm_fits(sp, vocab, flag, name, side)

    @property
    def target_pieces(self):
        """Whether the model writes SentencePiece pieces that :meth:`join_pieces` turns into words."""
        return self._tgt_spm is not None

    def join_pieces(self, line):
        """Output pieces of a target SentencePiece model -> its words (tokens, before detokenization)."""
        if self._tgt_spm is None or not line.strip():
            return line
        return self._tgt_spm.DecodePieces(line.split())

    def decode(self, line):
        """One tokenized output line -> running text (unchanged without ``tgt_lang``)."""
        if self._detok is None or not line.strip():
            return line
        tokens = line.split()
        # Moses's detokenizer passes a line that starts with "<" and ends with ">" through untouched, taking it for
        # an XML tag ("<unk> , a man runs . <unk>", issue 77.25): a word after it makes it a sentence again
        tagged = line.strip().startswith("<") and line.strip().endswith(">")
        with self._lock:
            text = self._detok(tokens + [DETOK_SENTINEL] if tagged else tokens)
        if tagged:
            text = text.removesuffix(DETOK_SENTINEL).rstrip()
        return capitalize_first(text) if self.capitalize else text

    def close(self):
        with self._lock:
            for proc in (self._tok, self._detok):
                if proc is not None and not getattr(proc, "closed", False):
                    proc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
