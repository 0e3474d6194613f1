#!/usr/bin/env python
"""Cut the small sample shipped in data/ from ../shared/data (Multi30k fr->en + English fastText).

    python lab/tools/make_sample.py -shared ../shared/data -out data

Text is tokenized as the shared vectors were trained (Moses, no escaping, lowercase):
the first 3,000 training pairs, the first 200 validation pairs and the first 200
pairs of test_2016_flickr; raw/ holds the same lines untokenized (docs/recipes/own_data.sh's
input, and the references of sacreBLEU on running text). The vector file keeps every word of the sample's English
side that has a vector, plus the most frequent other words of the full file up to
-extra_words, so that the <unk> average (vectors of words outside the vocabulary)
means something. Vector lines are copied byte for byte.
"""

import argparse
import gzip
import os

from mosestokenizer import MosesTokenizer

from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import refuse_output_over_inputs

SPLITS = (("train", "train", 3000), ("valid", "val", 200), ("test", "test_2016_flickr", 200))


def tokenize_lines(lines, lang):
    with MosesTokenizer(lang, no_escape=True) as tok:
        return [" ".join(tok(line.strip())).lower() if line.strip() else "" for line in lines]


@cli_main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-shared", default="../shared/data")
    p.add_argument("-out", default="data")
    p.add_argument("-extra_words", type=int, default=1400)
    args = p.parse_args(argv)
    inputs = [
        os.path.join(args.shared, "multi30k", f"{split}.{lang}") for _, split, _ in SPLITS for lang in ("fr", "en")
    ]
    inputs.append(os.path.join(args.shared, "embeddings", "en.ft300.vec.gz"))
    outputs = [
        os.path.join(args.out, *sub, f"{name}.{lang}")
        for name, _, _ in SPLITS
        for lang in ("fr", "en")
        for sub in ((), ("raw",))
    ]
    refuse_output_over_inputs({"-out": [*outputs, os.path.join(args.out, "en.vec.gz")]}, {"-shared": inputs})
    for path in inputs:
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such file (-shared: the folder of ../shared/data's README)")
    os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)
    en_words = set()
    for name, split, n in SPLITS:
        for lang in ("fr", "en"):
            with open(os.path.join(args.shared, "multi30k", f"{split}.{lang}"), encoding="utf-8") as f:
                raw = [next(f) for _ in range(n)]
            tok = tokenize_lines(raw, lang)
            with open(os.path.join(args.out, "raw", f"{name}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(raw)
            with open(os.path.join(args.out, f"{name}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(t + "\n" for t in tok)
            if lang == "en":
                for t in tok:
                    en_words.update(t.split())
    kept, extra = [], 0
    with gzip.open(os.path.join(args.shared, "embeddings", "en.ft300.vec.gz"), "rt", encoding="utf-8") as f:
        dim = next(f).split()[1]
        for line in f:
            word = line.split(" ", 1)[0]
            if word in en_words:
                kept.append(line)
            elif extra < args.extra_words:
                kept.append(line)
                extra += 1
    with gzip.GzipFile(os.path.join(args.out, "en.vec.gz"), "wb", mtime=0) as f:
        f.write(f"{len(kept)} {dim}\n".encode())
        f.writelines(line.encode("utf-8") for line in kept)
    print(f"wrote {args.out}: {len(kept)} vectors ({len(kept) - extra} sample words, {extra} others)")


if __name__ == "__main__":
    main()
