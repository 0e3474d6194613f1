"""The Moses tokenizer and detokenizer (Perl processes, via mosestokenizer): their languages, and
starting one so that a process that cannot run is a UserError, not a hang."""

import os
import re
import warnings

import mosestokenizer

from onmt_cont.utils.errors import UserError


def moses_languages():
    """The languages the Moses scripts have rules for (their nonbreaking-prefix files); others get English rules."""
    folder = os.path.join(os.path.dirname(mosestokenizer.__file__), "nonbreaking_prefixes")
    try:
        return sorted(n.split(".", 1)[1] for n in os.listdir(folder) if n.startswith("nonbreaking_prefix."))
    except OSError:
        return []


# a few names users type for a code (-src_lang french): the code to suggest
DETOK_SENTINEL = "onmtcontsentinel"  # a word appended to an output line that Moses would take for an XML tag
LANGUAGE_NAMES = {
    "english": "en",
    "french": "fr",
    "francais": "fr",
    "german": "de",
    "deutsch": "de",
    "spanish": "es",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
    "russian": "ru",
    "czech": "cs",
    "finnish": "fi",
    "polish": "pl",
    "romanian": "ro",
    "swedish": "sv",
    "greek": "el",
    "hungarian": "hu",
    "catalan": "ca",
    "icelandic": "is",
    "latvian": "lv",
    "slovak": "sk",
    "slovenian": "sl",
    "tamil": "ta",
}


def check_language(lang, what):
    """A Moses language code: lowercase ISO 639-1 letters, else a UserError (FR, french: Moses would take them for an
    unknown language and use English rules without a word); a well-formed code Moses has no rules for: a warning."""
    if not re.fullmatch(r"[a-z]{2,3}", lang or ""):
        known = moses_languages()
        name = (lang or "").strip().lower()
        hint = name if name in known else LANGUAGE_NAMES.get(name)
        raise UserError(
            f"{what} {lang!r}: expected a lowercase ISO 639-1 code such as "
            f"{hint or 'en'} (Moses has rules for {', '.join(known)})"
        )
    if lang not in moses_languages():
        warnings.warn(
            f"{what} {lang}: the Moses scripts have no rules for '{lang}' and use English ones "
            f"(they have rules for {', '.join(moses_languages())})",
            stacklevel=3,
        )


def started(cls, lang, what, probe, **kwargs):
    """Start a Moses Perl process and check that it answers a probe line: a process that cannot start
    (perl without its Thread module, a broken PERL5LIB) otherwise gave an empty line for every input
    and exit status 0, or a BrokenPipeError blamed on the output file."""
    check_language(lang, f"the Moses {what}'s language")
    try:
        proc = cls(lang, **kwargs)
    except OSError as exc:
        raise UserError(
            f"cannot start the Moses {what} for '{lang}' ({exc.strerror or exc}): is perl installed?"
        ) from None
    try:
        answer = proc(probe)
    except (OSError, ValueError):
        answer = None
    if not answer:
        quietly_close(proc)
        raise UserError(
            f"the Moses {what} for '{lang}' ({' '.join(proc.argv)}) does not answer: perl could not "
            "run it (its own message, if it printed one, is above; check perl, its threads module and "
            "PERL5LIB)"
        )
    return proc


def quietly_close(proc):
    try:
        proc.close()
    except (OSError, ValueError):
        pass
    proc.closed = True  # its __del__ would try the broken pipe again
