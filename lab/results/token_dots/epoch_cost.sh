#!/usr/bin/env bash
# candidate_dots without gathered rows (this checkout) against the former chunked gather (/tmp/old47 = 26c87c3):
# 300 updates of the recipe's continuous row, the two side by side on one thread each (same data, same seed), then
# its ce row beside the continuous row (this checkout) for the epoch-cost ratio; the whole twice.
# SRC=de (default): the source-piece row against BPE ce with the average; SRC=fr: the word row against word ce with
# the average. Times: lab/results/token_dots/epoch_cost_times*.txt
cd /work/main
SRC=${SRC:-de}
T="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.1 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -threads 1 -train_steps 300 -report_every 100 -valid_steps 1000000 -save_checkpoint_steps 1000000"
CONT="-learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias"
if [ "$SRC" = de ]; then
  R=/work/main/runs/word_choice_de-en
  CE="-data $R/bpe/data -learning_rate 0.5 -loss ce -label_smoothing 0.1"
  NCE="-data $R/srcbpe/data -tgt_emb $R/srcbpe/emb.dec.pt $CONT -drop_final_punct 0.05"
else
  R=/work/main/runs/word_choice_fr-en
  CE="-data $R/data -tgt_emb $R/emb.dec.pt -learning_rate 0.5 -loss ce -label_smoothing 0.1"
  NCE="-data $R/data -tgt_emb $R/emb.dec.pt $CONT"
fi
O=${O:-runs/s47/epoch_cost}; mkdir -p $O
run() {  # NAME DIR FLAGS...
  local name=$1 dir=$2; shift 2
  ( cd "$dir" && s=$(date +%s.%N); python train.py $T "$@" -save_model /tmp/ec47_$name -log_file /work/main/$O/${name}_$rep.log \
      > /dev/null 2>&1; echo "$name rep $rep rc $? wall $(echo "$(date +%s.%N) - $s" | bc)" >> /work/main/$O/times.txt )
}
for rep in 1 2; do
  run nce_new /work/main $NCE & run nce_old /tmp/old47 $NCE & wait
  run ce_new /work/main $CE & run nce_new2 /work/main $NCE & wait
done
