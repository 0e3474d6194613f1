#!/usr/bin/env bash
# Train, select and score the Transformer and LSTM rows of docs/results.md on Multi30k: one run folder per row
# and seed, $OUT/ROW.sSEED. The table scripts beside this one (results_at_a_glance.sh, transformer_rows.sh,
# lstm_rows.sh, calibration.sh) call it with the rows and seeds their table reports. Per run:
#   1. data (once per OUT): Moses tokenization, the target vocabulary restricted to words that have a vector, its
#      unit table and the lexicon (lab/recipes/prepare_m30k.sh); subword-nmt pieces for the bpe and srcbpe rows;
#   2. training with the row's preset (configs/*.yaml; the flags after it override it), greedy validation BLEU at
#      each epoch's end, early stopping (EARLY, WINDOW, at most EPOCHS epochs), a checkpoint at each epoch's end;
#   3. model_best.pt or the average of the last AVG epoch checkpoints (tools/average_models.py), whichever scores
#      higher on validation; for continuous rows also translate.py's -decode_prior beta among BETAS, on validation
#      (choice.txt);
#   4. both test sets with that checkpoint and beta, with -replace_unk (translate.py also prints the BLEU before
#      replacement and the <unk> rate) into TEST.bleu.txt, and lab/tools/rare_word_f1.py -bins calibration (output /
#      reference tokens per training-frequency bin) into TEST.calibration.json;
#   5. (BLOCKS) -block_ngram_repeat picked on validation among 0 and BLOCKS (block.txt), the tests again into
#      TEST.block.*: the decode the results tables report;
#   6. (CALIBRATE=1, word targets only) frequency-bin offsets (translate.py -freq_offsets) fitted on validation by
#      tools/calibrate_offsets.py under each beta of CAL_BETAS with step 5's blocking, the beta picked on
#      validation (CAL_NAME.txt), the tests again into TEST.CAL_NAME.*;
#   7. (BEAM=K) the tests again with -beam_size K, step 3's checkpoint and beta and step 5's blocking, into
#      TEST.beamK.* (the greedy decode they compare with: TEST.block.*).
# Every step is skipped when its output exists, so a rerun resumes; a killed training goes on from its newest
# checkpoint (-resume auto). lab/tools/quality_report.py tabulates the run folders.
#
#   bash lab/recipes/word_choice.sh                       # fr->en: Transformer ce and the continuous row, seed 1
#   SRC=de CONFIGS="t_bpe_ce_avg_d01 t_srcbpe_nce_both_avg_dfp_d00_lr1" SEEDS="1 2" JOBS=2 bash lab/recipes/word_choice.sh
#   PREPARE_ONLY=1 CONFIGS="..." bash lab/recipes/word_choice.sh     # step 1 only (before jobs started side by side)
#   CONFIGS=t_nce_both_avg_d00_lr1 CALIBRATE=1 CAL_BETAS=0.25 CAL_NAME=matchce CAL_MATCH="CE_VALID_DECODE" \
#     bash lab/recipes/word_choice.sh                    # step 6, offsets fitted to a ce row's validation profile
#
# Environment (defaults in brackets):
#   SRC, TGT        direction [fr, en]; the target needs $SHARED/embeddings/$TGT.ft300.vec.gz
#   SHARED          the shared data folder [../shared/data]
#   EMB             the target vectors (.vec or .vec.gz; e.g. from tools/train_vectors.py, which gives every training
#                   word one; use another OUT per vector file) [$SHARED/embeddings/$TGT.ft300.vec.gz]
#   OUT             run folder [runs/word_choice_$SRC-$TGT]
#   CONFIGS         rows, names from config() below [t_ce_d01_avg t_nce_both_avg_d00_lr1]
#   SEEDS           training seeds [1]
#   JOBS            runs trained at once, each on THREADS threads [1]
#   THREADS         torch threads per run [1]
#   EPOCHS, EARLY, WINDOW   at most EPOCHS epochs; stop after EARLY validations without a new best score or a new
#                   best mean of the last WINDOW scores (train.py -early_stopping, -early_stopping_window; EARLY 0:
#                   off) [40, 3, 2: the presets' values]
#   AVG             epoch checkpoints averaged in step 3 [5]
#   BETAS           step 3's -decode_prior values, 0 included [-0.25 -0.1 0 0.1 0.25 0.5]
#   BLOCKS          step 5's -block_ngram_repeat values besides 0 ["2 3"; empty: step 5 skipped]
#   BPE_MERGES      subword-nmt merges per language for the bpe and srcbpe rows [10000]
#   CALIBRATE       1: step 6 [0]
#   CAL_BETAS       step 6's betas ["0 0.25 0.5 0.75 1"; softmax rows: 0 only]
#   CAL_ROUNDS      calibrate_offsets.py -rounds [12]
#   CAL_MATCH       validation decodes of other systems (e.g. a ce row's, step 3/5's ROW.sN/CKPT.val.0.BLOCK.$TGT):
#                   fit to their mean output/reference ratio per bin instead of the reference's (1) [empty]
#   CAL_MATCH_RUNS  run folders of $OUT (e.g. "t_ce_d01.s1"): their validation decode that steps 3 and 5 picked
#                   joins CAL_MATCH [empty]
#   CAL_TARGET      six ratios, one per bin, to fit to instead (calibrate_offsets.py -target) [empty]
#   CAL_NAME        the tag of step 6's files: CAL_NAME.txt, offsets.CAL_NAME.BETA.json (offsets.BETA.json for calib),
#                   TEST.CAL_NAME.* [calib]
#   CAL_KEEP        target: the round nearest the target; bleu: the round of the best validation BLEU, round 0 (no
#                   offsets) included [target]
#   PREPARE_ONLY    1: step 1 for CONFIGS, then exit [0]
#   BEAM            step 7's beam size [empty: step 7 skipped]
#
# The script is one { ... } block that ends in exit, so bash parses all of it before running any of it. Bash reads a
# script file as it runs it: an edit of this file (a commit, an editor) while the main loop waited on its jobs made
# it read on at the old byte offset of the new text, which fell inside the loop, and the loop started every row
# again, a second training of a row that was still training into the same folder.
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/word_choice_$SRC-$TGT}
CONFIGS=${CONFIGS:-t_ce_d01_avg t_nce_both_avg_d00_lr1}
SEEDS=${SEEDS:-1}
JOBS=${JOBS:-1}
THREADS=${THREADS:-1}
EPOCHS=${EPOCHS:-40}
EARLY=${EARLY:-3}
WINDOW=${WINDOW:-2}
AVG=${AVG:-5}
BETAS=${BETAS:--0.25 -0.1 0 0.1 0.25 0.5}
BLOCKS=${BLOCKS-2 3}
BPE_MERGES=${BPE_MERGES:-10000}
CALIBRATE=${CALIBRATE:-0}
CAL_BETAS=${CAL_BETAS:-0 0.25 0.5 0.75 1}
CAL_ROUNDS=${CAL_ROUNDS:-12}
CAL_MATCH=${CAL_MATCH:-}
CAL_MATCH_RUNS=${CAL_MATCH_RUNS:-}
CAL_TARGET=${CAL_TARGET:-}
CAL_NAME=${CAL_NAME:-calib}
CAL_KEEP=${CAL_KEEP:-target}
BEAM=${BEAM:-}
PREPARE_ONLY=${PREPARE_ONLY:-0}
EMB=${EMB:-$SHARED/embeddings/$TGT.ft300.vec.gz}
TOK=$OUT/tok
mkdir -p "$TOK"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

