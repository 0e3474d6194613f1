"""Raw text to the model's tokens and back: Moses tokenization, lowercasing, source subword pieces,
detokenization.

The shared fastText vectors, the shipped sample and every recipe use Moses tokenization with no
escaping (aggressive hyphen splitting), then lowercase. A model trained on such text reads raw input
through :class:`TextPipeline` (``translate.py -src_lang fr``, :func:`onmt_cont.api.load`) and its
output is turned back into running text: Moses detokenization, and the first letter of each
sentence in upper case (the model's words are lowercase).

    with TextPipeline(src_lang="fr", tgt_lang="en", bpe_codes="codes.fr") as text:
        tokens = text.encode("Un chien court dans l'herbe.")   # "un chien court dans l' herbe ." in pieces
        text.decode("a dog runs through the grass .")          # "A dog runs through the grass."
"""

import hashlib
import os
import re
import threading
import warnings

import mosestokenizer
from mosestokenizer import MosesDetokenizer, MosesTokenizer

from onmt_cont.utils.errors import UserError, printable
from onmt_cont.utils.io import drop_invisible, read_lines


def _spm_entry(path, flag):
    """A SentencePiece model file -> its record entry (the model's bytes, their sha256, the name)."""
    read_spm(path, flag)  # a file SentencePiece cannot load is refused here, not at translation
    with open(path, "rb") as f:
        data = f.read()
    return {"model": data, "sha256": hashlib.sha256(data).hexdigest(), "file": os.path.basename(path)}


def text_record(src_lang=None, tgt_lang=None, bpe_codes=None, lower=True, src_spm=None, tgt_spm=None):
    """What raw text a model's data was made from, for its checkpoint (preprocess.py -src_lang,
    -tgt_lang, -src_bpe_codes): the Moses languages and settings, the lowercasing, and the source's
    subword-nmt codes themselves with their sha256. None when no language is given."""
    if not (src_lang or tgt_lang):
        for flag, given in (("-src_bpe_codes", bpe_codes), ("-src_spm", src_spm), ("-tgt_spm", tgt_spm)):
            if given:
                raise UserError(f"{flag} is recorded with the raw text's languages: give -src_lang (and -tgt_lang)")
        return None
    if bpe_codes and src_spm:
        raise UserError("-src_bpe_codes and -src_spm both cut the source into pieces: give one of them")
    record = {"src_lang": src_lang, "tgt_lang": tgt_lang, "lower": bool(lower),
              "moses": {"no_escape": True}, "src_bpe": None}
    if bpe_codes:
        read_bpe_codes(bpe_codes)  # a file subword-nmt cannot read is refused here, not at translation
        with open(bpe_codes, encoding="utf-8") as f:
            codes = f.read()
        record["src_bpe"] = {"codes": codes, "sha256": hashlib.sha256(codes.encode("utf-8")).hexdigest(),
                             "file": os.path.basename(bpe_codes)}
    record["src_spm"] = _spm_entry(src_spm, "-src_spm") if src_spm else None
    record["tgt_spm"] = _spm_entry(tgt_spm, "-tgt_spm") if tgt_spm else None
    return record


def check_text_record(record, where):
    """``record`` (a checkpoint's or an export's raw-text record) as preprocess.py writes it, else a UserError naming
    ``where``: a file edited or damaged after it was written must not reach Moses, subword-nmt or the terminal."""
    if record is None:
        return None

    def bad(what):
        raise UserError(f"{where}: its raw-text record is damaged ({what}): write it again (preprocess.py, "
                        "onmt_cont_convert)")

    if not isinstance(record, dict):
        bad(f"expected a mapping, got {type(record).__name__}")
    for key in ("src_lang", "tgt_lang"):
        value = record.get(key)
        if value is not None and not (isinstance(value, str) and re.fullmatch(r"[a-z]{2,3}", value)):
            bad(f"{key} is {printable(repr(value))[:60]}, not a language code")
    if not record.get("src_lang") and not record.get("tgt_lang"):
        bad("no language")
    if not isinstance(record.get("lower", True), bool) or not isinstance(record.get("moses", {}), dict):
        bad("lower must be true or false and moses a mapping")
    for key, content in (("src_bpe", str), ("src_spm", bytes), ("tgt_spm", bytes)):
        entry = record.get(key)
        if entry is None:
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("file"), str)
                and isinstance(entry.get("codes" if content is str else "model"), content)):
            bad(f"{key} is not an embedded {'codes file' if content is str else 'SentencePiece model'}")
    return record


