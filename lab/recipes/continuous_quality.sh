#!/usr/bin/env bash
# Continuous-output losses whose cost is flat in the vocabulary size (contrastive negatives from
# the batch, uniform samples and the gold word's precomputed neighbours), against the rows of
# lab/recipes/multi30k.sh; lab/recipes/papers.sh runs it for the papers' table of docs/results.md.
# Model selection by greedy validation BLEU (-valid_metric bleu, the model's own words: no
# -replace_unk); each test set is translated once with -replace_unk, and translate.py prints the
# BLEU of the output before replacement and the <unk> rate in the same pass.
#
#   bash lab/recipes/continuous_quality.sh                       # every config below, seed 1
#   CONFIGS="infonce" SEEDS="1 2" EPOCHS=10 bash lab/recipes/continuous_quality.sh
#
# Environment (defaults in brackets): SRC/TGT [fr/en], SHARED [../shared/data], OUT
# [runs/quality_$SRC-$TGT], CONFIGS, SEEDS [1], EPOCHS [10], THREADS per process [1]; MODEL [the
# papers' table's LSTM, so the rows compare with multi30k.sh's rows there].
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/quality_$SRC-$TGT}
SEEDS=${SEEDS:-1}
EPOCHS=${EPOCHS:-10}
THREADS=${THREADS:-1}
MODEL=${MODEL:--brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3}
ALL_CONFIGS="maxmargin_flat infonce nllvmf_nce_tied nllvmf_tied_center ce"
CONFIGS=${CONFIGS:-maxmargin_flat infonce nllvmf_nce_tied nllvmf_tied_center}
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
TOK=$OUT/tok
mkdir -p "$TOK"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

config_flags() {
  case $1 in
    # maxmargin (Lazaridou et al.) with its hardest negative among flat-cost candidates instead of the whole table
    maxmargin_flat)  echo "-loss maxmargin -margin 0.5 -tie_emb -negatives inbatch,random,gold_nn" ;;
    # sampled softmax over the fixed table: cosine / 0.1 against the same candidates
    infonce)         echo "-loss infonce -tie_emb" ;;
    # NLLvMF (the paper's tied row, reg1+reg2) plus the vMF density renormalised over those candidates
    nllvmf_nce_tied) echo "-loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    # the paper's NLLvMF tied row on the mean-centred table (no <unk> hub: docs/tables.md)
    nllvmf_tied_center) echo "-loss nllvmf -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    # the softmax baseline at the same size (the papers' table has multi30k.sh's ce at this MODEL)
    ce)              echo "-loss ce" ;;
    *) echo "unknown config $1 (known: $ALL_CONFIGS)" >&2; return 1 ;;
  esac
}

# 1. the data, the unit table and the lexicon
. lab/recipes/prepare_m30k.sh
[ -s "$OUT/emb_center.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -emb_file_dec "$EMB" -dict_file "$OUT/data.vocab.pt" \
  -output_file "$OUT/emb_center" -normalize -center

# 2. train (validation BLEU at every epoch's end picks model_best.pt), 3. translate both test sets
for cfg in $CONFIGS; do
  flags=$(config_flags "$cfg")
  table=$OUT/emb.dec.pt; [[ $cfg == *_center ]] && table=$OUT/emb_center.dec.pt
  for seed in $SEEDS; do
    run=$OUT/$cfg.s$seed
    mkdir -p "$run"
    if [ ! -s "$run/model_last.pt" ]; then
      log "train $cfg seed $seed"
      start=$(date +%s)
      # shellcheck disable=SC2086
      "$PYTHON" train.py -data "$OUT/data" -save_model "$run/model" -tgt_emb "$table" $flags $MODEL \
        -epochs "$EPOCHS" -seed "$seed" -threads "$THREADS" -valid_metric bleu -valid_steps 1000000 \
        -save_checkpoint_steps 1000000 -report_every 100 -log_file "$run/train.log" > "$run/train.stdout" 2>&1
      echo "train_wall_s $(( $(date +%s) - start ))" > "$run/train_time.txt"
    fi
    for t in test_2016_flickr test_2017_flickr; do
      [ -s "$run/$t.bleu.txt" ] || "$PYTHON" translate.py -model "$run/model_best.pt" -src "$TOK/$t.$SRC" \
        -output "$run/$t.$TGT" -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -threads "$THREADS" \
        -replace_unk -lookup_dict "$OUT/lexicon.txt" > "$run/$t.bleu.txt" 2>&1
      log "$cfg seed $seed $t: $(grep -h '^sacreBLEU' "$run/$t.bleu.txt" | cut -c1-30) | $(grep -h '^without' "$run/$t.bleu.txt")"
    done
  done
done
log "done"
exit
}