TC=configs/transformer_continuous.yaml
TS=configs/transformer_softmax.yaml
LC=configs/lstm_continuous.yaml
LS=configs/lstm_softmax.yaml
# the *_dfp rows (German source): a training pair loses its source's final . ! ? (and its target's) with
# probability 0.05, so that the model learns to end sentences without one (0.9% of de training sources lack it)
DFP="-drop_final_punct 0.05"

# ROW -> "train.py flags|data": emb (words on both sides, the normalised pretrained table), bpe (subword-nmt
# pieces on both sides, a softmax row: no table), bpe_sphere (the same pieces, a continuous row over a random unit
# table) or srcbpe (pieces on the source only; words and the table on the target). The names are those of the run
# folders in lab/results/word_choice_*.
config() {
  case $1 in
    # Transformer, softmax: the preset is word ce with the moving average at dropout 0.1
    t_ce_d01_avg)        echo "-config $TS|emb" ;;
    t_ce_d01)            echo "-config $TS -average_decay 0|emb" ;;
    t_ce_dfp_d01_avg)    echo "-config $TS $DFP|emb" ;;
    t_ce_dfp_d01)        echo "-config $TS $DFP -average_decay 0|emb" ;;
    t_bpe_ce_avg_d01)    echo "-config $TS|bpe" ;;
    t_srcbpe_ce_avg_d01) echo "-config $TS|srcbpe" ;;
    # Transformer, continuous: the recommended row (dropout 0, noam factor 1) as the preset was before it drew 2,048
    # random negatives a batch (the results' rows up to the *_ns2048 rows)
    t_nce_both_avg_d00_lr1)            echo "-config $TC -num_sampled 64|emb" ;;
    t_srcbpe_nce_both_avg_dfp_d00_lr1) echo "-config $TC -num_sampled 64 $DFP|srcbpe" ;;
    t_nce_both_avg_d01_lr1)            echo "-config $TC -num_sampled 64 -dropout 0.1|emb" ;;
    t_nce_both_avg_dfp_d01_lr1)        echo "-config $TC -num_sampled 64 $DFP -dropout 0.1|emb" ;;
    t_srcbpe_nce_both_avg_d01_lr1)     echo "-config $TC -num_sampled 64 -dropout 0.1|srcbpe" ;;
    t_srcbpe_nce_both_avg_dfp_d01_lr1) echo "-config $TC -num_sampled 64 $DFP -dropout 0.1|srcbpe" ;;
    # the recommended rows with the sampling correction's unbiased expected counts (-expected_counts batch)
    t_nce_both_avg_d00_lr1_bc)            echo "-config $TC -num_sampled 64 -expected_counts batch|emb" ;;
    t_srcbpe_nce_both_avg_dfp_d00_lr1_bc) echo "-config $TC -num_sampled 64 $DFP -expected_counts batch|srcbpe" ;;
    # ... and with counts unbiased over how batches are drawn, given the token (-expected_counts sentence)
    t_nce_both_avg_d00_lr1_sc)            echo "-config $TC -num_sampled 64 -expected_counts sentence|emb" ;;
    t_srcbpe_nce_both_avg_dfp_d00_lr1_sc) echo "-config $TC -num_sampled 64 $DFP -expected_counts sentence|srcbpe" ;;
    # ... and with the word bias updated lazily (-word_bias_update lazy: only the entries a step's candidates reach)
    t_nce_both_avg_d00_lr1_lazy)          echo "-config $TC -num_sampled 64 -word_bias_update lazy|emb" ;;
    # the preset as it is: 2,048 uniform random negatives a batch instead of 64 (their push on each frequency bin's
    # biases is within 1.05 of the full softmax's: docs/results.md, "The sampling correction's expected counts")
    t_nce_both_avg_d00_lr1_ns2048)            echo "-config $TC -num_sampled 2048|emb" ;;
    t_srcbpe_nce_both_avg_dfp_d00_lr1_ns2048) echo "-config $TC $DFP -num_sampled 2048|srcbpe" ;;
    # ... over subword target pieces, which have no pretrained vectors: a random unit table (Tokarchuk & Niculae 2024)
    t_bpe_nce_sphere_ns2048)                  echo "-config $TC -num_sampled 2048|bpe_sphere" ;;
    # LSTM
    lstm_ce)               echo "-config $LS|emb" ;;
    lstm_ce_dfp)           echo "-config $LS $DFP|emb" ;;
    lstm_nce_bias_avg)     echo "-config $LC|emb" ;;
    lstm_nce_bias_dfp_avg) echo "-config $LC $DFP|emb" ;;
    *) echo "unknown config $1" >&2; return 1 ;;
  esac
}

