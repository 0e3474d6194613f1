#!/usr/bin/env bash
# The update's cost without dropout: 300 updates of the fr->en word rows on one thread each, in turns (ce at dropout
# 0.1, the continuous row at dropout 0, the continuous row at dropout 0.1, ce at dropout 0; then again in the reverse
# order, REPS times), each beside whatever else runs, same data and seed. Prints each run's wall seconds; ratios of the
# means are docs/results.md 5c, continued (26)'s epoch costs. OUT [runs/s51/epoch_cost].
cd "$(dirname "$0")/../../.."  # the repository root
R=runs/word_choice_fr-en
T="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -threads 1 -train_steps 300 -report_every 100 -valid_steps 1000000 -save_checkpoint_steps 1000000 -data $R/data"
CE="-learning_rate 0.5 -loss ce -label_smoothing 0.1"
NCE="-tgt_emb $R/emb.dec.pt -learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias"
O=${OUT:-runs/s51/epoch_cost}; mkdir -p "$O"
order="ce_d01 nce_d00 nce_d01 ce_d00"
for rep in $(seq "${REPS:-2}"); do
  for row in $order; do
    case $row in
      ce_d01) F="$CE -dropout 0.1" ;; ce_d00) F="$CE -dropout 0" ;;
      nce_d01) F="$NCE -dropout 0.1" ;; nce_d00) F="$NCE -dropout 0" ;;
    esac
    s=$(date +%s.%N)
    # shellcheck disable=SC2086
    python train.py $T $F -save_model "/tmp/ec_$row" -log_file "$O/${row}_$rep.log" > /dev/null 2>&1 || exit 1
    echo "$row rep $rep wall $(echo "$(date +%s.%N) - $s" | bc)" | tee -a "$O/times.txt"
  done
  order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
done
