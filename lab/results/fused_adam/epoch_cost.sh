#!/usr/bin/env bash
# fused Adam (this checkout) against the loop (/tmp/old = 2fddb23), 300 updates of the de->en recipe rows on one
# thread each, the two implementations side by side (same data, same seed), then the next row
cd /work/main
R=/work/main/runs/word_choice_de-en
T="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.1 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -threads 1 -train_steps 300 -report_every 100 -valid_steps 1000000 -save_checkpoint_steps 1000000"
CE="-data $R/bpe/data -learning_rate 0.5 -loss ce -label_smoothing 0.1"
NCE="-data $R/srcbpe/data -tgt_emb $R/srcbpe/emb.dec.pt -learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias -drop_final_punct 0.05"
O=runs/s46/epoch_cost; mkdir -p $O
for rep in 1 2; do
for row in ce nce; do
  [ $row = ce ] && F=$CE || F=$NCE
  for impl in fused loop; do
    [ $impl = fused ] && dir=/work/main || dir=/tmp/old
    ( cd $dir && s=$(date +%s.%N); python train.py $T $F -save_model /tmp/ec_${row}_$impl -log_file /work/main/$O/${row}_${impl}_$rep.log > /dev/null 2>&1; echo "$row $impl rep $rep rc $? wall $(echo "$(date +%s.%N) - $s" | bc)" >> /work/main/$O/times.txt ) &
  done
  wait
done
done
