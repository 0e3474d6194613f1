"""translate.py: translate a source file with a trained checkpoint.

The source is tokenized text, as preprocess.py read it; or raw text with ``-src_lang LANG``
(Moses-tokenized and lowercased here, then cut into pieces with ``-src_bpe_codes``).
``-detokenize`` writes running text instead of tokens.

Continuous models decode by nearest neighbour in the target embedding table (greedy, or
beam search over the k nearest); softmax models greedily or with beam search.

The source (and -tgt) are streamed: read, translated and written -chunk_size lines at a time
into a temporary file beside -output, renamed onto it only at the end, so memory does not grow
with the file and a failed or interrupted run (Ctrl-C, SIGTERM) leaves neither -output nor the
temporary file; the next run to the same -output removes one that a SIGKILL left. ``-src -``
reads standard input; a pipe (``-src <(...)``, /dev/stdin) is read once, as it comes: a chunk
is what has arrived (at most -chunk_size lines), so a line fed alone is translated and written
before the next one is read. Without -output (or with ``-output -``) the translations go to
standard output, flushed after each chunk; an -output that is no regular file (a FIFO,
/dev/null, a terminal, a link to one) is written in place, never replaced. Every other line
translate.py prints (the summary, BLEU, -verbose) goes to standard error.
No -output may be one of the files the run reads.
BLEU keeps sacreBLEU's summed sentence statistics, not the lines (evaluate.CorpusBleu).
"""

import os
import stat
import sys
import time
from contextlib import contextmanager, nullcontext
from itertools import islice, zip_longest

import torch

from onmt_cont import opts
from onmt_cont.inputters.corpus import count_lines
from onmt_cont.inputters.vocab import lowercase_only
from onmt_cont.text import CodesText, TextPipeline, checked_codes, checked_spm, describe_record
from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import FLAG_NAMES, DecodingConfig
from onmt_cont.translate.options import build_parser
from onmt_cont.translate.report import attention_table, reference_mismatch, unsegmented
from onmt_cont.translate.unk import remove_bpe
from onmt_cont.utils.device import resolve_device
from onmt_cont.utils.errors import UserError, cli_main, printable
from onmt_cont.utils.io import (
    atomic_path,
    check_readable,
    decode_line,
    read_lines,
    refuse_output_over_inputs,
    remove_stale_temps,
)
from onmt_cont.utils.memory import keep_freed_memory
from onmt_cont.utils.progress import progress
from onmt_cont.utils.signals import Stopped, sigterm_stops
from onmt_cont.utils.threads import apply_threads

# a longer line from a stream is refused (a source such as /dev/zero never ends one)
MAX_STREAM_LINE = 1 << 20


def stream_chunks(path, size):
    """Yield lists of the lines of a stream (a pipe, standard input, a FIFO, a terminal) as they
    arrive: each waits for one line, then takes the lines that can be read without waiting, at most
    ``size``. A line fed on its own is thus translated before the next one comes (line in, line
    out), and a pipe full of text still fills whole chunks. A line longer than MAX_STREAM_LINE
    bytes is a UserError naming it."""
    check_readable(path)
    fd = os.open(path, os.O_RDONLY)
    buf, lineno, chunk = b"", 0, []
    try:
        while True:
            while len(chunk) < size and (end := buf.find(b"\n")) >= 0:
                lineno += 1
                chunk.append(decode_line(path, lineno, buf[: end + 1]))
                buf = buf[end + 1 :]
            if chunk and (len(chunk) >= size or not _readable(fd)):
                yield chunk
                chunk = []
                continue
            if len(buf) > MAX_STREAM_LINE:
                raise UserError(f"{path}, line {lineno + 1}: longer than {MAX_STREAM_LINE:,} bytes without a line "
                                "end: not a sentence per line (a device such as /dev/zero?)")
            data = os.read(fd, 1 << 16)  # waits until something arrives
            if not data:
                break
            buf += data
        if buf:
            lineno += 1
            chunk.append(decode_line(path, lineno, buf))
        if chunk:
            yield chunk
    finally:
        os.close(fd)


