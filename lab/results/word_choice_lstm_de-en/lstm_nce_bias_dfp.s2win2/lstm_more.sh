#!/usr/bin/env bash
# continue runs/word_choice_lstm_de-en/CFG.sSEED under -early_stopping 3 -early_stopping_window 2 (at most 40
# epochs), every epoch kept; the exact window-2 stop is then found by lab/tools/stopping_rule.py on the joined logs
set -euo pipefail
cd /work/main
cfg=$1; seed=$2; shift 2
R=runs/word_choice_lstm_de-en; W=runs/wc_win2_lstm_de-en; M=$W/$cfg.s$seed.more; mkdir -p $M
cp $R/$cfg.s$seed/model_last.pt $M/model_resume.pt; cp $R/$cfg.s$seed/model_best.pt $M/model_best.pt
start=$(date +%s)
python train.py -train_from $M/model_resume.pt -data $R/data -save_model $M/model -tgt_emb $R/emb.dec.pt \
  -brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3 \
  -drop_final_punct 0.05 "$@" -epochs 40 -early_stopping 3 -early_stopping_window 2 -seed $seed -threads 1 \
  -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 \
  -report_every 100 -log_file $M/train.log > $M/train.stdout 2>&1
echo "train_wall_s $(( $(date +%s) - start ))" > $M/train_time.txt
