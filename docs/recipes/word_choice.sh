#!/usr/bin/env bash
# Issue 21: word choice of continuous outputs. Each fix is a row against the same baseline (the
# Transformer nllvmf_nce tied row of docs/recipes/transformer.sh), trained until greedy validation
# BLEU has not improved for 3 epochs (at most EPOCHS), with a checkpoint at every epoch's end:
#   - the row's model_best.pt and the average of its last AVG epoch checkpoints
#     (tools/average_models.py) are both scored on the validation set; the better one is kept;
#   - the decoding prior's beta (translate.py -decode_prior) is picked on validation BLEU among
#     BETAS (0 included, so it is only used where it helps);
#   - that checkpoint and beta translate both test sets with -replace_unk (translate.py prints the
#     BLEU before replacement and the <unk> rate), and tools/rare_word_f1.py -bins calibration
#     writes the output/reference token ratio per training-frequency bin.
# Results: docs/results.md, section "Word choice"; tools/quality_report.py tabulates the runs.
#
#   bash docs/recipes/word_choice.sh                                  # fr->en, CONFIGS below, seed 1
#   SRC=de CONFIGS="t_ce t_nce_both" SEEDS="1 2" EPOCHS=40 bash docs/recipes/word_choice.sh
#   EPOCHS=8 EARLY=0 ... (screening: a fixed number of epochs, no early stopping)
#   CONFIGS="t_bpe_ce t_bpe_nce_sphere" EPOCHS=40 bash docs/recipes/word_choice.sh   # the subword rows
#   CONFIGS="t_bpe_ce_d01 t_bpe_nce_sphere_avg_d01" WINDOW=2 EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (the same at dropout 0.1, the continuous one with the recommended row's flags; docs/results.md 5c, continued (12))
#   SRC=de CONFIGS="t_srcbpe_nce_both_avg_dfp_d01 t_srcbpe_ce_d01" SEEDS="1 2" WINDOW=2 EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (subword pieces on the source only, words and their vectors on the target: README's recommended de->en row;
#     fr->en: t_srcbpe_nce_both_avg_d01; docs/results.md 5c, continued (14))
#   SRC=de CONFIGS="t_ce_avg t_nce_both_avg" EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (the moving average of the parameters, train.py -average_decay; -block_ngram_repeat picked on validation)
#   SRC=de CONFIGS="t_nce_both_avg_train" EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (the same with the target table trained from the pretrained vectors, train.py -train_table)
#   SRC=fr OUT=runs/word_choice_lstm_fr-en CONFIGS=lstm_ce SEEDS=1 EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (and CONFIGS=lstm_nce_bias beside it, one thread each: the converged LSTM rows of docs/results.md 5c, continued (3))
#   SRC=fr OUT=runs/wc_win2_lstm_fr-en CONFIGS=lstm_nce_bias_avg SEEDS=1 WINDOW=2 EPOCHS=40 BLOCKS="2 3" bash docs/recipes/word_choice.sh
#     (the same row with -average_decay 1e-4; de->en: lstm_nce_bias_dfp_avg; docs/results.md 5c, continued (8))
#   SRC=de OUT=runs/wc_win2_de-en CONFIGS=t_nce_both_avg_dfp SEEDS="1 2" WINDOW=2 EPOCHS=40 BLOCKS="2 3" UL=16 \
#     UL_LR=0.2 bash docs/recipes/word_choice.sh   (step 6: the finished rows fine-tuned with -seq_unlikelihood 16
#     from their average at noam factor 0.2; UL=0: the same fine-tune without it; docs/results.md 5c, continued (7))
#   SRC=de OUT=runs/wc_win2_de-en CONFIGS="t_nce_both_avg_dfp_d01 t_ce_dfp_d01" SEEDS="1 2" WINDOW=2 EPOCHS=40 \
#     BLOCKS="2 3" bash docs/recipes/word_choice.sh   (dropout 0.1 instead of transformer.sh's 0.3, both outputs;
#     fr->en: SRC=fr CONFIGS="t_nce_both_avg_d01 t_ce_d01"; docs/results.md 5c, continued (10))
#   SRC=de CONFIGS="t_srcbpe_nce_both_avg_dfp_d01_lr1 t_bpe_ce_avg_d01" SEEDS="1 2" WINDOW=2 EPOCHS=40 BLOCKS="2 3" \
#     bash docs/recipes/word_choice.sh   (README's recommended rows: the continuous rows at noam factor 1 against the
#     ce rows with the same moving average; fr->en: SRC=fr CONFIGS="t_nce_both_avg_d01_lr1 t_ce_d01_avg";
#     docs/results.md 5c, continued (19))
#   SRC=fr CONFIGS="t_nce_both_avg_d00_lr1 t_ce_d00_avg" ...   (less dropout, continued (25) and (26): the fr->en word
#     row without dropout, seeds 1, 2 and 5, with the CALIBRATE lines of docs/results/dropout/commands.txt; de->en:
#     SRC=de CONFIGS="t_srcbpe_nce_both_avg_dfp_d00_lr1 t_bpe_ce_avg_d00", not yet run through the recipe)
#
# Environment (defaults in brackets): SRC/TGT [fr/en], SHARED [../shared/data], OUT
# [runs/word_choice_$SRC-$TGT], CONFIGS, SEEDS [1], EPOCHS [20], EARLY [3, 0: off], WINDOW [1: train.py
# -early_stopping_window, EARLY counts epochs without a new best mean of the last WINDOW scores], AVG [5],
# BETAS ["-0.25 -0.1 0 0.1 0.25 0.5"; a negative beta favours rarer words: the LSTM with -sampling_correction
# -word_bias over-produces frequent ones; the rows of docs/results.md 5c up to "5c, continued (2)" were picked
# among "0 0.1 0.25 0.5"], LR [noam factor for the continuous rows, 2: picked on fr->en validation
# BLEU, 2 against 0.5 (8 epochs: 36.82 against 35.71); its curve is slower than ce's], THREADS [1],
# BPE_MERGES [10000: subword-nmt merges per language for the t_bpe_* rows, as docs/results.md section 7],
# BLOCKS [empty: skipped; e.g. "2 3": step 5 picks translate.py -block_ngram_repeat among 0 and these on validation],
# UL [empty: skipped; a weight, e.g. 4: step 6 fine-tunes each finished row with train.py -seq_unlikelihood UL;
# 0: the same fine-tune without it],
# UL_NGRAM [3], UL_EPOCHS [2: epochs of that fine-tuning], UL_LR [empty: the row's own -learning_rate; e.g. 0.2, the
# fine-tune's noam factor: without its average the de->en Transformer at factor 2 loses 1.5 validation BLEU],
# VALID_NOPUNCT [0; 1: every validation score of steps 3, 5 and 6 is the mean of the validation set's BLEU and that
# of its copy without final . ! ? (tools/strip_final_punct.py, TOK/val_nop.*), which shows the continuous decoder's
# loops; word rows only; a choice.txt or block.txt written without it is kept: delete it to choose again],
# CALIBRATE [0; 1: step 7 fits translate.py -freq_offsets on validation (tools/calibrate_offsets.py -rounds
# CAL_ROUNDS [12]) for every beta of CAL_BETAS ["0 0.25 0.5 0.75 1"; ce rows: 0 only; with the offsets the best beta
# is larger than without: 0.5 on the LSTM rows among -0.25 ... 0.5], picks the beta on validation BLEU and decodes
# the tests again into TEST.calib.*; word rows only; with UL set, the fine-tuned rows only], CAL_MATCH [empty; other
# systems' validation outputs, e.g. ce's: fit to their mean output/reference ratios instead of 1], CAL_TARGET [empty;
# six ratios, one per bin, to fit to instead (calibrate_offsets.py -target), e.g. the "target" of an earlier CAL_MATCH
# fit's offsets file once those outputs are gone; not with CAL_MATCH], CAL_NAME [calib;
# the tag of step 7's files: CAL_NAME.txt, offsets.CAL_NAME.BETA.json (offsets.BETA.json for calib), TEST.CAL_NAME.*],
# CAL_KEEP [target: the round nearest the target; bleu: the round of the best validation BLEU, round 0 (no offsets)
# included, so that validation chooses how far the fit goes].
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/word_choice_$SRC-$TGT}
SEEDS=${SEEDS:-1}
EPOCHS=${EPOCHS:-20}
EARLY=${EARLY:-3}
WINDOW=${WINDOW:-1}
AVG=${AVG:-5}
BETAS=${BETAS:--0.25 -0.1 0 0.1 0.25 0.5}
LR=${LR:-2}
THREADS=${THREADS:-1}
BPE_MERGES=${BPE_MERGES:-10000}
BLOCKS=${BLOCKS:-}
UL=${UL:-}
UL_NGRAM=${UL_NGRAM:-3}
UL_EPOCHS=${UL_EPOCHS:-2}
UL_LR=${UL_LR:-}
VALID_NOPUNCT=${VALID_NOPUNCT:-0}
CALIBRATE=${CALIBRATE:-0}
CAL_BETAS=${CAL_BETAS:-0 0.25 0.5 0.75 1}
CAL_ROUNDS=${CAL_ROUNDS:-12}
CAL_MATCH=${CAL_MATCH:-}
CAL_TARGET=${CAL_TARGET:-}
CAL_NAME=${CAL_NAME:-calib}
CAL_KEEP=${CAL_KEEP:-target}
# docs/recipes/transformer.sh's Transformer (d_model 128, 2+2 layers), without its learning rate
TMODEL=${TMODEL:--encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 \
-heads 4 -transformer_ff 512 -dropout 0.3 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot \
-decay_method noam -warmup_steps 1000 -adam_beta2 0.998}
LMODEL=${LMODEL:--brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3}
NCE="-loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb"
# the *_dfp rows: a training pair loses its source's final . ! ? (and its target's) with probability 0.05, about
# the share of Multi30k validation (and fr training) sources without one; de training sources: 0.9%
DFP="-drop_final_punct 0.05"
# the *_prefix rows: the default negatives plus the earlier words of the token's own sentence (against repetition)
PREFIX="-negatives inbatch,random,gold_nn,prefix"
# the *_avg rows: validation, early stopping and checkpoints on train.py's moving average of the parameters
AVERAGE="-average_decay 1e-4"
CONFIGS=${CONFIGS:-t_nce t_nce_corr t_nce_bias t_nce_both}
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
TOK=$OUT/tok
mkdir -p "$TOK"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

