#!/usr/bin/env bash
# The softmax (cross-entropy) baseline on the shipped sample, for comparison with docs/quickstart.sh:
# same data, same encoder and decoder sizes, -loss ce with the paper's softmax learning rate (2e-4),
# translated greedily and with beam 5 (the vMF paper compares at both).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/softmax}
mkdir -p "$OUT"

python preprocess.py -train_src data/train.fr -train_tgt data/train.en \
  -valid_src data/valid.fr -valid_tgt data/valid.en \
  -save_data "$OUT/data" -tgt_emb data/en.vec.gz -shard_size 1000 -shuffle

python build_lexicon.py -src data/train.fr -tgt data/train.en -output "$OUT/lexicon.txt"

python train.py -data "$OUT/data" -save_model "$OUT/model" \
  -loss ce -generator linear -brnn -rnn_size 256 -word_vec_size 256 \
  -enc_layers 1 -dec_layers 2 -dropout 0.2 -batch_size 32 -epochs ${EPOCHS:-12} \
  -valid_steps 100000 -save_checkpoint_steps 100000 -report_every 50 -log_file "$OUT/train.log"

for beam in 1 5; do
  python translate.py -model "$OUT/model_best.pt" -src data/test.fr -output "$OUT/test.beam$beam.en" \
    -tgt data/test.en -beam_size $beam -replace_unk -lookup_dict "$OUT/lexicon.txt"
done
