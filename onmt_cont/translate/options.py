"""translate.py's options: the parser, and the parsed options with their decoding configuration. The decoding
flags come from DecodingConfig's fields (translate/config.py: their help, types and defaults); every option is
checked in translate/checks.py (before any model is loaded) and the Translator."""

import os
import sys
from argparse import ArgumentParser, Namespace
from collections.abc import Sequence

from onmt_cont import opts
from onmt_cont.config import add_flags
from onmt_cont.translate.config import FLAG_NAMES, DecodingConfig
from onmt_cont.utils import numbers
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.threads import add_threads_arg


def build_parser() -> ArgumentParser:
    p = opts.new_parser("Translate a tokenized source file (one sentence per line) with a trained model.")
    g = p.add_argument_group("Data")
    g.add_argument(
        "-model",
        nargs="+",
        help="checkpoint written by train.py; several: an ensemble of models of one "
        "vocabulary, softmax or continuous, that decodes with the mean of their log-probabilities (a "
        "continuous model's: its beam distribution); the first model's options and record apply",
    )
    g.add_argument(
        "-src",
        help="source text, one sentence per line: tokenized as the training data, or raw "
        "text with -src_lang; - or absent: standard input, read once, as it comes",
    )
    g.add_argument(
        "-output", help="where to write the translations (one line per input line); absent or -: standard output"
    )
    g.add_argument(
        "-tgt",
        help="reference: report BLEU. With -detokenize it is raw text, scored as sacrebleu "
        "would score the written output (case-insensitive for a lowercasing model) and, Moses-tokenized "
        "as the model's data, by tokenized BLEU; without, it is tokenized as the model's output "
        "(-tgt_tokenized says so with -detokenize too)",
    )
    g.add_argument(
        "-src_spm",
        help="with -src_lang: a SentencePiece model the tokenized source is cut with (instead of -src_bpe_codes)",
    )
    g.add_argument(
        "-tgt_spm",
        help="the target's SentencePiece model: the output's pieces are joined into words "
        "(before -detokenize and BLEU)",
    )
    g.add_argument(
        "-tokenized",
        action="store_true",
        help="-src is the model's tokens and the output is written as "
        "tokens, also for a model whose checkpoint records the raw text it was trained on (preprocess.py "
        "-src_lang/-tgt_lang/-src_bpe_codes: then raw text is read and written by default)",
    )
    g.add_argument(
        "-tgt_tokenized",
        action="store_true",
        help="-tgt is tokenized (and lowercased) as the model's "
        "output, also with -detokenize: it is detokenized for sacreBLEU, as without -detokenize",
    )
    g.add_argument("-tgt_lang", default="en", help="target language for Moses detokenization (BLEU, -detokenize)")
    g = p.add_argument_group("Raw text (docs/recipes/own_data.sh)")
    g.add_argument(
        "-src_lang",
        default=None,
        help="-src is raw text in this language: Moses-tokenize it (no "
        "escaping, aggressive hyphen splitting) and lowercase it, as tools/moses_tok.py does",
    )
    g.add_argument(
        "-src_bpe_codes",
        default=None,
        help="subword-nmt codes the model's source side was cut with: "
        "cut -src into the same pieces (after -src_lang's tokenization)",
    )
    g.add_argument(
        "-detokenize",
        action="store_true",
        help="write running text: Moses-detokenized in -tgt_lang, "
        "each sentence's first letter in upper case (BLEU with -tgt still scores the tokens)",
    )
    g = p.add_argument_group("Decoding")
    g.add_argument(
        "-batch_size",
        type=int,
        default=32,
        help="sentences per batch (-batch_type sents), or padded source tokens per batch (-batch_type tokens)",
    )
    g.add_argument(
        "-batch_type",
        choices=["sents", "tokens"],
        default="sents",
        help="what -batch_size counts; tokens: the longest source of a batch times its sentences (the "
        "input is sorted by length, so long sentences share small batches)",
    )
    g.add_argument(
        "-chunk_size",
        type=int,
        default=10000,
        help="source lines read, translated and written at "
        "a time: memory grows with it, not with the file. Batches are sorted by length within a chunk",
    )
    add_flags(g, DecodingConfig, ["engine"])
    g.add_argument("-gpu", type=gpu_option, default=None, help="CUDA device id; CPU when absent or negative")
    add_threads_arg(g)
    add_flags(
        g,
        DecodingConfig,
        [
            "max_length",
            "max_length_ratio",
            "min_length",
            "search",
            "beam_size",
            "length_penalty",
            "alpha",
            "coverage_penalty",
            "beta",
            "beam_temperature",
            "ban_unk",
            "ignore_when_blocking",
            "block_ngram_repeat",
            "replace_unk",
            "alignment_layer",
            "lexicon",
        ],
    )
    g.add_argument(
        "-remove_bpe",
        action="store_true",
        help="the model's target side is subword-nmt BPE: join "
        "the pieces ('@@ ' and a final '@@' removed) before writing the output and scoring it",
    )
    g = p.add_argument_group("Word choice (continuous models; -freq_offsets: any model)")
    add_flags(g, DecodingConfig, ["decode_prior", "decode_prior_cap", "freq_offsets", "csls"])
    g = p.add_argument_group("Open vocabulary and approximate search (continuous models)")
    add_flags(g, DecodingConfig, ["tgt_emb_extend", "tgt_emb_extend_vocab"])
    g.add_argument(
        "-ann",
        choices=["faiss"],
        default=None,
        help="approximate nearest-neighbour search (faiss-cpu) instead of exact search, for tables "
        "of 300K words and more; the index proposes beam_size+2 words, rescored exactly",
    )
    g.add_argument(
        "-ann_index",
        choices=["ivf", "hnsw"],
        default="ivf",
        help="IndexIVFFlat (k-means cells, built in seconds) or IndexHNSWFlat (minutes to build at "
        "300K words on one core); inner product on unit rows. See docs/open_vocabulary.md",
    )
    g.add_argument(
        "-ann_nlist", type=int, default=None, help="ivf: number of cells (default 4·sqrt(words), faiss's guideline)"
    )
    g.add_argument("-ann_nprobe", type=int, default=64, help="ivf: cells searched per query")
    g.add_argument("-ann_hnsw_m", type=int, default=16, help="hnsw: links per node")
    g.add_argument("-ann_ef_search", type=int, default=64, help="hnsw: candidate list size when searching")
    add_flags(
        g,
        DecodingConfig,
        ["n_best", "with_score", "random_sampling_topk", "random_sampling_topp", "random_sampling_temp", "seed"],
    )
    g.add_argument(
        "-tgt_prefix",
        action="store_true",
        help="each output starts with its -tgt line (tokens, as the "
        "model writes), forced, and decoding goes on from there (OpenNMT-py's -tgt_prefix); no BLEU. "
        "Greedy search, sampling or beam search (every hypothesis starts with it)",
    )
    add_flags(g, DecodingConfig, ["report_align", "attn_debug"])
    g.add_argument("-log_file", help="also write what translate.py prints on standard error to this file")
    g.add_argument(
        "-report_time",
        action="store_true",
        help="print OpenNMT-py's timing lines at the end: the total "
        "and average translation time (s) and the output tokens per second",
    )
    g.add_argument(
        "-verbose",
        action="store_true",
        help="print each source and translation (with its score when "
        "-with_score or -n_best give one) on standard error",
    )
    for action in p._actions:  # every float option: nan, inf and a non-zero value that rounds to 0 are refused
        if action.type is float:
            action.type = numbers.finite_float
    return p


