#!/usr/bin/env bash
# job a starts alone (-threads default), job b 15 s later; TRAIN=path of train.py (the "before" runs used a
# worktree of 6a992dc), TAG=name
cd "$(dirname "$0")/../../.."
unset OMP_NUM_THREADS
D=${D:-runs/quickstart}  # a finished docs/quickstart.sh run (data and table); OUT=... picks the outputs
for j in a b; do
  mkdir -p ${OUT:-runs/thread_claims}/late_${TAG}_$j
  python $TRAIN -data $D/data -save_model ${OUT:-runs/thread_claims}/late_${TAG}_$j/m -tgt_emb $D/emb.dec.pt \
    -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias -generator linear \
    -encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 \
    -heads 4 -transformer_ff 512 -dropout 0.1 -param_init 0 -param_init_glorot \
    -decay_method noam -learning_rate 1 -warmup_steps 400 -adam_beta2 0.998 -average_decay 1e-4 \
    -batch_size 32 -train_steps 400 -valid_steps 100000 -save_checkpoint_steps 100000 -report_every 50 \
    -log_file ${OUT:-runs/thread_claims}/late_${TAG}_$j/train.log > /dev/null 2>&1 &
  sleep 15
done
wait
