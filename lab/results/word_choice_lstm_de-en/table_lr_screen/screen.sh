#!/usr/bin/env bash
# LSTM de->en screens, seed 2, 12 epochs, against lstm_nce_bias_dfp.s2's curve (the same flags)
# usage: bash runs/screen.sh NAME EXTRA_FLAGS...
set -euo pipefail
cd /work/main
name=$1; shift
D=runs/word_choice_lstm_de-en
out=runs/screen_de-en/$name
mkdir -p $out
start=$(date +%s)
python train.py -data $D/data -save_model $out/model -tgt_emb $D/emb.dec.pt \
  -brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3 \
  -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -word_bias -drop_final_punct 0.05 "$@" \
  -epochs ${EPOCHS:-12} -seed 2 -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 \
  -report_every 100 -log_file $out/train.log > $out/train.stdout 2>&1
echo "train_wall_s $(( $(date +%s) - start ))" > $out/train_time.txt
