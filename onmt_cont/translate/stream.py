"""translate.py's stream: the source read chunk by chunk (translate/files.py), each chunk's lines turned into the
model's tokens (raw text: onmt_cont.text), translated, their outputs written, scored against -tgt (BLEU: evaluate's
summed sentence statistics, not the lines) and reported on standard error (translate/report.py)."""

import sys
import time
from argparse import Namespace
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from onmt_cont.inputters.vocab import lowercase_only
from onmt_cont.text.pipeline import TextPipeline
from onmt_cont.text.record import checked_codes, checked_spm, describe_record
from onmt_cont.text.subwords import CodesText, SpmModel
from onmt_cont.translate.base import BaseTranslator
from onmt_cont.translate.files import output_file, read_chunks
from onmt_cont.translate.report import attention_table, log, reference_mismatch, unsegmented
from onmt_cont.translate.unk import remove_bpe
from onmt_cont.utils.progress import progress

if TYPE_CHECKING:
    from onmt_cont.evaluate import CorpusBleu


def apply_text_record(
    opt: Namespace, translator: BaseTranslator
) -> tuple[str | CodesText | None, str | SpmModel | None, str | SpmModel | None, bool]:
    """A checkpoint that records the raw text its data was made from (preprocess.py -src_lang ...):
    unless -tokenized, or raw-text flags of the user's own, translate.py reads and writes raw text as
    it says, and says so once. -> (the BPE codes for the source: a path, the record's text or None; the source's
    and the target's SentencePiece models: a path, the record's model or None; whether the tokenizer lowercases)."""
    record = translator.text_record
    if record is None or opt.tokenized or opt.src_lang or opt.src_bpe_codes or opt.src_spm or opt.detokenize:
        tgt_spm = opt.tgt_spm or (None if record is None or opt.tokenized else checked_spm(record, "tgt", opt.model))
        return (opt.src_bpe_codes, opt.src_spm, tgt_spm, True if record is None else bool(record.get("lower", True)))
    opt.src_lang = record.get("src_lang")
    codes = checked_codes(record, opt.model)
    if record.get("tgt_lang"):
        opt.detokenize, opt.tgt_lang = True, record["tgt_lang"]
    log(
        f"{opt.model} records the text it was trained on: {describe_record(record)} (-tokenized: read and write "
        "its tokens instead)"
    )
    return (
        (CodesText(codes, f"{opt.model}'s codes") if codes else None),
        checked_spm(record, "src", opt.model),
        opt.tgt_spm or checked_spm(record, "tgt", opt.model),
        bool(record.get("lower", True)),
    )