# "flags|table": the table is emb (the normalised pretrained vectors), sphere (-init random_sphere),
# mixed (-init mixed), softmax (the output layer of this seed's t_ce run, -init softmax); the bpe_*
# tables train on subword-nmt pieces on both sides ($OUT/bpe): bpe_none (a softmax row: no table) and
# bpe_sphere (a random unit table over the target pieces: they have no pretrained vectors); srcbpe_emb: subword-nmt
# pieces on the source only ($OUT/srcbpe), words and the normalised pretrained vectors on the target, as emb
config() {
  case $1 in
    t_ce)          echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1|emb" ;;
    t_nce)         echo "$TMODEL -learning_rate $LR $NCE|emb" ;;
    t_nce_corr)    echo "$TMODEL -learning_rate $LR $NCE -sampling_correction|emb" ;;
    t_nce_bias)    echo "$TMODEL -learning_rate $LR $NCE -word_bias|emb" ;;
    t_nce_both)    echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias|emb" ;;
    t_nce_sphere)  echo "$TMODEL -learning_rate $LR $NCE|sphere" ;;
    t_nce_mixed)   echo "$TMODEL -learning_rate $LR $NCE|mixed" ;;
    t_nce_softmax) echo "$TMODEL -learning_rate $LR $NCE|softmax" ;;
    t_nce_both_sphere)  echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias|sphere" ;;
    t_nce_both_mixed)   echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias|mixed" ;;
    t_nce_both_softmax) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias|softmax" ;;
    t_ce_avg)      echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE|emb" ;;
    t_nce_both_avg) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE|emb" ;;
    t_ce_dfp)      echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $DFP|emb" ;;
    t_nce_both_avg_dfp) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP|emb" ;;
    t_ce_d01)      echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 -dropout 0.1|emb" ;;
    t_ce_d01_avg)  echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE -dropout 0.1|emb" ;;
    t_ce_dfp_d01)  echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $DFP -dropout 0.1|emb" ;;
    t_ce_dfp_d01_avg) echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE $DFP -dropout 0.1|emb" ;;
    t_nce_both_avg_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -dropout 0.1|emb" ;;
    # less dropout (docs/results.md 5c, continued (25): fewer epochs to ce's target; screened, one seed converged at 0)
    t_nce_both_avg_d005) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -dropout 0.05|emb" ;;
    t_nce_both_avg_d00) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -dropout 0|emb" ;;
    t_ce_d00_avg)  echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE -dropout 0|emb" ;;
    t_nce_both_avg_dfp_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP -dropout 0.1|emb" ;;
    t_nce_both_avg_dfp_prefix) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP $PREFIX|emb" ;;
    t_nce_both_avg_train) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -train_table|emb" ;;
    t_bpe_ce)      echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1|bpe_none" ;;
    t_bpe_nce_sphere) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias|bpe_sphere" ;;
    t_bpe_ce_d01)  echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 -dropout 0.1|bpe_none" ;;
    # BPE ce with the continuous rows' moving average of the parameters: the baseline with the same average
    t_bpe_ce_avg_d01) echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE -dropout 0.1|bpe_none" ;;
    t_bpe_nce_sphere_avg_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -dropout 0.1|bpe_sphere" ;;
    t_srcbpe_ce_d01) echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 -dropout 0.1|srcbpe_emb" ;;
    t_srcbpe_ce_avg_d01) echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE -dropout 0.1|srcbpe_emb" ;;
    t_srcbpe_nce_both_avg_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE -dropout 0.1|srcbpe_emb" ;;
    t_srcbpe_nce_both_avg_dfp_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP -dropout 0.1|srcbpe_emb" ;;
    # de->en source-piece row without dropout and BPE ce without it (continued (26): one screened seed each way)
    t_srcbpe_nce_both_avg_dfp_d00) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP -dropout 0|srcbpe_emb" ;;
    t_bpe_ce_avg_d00) echo "$TMODEL -learning_rate 0.5 -loss ce -label_smoothing 0.1 $AVERAGE -dropout 0|bpe_none" ;;
    # the same with 16 instead of 32 gold_nn neighbours per token: a cheaper step, against the time target
    t_srcbpe_nce_both_avg_dfp_nn16_d01) echo "$TMODEL -learning_rate $LR $NCE -sampling_correction -word_bias $AVERAGE $DFP -ann_candidates 16 -dropout 0.1|srcbpe_emb" ;;
    # ROW_lr1: a continuous ROW at noam factor 1 instead of $LR (2), in its own run folder (5c, continued (19))
    t_*nce*_lr1)   LR=1 config "${1%_lr1}" ;;
    t_infonce_both) echo "$TMODEL -learning_rate $LR -loss infonce -tie_emb -sampling_correction -word_bias|emb" ;;
    lstm_ce)       echo "$LMODEL -loss ce|emb" ;;
    lstm_infonce)  echo "$LMODEL -loss infonce -tie_emb|emb" ;;
    lstm_infonce_both) echo "$LMODEL -loss infonce -tie_emb -sampling_correction -word_bias|emb" ;;
    lstm_nce)      echo "$LMODEL $NCE|emb" ;;
    lstm_nce_corr) echo "$LMODEL $NCE -sampling_correction|emb" ;;
    lstm_nce_bias) echo "$LMODEL $NCE -word_bias|emb" ;;
    lstm_nce_both) echo "$LMODEL $NCE -sampling_correction -word_bias|emb" ;;
    lstm_ce_dfp)   echo "$LMODEL -loss ce $DFP|emb" ;;
    lstm_nce_bias_dfp) echo "$LMODEL $NCE -word_bias $DFP|emb" ;;
    lstm_nce_bias_avg) echo "$LMODEL $NCE -word_bias $AVERAGE|emb" ;;
    lstm_nce_bias_dfp_avg) echo "$LMODEL $NCE -word_bias $DFP $AVERAGE|emb" ;;
    lstm_nce_bias_dfp_prefix) echo "$LMODEL $NCE -word_bias $DFP $PREFIX|emb" ;;
    lstm_nce_bias_dfp_train) echo "$LMODEL $NCE -word_bias $DFP -train_table|emb" ;;
    lstm_nce_bias_dfp_train_slow) echo "$LMODEL $NCE -word_bias $DFP -train_table -table_lr_scale 0.1|emb" ;;
    *) echo "unknown config $1" >&2; return 1 ;;
  esac
}

