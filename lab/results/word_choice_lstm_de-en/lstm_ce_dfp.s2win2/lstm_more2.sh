#!/usr/bin/env bash
# lstm_ce_dfp.s2.more stopped at epoch 26 by its own (restarted) count; the window-2 rule from epoch 1 goes on:
# continue without early stopping into the same folder and log, and stop it where lab/tools/stopping_rule.py says
set -euo pipefail
cd /work/main
R=runs/word_choice_lstm_de-en; W=runs/wc_win2_lstm_de-en; M=$W/lstm_ce_dfp.s2.more
cp $M/model_last.pt $M/model_resume2.pt
python train.py -train_from $M/model_resume2.pt -data $R/data -save_model $M/model -tgt_emb $R/emb.dec.pt \
  -brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3 \
  -drop_final_punct 0.05 -loss ce -epochs 40 -early_stopping 0 -early_stopping_window 2 -seed 2 -threads 1 \
  -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 \
  -report_every 100 -log_file $M/train.log > $M/train2.stdout 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  sleep 15
  row=$(python lab/tools/stopping_rule.py -windows 2 -runs $R/lstm_ce_dfp.s2/train.log,$M/train.log | tail -1)
  case "$row" in *"runs past"*) ;; *) echo "stopped by the replay: $row"; sleep 5; kill $pid; break;; esac
done
wait $pid || true
