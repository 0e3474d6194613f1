#!/usr/bin/env bash
# Issue 21: sequence-level unlikelihood fine-tuning of the de->en continuous Transformer rows
# (t_nce_both_avg_dfp, window 2) from their chosen checkpoint (model_best.pt), with the row's own
# training options (as runs/t_more40.sh) plus -seq_unlikelihood ALPHA, for EPOCHS_MORE epochs.
#   bash runs/ul_ft.sh SEED ALPHA EPOCHS_MORE [NGRAM]
set -euo pipefail
cd /work/main
seed=$1; alpha=$2; more=$3; ngram=${4:-3}
R=runs/word_choice_de-en; W=runs/wc_win2_de-en; B=$W/t_nce_both_avg_dfp.s$seed
M=runs/wc_ul_de-en/t_nce_both_avg_dfp.s$seed.ul$alpha.n$ngram
mkdir -p $M
from=$(python -c "import torch; print(torch.load('$B/model_best.pt', weights_only=False, map_location='cpu')['progress']['epoch'])")
TMODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4
 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot
 -decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
# shellcheck disable=SC2086
python train.py -train_from $B/model_best.pt -data $R/data -save_model $M/model -tgt_emb $R/emb.dec.pt $TMODEL \
  -learning_rate 2 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias \
  -average_decay 1e-4 -drop_final_punct 0.05 -epochs $((from + more)) -early_stopping 0 -seed $seed \
  -seq_unlikelihood $alpha -seq_unlikelihood_ngram $ngram \
  -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 \
  -report_every 100 -log_file $M/train.log > $M/train.stdout 2>&1