def _readable(fd):
    """Can ``fd`` be read now without waiting?"""
    import select

    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def read_chunks(src_path, tgt_path, size):
    """Yield ``(src_lines, ref_lines)`` of at most ``size`` lines each (``ref_lines`` None without
    ``tgt_path``), streaming. Files of different lengths are a UserError at the end of the shorter.
    A stream source without ``tgt_path`` comes in the chunks :func:`stream_chunks` makes."""
    if tgt_path is None:
        if is_stream(src_path):
            for chunk in stream_chunks(src_path, size):
                yield chunk, None
            return
        src = (line for _, line in read_lines(src_path))
        while chunk := list(islice(src, size)):
            yield chunk, None
        return
    src = (line for _, line in read_lines(src_path))
    missing = object()
    pairs = zip_longest(src, (line for _, line in read_lines(tgt_path)), fillvalue=missing)
    n = 0
    while chunk := list(islice(pairs, size)):
        for k, (s, t) in enumerate(chunk):
            if s is missing or t is missing:
                short, long_ = (src_path, tgt_path) if s is missing else (tgt_path, src_path)
                raise UserError(f"{short} ends after line {n + k} but {long_} goes on: -src and -tgt must "
                                "have the same number of lines")
        n += len(chunk)
        yield [s for s, _ in chunk], [t for _, t in chunk]


STDIN = "/dev/stdin"  # -src - and -tgt -


def is_stream(path):
    """A pipe, a FIFO, standard input or a terminal: read once, in order, never counted ahead."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


# a word with punctuation stuck to it ("dog." or "l'herbe"): what Moses tokenization splits
def apply_text_record(opt, translator):
    """A checkpoint that records the raw text its data was made from (preprocess.py -src_lang ...):
    unless -tokenized, or raw-text flags of the user's own, translate.py reads and writes raw text as
    it says, and says so once. -> (the BPE codes for the source: a path, the record's text or None,
    whether the tokenizer lowercases)."""
    record = translator.text_record
    if record is None or opt.tokenized or opt.src_lang or opt.src_bpe_codes or opt.src_spm or opt.detokenize:
        tgt_spm = opt.tgt_spm or (None if record is None or opt.tokenized else checked_spm(record, "tgt", opt.model))
        return (opt.src_bpe_codes, opt.src_spm, tgt_spm,
                True if record is None else bool(record.get("lower", True)))
    opt.src_lang = record.get("src_lang")
    codes = checked_codes(record, opt.model)
    if record.get("tgt_lang"):
        opt.detokenize, opt.tgt_lang = True, record["tgt_lang"]
    log(f"{opt.model} records the text it was trained on: {describe_record(record)} (-tokenized: read and write "
        "its tokens instead)")
    return ((CodesText(codes, f"{opt.model}'s codes") if codes else None), checked_spm(record, "src", opt.model),
            opt.tgt_spm or checked_spm(record, "tgt", opt.model), bool(record.get("lower", True)))


LOG_FILES = []  # -log_file's open file, while a run writes it


def log(text):
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
            print(f"warning: cannot write the log file {f.name}: {exc.strerror or exc}; it is no longer written "
                  "(the log goes on on standard error)", file=sys.stderr, flush=True)


@contextmanager
def log_file(path):
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


@contextmanager
def output_file(path):
    """The translations' text file: standard output for ``-`` (left open), else written through
    :func:`atomic_path` (a regular file is replaced at the end only; a FIFO or device in place)."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        yield out


@cli_main
def main(argv=None):
    opt = opts.parse(build_parser(), argv, required=("model",))
    opt.models = opt.model if isinstance(opt.model, list) else [opt.model]  # -model A.pt B.pt: an ensemble
    opt.model = opt.models[0]
    if opt.output is None:
        opt.output = "-"
    for name in ("src_lang", "tgt_lang"):  # an unset shell variable: -tgt_lang "$TGT"
        value = getattr(opt, name)
        if value is not None and not value.strip():
            raise UserError(f"-{name} is empty (an unset shell variable?): give a language code such as en, or "
                            "leave the flag out")
    if opt.src is None:  # a Unix filter, as fairseq-interactive: `cat f | translate.py -model M`
        opt.src = "-"
        if sys.stdin is not None and sys.stdin.isatty():
            print("translate.py: no -src: reading sentences from standard input, one per line (Ctrl-D ends)",
                  file=sys.stderr)
    done = {"lines": 0, "total": None}
    try:
        with sigterm_stops(), log_file(opt.log_file):
            run(opt, done)
    except KeyboardInterrupt as exc:
        sigterm = isinstance(exc, Stopped)
        of = f" of {done['total']}" if done["total"] is not None else ""
        kept = ("the lines written so far stay on standard output" if opt.output == "-" else
                f"nothing kept, -output {opt.output} was not written (an earlier one, if any, is unchanged)")
        print(f"translate.py: stopped by {'SIGTERM' if sigterm else 'SIGINT (Ctrl-C)'} after {done['lines']}{of} "
              f"lines: {kept}", file=sys.stderr)
        raise SystemExit(143 if sigterm else 130) from None


