#!/usr/bin/env bash
# ce's label-smoothed loss as one autograd function (losses/softmax.py, this checkout) against F.cross_entropy (OLD,
# default /tmp/old49 = 8ee4325), and the continuous rows' epoch cost against the faster ce: 300 updates of each row,
# two side by side on one thread each (same data, same seed), the whole twice:
#   1. fr->en: the word row (t_nce_both_avg_d01_lr1) beside word ce with the average (t_ce_d01_avg);
#   2. de->en: the source-piece row (t_srcbpe_nce_both_avg_dfp_d01_lr1) beside BPE ce with the average (t_bpe_ce_avg_d01);
#   3. fr->en word ce with the average: this checkout beside OLD.
# Needs the recipe's data in runs/word_choice_{fr,de}-en (lab/recipes/word_choice.sh prepares it).
# Times: lab/results/label_smoothing/times.txt (whole runs, start-up included) and the runs' logs (a line per 100
# updates, for the time from update 100 to 300).
cd /work/main
T="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.1 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -threads 1 -train_steps 300 -report_every 100 -valid_steps 1000000 -save_checkpoint_steps 1000000"
CONT="-learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias"
CEL="-learning_rate 0.5 -loss ce -label_smoothing 0.1"
R=/work/main/runs/word_choice_fr-en
CE_FR="-data $R/data -tgt_emb $R/emb.dec.pt $CEL"
NCE_FR="-data $R/data -tgt_emb $R/emb.dec.pt $CONT"
R=/work/main/runs/word_choice_de-en
CE_DE="-data $R/bpe/data $CEL"
NCE_DE="-data $R/srcbpe/data -tgt_emb $R/srcbpe/emb.dec.pt $CONT -drop_final_punct 0.05"
O=${O:-runs/s49/epoch_cost}; OLD=${OLD:-/tmp/old49}; mkdir -p $O
run() {  # NAME DIR FLAGS...
  local name=$1 dir=$2; shift 2
  ( cd "$dir" && s=$(date +%s.%N); python train.py $T "$@" -save_model /tmp/ec49_$name -log_file /work/main/$O/${name}_$rep.log \
      > /dev/null 2>&1; echo "$name rep $rep rc $? wall $(echo "$(date +%s.%N) - $s" | bc)" >> /work/main/$O/times.txt )
}
for rep in 1 2; do
  run nce_fr /work/main $NCE_FR & run ce_fr /work/main $CE_FR & wait
  run nce_de /work/main $NCE_DE & run ce_de /work/main $CE_DE & wait
  run ce_fr_new /work/main $CE_FR & run ce_fr_old $OLD $CE_FR & wait
done