# subword-nmt: BPE_MERGES merges learnt per language on the tokenized training text, every split segmented
segment_bpe() {  # LANG...
  mkdir -p "$OUT/bpe"
  local l split
  for l in "$@"; do
    [ -s "$OUT/bpe/codes.$l" ] || "$PYTHON" -m subword_nmt.learn_bpe -s "$BPE_MERGES" < "$TOK/train.$l" > "$OUT/bpe/codes.$l"
    for split in train val test_2016_flickr test_2017_flickr; do
      [ -s "$OUT/bpe/$split.$l" ] || "$PYTHON" -m subword_nmt.apply_bpe -c "$OUT/bpe/codes.$l" < "$TOK/$split.$l" \
        > "$OUT/bpe/$split.$l"
    done
  done
}

# 1. the data of one row; sets flags, softmax, DATA, SRC_TXT, WORD_TGT, TGT_EMB, BPE_TRAIN and BPE_DECODE (the flags
# that score words, not pieces: the references are always the tokenized words)
prepare() {  # ROW
  local mode
  IFS='|' read -r flags mode <<< "$(config "$1")"
  softmax=0; [[ $flags == *_softmax.yaml* ]] && softmax=1
  DATA=$OUT/data; SRC_TXT=$TOK; WORD_TGT=1; TGT_EMB=(-tgt_emb "$OUT/emb.dec.pt"); BPE_TRAIN=(); BPE_DECODE=()
  case $mode in
    bpe|bpe_sphere)
      segment_bpe "$SRC" "$TGT"
      [ -s "$OUT/bpe/data.vocab.pt" ] || "$PYTHON" preprocess.py -train_src "$OUT/bpe/train.$SRC" -train_tgt \
        "$OUT/bpe/train.$TGT" -valid_src "$OUT/bpe/val.$SRC" -valid_tgt "$OUT/bpe/val.$TGT" -save_data "$OUT/bpe/data" \
        -shuffle > /dev/null
      DATA=$OUT/bpe/data; SRC_TXT=$OUT/bpe; WORD_TGT=0; TGT_EMB=(); BPE_TRAIN=(-valid_remove_bpe)
      BPE_DECODE=(-remove_bpe)
      if [ "$mode" = bpe_sphere ]; then  # a random unit table over the target pieces
        [ -s "$OUT/bpe/sphere.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -init random_sphere -dim 300 \
          -dict_file "$OUT/bpe/data.vocab.pt" -output_file "$OUT/bpe/sphere" > /dev/null
        TGT_EMB=(-tgt_emb "$OUT/bpe/sphere.dec.pt")
      fi ;;
    srcbpe)  # -replace_unk keeps the word lexicon (it joins the attended source pieces into their word first)
      segment_bpe "$SRC"
      mkdir -p "$OUT/srcbpe"
      [ -s "$OUT/srcbpe/data.vocab.pt" ] || "$PYTHON" preprocess.py -train_src "$OUT/bpe/train.$SRC" -train_tgt \
        "$TOK/train.$TGT" -valid_src "$OUT/bpe/val.$SRC" -valid_tgt "$TOK/val.$TGT" -save_data "$OUT/srcbpe/data" \
        -tgt_emb "$EMB" -shuffle > /dev/null
      [ -s "$OUT/srcbpe/emb.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -emb_file_dec "$EMB" \
        -dict_file "$OUT/srcbpe/data.vocab.pt" -output_file "$OUT/srcbpe/emb" -normalize > /dev/null
      DATA=$OUT/srcbpe/data; SRC_TXT=$OUT/bpe; TGT_EMB=(-tgt_emb "$OUT/srcbpe/emb.dec.pt") ;;
  esac
}