def decoding_config(opt):
    """translate.py's decoding flags -> a DecodingConfig (the API's names)."""
    ann = None
    if opt.ann:
        ann = {"kind": opt.ann_index, "nlist": opt.ann_nlist, "nprobe": opt.ann_nprobe, "hnsw_m": opt.ann_hnsw_m,
               "ef_search": opt.ann_ef_search}
    names = {name: getattr(opt, flag) for flag, name in FLAG_NAMES.items()}
    return DecodingConfig(**{name: getattr(opt, name) for name in DecodingConfig.names()
                             if name not in names and name != "ann"}, **names, ann=ann)


def run(opt, done):
    """translate.py's work; ``done["lines"]``: the lines translated so far (for an interrupt's message)."""
    refuse_output_over_inputs({"-output": opt.output, "-log_file": opt.log_file}, {
        "-model": opt.models, "-src": opt.src, "-tgt": opt.tgt, "-lookup_dict": opt.lookup_dict,
        "-freq_offsets": opt.freq_offsets, "-tgt_emb_extend": opt.tgt_emb_extend,
        "-tgt_emb_extend_vocab": opt.tgt_emb_extend_vocab, "-src_bpe_codes": opt.src_bpe_codes,
        "-src_spm": opt.src_spm, "-tgt_spm": opt.tgt_spm, "-config": opt.config})
    if opt.src == "-" and opt.tgt == "-":
        raise UserError("-src - and -tgt - would both read standard input: give one of them as a file")
    src = STDIN if opt.src == "-" else opt.src
    tgt = STDIN if opt.tgt == "-" else opt.tgt
    if opt.batch_size < 1 or opt.chunk_size < 1:
        raise UserError("-batch_size and -chunk_size must be at least 1")
    config = decoding_config(opt).resolved()  # refused before any file is read or model loaded
    opt.beam_size, opt.block_ngram_repeat = config.beam_size, config.block_ngram_repeat  # the defaults filled in
    if opt.output != "-":
        out_dir = os.path.dirname(os.path.abspath(opt.output))
        if not os.path.isdir(out_dir):
            raise UserError(f"-output {opt.output}: directory {out_dir} does not exist")
        if os.path.isdir(opt.output):
            raise UserError(f"-output {opt.output}: is a directory, expected a file name")
        stale = remove_stale_temps(out_dir, os.path.basename(opt.output), exact=True)
        if stale:
            log(f"removed {len(stale)} temporary file(s) that killed runs left beside -output: {', '.join(stale)}")
    # A binary line count (no decoding, no lines kept) finds a -tgt of the wrong length before any decoding.
    # A pipe can be read only once: it is not counted, and a -tgt of another length is found at its end.
    n_src = None if is_stream(src) else count_lines(src)
    if opt.tgt and n_src is not None and not is_stream(tgt) and (n_tgt := count_lines(tgt)) != n_src:
        raise UserError(f"-tgt {opt.tgt} has {n_tgt} lines but -src {opt.src} has {n_src}")
    done["total"] = n_src
    device = resolve_device(opt.gpu)
    apply_threads(opt.threads)
    keep_freed_memory()  # a beam step reuses the pages of the last one's scores (onmt_cont.utils.memory)
    translator = build_translator(config, opt.models, device, threads=torch.get_num_threads(), log=log)
    if opt.tgt_prefix and not opt.tgt:
        raise UserError("-tgt_prefix forces each output to start with its -tgt line: give -tgt")
    if opt.tgt_emb_extend:
        added = len(translator.tgt_vocab) - translator.n_train_words
        log(f"-tgt_emb_extend {opt.tgt_emb_extend}: {translator.n_train_words:,} training target words "
            f"+ {added:,} new words")
    bleu_ctx = raw_ctx = ref_ctx = nullcontext()
    codes, src_spm, tgt_spm, text_lower = apply_text_record(opt, translator)
    raw_reference = bool(opt.tgt) and opt.detokenize and not opt.tgt_tokenized
    # a model writes lowercase when its data was lowercased by preprocess.py or before it (no target word
    # has an upper-case letter): BLEU is then case-insensitive, and says so (case:lc)
    lowercase = translator.lower or lowercase_only(translator.tgt_vocab)
    if opt.tgt and not opt.tgt_prefix:
        from onmt_cont.evaluate import CorpusBleu  # sacreBLEU and the Moses detokenizer only when scoring

        # a raw reference is also Moses-tokenized (and lowercased) as the model's data, for tokenized BLEU
        ref_ctx = TextPipeline(opt.tgt_lang, lower=lowercase) if raw_reference else nullcontext()
        ref_text = ref_ctx if raw_reference else None

        def scorer():
            return CorpusBleu(opt.tgt_lang, refs_tokenized=not raw_reference, lowercase=lowercase,
                              tokenize_ref=ref_text.encode if raw_reference else None)

        bleu_ctx = scorer()
        if opt.replace_unk:  # also score the model's own output: how much of the BLEU is the lexicon's
            raw_ctx = scorer()
        if raw_reference:
            log(f"-tgt {opt.tgt}: raw text (-detokenize): sacreBLEU on the written text"
                f"{', case-insensitive (the model writes lowercase)' if lowercase else ''}; tokenized BLEU "
                "against it Moses-tokenized as the model's data (-tgt_tokenized: the reference is tokenized)")
    checked = [False]  # the reference's look is checked once, on its first lines
    n_lines, elapsed = 0, 0.0
    bar = progress(desc=f"translating {opt.src}", total=n_src, unit="sent")

    def on_batch(n):
        bar.update(n)

    text = TextPipeline(opt.src_lang, opt.tgt_lang if opt.detokenize else None, codes, lower=text_lower,
                        src_spm=src_spm, tgt_spm=tgt_spm)
    with bar, text, ref_ctx, bleu_ctx as bleu, raw_ctx as raw_bleu, output_file(opt.output) as out:
        text.check_fits(translator.src_vocab, translator.tgt_vocab)  # -src_spm/-tgt_spm the model was trained with
        # islice takes at most sys.maxsize: a larger -chunk_size reads everything at once anyway
        lines_done = 0
        for lines, refs in read_chunks(src, tgt, min(opt.chunk_size, sys.maxsize)):
            raw_lines = lines
            lines = [text.encode(line) for line in lines]  # tokenized input: only stripped
            start = time.time()
            raw = [] if raw_bleu is not None else None
            nbest = [] if translator.scored else None
            align = [] if opt.report_align else None
            nbest_align = [] if opt.report_align and nbest is not None else None
            attn = [] if opt.attn_debug else None
            with torch.no_grad():
                outputs = translator.translate_lines(lines, opt.batch_size, batch_type=opt.batch_type,
                                                     lower=translator.lower, on_batch=on_batch, raw=raw, nbest=nbest,
                                                     prefixes=refs if opt.tgt_prefix else None, align=align,
                                                     attn=attn, first_line=lines_done + 1, nbest_align=nbest_align)
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
                warning = reference_mismatch(raw_lines, lowercase, False, scored="read",
                                             hint_raw="give -src_lang LANG (and -src_bpe_codes) to read raw text")
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
                aligned = nbest_align if nbest_align is not None else [[None] * len(hyps) for hyps in nbest]
                out.writelines(text.decode(h) + (f" ||| {a}" if a is not None else "")
                               + (f"\t{sc:.6f}" if opt.with_score else "") + "\n"
                               for hyps, hyp_aligns in zip(nbest, aligned, strict=True)
                               for (h, sc), a in zip(hyps, hyp_aligns, strict=True))
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
        log(f"Total translation time (s): {elapsed:.6f}\nAverage translation time (s): "
            f"{elapsed / max(n_lines, 1):.6f}\nTokens per second: {translator.words_out / max(elapsed, 1e-9):.6f}")
    share = translator.unk_out / max(translator.words_out, 1)
    log(f"decoded {translator.words_out} words, {translator.unk_out} of them <unk> ({100 * share:.1f}%)"
        + (", each replaced (-replace_unk)" if opt.replace_unk else ""))
    if bleu is not None:
        log("\n".join(bleu.report()[0]))
    if raw_bleu is not None:
        detok, tok = raw_bleu.scores()
        log(f"without -replace_unk (the model's own words, {100 * share:.1f}% <unk>): sacreBLEU {detok:.2f}, "
            f"tokenized BLEU {tok:.2f}")


if __name__ == "__main__":
    main()
