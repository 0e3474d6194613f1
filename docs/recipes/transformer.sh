#!/usr/bin/env bash
# Issue 16's comparison on Multi30k: the Transformer with a softmax (ce, label smoothing 0.1)
# against the Transformer with the best continuous output of issue 15 (NLLvMF tied + the
# contrastive term, on the normalised pretrained table), and the LSTM of docs/results.md
# section 5a with the same two outputs. Every run trains until validation BLEU (greedy, no
# -replace_unk) has not improved for 3 epochs (-early_stopping 3, at most EPOCHS epochs);
# model_best.pt translates both test sets with -replace_unk, and translate.py prints the BLEU
# before replacement and the <unk> rate in the same pass. Results: docs/results.md, section
# "Transformer"; tools/quality_report.py tabulates the run folders (time to best included).
#
#   bash docs/recipes/transformer.sh                                   # fr->en, every config, seed 1
#   SRC=de CONFIGS="t_ce t_nllvmf_nce_tied" SEEDS="1 2" bash docs/recipes/transformer.sh
#
# Environment (defaults in brackets): SRC/TGT [fr/en], SHARED [../shared/data], OUT
# [runs/transformer_$SRC-$TGT], CONFIGS, SEEDS [1], EPOCHS [20], THREADS per process [1],
# TMODEL (the Transformer's size and schedule) and LMODEL (the LSTM's, section 5a's).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/transformer_$SRC-$TGT}
SEEDS=${SEEDS:-1}
EPOCHS=${EPOCHS:-20}
THREADS=${THREADS:-1}
# A small Transformer for 29K sentence pairs on a CPU: d_model 128, 2+2 layers, 4 heads, noam
# (peak lr 0.5 x 128^-0.5 x 1000^-0.5 = 1.4e-3 at step 1000), Xavier init, Adam beta2 0.998.
TMODEL=${TMODEL:--encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 \
-heads 4 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot \
-decay_method noam -learning_rate 0.5 -warmup_steps 1000 -adam_beta2 0.998}
LMODEL=${LMODEL:--brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3}
ALL_CONFIGS="t_ce t_nllvmf_nce_tied t_infonce t_nllvmf_tied lstm_ce lstm_nllvmf_nce_tied"
CONFIGS=${CONFIGS:-t_ce t_nllvmf_nce_tied}
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
TOK=$OUT/tok
mkdir -p "$TOK"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

config_flags() {
  case $1 in
    t_ce)                 echo "$TMODEL -loss ce -label_smoothing 0.1" ;;
    # NLLvMF (reg1+reg2, the paper's tied row) + contrastive term: issue 15's best NLLvMF row
    t_nllvmf_nce_tied)    echo "$TMODEL -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    # sampled softmax over the fixed table (cos / 0.1) against the same flat negatives: issue 15's best row
    t_infonce)            echo "$TMODEL -loss infonce -tie_emb" ;;
    # the paper's NLLvMF tied row alone, for reference
    t_nllvmf_tied)        echo "$TMODEL -loss nllvmf -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    lstm_ce)              echo "$LMODEL -loss ce" ;;
    lstm_nllvmf_nce_tied) echo "$LMODEL -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    *) echo "unknown config $1 (known: $ALL_CONFIGS)" >&2; return 1 ;;
  esac
}

# 1. the data, the unit table and the lexicon
. docs/recipes/prepare_m30k.sh

# 2. train to convergence on validation BLEU, 3. translate both test sets with model_best.pt
for cfg in $CONFIGS; do
  flags=$(config_flags "$cfg")
  for seed in $SEEDS; do
    run=$OUT/$cfg.s$seed
    mkdir -p "$run"
    if [ ! -s "$run/model_last.pt" ]; then
      log "train $cfg seed $seed"
      start=$(date +%s)
      # shellcheck disable=SC2086
      python train.py -data "$OUT/data" -save_model "$run/model" -tgt_emb "$OUT/emb.dec.pt" $flags \
        -epochs "$EPOCHS" -early_stopping 3 -seed "$seed" -threads "$THREADS" -valid_metric bleu \
        -valid_steps 1000000 -save_checkpoint_steps 1000000 -report_every 100 -log_file "$run/train.log" \
        > "$run/train.stdout" 2>&1
      echo "train_wall_s $(( $(date +%s) - start ))" > "$run/train_time.txt"
    fi
    for t in test_2016_flickr test_2017_flickr; do
      [ -s "$run/$t.bleu.txt" ] || python translate.py -model "$run/model_best.pt" -src "$TOK/$t.$SRC" \
        -output "$run/$t.$TGT" -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -threads "$THREADS" \
        -replace_unk -lookup_dict "$OUT/lexicon.txt" > "$run/$t.bleu.txt"
      log "$cfg seed $seed $t: $(grep -h '^sacreBLEU' "$run/$t.bleu.txt" | cut -c1-30) | $(grep -h '^without' "$run/$t.bleu.txt")"
    done
  done
done
log "done"
