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

from onmt_cont.export.ct2 import convert
from onmt_cont.export.options import add_export_options
from onmt_cont.utils.errors import cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs


def build_parser():
    p = argparse.ArgumentParser(
        prog="onmt_cont_convert",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_export_options(p)  # a flag per ExportConfig field (export/options.py)
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
