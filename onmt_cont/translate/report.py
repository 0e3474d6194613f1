"""What translate.py says about its input and output besides the translations: warnings when an input or a
reference does not look like what the model reads (raw text against tokens, pieces against words),
-attn_debug's table and -report_align's alignments; and :func:`log`, which prints all of it."""

import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from torch import Tensor

from onmt_cont.inputters.vocab import Vocab, data_words
from onmt_cont.utils.errors import printable

_UNTOKENIZED = re.compile(r"\w[.,!?;:)\"]|\w'\w|[(\"]\w")


def reference_mismatch(
    refs: Sequence[str],
    lower: bool,
    raw: bool,
    hint_raw: str = "give -detokenize -tgt_lang LANG to score a raw reference",
    hint_tok: str = "give -tgt_tokenized if it is the model's tokens",
    scored: str = "scored",
) -> str | None:
    """A warning when the text does not look like what it is read as, else None: tokenized text
    (``raw`` False) with upper case for a lowercasing model or with punctuation stuck to words; raw
    text whose words are all split from their punctuation. The hints say what to do instead."""
    lines = [r for r in refs if r.strip()][:200]
    if not lines:
        return None
    untokenized = sum(bool(_UNTOKENIZED.search(r)) for r in lines) / len(lines)
    if raw:
        if untokenized == 0 and any(" . " in f"{r} " or r.rstrip().endswith(" .") for r in lines):
            return f"it looks tokenized (punctuation split from the words), but it is {scored} as raw text: {hint_tok}"
        return None
    cased = lower and any(ch.isupper() for r in lines for ch in r)
    if untokenized > 0.2 or cased:
        what = "punctuation stuck to words" if untokenized > 0.2 else "upper-case letters (the model writes lowercase)"
        return f"it holds {what}: it looks like raw text, but it is {scored} as tokenized text; {hint_raw}"
    return None


def attention_table(i: int, src: Sequence[str], hyp: Sequence[str], weights: Tensor | None) -> str:
    """-attn_debug's text for sentence ``i``: a row per output token, a column per source token, the
    weights to 3 decimals and '*' at each row's largest."""
    if weights is None or not hyp:
        return f"ATTN {i}: (empty)"
    width = max([len(t) for t in src] + [6])
    head = " " * max(len(t) for t in hyp) + " " + " ".join(t.rjust(width) for t in src)
    rows = []
    for t, word in enumerate(hyp[: weights.size(0)]):
        row = weights[t].tolist()
        best = max(range(len(row)), key=row.__getitem__) if row else -1
        cells = " ".join((f"*{w:.3f}" if j == best else f"{w:.3f}").rjust(width) for j, w in enumerate(row))
        rows.append(word.ljust(max(len(x) for x in hyp)) + " " + cells)
    return f"ATTN {i}:\n" + "\n".join([head, *rows])


def unsegmented(lines: Sequence[str], src_vocab: Vocab) -> str | None:
    """A warning when the model reads subword pieces (its source vocabulary holds many subword-nmt
    "@@" or SentencePiece "▁" tokens) but the input holds none of them, else None."""
    words = data_words(src_vocab)
    for mark, what, flag in (
        ("@@", "subword-nmt pieces", "-src_bpe_codes"),
        ("\u2581", "SentencePiece pieces", "-src_spm"),
    ):
        if sum(mark in w for w in words) > 0.1 * max(len(words), 1):
            if any(line.strip() for line in lines) and not any(mark in line for line in lines):
                return (
                    f"the model reads {what}, but the input holds none: give {flag} to cut it, or cut it "
                    "as the training data was"
                )
    return None


def alignment(attn: Tensor | None, src_len: int) -> str:
    """A hypothesis's word alignment, OpenNMT-py's -report_align format: "s-t" for each output word t
    (0-based) and the source word s (0-based) its attention weighs most, space-separated."""
    if attn is None or attn.numel() == 0 or src_len == 0:
        return ""
    best = attn[:, :src_len].argmax(-1).tolist()
    return " ".join(f"{s}-{t}" for t, s in enumerate(best))


LOG_FILES: list[TextIO] = []  # -log_file's open file, while a run writes it


def log(text: str) -> None:
    """Every line translate.py prints besides the translations goes to standard error, so standard
    output holds the translations alone when it is the output; and to -log_file when given."""
    text = printable(text)  # names and lines read from files: no escape sequence reaches the terminal
    print(text, file=sys.stderr, flush=True)
    for f in list(LOG_FILES):
        try:
            f.write(text + "\n")
            f.flush()
        except OSError as exc:  # a full disk: the log stops, the translation goes on (as train.py's)
            LOG_FILES.remove(f)
            print(
                f"warning: cannot write the log file {f.name}: {exc.strerror or exc}; it is no longer written "
                "(the log goes on on standard error)",
                file=sys.stderr,
                flush=True,
            )


@contextmanager
def log_file(path: str | None) -> Iterator[None]:
    """-log_file: opened for appending (a folder, a FIFO without reader: refused first), closed at the end."""
    if path is None:
        yield
        return
    from onmt_cont.utils.writable import check_log_file

    check_log_file(path)
    f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed below, where a full disk's error is kept quiet
    LOG_FILES.append(f)
    try:
        yield
    finally:
        if f in LOG_FILES:
            LOG_FILES.remove(f)
        try:
            f.close()
        except OSError:
            pass