# 1. the data, the unit table and the lexicon; the other tables
. docs/recipes/prepare_m30k.sh
if [ "$VALID_NOPUNCT" = 1 ] && [ ! -s "$TOK/val_nop.$TGT" ]; then
  python tools/strip_final_punct.py -src "$TOK/val.$SRC" -tgt "$TOK/val.$TGT" -out_src "$TOK/val_nop.$SRC" \
    -out_tgt "$TOK/val_nop.$TGT"
fi
[ -s "$OUT/sphere.dec.pt" ] || python embeddings_to_torch.py -dict_file "$OUT/data.vocab.pt" -output_file "$OUT/sphere" \
  -init random_sphere -dim 300 > /dev/null
[ -s "$OUT/mixed.dec.pt" ] || python embeddings_to_torch.py -emb_file_dec "$EMB" -dict_file "$OUT/data.vocab.pt" \
  -output_file "$OUT/mixed" -normalize -init mixed > /dev/null

# the subword rows' data: BPE_MERGES merges learnt per language on the tokenized training text, every
# split segmented, preprocessed without restricting the target pieces to words that have a vector
segment_bpe() {  # LANG...: learn the merges of each language and segment its splits into $OUT/bpe
  mkdir -p "$OUT/bpe"
  local l split
  for l in "$@"; do
    [ -s "$OUT/bpe/codes.$l" ] || python -m subword_nmt.learn_bpe -s "$BPE_MERGES" < "$TOK/train.$l" > "$OUT/bpe/codes.$l"
    for split in train val test_2016_flickr test_2017_flickr; do
      [ -s "$OUT/bpe/$split.$l" ] || python -m subword_nmt.apply_bpe -c "$OUT/bpe/codes.$l" < "$TOK/$split.$l" \
        > "$OUT/bpe/$split.$l"
    done
  done
}
prepare_bpe() {
  segment_bpe "$SRC" "$TGT"
  [ -s "$OUT/bpe/data.vocab.pt" ] || python preprocess.py -train_src "$OUT/bpe/train.$SRC" -train_tgt \
    "$OUT/bpe/train.$TGT" -valid_src "$OUT/bpe/val.$SRC" -valid_tgt "$OUT/bpe/val.$TGT" -save_data "$OUT/bpe/data" \
    -shuffle > /dev/null
  [ -s "$OUT/bpe/sphere.dec.pt" ] || python embeddings_to_torch.py -dict_file "$OUT/bpe/data.vocab.pt" \
    -output_file "$OUT/bpe/sphere" -init random_sphere -dim 300 > /dev/null
}

