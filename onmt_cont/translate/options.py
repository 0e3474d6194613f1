"""translate.py's options: the parser, and the parsed options with their decoding configuration. Every flag but
-config is a field of a typed configuration (:mod:`onmt_cont.config`): the decoding flags of DecodingConfig and
the -ann flags of AnnConfig (translate/config.py), the others of the session's TranslateSessionConfig
(translate/session_options.py), with their help, types, defaults and the session's ranges. The decoding options
are checked in translate/checks.py (before any model is loaded) and the Translator; the session's ranges and the
checks that combine options here, in :func:`check_options`."""

import os
import sys
from argparse import ArgumentParser, Namespace
from collections.abc import Sequence
from dataclasses import fields

from onmt_cont import opts
from onmt_cont.config import add_flags, check_ranges, from_values
from onmt_cont.translate.config import FLAG_NAMES, AnnConfig, DecodingConfig
from onmt_cont.translate.session_options import TranslateSessionConfig
from onmt_cont.utils import numbers
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.overwrite import refuse_output_over_inputs


def build_parser() -> ArgumentParser:
    """translate.py's parser: -config, then the groups Data, Raw text, Decoding, Word choice and Open vocabulary,
    their flags from the session's, the decoding's and the approximate search's fields interleaved as they were
    declared by hand."""
    p = opts.new_parser("Translate a tokenized source file (one sentence per line) with a trained model.")
    g = p.add_argument_group("Data")
    add_flags(
        g,
        TranslateSessionConfig,
        ["model", "src", "output", "tgt", "src_spm", "tgt_spm", "tokenized", "tgt_tokenized", "tgt_lang"],
    )
    g = p.add_argument_group("Raw text (docs/recipes/own_data.sh)")
    add_flags(g, TranslateSessionConfig, ["src_lang", "src_bpe_codes", "detokenize"])
    g = p.add_argument_group("Decoding")
    add_flags(g, TranslateSessionConfig, ["batch_size", "batch_type", "chunk_size"])
    add_flags(g, DecodingConfig, ["engine"])
    add_flags(g, TranslateSessionConfig, ["gpu", "threads"])
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
    add_flags(g, TranslateSessionConfig, ["remove_bpe"])
    g = p.add_argument_group("Word choice (continuous models; -freq_offsets: any model)")
    add_flags(g, DecodingConfig, ["decode_prior", "decode_prior_cap", "freq_offsets", "csls"])
    g = p.add_argument_group("Open vocabulary and approximate search (continuous models)")
    add_flags(g, DecodingConfig, ["tgt_emb_extend", "tgt_emb_extend_vocab"])
    add_flags(g, AnnConfig, [f.name for f in fields(AnnConfig)])
    add_flags(
        g,
        DecodingConfig,
        ["n_best", "with_score", "random_sampling_topk", "random_sampling_topp", "random_sampling_temp", "seed"],
    )
    add_flags(g, TranslateSessionConfig, ["tgt_prefix"])
    add_flags(g, DecodingConfig, ["report_align", "attn_debug"])
    add_flags(g, TranslateSessionConfig, ["log_file", "report_time", "verbose"])
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
    """translate.py's decoding flags -> a DecodingConfig (the API's names; the -ann flags as its ``ann``)."""
    names = {name: getattr(opt, flag) for flag, name in FLAG_NAMES.items()}
    return DecodingConfig(
        **{name: getattr(opt, name) for name in DecodingConfig.names() if name not in names and name != "ann"},
        **names,
        ann=from_values(AnnConfig, vars(opt)).index(),
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
    check_ranges(vars(opt), TranslateSessionConfig)
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
