"""translate.py: translate a tokenized source file with a trained checkpoint.

Continuous models decode by nearest neighbour in the target embedding table (greedy, or
beam search over the k nearest); softmax models greedily or with beam search.
"""

import os
import time

import torch

from onmt_cont import opts
from onmt_cont.bin.train import resolve_device
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import read_lexicon
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import atomic_write_text, read_lines


def build_parser():
    p = opts.new_parser("Translate a tokenized source file (one sentence per line) with a trained model.")
    g = p.add_argument_group("Data")
    g.add_argument("-model", help="checkpoint written by train.py")
    g.add_argument("-src", help="tokenized source text, one sentence per line")
    g.add_argument("-output", help="where to write the translations (one line per input line)")
    g.add_argument("-tgt", help="tokenized reference: report BLEU (sacreBLEU on detokenized text + tokenized BLEU)")
    g.add_argument("-tgt_lang", default="en", help="target language for Moses detokenization (BLEU)")
    g = p.add_argument_group("Decoding")
    g.add_argument("-batch_size", type=int, default=32, help="sentences per batch")
    g.add_argument("-gpu", type=int, default=None, help="CUDA device id; CPU when absent")
    g.add_argument("-max_length", type=int, default=None,
                   help="longest output in words; default -max_length_ratio × source length + 10")
    g.add_argument("-max_length_ratio", type=float, default=2.0, help="see -max_length")
    g.add_argument("-beam_size", type=int, default=1, help="1: greedy. For continuous models each hypothesis "
                   "expands to its k nearest neighbours, scored by the generator's criterion")
    g.add_argument("-length_penalty", choices=["none", "avg", "wu"], default="avg",
                   help="beam search: rank finished hypotheses by score / length (avg) or GNMT's penalty (wu)")
    g.add_argument("-alpha", type=float, default=0.0, help="exponent of -length_penalty wu")
    g.add_argument("-replace_unk", action="store_true", help="replace each <unk> through the attention: the "
                   "most-attended source word, translated by -lookup_dict, or copied when it is not there")
    g.add_argument("-lookup_dict", help="bilingual lexicon: 'source_word target_word' per line (build_lexicon.py)")
    g.add_argument("-verbose", action="store_true", help="print each source and translation")
    return p


@cli_main
def main(argv=None):
    opt = opts.parse(build_parser(), argv, required=("model", "src", "output"))
    if opt.beam_size < 1 or opt.batch_size < 1:
        raise UserError("-beam_size and -batch_size must be at least 1")
    if (opt.max_length is not None and opt.max_length < 0) or opt.max_length_ratio < 0:
        raise UserError("-max_length and -max_length_ratio must be at least 0")
    if opt.lookup_dict and not opt.replace_unk:
        raise UserError("-lookup_dict is only used with -replace_unk")
    out_dir = os.path.dirname(os.path.abspath(opt.output))
    if not os.path.isdir(out_dir):
        raise UserError(f"-output {opt.output}: directory {out_dir} does not exist")
    lexicon = read_lexicon(opt.lookup_dict) if opt.lookup_dict else None
    lines = [line for _, line in read_lines(opt.src)]
    refs = [line for _, line in read_lines(opt.tgt)] if opt.tgt else None
    if refs is not None and len(refs) != len(lines):
        raise UserError(f"-tgt {opt.tgt} has {len(refs)} lines but -src {opt.src} has {len(lines)}")
    device = resolve_device(opt.gpu)
    translator = Translator(opt.model, device, opt.beam_size, opt.max_length, opt.max_length_ratio,
                            opt.length_penalty, opt.alpha, opt.replace_unk, lexicon)
    start = time.time()
    with torch.no_grad():
        outputs = translator.translate_lines(lines, opt.batch_size, lower=translator.lower)
    elapsed = time.time() - start
    atomic_write_text(opt.output, "".join(o + "\n" for o in outputs))
    if opt.verbose:
        for i, (src, out) in enumerate(zip(lines, outputs, strict=True), 1):
            print(f"SENT {i}: {src}\nPRED {i}: {out}")
    print(f"translated {len(lines)} lines in {elapsed:.1f}s ({len(lines) / max(elapsed, 1e-9):.1f} sent/s): "
          f"wrote {opt.output}")
    if refs is not None:
        from onmt_cont.evaluate import bleu_report

        report, _ = bleu_report(outputs, refs, opt.tgt_lang)
        print("\n".join(report))