valid_bleu() {  # CHECKPOINT BETA [BLOCK [OFFSETS NAME]] -> sacreBLEU of the validation set (greedy, no -replace_unk),
  # decoded into CHECKPOINT.val.BETA.BLOCK[.NAME].$TGT. OFFSETS: a tools/calibrate_offsets.py file fitted under BETA
  local prior=(); [ "$2" != 0 ] && prior=(-decode_prior "$2")
  local block=${3:-0} calib=
  [ -n "${4:-}" ] && { prior+=(-freq_offsets "$4"); calib=.$5; }
  "$PYTHON" translate.py -model "$1" -src "$SRC_TXT/val.$SRC" -output "$1.val.$2.$block$calib.$TGT" \
    -tgt "$TOK/val.$TGT" -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" -block_ngram_repeat "$block" \
    "${BPE_DECODE[@]}" 2>&1 | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p'
}

test_decode() {  # SUFFIX BLOCK [FLAGS...]: both tests with step 3's checkpoint and prior into $run/TEST$SUFFIX.*
  local t extra=("${@:3}")
  for t in test_2016_flickr test_2017_flickr; do
    [ -s "$run/$t$1.bleu.txt" ] || "$PYTHON" translate.py -model "$run/$ckpt" -src "$SRC_TXT/$t.$SRC" \
      -output "$run/$t$1.$TGT" -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" \
      -block_ngram_repeat "$2" "${BPE_DECODE[@]}" "${extra[@]}" -replace_unk -lookup_dict "$OUT/lexicon.txt" \
      > "$run/$t$1.bleu.txt" 2>&1
    [ -s "$run/$t$1.calibration.json" ] || "$PYTHON" lab/tools/rare_word_f1.py -train "$TOK/train.$TGT" -ref "$TOK/$t.$TGT" \
      -hyp "$run/$t$1.$TGT" -bins calibration -json "$run/$t$1.calibration.json" > /dev/null
    log "$cfg seed $seed $t$1: $(grep -h '^sacreBLEU' "$run/$t$1.bleu.txt" | cut -c1-30) |" \
      "$(grep -h '^without' "$run/$t$1.bleu.txt")"
  done
}

