"""onmt_cont_convert: a Transformer checkpoint as a CTranslate2 model, for fast CPU and GPU decoding.

    onmt_cont_convert -model run/model_best.pt -output model_ct2 [-quantization int8]
    onmt_cont_translate -model model_ct2 -src test.fr          # decodes through CTranslate2

Softmax models and continuous models whose decoding criterion is vMF or l2 (nllvmf, nllvmf_nce, l2:
the presets) export exactly: greedy output is the checkpoint's. A continuous model's decoding prior
(-decode_prior) and beam temperature are part of its output layer, so they are fixed here, as is the
decoder layer whose attention -replace_unk reads (-alignment_layer; default the last). The directory
holds CTranslate2's model.bin and vocabularies, and onmt_cont.json: the vocabularies' counts, the raw-text
record (languages, lowercasing, subword model) and what was fixed, so translate.py reads raw text as it
does from the checkpoint."""

import argparse
import sys

from onmt_cont.export.ct2 import QUANTIZATIONS, convert
from onmt_cont.models.transformer import parse_alignment_layer
from onmt_cont.utils.errors import cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs


def build_parser():
    p = argparse.ArgumentParser(
        prog="onmt_cont_convert",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("-model", required=True, help="a Transformer checkpoint written by train.py (or its release)")
    p.add_argument("-output", required=True, help="the CTranslate2 model directory to write")
    p.add_argument(
        "-quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="store the weights as this type (int8: 8-bit weights, float32 computation on the CPU); default float32",
    )
    p.add_argument(
        "-decode_prior",
        type=float,
        default=0.0,
        help="continuous models: β of score + β · log p_train(w), as translate.py's (default 0)",
    )
    p.add_argument(
        "-decode_prior_cap",
        type=int,
        default=0,
        help="continuous models: the prior flat for words seen at least this often (0: the plain prior)",
    )
    p.add_argument(
        "-beam_temperature",
        type=float,
        default=1.0,
        help="continuous models: beam search's softmax over the scores / (the model's scale × this)",
    )
    p.add_argument(
        "-alignment_layer",
        type=parse_alignment_layer,
        default=None,
        help="the decoder layer whose attention (every head's mean) -replace_unk reads (default: the last; "
        "CTranslate2 reads one layer, so 'mean' is not possible)",
    )
    p.add_argument("-force", action="store_true", help="replace -output if it exists")
    return p


@cli_main
def main(argv=None):
    opt = build_parser().parse_args(argv)
    refuse_output_over_inputs({"-output": opt.output}, {"-model": opt.model})
    layer = None if opt.alignment_layer == "mean" else opt.alignment_layer
    if opt.alignment_layer == "mean":
        print(
            "note: -alignment_layer mean: CTranslate2 reads one layer's attention; the last is exported",
            file=sys.stderr,
        )
    record = convert(
        opt.model,
        opt.output,
        opt.quantization,
        opt.decode_prior,
        opt.decode_prior_cap,
        opt.beam_temperature,
        layer,
        opt.force,
    )
    kind = f"continuous ({record['criterion']} criterion)" if record["continuous"] else "softmax"
    print(
        f"wrote {opt.output}: a CTranslate2 model ({record['quantization']} weights) of {opt.model}'s {kind} "
        f"Transformer; translate with: onmt_cont_translate -model {opt.output} -src FILE",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