def translate_stream(
    opt: Namespace, translator: BaseTranslator, src: str, tgt: str | None, n_src: int | None, done: dict[str, int]
) -> None:
    """Translate ``src`` (a path; -tgt's ``tgt`` or None) into -output with ``translator``, as translate.py's
    options say. ``n_src``: its lines (None for a stream); ``done["lines"]``: the lines translated so far (for
    an interrupt's message)."""
    if opt.tgt_emb_extend:
        added = len(translator.tgt_vocab) - translator.n_train_words
        log(
            f"-tgt_emb_extend {opt.tgt_emb_extend}: {translator.n_train_words:,} training target words "
            f"+ {added:,} new words"
        )
    bleu_ctx: AbstractContextManager[CorpusBleu | None] = nullcontext()
    raw_ctx: AbstractContextManager[CorpusBleu | None] = nullcontext()
    ref_ctx: AbstractContextManager[object] = nullcontext()
    codes, src_spm, tgt_spm, text_lower = apply_text_record(opt, translator)
    raw_reference = bool(opt.tgt) and opt.detokenize and not opt.tgt_tokenized
    # a model writes lowercase when its data was lowercased by preprocess.py or before it (no target word
    # has an upper-case letter): BLEU is then case-insensitive, and says so (case:lc)
    lowercase = translator.lower or lowercase_only(translator.tgt_vocab)
    if opt.tgt and not opt.tgt_prefix:
        from onmt_cont import evaluate  # sacreBLEU and the Moses detokenizer only when scoring

        # a raw reference is also Moses-tokenized (and lowercased) as the model's data, for tokenized BLEU
        ref_ctx = TextPipeline(opt.tgt_lang, lower=lowercase) if raw_reference else nullcontext()
        ref_text = ref_ctx if raw_reference else None

        def scorer():
            return evaluate.CorpusBleu(
                opt.tgt_lang,
                refs_tokenized=not raw_reference,
                lowercase=lowercase,
                tokenize_ref=ref_text.encode if raw_reference else None,
            )

        bleu_ctx = scorer()
        if opt.replace_unk:  # also score the model's own output: how much of the BLEU is the lexicon's
            raw_ctx = scorer()
        if raw_reference:
            log(
                f"-tgt {opt.tgt}: raw text (-detokenize): sacreBLEU on the written text"
                f"{', case-insensitive (the model writes lowercase)' if lowercase else ''}; tokenized BLEU "
                "against it Moses-tokenized as the model's data (-tgt_tokenized: the reference is tokenized)"
            )
    checked = [False]  # the reference's look is checked once, on its first lines
    n_lines, elapsed = 0, 0.0
    bar = progress(desc=f"translating {opt.src}", total=n_src, unit="sent")

    def on_batch(n: int) -> None:
        bar.update(n)

    text = TextPipeline(
        opt.src_lang,
        opt.tgt_lang if opt.detokenize else None,
        codes,
        lower=text_lower,
        src_spm=src_spm,
        tgt_spm=tgt_spm,
    )
    with bar, text, ref_ctx, bleu_ctx as bleu, raw_ctx as raw_bleu, output_file(opt.output) as out:
        text.check_fits(translator.src_vocab, translator.tgt_vocab)  # -src_spm/-tgt_spm the model was trained with
        # islice takes at most sys.maxsize: a larger -chunk_size reads everything at once anyway
        lines_done = 0
        for lines, refs in read_chunks(src, tgt, min(opt.chunk_size, sys.maxsize)):
            raw_lines = lines
            lines = [text.encode(line) for line in lines]  # tokenized input: only stripped
            start = time.time()
            raw: list[str] | None = [] if raw_bleu is not None else None
            nbest: list[list[tuple[str, float]]] | None = [] if translator.scored else None
            align: list[str] | None = [] if opt.report_align else None
            nbest_align: list[list[str]] | None = [] if opt.report_align and nbest is not None else None
            attn: list[Tensor | None] | None = [] if opt.attn_debug else None
            with torch.no_grad():
                outputs = translator.translate_lines(
                    lines,
                    opt.batch_size,
                    batch_type=opt.batch_type,
                    lower=translator.lower,
                    on_batch=on_batch,
                    raw=raw,
                    nbest=nbest,
                    prefixes=refs if opt.tgt_prefix else None,
                    align=align,
                    attn=attn,
                    first_line=lines_done + 1,
                    nbest_align=nbest_align,
                )
            lines_done += len(lines)
            elapsed += time.time() - start
            if text.target_pieces:  # a SentencePiece target: words before writing and scoring
                outputs = [text.join_pieces(o) for o in outputs]
                raw = [text.join_pieces(o) for o in raw] if raw is not None else None
                nbest = None if nbest is None else [[(text.join_pieces(h), sc) for h, sc in hyps] for hyps in nbest]
            if opt.remove_bpe:
                outputs = [remove_bpe(o) for o in outputs]
                raw = [remove_bpe(o) for o in raw] if raw is not None else None
                nbest = None if nbest is None else [[(remove_bpe(h), sc) for h, sc in hyps] for hyps in nbest]
            if not checked[0] and opt.src_lang is None:  # tokens are expected: does the source look like them?
                warning = reference_mismatch(
                    raw_lines,
                    lowercase,
                    False,
                    scored="read",
                    hint_raw="give -src_lang LANG (and -src_bpe_codes) to read raw text",
                )
                if warning:
                    log(f"warning: -src {opt.src}: {warning}")
            if not checked[0] and codes is None and src_spm is None:  # no pieces are cut here: are they there?
                warning = unsegmented(lines, translator.src_vocab)
                if warning:
                    log(f"warning: -src {opt.src}: {warning}")
            if refs is not None and not checked[0] and not opt.tgt_prefix:
                warning = reference_mismatch(refs, lowercase, raw_reference)
                if warning:
                    log(f"warning: -tgt {opt.tgt}: {warning}")
            checked[0] = True
            if raw_bleu is not None:
                raw_bleu.add(raw, refs)
            if nbest is not None:  # a line per hypothesis: OpenNMT-py's " ||| alignment", then the tab and score
                aligned: Sequence[Sequence[str | None]] = (
                    nbest_align if nbest_align is not None else [[None] * len(hyps) for hyps in nbest]
                )
                out.writelines(
                    text.decode(h)
                    + (f" ||| {a}" if a is not None else "")
                    + (f"\t{sc:.6f}" if opt.with_score else "")
                    + "\n"
                    for hyps, hyp_aligns in zip(nbest, aligned, strict=True)
                    for (h, sc), a in zip(hyps, hyp_aligns, strict=True)
                )
            elif align is not None:
                out.writelines(f"{text.decode(o)} ||| {a}\n" for o, a in zip(outputs, align, strict=True))
            else:
                out.writelines(text.decode(o) + "\n" for o in outputs)
            out.flush()
            if opt.verbose:
                for i, (line, hyp) in enumerate(zip(lines, outputs, strict=True), n_lines + 1):
                    score = f"\nPRED SCORE {i}: {nbest[i - n_lines - 1][0][1]:.4f}" if nbest is not None else ""
                    log(f"SENT {i}: {line}\nPRED {i}: {hyp}{score}")
            if attn is not None:
                for i, (line, hyp, weights) in enumerate(zip(lines, outputs, attn, strict=True), n_lines + 1):
                    log(attention_table(i, line.split(), hyp.split(), weights))
            if bleu is not None:
                bleu.add(outputs, refs)
            n_lines += len(lines)
            done["lines"] = n_lines
    where = "standard output" if opt.output == "-" else opt.output
    log(f"translated {n_lines} lines in {elapsed:.1f}s ({n_lines / max(elapsed, 1e-9):.1f} sent/s): wrote {where}")
    if opt.report_time:  # OpenNMT-py's three lines, its wording (words decoded, not subword pieces, per second)
        log(
            f"Total translation time (s): {elapsed:.6f}\nAverage translation time (s): "
            f"{elapsed / max(n_lines, 1):.6f}\nTokens per second: {translator.words_out / max(elapsed, 1e-9):.6f}"
        )
    share = translator.unk_out / max(translator.words_out, 1)
    log(
        f"decoded {translator.words_out} words, {translator.unk_out} of them <unk> ({100 * share:.1f}%)"
        + (", each replaced (-replace_unk)" if opt.replace_unk else "")
    )
    if bleu is not None:
        log("\n".join(bleu.report()[0]))
    if raw_bleu is not None:
        detok, tok = raw_bleu.scores()
        log(
            f"without -replace_unk (the model's own words, {100 * share:.1f}% <unk>): sacreBLEU {detok:.2f}, "
            f"tokenized BLEU {tok:.2f}"
        )
