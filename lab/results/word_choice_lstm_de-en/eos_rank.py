"""Teacher-forced to the end of each reference: where </s> ranks among a trained model's scores,
split by whether the source ends with "." (the record of docs/results.md 5c, continued (4)):

    python lab/results/word_choice_lstm_de-en/eos_rank.py runs/word_choice_lstm_de-en/lstm_nce_bias.s2/model_best.pt \\
        runs/word_choice_lstm_de-en/tok/val.de runs/word_choice_lstm_de-en/tok/val.en
"""

import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.abspath(__file__).rsplit("/docs/", 1)[0])  # the repository root

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402

torch.set_num_threads(1)
ckpt, src_path, ref_path = sys.argv[1:4]
model, _, src_vocab, tgt_vocab = model_from_checkpoint(load_checkpoint(ckpt), "cpu")
model.eval()
with open(src_path, encoding="utf-8") as f:
    sources = [line.split() for line in f]
with open(ref_path, encoding="utf-8") as f:
    references = [line.split() for line in f]
groups = {True: [], False: []}  # source ends with ".": [(rank of </s>, best score - </s>'s, best word)]
with torch.no_grad():
    for src, ref in zip(sources, references, strict=True):
        memory, mask, state = model.encode(torch.tensor([src_vocab.encode(src)]), torch.tensor([len(src)]))
        for w in [BOS_ID] + tgt_vocab.encode(ref):  # the scores after the reference's last word
            out, _, state = model.decoder(torch.tensor([[w]]), memory, mask, state)
            scores = model.generator.scores(model.generator(out[:, 0]))[0]
        scores[[PAD_ID, BOS_ID]] = float("-inf")
        rank = int((scores > scores[EOS_ID]).sum())
        gap = float(scores.max() - scores[EOS_ID])
        groups[src[-1] == "."].append((rank, gap, tgt_vocab.itos[int(scores.argmax())]))
for ends, rows in groups.items():
    ranks = [r for r, _, _ in rows]
    print(f"{'source ends with .' if ends else 'source without final .'}: {len(rows)} sentences; </s> first "
          f"{sum(r == 0 for r in ranks) / len(rows):.2f}, in the top 5 {sum(r < 5 for r in ranks) / len(rows):.2f}; "
          f"median gap {statistics.median(g for _, g, _ in rows):.3f}; first word where not </s>: "
          + " ".join(w for r, _, w in rows if r > 0)[:300])