def checked_spm(record, side, where):
    """The SentencePiece model (as :class:`SpmModel`) a text record holds for ``side`` ("src" or "tgt"),
    checked against its sha256; None where there is none."""
    entry = (record or {}).get(f"{side}_spm")
    if not entry:
        return None
    data = entry.get("model")
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise UserError(f"{where}: the SentencePiece model it carries does not match its checksum: the file is damaged")
    return SpmModel(data, f"{where}'s {entry.get('file')}")


def checked_codes(record, where):
    """The BPE codes a text record holds, checked against their sha256 (UserError naming ``where``)."""
    bpe = (record or {}).get("src_bpe")
    if not bpe:
        return None
    codes = bpe.get("codes")
    if not isinstance(codes, str) or hashlib.sha256(codes.encode("utf-8")).hexdigest() != bpe.get("sha256"):
        raise UserError(f"{where}: the BPE codes it carries do not match their checksum: the file is damaged")
    return codes


def describe_record(record):
    """One line saying what a text record makes translate.py do."""
    parts = [f"raw {record['src_lang']} text, Moses-tokenized" + (" and lowercased" if record.get("lower") else "")]
    if record.get("src_spm"):
        parts.append(f"cut into its SentencePiece pieces ({record['src_spm']['file']}, sha256 "
                     f"{record['src_spm']['sha256'][:12]})")
    if record.get("tgt_spm"):
        parts.append(f"output pieces joined with its target SentencePiece model ({record['tgt_spm']['file']})")
    if record.get("src_bpe"):
        parts.append(f"cut into its subword-nmt pieces ({record['src_bpe']['file']}, sha256 "
                     f"{record['src_bpe']['sha256'][:12]})")
    if record.get("tgt_lang"):
        parts.append(f"output detokenized as {record['tgt_lang']}")
    return printable("; ".join(parts))  # names read from the checkpoint: no escape sequence reaches the terminal


def read_bpe_codes(path):
    """A subword-nmt codes file (``subword-nmt learn-bpe``) -> an object with
    ``process_line(text) -> text``: the pieces, joined by ``@@ `` as translate.py expects."""
    import contextlib
    import io

    from subword_nmt.apply_bpe import BPE  # only when pieces are asked for

    said = io.StringIO()  # subword-nmt prints its complaint on stderr, then calls sys.exit(1)
    try:
        with (io.StringIO(path.text) if isinstance(path, CodesText) else open(path, encoding="utf-8")) as f, \
                contextlib.redirect_stderr(said):
            return BPE(f)
    except OSError as exc:
        raise UserError(f"{path}: cannot read subword codes ({exc.strerror})") from None
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a subword-nmt codes file ({exc})") from None
    except SystemExit:  # a bad line: a library must not end the process (a server, the API's caller)
        why = " ".join(said.getvalue().split()).removeprefix("Error: ") or "rejected by subword-nmt"
        raise UserError(f"{path}: not a subword-nmt codes file ({why})") from None


def moses_languages():
    """The languages the Moses scripts have rules for (their nonbreaking-prefix files); others get English rules."""
    folder = os.path.join(os.path.dirname(mosestokenizer.__file__), "nonbreaking_prefixes")
    try:
        return sorted(n.split(".", 1)[1] for n in os.listdir(folder) if n.startswith("nonbreaking_prefix."))
    except OSError:
        return []


# a few names users type for a code (-src_lang french): the code to suggest
DETOK_SENTINEL = "onmtcontsentinel"  # a word appended to an output line that Moses would take for an XML tag
LANGUAGE_NAMES = {"english": "en", "french": "fr", "francais": "fr", "german": "de", "deutsch": "de", "spanish": "es",
                  "italian": "it", "portuguese": "pt", "dutch": "nl", "russian": "ru", "czech": "cs", "finnish": "fi",
                  "polish": "pl", "romanian": "ro", "swedish": "sv", "greek": "el", "hungarian": "hu",
                  "catalan": "ca", "icelandic": "is", "latvian": "lv", "slovak": "sk", "slovenian": "sl",
                  "tamil": "ta"}


