"""Validation sacreBLEU of other parameter averages of one -average_decay run's epoch checkpoints
(results 5c, continued (19)). Run from the repository root:

    python lab/results/word_choice_fr-en/lr_screen/avg_screen.py RUN VALID_SRC VALID_TGT LANG EPOCHS KINDS OUT.tsv

EPOCHS: comma list. KINDS: comma list of
  ema1  the checkpoint's own moving average (what train.py validated)
  rawK  the uniform mean of the raw parameters (the checkpoints' train_model) of the last K epoch ends
  emaK  the uniform mean of the last K epochs' moving averages
  half  the uniform mean of the raw parameters of epochs ceil(e/2)..e
Appends "epoch<TAB>kind<TAB>bleu" lines to OUT.tsv and skips the pairs already there.
"""

import os
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.getcwd())
from onmt_cont.models.checkpoint import load_checkpoint  # noqa: E402


def main(run, src, tgt, lang, epochs, kinds, out):
    cache = {}

    def params(e, raw):
        if e not in cache:
            cache[e] = load_checkpoint(os.path.join(run, f"model_epoch_{e}.pt"))
        model = dict(cache[e]["model"])
        if raw:
            model.update(cache[e]["train_model"])
        return model

    def mean(eps, raw):
        models = [params(e, raw) for e in eps]
        return {k: (sum(m[k].double() for m in models) / len(models)).to(v.dtype) if v.is_floating_point() else v
                for k, v in models[0].items()}

    done = set()
    if os.path.exists(out):
        done = {tuple(line.split("\t")[:2]) for line in open(out)}
    for e in [int(x) for x in epochs.split(",")]:
        for kind in kinds.split(","):
            if (str(e), kind) in done:
                continue
            if kind == "half":
                eps, raw = list(range((e + 1) // 2, e + 1)), True
            else:
                m = re.fullmatch(r"(ema|raw)(\d+)", kind)
                if not m:
                    sys.exit(f"unknown kind {kind}")
                eps, raw = list(range(max(1, e - int(m.group(2)) + 1), e + 1)), m.group(1) == "raw"
            params(e, False)  # loads epoch e's checkpoint: options, vocabularies and progress come from it
            ckpt = {k: v for k, v in cache[e].items() if k != "train_model"}
            ckpt.update(model=mean(eps, raw), optim=None)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "m.pt")
                torch.save(ckpt, path)
                res = subprocess.run([sys.executable, "translate.py", "-model", path, "-src", src, "-tgt", tgt,
                                      "-tgt_lang", lang, "-output", os.path.join(tmp, "o.txt"), "-threads", "1"],
                                     capture_output=True, text=True)
            bleu = re.search(r"sacreBLEU \(detokenized\): ([0-9.]+)", res.stdout)
            line = f"{e}\t{kind}\t{bleu.group(1) if bleu else 'error: ' + res.stderr[-300:]}"
            print(line, flush=True)
            with open(out, "a") as f:
                f.write(line + "\n")
        cache.pop(e - 6, None)


if __name__ == "__main__":
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    main(*sys.argv[1:])