def parse_options(argv: Sequence[str] | None = None) -> Namespace:
    """translate.py's command line (and -config) -> its options, with ``models`` (-model A.pt B.pt: an
    ensemble; ``model`` is the first), -output ``-`` for standard output and -src ``-`` for standard input."""
    opt = opts.parse(build_parser(), argv, required=("model",))
    opt.models = opt.model if isinstance(opt.model, list) else [opt.model]
    opt.model = opt.models[0]
    if opt.output is None:
        opt.output = "-"
    if opt.src is None:  # a Unix filter, as fairseq-interactive: `cat f | translate.py -model M`
        opt.src = "-"
        if sys.stdin is not None and sys.stdin.isatty():
            print(
                "translate.py: no -src: reading sentences from standard input, one per line (Ctrl-D ends)",
                file=sys.stderr,
            )
    return opt


def decoding_config(opt: Namespace) -> DecodingConfig:
    """translate.py's decoding flags -> a DecodingConfig (the API's names)."""
    ann = None
    if opt.ann:
        ann = {
            "kind": opt.ann_index,
            "nlist": opt.ann_nlist,
            "nprobe": opt.ann_nprobe,
            "hnsw_m": opt.ann_hnsw_m,
            "ef_search": opt.ann_ef_search,
        }
    names = {name: getattr(opt, flag) for flag, name in FLAG_NAMES.items()}
    return DecodingConfig(
        **{name: getattr(opt, name) for name in DecodingConfig.names() if name not in names and name != "ann"},
        **names,
        ann=ann,
    )


def check_options(opt: Namespace, config: DecodingConfig) -> DecodingConfig:
    """translate.py's options, checked once, before any file is read or model loaded -> ``config`` (its
    DecodingConfig) resolved. ``opt``: the parsed options (translate/options.py's :func:`parse_options`)."""
    for name in ("src_lang", "tgt_lang"):  # an unset shell variable: -tgt_lang "$TGT"
        value = getattr(opt, name)
        if value is not None and not value.strip():
            raise UserError(
                f"-{name} is empty (an unset shell variable?): give a language code such as en, or leave the flag out"
            )
    refuse_output_over_inputs(
        {"-output": opt.output, "-log_file": opt.log_file},
        {
            "-model": opt.models,
            "-src": opt.src,
            "-tgt": opt.tgt,
            "-lookup_dict": opt.lookup_dict,
            "-freq_offsets": opt.freq_offsets,
            "-tgt_emb_extend": opt.tgt_emb_extend,
            "-tgt_emb_extend_vocab": opt.tgt_emb_extend_vocab,
            "-src_bpe_codes": opt.src_bpe_codes,
            "-src_spm": opt.src_spm,
            "-tgt_spm": opt.tgt_spm,
            "-config": opt.config,
        },
    )
    if opt.src == "-" and opt.tgt == "-":
        raise UserError("-src - and -tgt - would both read standard input: give one of them as a file")
    if opt.batch_size < 1 or opt.chunk_size < 1:
        raise UserError("-batch_size and -chunk_size must be at least 1")
    config = config.resolved()
    if opt.output != "-":
        out_dir = os.path.dirname(os.path.abspath(opt.output))
        if not os.path.isdir(out_dir):
            raise UserError(f"-output {opt.output}: directory {out_dir} does not exist")
        if os.path.isdir(opt.output):
            raise UserError(f"-output {opt.output}: is a directory, expected a file name")
    if opt.tgt_prefix and not opt.tgt:
        raise UserError("-tgt_prefix forces each output to start with its -tgt line: give -tgt")
    return config
