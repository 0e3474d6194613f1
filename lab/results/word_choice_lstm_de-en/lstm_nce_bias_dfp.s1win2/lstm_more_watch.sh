#!/usr/bin/env bash
# continue runs/word_choice_lstm_de-en/CFG.sSEED without early stopping and stop it where
# lab/tools/stopping_rule.py (window 2, patience 3, on the joined logs) says the rule from epoch 1 stops
set -euo pipefail
cd /work/main
cfg=$1; seed=$2; shift 2
R=runs/word_choice_lstm_de-en; W=runs/wc_win2_lstm_de-en; M=$W/$cfg.s$seed.more; mkdir -p $M
cp $R/$cfg.s$seed/model_last.pt $M/model_resume.pt; cp $R/$cfg.s$seed/model_best.pt $M/model_best.pt
python train.py -train_from $M/model_resume.pt -data $R/data -save_model $M/model -tgt_emb $R/emb.dec.pt \
  -brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3 \
  -drop_final_punct 0.05 "$@" -epochs 40 -early_stopping 0 -early_stopping_window 2 -seed $seed -threads 1 \
  -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 \
  -report_every 100 -log_file $M/train.log > $M/train.stdout 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  sleep 15
  [ -s $M/train.log ] || continue
  row=$(python lab/tools/stopping_rule.py -windows 2 -runs $R/$cfg.s$seed/train.log,$M/train.log 2>/dev/null | tail -1) || continue
  case "$row" in *"runs past"*) ;; *) echo "stopped by the replay: $row"; sleep 5; kill $pid; break;; esac
done
wait $pid || true
