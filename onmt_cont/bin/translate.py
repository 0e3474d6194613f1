"""translate.py: translate a source file with a trained checkpoint: parse the options, build the translator,
stream the source through it.

The source is tokenized text, as preprocess.py read it; or raw text with ``-src_lang LANG``
(Moses-tokenized and lowercased here, then cut into pieces with ``-src_bpe_codes``).
``-detokenize`` writes running text instead of tokens.

Continuous models decode by nearest neighbour in the target embedding table (greedy, or
beam search over the k nearest); softmax models greedily or with beam search.

The source (and -tgt) are streamed -chunk_size lines at a time into a temporary file beside -output,
renamed onto it only at the end (translate/files.py); ``-src -`` or no -src reads standard input, and
without -output (or with ``-output -``) the translations go to standard output. Every other line
translate.py prints (the summary, BLEU, -verbose) goes to standard error.
No -output may be one of the files the run reads.
"""

import sys

import torch

from onmt_cont.translate.build import build_translator
from onmt_cont.translate.files import STDIN, count_source, remove_stale_outputs
from onmt_cont.translate.options import check_options, decoding_config, parse_options
from onmt_cont.translate.report import log, log_file
from onmt_cont.translate.stream import translate_stream
from onmt_cont.utils.device import resolve_device
from onmt_cont.utils.errors import cli_main
from onmt_cont.utils.memory import keep_freed_memory
from onmt_cont.utils.signals import Stopped, sigterm_stops
from onmt_cont.utils.threads import apply_threads


@cli_main
def main(argv=None):
    opt = parse_options(argv)
    config = check_options(opt, decoding_config(opt))  # refused before any file is read or model loaded
    done = {"lines": 0, "total": None}
    try:
        with sigterm_stops(), log_file(opt.log_file):
            run(opt, config, done)
    except KeyboardInterrupt as exc:
        sigterm = isinstance(exc, Stopped)
        of = f" of {done['total']}" if done["total"] is not None else ""
        kept = (
            "the lines written so far stay on standard output"
            if opt.output == "-"
            else f"nothing kept, -output {opt.output} was not written (an earlier one, if any, is unchanged)"
        )
        print(
            f"translate.py: stopped by {'SIGTERM' if sigterm else 'SIGINT (Ctrl-C)'} after {done['lines']}{of} "
            f"lines: {kept}",
            file=sys.stderr,
        )
        raise SystemExit(143 if sigterm else 130) from None


def run(opt, config, done):
    """translate.py's work under its checked options and ``config``; ``done["lines"]``: the lines translated so
    far (for an interrupt's message)."""
    src = STDIN if opt.src == "-" else opt.src
    tgt = STDIN if opt.tgt == "-" else opt.tgt
    remove_stale_outputs(opt.output, log)
    done["total"] = n_src = count_source(src, tgt, opt.src, opt.tgt)
    device = resolve_device(opt.gpu)
    apply_threads(opt.threads)
    keep_freed_memory()  # a beam step reuses the pages of the last one's scores (onmt_cont.utils.memory)
    translator = build_translator(config, opt.models, device, threads=torch.get_num_threads(), log=log)
    translate_stream(opt, translator, src, tgt, n_src, done)


if __name__ == "__main__":
    main()
