#!/usr/bin/env bash
# The de->en continuous Transformer rows (t_nce_both_avg_dfp) ran 32 epochs; the window-2 rule from epoch 1 runs past
# 32 on both seeds. Continue each from its epoch-32 checkpoint up to the recipe's 40 epochs without its own stop
# (a resumed run from before the option restarts its count), and end it where lab/tools/stopping_rule.py, replayed
# on the joined logs, stops.   bash runs/t_more40.sh SEED
set -euo pipefail
cd /work/main
seed=$1
R=runs/word_choice_de-en; W=runs/wc_win2_de-en; M=$W/t_nce_both_avg_dfp.s$seed.more
if [ "$seed" = 1 ]; then LAST=runs/wc_more_de-en/t_nce_both_avg_dfp.s1; LOGS=$R/t_nce_both_avg_dfp.s1/train.log,$LAST/train.log
else LAST=$R/t_nce_both_avg_dfp.s2; LOGS=$LAST/train.log; fi
mkdir -p $M
cp $LAST/model_last.pt $M/model_resume32.pt
TMODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4
 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot
 -decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
# shellcheck disable=SC2086
python train.py -train_from $M/model_resume32.pt -data $R/data -save_model $M/model -tgt_emb $R/emb.dec.pt $TMODEL \
  -learning_rate 2 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias \
  -average_decay 1e-4 -drop_final_punct 0.05 -epochs 40 -early_stopping 0 -early_stopping_window 2 -seed $seed \
  -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 \
  -report_every 100 -log_file $M/train.log > $M/train.stdout 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  sleep 20
  grep -q "greedy BLEU" $M/train.log || continue
  row=$(python lab/tools/stopping_rule.py -windows 2 -runs $LOGS,$M/train.log | tail -1)
  case "$row" in *"runs past"*) ;; *) echo "stopped by the replay: $row"; sleep 5; kill $pid; break;; esac
done
wait $pid || true
python lab/tools/stopping_rule.py -windows 2 -runs $LOGS,$M/train.log
