"""translate.py's session options: the model and the files it reads and writes, raw text in and out, the batches,
the device and threads, and what it reports, as one typed configuration (:class:`TranslateSessionConfig`) whose
fields declare their help, default and range (:mod:`onmt_cont.config`). How it decodes is the decoding
configuration's (:mod:`onmt_cont.translate.config`); the flags are built in :mod:`onmt_cont.translate.options`,
which also holds the checks that combine options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onmt_cont.config import option
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.threads import HELP as THREADS_HELP
from onmt_cont.utils.threads import threads_problem


@dataclass
class TranslateSessionConfig:
    """translate.py's "Data" and "Raw text" flags and the session's share of the others (batches, device, BPE,
    -tgt_prefix, logging), each field with its help, default and range, in the order of translate.py -h."""

    model: Sequence[str] | None = option(
        None,
        nargs="+",  # required: opts.parse checks it, as a -config file may give it
        help="checkpoint written by train.py; several: an ensemble of models of one "
        "vocabulary, softmax or continuous, that decodes with the mean of their log-probabilities (a "
        "continuous model's: its beam distribution); the first model's options and record apply",
    )
    src: str | None = option(
        None,
        help="source text, one sentence per line: tokenized as the training data, or raw "
        "text with -src_lang; - or absent: standard input, read once, as it comes",
    )
    output: str | None = option(
        None, help="where to write the translations (one line per input line); absent or -: standard output"
    )
    tgt: str | None = option(
        None,
        help="reference: report BLEU. With -detokenize it is raw text, scored as sacrebleu "
        "would score the written output (case-insensitive for a lowercasing model) and, Moses-tokenized "
        "as the model's data, by tokenized BLEU; without, it is tokenized as the model's output "
        "(-tgt_tokenized says so with -detokenize too)",
    )
    src_spm: str | None = option(
        None,
        help="with -src_lang: a SentencePiece model the tokenized source is cut with (instead of -src_bpe_codes)",
    )
    tgt_spm: str | None = option(
        None,
        help="the target's SentencePiece model: the output's pieces are joined into words "
        "(before -detokenize and BLEU)",
    )
    tokenized: bool = option(
        False,
        help="-src is the model's tokens and the output is written as "
        "tokens, also for a model whose checkpoint records the raw text it was trained on (preprocess.py "
        "-src_lang/-tgt_lang/-src_bpe_codes: then raw text is read and written by default)",
    )
    tgt_tokenized: bool = option(
        False,
        help="-tgt is tokenized (and lowercased) as the model's "
        "output, also with -detokenize: it is detokenized for sacreBLEU, as without -detokenize",
    )
    tgt_lang: str = option("en", help="target language for Moses detokenization (BLEU, -detokenize)")
    src_lang: str | None = option(
        None,
        help="-src is raw text in this language: Moses-tokenize it (no "
        "escaping, aggressive hyphen splitting) and lowercase it, as tools/moses_tok.py does",
    )
    src_bpe_codes: str | None = option(
        None,
        help="subword-nmt codes the model's source side was cut with: "
        "cut -src into the same pieces (after -src_lang's tokenization)",
    )
    detokenize: bool = option(
        False,
        help="write running text: Moses-detokenized in -tgt_lang, "
        "each sentence's first letter in upper case (BLEU with -tgt still scores the tokens)",
    )
    batch_size: int = option(
        32,
        type=int,
        low=1,
        help="sentences per batch (-batch_type sents), or padded source tokens per batch (-batch_type tokens)",
    )
    batch_type: str = option(
        "sents",
        choices=["sents", "tokens"],
        help="what -batch_size counts; tokens: the longest source of a batch times its sentences (the "
        "input is sorted by length, so long sentences share small batches)",
    )
    chunk_size: int = option(
        10000,
        type=int,
        low=1,
        help="source lines read, translated and written at "
        "a time: memory grows with it, not with the file. Batches are sorted by length within a chunk",
    )
    gpu: int | None = option(None, type=gpu_option, help="CUDA device id; CPU when absent or negative")
    threads: int | None = option(None, type=int, check=threads_problem, help=THREADS_HELP)
    remove_bpe: bool = option(
        False,
        help="the model's target side is subword-nmt BPE: join "
        "the pieces ('@@ ' and a final '@@' removed) before writing the output and scoring it",
    )
    tgt_prefix: bool = option(
        False,
        help="each output starts with its -tgt line (tokens, as the "
        "model writes), forced, and decoding goes on from there (OpenNMT-py's -tgt_prefix); no BLEU. "
        "Greedy search, sampling or beam search (every hypothesis starts with it)",
    )
    log_file: str | None = option(None, help="also write what translate.py prints on standard error to this file")
    report_time: bool = option(
        False,
        help="print OpenNMT-py's timing lines at the end: the total "
        "and average translation time (s) and the output tokens per second",
    )
    verbose: bool = option(
        False,
        help="print each source and translation (with its score when "
        "-with_score or -n_best give one) on standard error",
    )
