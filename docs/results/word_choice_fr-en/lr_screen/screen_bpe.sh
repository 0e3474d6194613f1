#!/usr/bin/env bash
# screen_bpe NAME EPOCHS SEED FLAGS...: de->en BPE ce with the average (t_bpe_ce_avg_d01) with FLAGS appended, 1 thread
cd "$(dirname "$0")/../../../.."  # the repository root
name=$1; epochs=$2; seed=$3; shift 3
run=runs/s44/screens/$name; mkdir -p $run
TMODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
flags="$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 -average_decay 1e-4 -dropout 0.1"
python train.py -data runs/word_choice_de-en/bpe/data -save_model $run/model $flags "$@" -valid_remove_bpe \
  -epochs $epochs -seed $seed -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 \
  -save_checkpoint_epochs 1000 -report_every 100 -log_file $run/train.log > $run/train.stdout 2>&1
echo "rc $?" >> $run/train.stdout