block_step() {  # 5. -block_ngram_repeat picked on validation among 0 and BLOCKS with step 3's checkpoint and beta
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

calibrate_step() {  # 6. frequency-bin offsets fitted on validation under every beta of CAL_BETAS with step 5's
  # blocking; validation BLEU picks the beta; the tests again into TEST.CAL_NAME.* with that beta and its offsets
  [ "$CALIBRATE" = 1 ] || return 0
  [ "$WORD_TGT" = 1 ] || { echo "error: CALIBRATE=1 is for word-target rows, not $cfg" >&2; exit 2; }
  local block=0 b bleu best_bleu=-1 pick= betas=$CAL_BETAS scores= off=offsets match=()
  [ "$CAL_NAME" = calib ] || off=offsets.$CAL_NAME
  local files=$CAL_MATCH r c bl
  for r in $CAL_MATCH_RUNS; do  # the picked validation decode: CHECKPOINT.val.BETA.BLOCK.$TGT (valid_bleu's name)
    read -r _ c _ b _ < "$OUT/$r/choice.txt"; bl=0
    [ -s "$OUT/$r/block.txt" ] && read -r _ bl _ < "$OUT/$r/block.txt"
    files="$files $OUT/$r/$c.val.$b.$bl.$TGT"
  done
  # shellcheck disable=SC2206  # a list of files
  [ -n "${files// /}" ] && match=(-match $files)
  # shellcheck disable=SC2206  # CAL_TARGET: six numbers
  [ -n "$CAL_TARGET" ] && match+=(-target $CAL_TARGET)
  [ "$softmax" = 1 ] && betas=0  # a softmax takes the offsets on its log-probabilities, no beta
  [ -s "$run/block.txt" ] && read -r _ block _ < "$run/block.txt"
  if [ ! -s "$run/$CAL_NAME.txt" ]; then
    for b in $betas; do
      [ -s "$run/$off.$b.json" ] || "$PYTHON" tools/calibrate_offsets.py -model "$run/$ckpt" -src "$SRC_TXT/val.$SRC" \
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
  prior=(-freq_offsets "$run/$off.$b.json")
  [ "$b" != 0 ] && prior+=(-decode_prior "$b")
  test_decode ".$CAL_NAME" "$block"
}

beam_step() {  # 7. (BEAM) the tests with -beam_size BEAM, step 3's checkpoint and beta, step 5's blocking
  [ -n "$BEAM" ] || return 0
  local block=0
  [ -s "$run/block.txt" ] && read -r _ block _ < "$run/block.txt"
  test_decode ".beam$BEAM" "$block" -beam_size "$BEAM"
}

train_and_score() {  # ROW SEED: steps 2-7 (prepare ROW first)
  # local: the steps' functions see them, the main loop's cfg and seed stay its own
  local cfg=$1 seed=$2 run=$OUT/$1.s$2 ckpt beta prior lock=
  mkdir -p "$run"
  # one script at a time per run folder: the lock stays held while any process started here (train.py) lives
  if command -v flock > /dev/null; then
    exec {lock}> "$run/.lock"
    flock -n "$lock" || { echo "error: $run is in use (a training or decode of another word_choice.sh holds" \
      "$run/.lock)" >&2; exit 2; }
  fi
  # 2. train
  if [ ! -s "$run/model_last.pt" ]; then
    log "train $cfg seed $seed"
    local start; start=$(date +%s)
    local early=(-early_stopping "$EARLY"); [ "$EARLY" != 0 ] && early+=(-early_stopping_window "$WINDOW")
    # shellcheck disable=SC2086
    "$PYTHON" train.py -data "$DATA" -save_model "$run/model" "${TGT_EMB[@]}" $flags -epochs "$EPOCHS" -resume auto \
      "${early[@]}" "${BPE_TRAIN[@]}" -seed "$seed" -threads "$THREADS" \
      -save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 -report_every 100 -log_file "$run/train.log" \
      > "$run/train.stdout" 2>&1
    echo "train_wall_s $(( $(date +%s) - start ))" > "$run/train_time.txt"
  fi
  # 3. model_best or the average of the last AVG epochs; then beta (continuous rows) on validation
  if [ ! -s "$run/choice.txt" ]; then
    local n best best_bleu avg_bleu b bleu
    n=$(ls "$run"/model_epoch_*.pt | wc -l)
    "$PYTHON" tools/average_models.py -last $(( n < AVG ? n : AVG )) -prefix "$run/model" -output "$run/model_avg.pt"
    best=model_best.pt; best_bleu=$(valid_bleu "$run/model_best.pt" 0)
    avg_bleu=$(valid_bleu "$run/model_avg.pt" 0)
    if awk "BEGIN{exit !($avg_bleu > $best_bleu)}"; then best=model_avg.pt; best_bleu=$avg_bleu; fi
    beta=0
    if [ "$softmax" = 0 ]; then  # the prior re-scores nearest-neighbour scores only
      for b in $BETAS; do
        [ "$b" = 0 ] && continue
        bleu=$(valid_bleu "$run/$best" "$b")
        if awk "BEGIN{exit !($bleu > $best_bleu)}"; then beta=$b; best_bleu=$bleu; fi
      done
    fi
    echo "checkpoint $best beta $beta valid_bleu $best_bleu (model_best $(valid_bleu "$run/model_best.pt" 0)," \
      "average of last $AVG $avg_bleu)" > "$run/choice.txt"
    rm -f "$run"/model_epoch_*.pt  # the average keeps what they were for
  fi
  read -r _ ckpt _ beta _ < "$run/choice.txt"
  prior=(); [ "$beta" != 0 ] && prior=(-decode_prior "$beta")
  # 4. the tests, with and without the lexicon, and the calibration ratios
  test_decode "" 0
  # 5. (BLOCKS) -block_ngram_repeat picked on validation
  block_step
  # 6. (CALIBRATE=1) frequency-bin offsets
  calibrate_step
  # 7. (BEAM) beam search
  beam_step
  [ -z "$lock" ] || exec {lock}>&-
}

# 1. the data, the unit table and the lexicon
. lab/recipes/prepare_m30k.sh
for cfg in $CONFIGS; do prepare "$cfg"; done
[ "$PREPARE_ONLY" = 1 ] && { log "data ready in $OUT"; exit 0; }

running=0
for cfg in $CONFIGS; do
  prepare "$cfg"
  for seed in $SEEDS; do
    if [ "$JOBS" -le 1 ]; then train_and_score "$cfg" "$seed"; continue; fi
    train_and_score "$cfg" "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
  done
done
while [ "$running" -gt 0 ]; do wait -n; running=$((running - 1)); done  # a failed run stops the script (set -e)
log "done"
exit
}
