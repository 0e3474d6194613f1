#!/usr/bin/env bash
# The LSTM table of docs/results.md, one language pair per call: LSTM ce (configs/lstm_softmax.yaml) against the
# continuous LSTM (configs/lstm_continuous.yaml), 2 seeds each (de->en: both with -drop_final_punct 0.05), through
# lab/recipes/word_choice.sh; the continuous rows are also decoded with frequency-bin offsets fitted on validation to
# the mean output/reference ratios of both ce seeds' validation output (word_choice.sh step 6, TEST.match.*). Then
# the table: BLEU mean ± std over seeds and the <unk> rate, without and with the offsets (lab/tools/quality_report.py).
#
#   bash lab/recipes/lstm_rows.sh                 # fr->en
#   SRC=de bash lab/recipes/lstm_rows.sh          # de->en
#
# Environment: SRC [fr; or de], SHARED [../shared/data], OUT [runs/word_choice_$SRC-en], JOBS [2: runs trained at
# once, one thread each]. The table is written to $OUT/lstm_rows.md.
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}
case $SRC in
  fr) CE=lstm_ce; CONT=lstm_nce_bias_avg ;;
  de) CE=lstm_ce_dfp; CONT=lstm_nce_bias_dfp_avg ;;
  *) echo "SRC must be fr or de, got $SRC" >&2; exit 2 ;;
esac
export SRC TGT=en SHARED=${SHARED:-../shared/data} OUT=${OUT:-runs/word_choice_$SRC-en} THREADS=1
JOBS=${JOBS:-2}
WC=lab/recipes/word_choice.sh

PREPARE_ONLY=1 CONFIGS="$CE $CONT" bash $WC
CONFIGS="$CE $CONT" SEEDS="1 2" JOBS=$JOBS bash $WC
CONFIGS=$CONT SEEDS="1 2" JOBS=$JOBS CALIBRATE=1 CAL_NAME=match CAL_MATCH_RUNS="$CE.s1 $CE.s2" bash $WC
{
  echo "## $SRC->en LSTM: BLEU mean ± std over 2 seeds (TEST.block.*), <unk> rate"
  "$PYTHON" lab/tools/quality_report.py -suffix .block "$OUT/$CE".s{1,2} "$OUT/$CONT".s{1,2}
  echo "## the continuous LSTM with the offsets (TEST.match.*)"
  "$PYTHON" lab/tools/quality_report.py -suffix .match "$OUT/$CONT".s{1,2}
} | tee "$OUT/lstm_rows.md"
exit
}
