#!/usr/bin/env bash
# screen ROW NAME EPOCHS SEED [FLAGS...]: a validation-only screen of one of lab/recipes/word_choice.sh's rows with
# FLAGS appended last (the last value of a repeated flag wins: e.g. -valid_steps 227 validates every half epoch),
# 1 thread, into $SCREENS/NAME [runs/s44/screens]. ROW:
#   nce_fr  fr->en continuous word row (t_nce_both_avg_d01)
#   ce_fr   fr->en word ce with the average (t_ce_d01_avg)
#   bpe_de  de->en BPE ce with the average (t_bpe_ce_avg_d01)
#   src_de  de->en continuous row with source pieces (t_srcbpe_nce_both_avg_dfp_d01)
cd "$(dirname "$0")/../../../.."  # the repository root
row=$1; name=$2; epochs=$3; seed=$4; shift 4
TMODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot -decay_method noam -warmup_steps 1000 -adam_beta2 0.998"
CE="-learning_rate 0.5 -loss ce -label_smoothing 0.1 -average_decay 1e-4 -dropout 0.1"
NCE="-learning_rate 2 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias -average_decay 1e-4 -dropout 0.1"
case $row in
  nce_fr) data=(-data runs/word_choice_fr-en/data -tgt_emb runs/word_choice_fr-en/emb.dec.pt)
          flags="$TMODEL $NCE" ;;
  ce_fr)  data=(-data runs/word_choice_fr-en/data -tgt_emb runs/word_choice_fr-en/emb.dec.pt); flags="$TMODEL $CE" ;;
  bpe_de) data=(-data runs/word_choice_de-en/bpe/data -valid_remove_bpe); flags="$TMODEL $CE" ;;
  src_de) data=(-data runs/word_choice_de-en/srcbpe/data -tgt_emb runs/word_choice_de-en/srcbpe/emb.dec.pt)
          flags="$TMODEL $NCE -drop_final_punct 0.05" ;;
  *) echo "unknown row $row (nce_fr, ce_fr, bpe_de, src_de)" >&2; exit 2 ;;
esac
run=${SCREENS:-runs/s44/screens}/$name; mkdir -p "$run"
# shellcheck disable=SC2086
python train.py "${data[@]}" -save_model "$run/model" $flags \
  -epochs "$epochs" -seed "$seed" -threads 1 -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 \
  -save_checkpoint_epochs 1000 -report_every 100 -log_file "$run/train.log" "$@" > "$run/train.stdout" 2>&1
echo "rc $?" >> "$run/train.stdout"
