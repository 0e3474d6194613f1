#!/usr/bin/env python
"""How well does a model's attention serve ``-replace_unk``? Translate a tokenized source file
greedily and, for every output word, ask: had this word come out as ``<unk>``, would
``-replace_unk`` (the most-attended source word, translated by the lexicon or copied) have put
it back? That is the replacement accuracy, over the output words it could restore at all: those
that some source word of the sentence yields (through the lexicon, or by copying). The real
``<unk>`` outputs are too few in a well-trained model to measure it on them alone.

    python lab/tools/replacement_accuracy.py -model M.pt -src test.fr -lookup_dict lexicon.txt \\
        [-alignment_layer mean,0,1] [-json out.json]

With several ``-alignment_layer`` values (Transformer decoders) the source is translated once
per layer: the words are the same, only the attention read differs. LSTM models have one
attention; leave the option out.
"""

import argparse
import json
import sys

from onmt_cont.constants import UNK
from onmt_cont.translate.build import build_translator
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.unk import (
    is_punctuation,
    read_lexicon,
    replace_unk,
    source_word_at,
)
from onmt_cont.utils.atomic import atomic_write_text
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.io import read_lines
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.threads import apply_threads


def restorable(word, src_tokens, lexicon):
    """Can some source word give back ``word`` (by the lexicon, or copied)?"""
    for pos in range(len(src_tokens)):
        s = source_word_at(src_tokens, pos)
        if word == s or lexicon.get(s) == word:
            return True
    return False


def score(outputs, attns, sources, lexicon):
    """outputs: word lists; attns: [len, >= src_len] each; sources: token lists ->
    counts {'words', 'eligible', 'restored'} over the non-punctuation output words."""
    counts = {"words": 0, "eligible": 0, "restored": 0}
    for words, attn, src in zip(outputs, attns, sources, strict=True):
        for t, word in enumerate(words):
            if word == UNK or is_punctuation(word):
                continue
            counts["words"] += 1
            if not restorable(word, src, lexicon):
                continue
            counts["eligible"] += 1
            masked = words[:t] + [UNK] + words[t + 1 :]
            counts["restored"] += replace_unk(masked, attn, src, lexicon)[t] == word
    return counts


def parse_layers(text):
    if text is None:
        return [None]
    try:
        return [x if x == "mean" else int(x) for x in text.split(",")]
    except ValueError:
        raise SystemExit(
            f"error: -alignment_layer takes a comma list of layer numbers and 'mean', got {text!r}"
        ) from None


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-model", required=True)
    p.add_argument("-src", required=True, help="tokenized source, one sentence per line")
    p.add_argument("-lookup_dict", required=True, help="the lexicon translate.py -replace_unk uses")
    p.add_argument("-alignment_layer", default=None, help="Transformer: comma list of decoder layers to compare")
    p.add_argument("-batch_size", type=int, default=64)
    p.add_argument("-threads", type=int, default=1, help="torch threads (0: PyTorch's default)")
    p.add_argument("-json", help="also write the counts here")
    opt = p.parse_args(argv)
    refuse_output_over_inputs(
        {"-json": opt.json}, {"-model": opt.model, "-src": opt.src, "-lookup_dict": opt.lookup_dict}
    )
    if opt.batch_size < 1:
        raise UserError(f"-batch_size must be at least 1, got {opt.batch_size}")
    apply_threads(opt.threads)
    lexicon = read_lexicon(opt.lookup_dict)
    lines = [line for _, line in read_lines(opt.src)]
    results = {}
    for layer in parse_layers(opt.alignment_layer):
        translator = build_translator(
            DecodingConfig(beam_size=1, block_ngram_repeat=0, alignment_layer=layer), [opt.model]
        )
        sources, outputs, attns = [], [], []
        todo = [line.lower().split() if translator.lower else line.split() for line in lines]
        todo = [t for t in todo if t]
        for i in range(0, len(todo), opt.batch_size):
            chunk = todo[i : i + opt.batch_size]
            out, att = translator.translate_batch(chunk, attention=True)
            sources += chunk
            outputs += out
            attns += att
        counts = score(outputs, attns, sources, lexicon)
        name = "default" if layer is None else str(layer)
        if layer is None and hasattr(translator.model.decoder, "alignment_layer"):
            name = f"default ({translator.model.decoder.alignment_layer or 'mean'})"
        counts["accuracy"] = counts["restored"] / max(counts["eligible"], 1)
        results[name] = counts
        print(
            f"alignment layer {name}: {counts['restored']} of {counts['eligible']} restorable output words "
            f"restored ({counts['accuracy']:.2%}); {counts['words']} non-punctuation output words"
        )
    if opt.json:
        atomic_write_text(opt.json, json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
