"""What raw text a model's data was made from, as its checkpoint records it (preprocess.py -src_lang,
-tgt_lang, -src_bpe_codes, -src_spm/-tgt_spm), and the checks of a record read back."""

import hashlib
import os
import re

from onmt_cont.text.subwords import SpmModel, read_bpe_codes, read_spm
from onmt_cont.utils.errors import UserError, printable


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
    record = {
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "lower": bool(lower),
        "moses": {"no_escape": True},
        "src_bpe": None,
    }
    if bpe_codes:
        read_bpe_codes(bpe_codes)  # a file subword-nmt cannot read is refused here, not at translation
        with open(bpe_codes, encoding="utf-8") as f:
            codes = f.read()
        record["src_bpe"] = {
            "codes": codes,
            "sha256": hashlib.sha256(codes.encode("utf-8")).hexdigest(),
            "file": os.path.basename(bpe_codes),
        }
    record["src_spm"] = _spm_entry(src_spm, "-src_spm") if src_spm else None
    record["tgt_spm"] = _spm_entry(tgt_spm, "-tgt_spm") if tgt_spm else None
    return record


def check_text_record(record, where):
    """``record`` (a checkpoint's or an export's raw-text record) as preprocess.py writes it, else a UserError naming
    ``where``: a file edited or damaged after it was written must not reach Moses, subword-nmt or the terminal."""
    if record is None:
        return None

    def bad(what):
        raise UserError(
            f"{where}: its raw-text record is damaged ({what}): write it again (preprocess.py, onmt_cont_convert)"
        )

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
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("file"), str)
            and isinstance(entry.get("codes" if content is str else "model"), content)
        ):
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
        parts.append(
            f"cut into its SentencePiece pieces ({record['src_spm']['file']}, sha256 "
            f"{record['src_spm']['sha256'][:12]})"
        )
    if record.get("tgt_spm"):
        parts.append(f"output pieces joined with its target SentencePiece model ({record['tgt_spm']['file']})")
    if record.get("src_bpe"):
        parts.append(
            f"cut into its subword-nmt pieces ({record['src_bpe']['file']}, sha256 {record['src_bpe']['sha256'][:12]})"
        )
    if record.get("tgt_lang"):
        parts.append(f"output detokenized as {record['tgt_lang']}")
    return printable("; ".join(parts))  # names read from the checkpoint: no escape sequence reaches the terminal