# the srcbpe rows' data: the source pieces of segment_bpe, the target words restricted to those with a vector (as
# prepare_m30k.sh) and their unit table; -replace_unk keeps the word lexicon (it joins the source pieces first)
prepare_srcbpe() {
  segment_bpe "$SRC"
  mkdir -p "$OUT/srcbpe"
  [ -s "$OUT/srcbpe/data.vocab.pt" ] || python preprocess.py -train_src "$OUT/bpe/train.$SRC" -train_tgt \
    "$TOK/train.$TGT" -valid_src "$OUT/bpe/val.$SRC" -valid_tgt "$TOK/val.$TGT" -save_data "$OUT/srcbpe/data" \
    -tgt_emb "$EMB" -shuffle > /dev/null
  [ -s "$OUT/srcbpe/emb.dec.pt" ] || python embeddings_to_torch.py -emb_file_dec "$EMB" \
    -dict_file "$OUT/srcbpe/data.vocab.pt" -output_file "$OUT/srcbpe/emb" -normalize > /dev/null
}

# per row: DATA (preprocess.py prefix), SRC_TXT (the source text to translate), WORD_TGT (1: the target side is
# words, so the calibration steps apply), BPE_TRAIN and BPE_DECODE
# (the flags that score words, not pieces: the references are always the tokenized words)
valid_bleu() {  # CHECKPOINT BETA [BLOCK [OFFSETS NAME]] -> sacreBLEU of the validation set (greedy, no
  # -replace_unk); with VALID_NOPUNCT=1 the mean of it and of the validation set without final punctuation (val_nop).
  # OFFSETS: a file of tools/calibrate_offsets.py fitted under BETA (translate.py -freq_offsets), NAME its tag
  local prior=(); [ "$2" != 0 ] && prior=(-decode_prior "$2")
  local block=${3:-0} plain nop calib=
  [ -n "${4:-}" ] && { prior+=(-freq_offsets "$4"); calib=.$5; }
  plain=$(python translate.py -model "$1" -src "$SRC_TXT/val.$SRC" -output "$1.val.$2.$block$calib.$TGT" \
    -tgt "$TOK/val.$TGT" -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" -block_ngram_repeat "$block" \
    "${BPE_DECODE[@]}" | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p')
  if [ "$VALID_NOPUNCT" != 1 ]; then echo "$plain"; return; fi
  [ "$SRC_TXT" = "$TOK" ] || { echo "error: VALID_NOPUNCT=1 is for word-source rows, not $cfg" >&2; exit 2; }
  nop=$(python translate.py -model "$1" -src "$TOK/val_nop.$SRC" -output "$1.valnop.$2.$block$calib.$TGT" \
    -tgt "$TOK/val_nop.$TGT" -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" -block_ngram_repeat "$block" \
    | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p')
  awk "BEGIN{printf \"%.2f\\n\", ($plain + $nop) / 2}"
}

test_decode() {  # SUFFIX BLOCK: both tests with step 3's checkpoint and beta into $run/TEST$SUFFIX.*
  local t
  for t in test_2016_flickr test_2017_flickr; do
    [ -s "$run/$t$1.bleu.txt" ] || python translate.py -model "$run/$ckpt" -src "$SRC_TXT/$t.$SRC" \
      -output "$run/$t$1.$TGT" -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" \
      -block_ngram_repeat "$2" "${BPE_DECODE[@]}" -replace_unk -lookup_dict "$OUT/lexicon.txt" > "$run/$t$1.bleu.txt"
    [ -s "$run/$t$1.calibration.json" ] || python tools/rare_word_f1.py -train "$TOK/train.$TGT" -ref "$TOK/$t.$TGT" \
      -hyp "$run/$t$1.$TGT" -bins calibration -json "$run/$t$1.calibration.json" > /dev/null
    log "$cfg seed $seed $t, -block_ngram_repeat $2: $(grep -h '^sacreBLEU' "$run/$t$1.bleu.txt" | cut -c1-30) |" \
      "$(grep -h '^without' "$run/$t$1.bleu.txt")"
  done
}

block_step() {  # BLOCKS set: -block_ngram_repeat picked on validation among 0 and BLOCKS with step 3's
  # checkpoint and beta; the tests again into TEST.block.* (step 4's files are kept)
  [ -n "$BLOCKS" ] || return 0
  if [ ! -s "$run/block.txt" ]; then
    local block=0 n bleu best_bleu
    best_bleu=$(valid_bleu "$run/$ckpt" "$beta" 0)
    for n in $BLOCKS; do
      bleu=$(valid_bleu "$run/$ckpt" "$beta" "$n")
      if awk "BEGIN{exit !($bleu > $best_bleu)}"; then block=$n; best_bleu=$bleu; fi
    done
    echo "block_ngram_repeat $block valid_bleu $best_bleu (among 0 $BLOCKS)" > "$run/block.txt"
  fi
  read -r _ block _ < "$run/block.txt"
  test_decode .block "$block"
}

calibrate_step() {  # CALIBRATE=1: frequency-bin offsets (tools/calibrate_offsets.py) fitted on validation under
  # every beta of CAL_BETAS with step 5's blocking (0 without it); validation BLEU picks the beta; the tests again
  # into TEST.CAL_NAME.* with that beta and its offsets (CAL_MATCH: fitted to those outputs' ratios instead of 1)
  [ "$CALIBRATE" = 1 ] || return 0
  [ "$WORD_TGT" = 1 ] || { echo "error: CALIBRATE=1 is for word-target rows, not $cfg" >&2; exit 2; }
  local block=0 b bleu best_bleu=-1 pick= betas=$CAL_BETAS scores= off=offsets match=()
  [ "$CAL_NAME" = calib ] || off=offsets.$CAL_NAME
  # shellcheck disable=SC2206  # CAL_MATCH: a list of files
  [ -n "$CAL_MATCH" ] && match=(-match $CAL_MATCH)
  # shellcheck disable=SC2206  # CAL_TARGET: six numbers
  [ -n "$CAL_TARGET" ] && match+=(-target $CAL_TARGET)
  [[ $flags == *"-loss ce"* ]] && betas=0  # a softmax takes the offsets on its log-probabilities, no beta
  [ -s "$run/block.txt" ] && read -r _ block _ < "$run/block.txt"
  if [ ! -s "$run/$CAL_NAME.txt" ]; then
    for b in $betas; do
      [ -s "$run/$off.$b.json" ] || python tools/calibrate_offsets.py -model "$run/$ckpt" -src "$SRC_TXT/val.$SRC" \
        -tgt "$TOK/val.$TGT" -decode_prior "$b" -block_ngram_repeat "$block" -rounds "$CAL_ROUNDS" "${match[@]}" \
        -keep "$CAL_KEEP" -threads "$THREADS" -output "$run/$off.$b.json" > "$run/$off.$b.log"
      bleu=$(valid_bleu "$run/$ckpt" "$b" "$block" "$run/$off.$b.json" "$CAL_NAME")
      scores="$scores $b:$bleu"
      if awk "BEGIN{exit !($bleu > $best_bleu)}"; then pick=$b; best_bleu=$bleu; fi
    done
    echo "beta $pick valid_bleu $best_bleu ($off.$pick.json, -block_ngram_repeat $block; beta:valid_bleu$scores)" \
      > "$run/$CAL_NAME.txt"
  fi
  read -r _ b _ < "$run/$CAL_NAME.txt"
  local row_prior=("${prior[@]}")
  prior=(-freq_offsets "$run/$off.$b.json")
  [ "$b" != 0 ] && prior+=(-decode_prior "$b")
  test_decode ".$CAL_NAME" "$block"
  prior=("${row_prior[@]}")
}

for cfg in $CONFIGS; do
  IFS='|' read -r flags tablename <<< "$(config "$cfg")"
  DATA=$OUT/data; SRC_TXT=$TOK; WORD_TGT=1; BPE_TRAIN=(); BPE_DECODE=()
  if [[ $tablename == bpe_* ]]; then
    prepare_bpe
    DATA=$OUT/bpe/data; SRC_TXT=$OUT/bpe; WORD_TGT=0; BPE_TRAIN=(-valid_remove_bpe); BPE_DECODE=(-remove_bpe)
  elif [ "$tablename" = srcbpe_emb ]; then
    prepare_srcbpe
    DATA=$OUT/srcbpe/data; SRC_TXT=$OUT/bpe
  fi
  for seed in $SEEDS; do
    run=$OUT/$cfg.s$seed
    mkdir -p "$run"
    table=$OUT/$tablename.dec.pt; tgt_emb=(-tgt_emb "$table")
    [ "$tablename" = bpe_none ] && tgt_emb=()
    [ "$tablename" = bpe_sphere ] && tgt_emb=(-tgt_emb "$OUT/bpe/sphere.dec.pt")
    [ "$tablename" = srcbpe_emb ] && tgt_emb=(-tgt_emb "$OUT/srcbpe/emb.dec.pt")
    if [ "$tablename" = softmax ]; then
      table=$OUT/softmax.s$seed.dec.pt; tgt_emb=(-tgt_emb "$table")
      [ -s "$table" ] || python embeddings_to_torch.py -dict_file "$OUT/data.vocab.pt" -output_file "${table%.dec.pt}" \
        -init softmax -from_model "$OUT/t_ce.s$seed/model_best.pt" -normalize > /dev/null
    fi
    # 2. train
    if [ ! -s "$run/model_last.pt" ]; then
      log "train $cfg seed $seed"
      start=$(date +%s)
      early=(); [ "$EARLY" != 0 ] && early=(-early_stopping "$EARLY" -early_stopping_window "$WINDOW")
      # shellcheck disable=SC2086
      # -resume auto: a run killed part-way goes on from its newest checkpoint (its epoch checkpoints are kept)
      python train.py -data "$DATA" -save_model "$run/model" "${tgt_emb[@]}" $flags -epochs "$EPOCHS" -resume auto \
        "${early[@]}" "${BPE_TRAIN[@]}" -seed "$seed" -threads "$THREADS" -valid_metric bleu -valid_steps 1000000 \
        -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 -report_every 100 -log_file "$run/train.log" \
        > "$run/train.stdout" 2>&1
      echo "train_wall_s $(( $(date +%s) - start ))" > "$run/train_time.txt"
    fi
    # 3. model_best or the average of the last AVG epochs; then beta (continuous rows) on validation
    if [ ! -s "$run/choice.txt" ]; then
      n=$(ls "$run"/model_epoch_*.pt | wc -l)
      python tools/average_models.py -last $(( n < AVG ? n : AVG )) -prefix "$run/model" -output "$run/model_avg.pt"
      best=model_best.pt; best_bleu=$(valid_bleu "$run/model_best.pt" 0)
      avg_bleu=$(valid_bleu "$run/model_avg.pt" 0)
      if awk "BEGIN{exit !($avg_bleu > $best_bleu)}"; then best=model_avg.pt; best_bleu=$avg_bleu; fi
      beta=0
      if [[ $flags != *"-loss ce"* ]]; then  # beta re-scores continuous models only
        for b in $BETAS; do
          [ "$b" = 0 ] && continue
          bleu=$(valid_bleu "$run/$best" "$b")
          if awk "BEGIN{exit !($bleu > $best_bleu)}"; then beta=$b; best_bleu=$bleu; fi
        done
      fi
      echo "checkpoint $best beta $beta valid_bleu $best_bleu (model_best $(valid_bleu "$run/model_best.pt" 0), average of last $AVG $avg_bleu)" > "$run/choice.txt"
      rm -f "$run"/model_epoch_*.pt  # the average keeps what they were for
    fi
    read -r _ ckpt _ beta _ < "$run/choice.txt"
    prior=(); [ "$beta" != 0 ] && prior=(-decode_prior "$beta")
    # 4. the tests, with and without the lexicon, and the calibration ratios
    test_decode "" 0
    # 5. (BLOCKS set) translate.py -block_ngram_repeat n picked on validation among 0 and these, every row alike
    block_step
    # 7. (CALIBRATE=1) frequency-bin offsets fitted on validation, beta picked again with them (with UL set: on the
    # fine-tuned row only, below)
    [ -n "$UL" ] || calibrate_step
    # 6. (UL set) sequence-level unlikelihood fine-tuning (train.py -seq_unlikelihood UL, -seq_unlikelihood_ngram
    # UL_NGRAM; UL=0: the same fine-tune without it, the control) from step 3's model_best.pt (the averaged file
    # keeps no optimiser state), UL_EPOCHS more epochs with the row's own flags, into $run.ulUL.nUL_NGRAM. An
    # -average_decay row is fine-tuned from its average (-train_from_average) without a new one: an average at 1e-4
    # would take in a quarter of an epoch's fine-tuning. There step 3 picks among the new epoch checkpoints
    # (validation BLEU at the row's beta; choice.txt also gives the row's own score), then steps 4 and 5.
    [ -n "$UL" ] || continue
    base=$run; run=$base.ul$UL.n$UL_NGRAM${UL_LR:+.lr$UL_LR}
    mkdir -p "$run"
    ft_flags=$flags; ul=(-seq_unlikelihood "$UL" -seq_unlikelihood_ngram "$UL_NGRAM")
    [ "$UL" = 0 ] && ul=()
    [ -n "$UL_LR" ] && ul+=(-learning_rate "$UL_LR")  # the last -learning_rate given is the one train.py takes
    if [[ $flags == *"$AVERAGE"* ]]; then ft_flags=${flags/$AVERAGE/}; ul+=(-train_from_average); fi
    if [ ! -s "$run/model_last.pt" ]; then
      from=$(python -c "import sys, torch; print(torch.load(sys.argv[1], weights_only=False, map_location='cpu')\
['progress']['epoch'])" "$base/model_best.pt")
      log "fine-tune $cfg seed $seed from epoch $from: ${ul[*]}"
      # shellcheck disable=SC2086
      python train.py -train_from "$base/model_best.pt" -data "$DATA" -save_model "$run/model" "${tgt_emb[@]}" \
        $ft_flags -epochs $((from + UL_EPOCHS)) -early_stopping 0 "${ul[@]}" "${BPE_TRAIN[@]}" -seed "$seed" \
        -threads "$THREADS" -valid_metric bleu -valid_steps 1000000 -save_checkpoint_steps 1000000 \
        -save_checkpoint_epochs 1 -report_every 100 -log_file "$run/train.log" > "$run/train.stdout" 2>&1
    fi
    if [ ! -s "$run/choice.txt" ]; then
      pick=; best_bleu=-1
      for c in "$run"/model_epoch_*.pt; do
        bleu=$(valid_bleu "$c" "$beta")
        if awk "BEGIN{exit !($bleu > $best_bleu)}"; then pick=$(basename "$c"); best_bleu=$bleu; fi
      done
      echo "checkpoint $pick beta $beta valid_bleu $best_bleu (among the fine-tuned epochs; before fine-tuning:" \
        "$ckpt $(valid_bleu "$base/$ckpt" "$beta"))" > "$run/choice.txt"
    fi
    read -r _ ckpt _ beta _ < "$run/choice.txt"
    test_decode "" 0
    block_step
    calibrate_step
  done
done
log "done"