def check_language(lang, what):
    """A Moses language code: lowercase ISO 639-1 letters, else a UserError (FR, french: Moses would take them for an
    unknown language and use English rules without a word); a well-formed code Moses has no rules for: a warning."""
    if not re.fullmatch(r"[a-z]{2,3}", lang or ""):
        known = moses_languages()
        name = (lang or "").strip().lower()
        hint = name if name in known else LANGUAGE_NAMES.get(name)
        raise UserError(f"{what} {lang!r}: expected a lowercase ISO 639-1 code such as "
                        f"{hint or 'en'} (Moses has rules for {', '.join(known)})")
    if lang not in moses_languages():
        warnings.warn(f"{what} {lang}: the Moses scripts have no rules for '{lang}' and use English ones "
                      f"(they have rules for {', '.join(moses_languages())})", stacklevel=3)


def _started(cls, lang, what, probe, **kwargs):
    """Start a Moses Perl process and check that it answers a probe line: a process that cannot start
    (perl without its Thread module, a broken PERL5LIB) otherwise gave an empty line for every input
    and exit status 0, or a BrokenPipeError blamed on the output file."""
    check_language(lang, f"the Moses {what}'s language")
    try:
        proc = cls(lang, **kwargs)
    except OSError as exc:
        raise UserError(f"cannot start the Moses {what} for '{lang}' ({exc.strerror or exc}): is perl installed?") \
            from None
    try:
        answer = proc(probe)
    except (OSError, ValueError):
        answer = None
    if not answer:
        _quietly_close(proc)
        raise UserError(f"the Moses {what} for '{lang}' ({' '.join(proc.argv)}) does not answer: perl could not "
                        "run it (its own message, if it printed one, is above; check perl, its threads module and "
                        "PERL5LIB)")
    return proc


def _quietly_close(proc):
    try:
        proc.close()
    except (OSError, ValueError):
        pass
    proc.closed = True  # its __del__ would try the broken pipe again


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
                raise UserError(f"{flag} {model}: is a folder; give the SentencePiece model file in it "
                                "(NAME.model, written by spm_train)")
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
        what = ("words, not SentencePiece pieces (none starts with \u2581)" if marked < 0.01 else
                "the pieces of another SentencePiece model")
        raise UserError(f"{flag} {name}: only {share:.0%} of the model's {side} vocabulary are pieces of it: the model "
                        f"was trained on {what}; give the SentencePiece model its data was cut with, or leave "
                        f"{flag} out")


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
        raise UserError(f"{flag}: {path} was not cut with it: {checked - same} of its first {checked} lines cut "
                        f"again give other pieces (first: line {first_bad}); give the SentencePiece model the data "
                        "was cut with")


class CodesText:
    """BPE codes given as their text (a checkpoint's record), where a codes file's path is expected."""

    def __init__(self, text, name="the checkpoint's codes"):
        self.text, self.name = text, name

    def __str__(self):
        return self.name


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

    def __init__(self, src_lang=None, tgt_lang=None, bpe_codes=None, lower=True, capitalize=True, src_spm=None,
                 tgt_spm=None):
        self._lock = threading.Lock()
        self.lower, self.capitalize = lower, capitalize
        self._bpe = read_bpe_codes(bpe_codes) if bpe_codes else None
        self._src_spm = read_spm(src_spm, "-src_spm") if src_spm else None
        self._tgt_spm = read_spm(tgt_spm, "-tgt_spm") if tgt_spm else None
        self._spm_names = (str(src_spm), str(tgt_spm))
        self._tok = self._detok = None
        try:
            self._tok = _started(MosesTokenizer, src_lang, "tokenizer", "a .", no_escape=True) if src_lang else None
            self._detok = _started(MosesDetokenizer, tgt_lang, "detokenizer", ["a", "."]) if tgt_lang else None
        except BaseException:
            self.close()
            raise

    def encode(self, line):
        """One raw source line -> the tokenized (and, with codes, segmented) line the model reads."""
        if not isinstance(line, str):
            raise UserError(f"a sentence must be a string, got {type(line).__name__}: {line!r:.60}")
        if "\n" in line.strip():
            raise UserError(f"a sentence holds a line break ({line.strip()!r:.60}): give one sentence per string "
                            "(split the text at its line breaks first)")
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
        for sp, vocab, flag, name, side in ((self._src_spm, src_vocab, "-src_spm", self._spm_names[0], "source"),
                                            (self._tgt_spm, tgt_vocab, "-tgt_spm", self._spm_names[1], "target")):
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
