#!/usr/bin/env bash
# (run from the repository root) screen NAME EPOCHS FLAGS...: fr->en continuous word row t_nce_both_avg_d01, seed 3, with FLAGS appended (the last
# value of a repeated flag wins), 1 thread, validation BLEU per epoch only
cd "$(dirname "$0")/../../../.."  # the repository root
name=$1; epochs=$2; shift 2
run=runs/s44/screens/$name; mkdir -p $run
TMODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
flags="$TMODEL -learning_rate 2 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias -average_decay 1e-4 -dropout 0.1"
python train.py -data runs/word_choice_fr-en/data -save_model $run/model -tgt_emb runs/word_choice_fr-en/emb.dec.pt $flags "$@" \
  -epochs $epochs -seed 3 -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 \
  -save_checkpoint_epochs 1000 -report_every 100 -log_file $run/train.log > $run/train.stdout 2>&1
echo "rc $?" >> $run/train.stdout
