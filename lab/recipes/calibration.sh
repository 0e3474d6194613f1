#!/usr/bin/env bash
# The word-choice table of docs/results.md, one language pair per call: how often the recommended continuous
# Transformer writes words of each training-frequency bin (output / reference tokens), without and with the
# frequency-bin offsets, against every word ce seed. Trains (or reuses, in the same OUT) through
# lab/recipes/word_choice.sh: word ce without and with the moving average (fr->en 2 + 5 seeds, de->en 2 + 2, with
# -drop_final_punct 0.05) and the continuous row of the results-at-a-glance table with its offsets (fitted on
# validation to one word ce run's validation output, TEST.matchce.*). Then, per test set and bin,
# lab/tools/bin_bootstrap.py: each side's mean output/reference ratio and the quotient of the continuous row's over word
# ce's, with a 95% interval over resampled sentences.
#
#   bash lab/recipes/calibration.sh              # fr->en
#   SRC=de bash lab/recipes/calibration.sh       # de->en
#
# Environment: SRC [fr; or de], SHARED [../shared/data], OUT [runs/word_choice_$SRC-en], JOBS [2: runs trained at
# once, one thread each]. The output is written to $OUT/calibration.txt.
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
  fr) CE=t_ce_d01; CE_AVG=t_ce_d01_avg; CE_AVG_SEEDS="1 2 3 4 5"; MATCH=t_ce_d01.s1
      CONT=t_nce_both_avg_d00_lr1; CONT_SEEDS="5 1 2" ;;
  de) CE=t_ce_dfp_d01; CE_AVG=t_ce_dfp_d01_avg; CE_AVG_SEEDS="1 2"; MATCH=t_ce_dfp_d01.s2
      CONT=t_srcbpe_nce_both_avg_dfp_d00_lr1; CONT_SEEDS="6 1 2 3" ;;
  *) echo "SRC must be fr or de, got $SRC" >&2; exit 2 ;;
esac
export SRC TGT=en SHARED=${SHARED:-../shared/data} OUT=${OUT:-runs/word_choice_$SRC-en} THREADS=1
JOBS=${JOBS:-2}
WC=lab/recipes/word_choice.sh

PREPARE_ONLY=1 CONFIGS="$CE $CE_AVG $CONT" bash $WC
CONFIGS=$CE SEEDS="1 2" JOBS=$JOBS bash $WC
CONFIGS=$CE_AVG SEEDS="$CE_AVG_SEEDS" JOBS=$JOBS bash $WC
CONFIGS=$CONT SEEDS="$CONT_SEEDS" JOBS=$JOBS CALIBRATE=1 CAL_BETAS=0.25 CAL_NAME=matchce CAL_MATCH_RUNS=$MATCH bash $WC

ce=(); cont=()
for s in 1 2; do ce+=("$OUT/$CE.s$s"); done
for s in $CE_AVG_SEEDS; do ce+=("$OUT/$CE_AVG.s$s"); done
for s in $CONT_SEEDS; do cont+=("$OUT/$CONT.s$s"); done
for t in test_2016_flickr test_2017_flickr; do
  for b in 1 2-4 5-9 10-99 100-999 1000+; do
    for d in block matchce; do  # the row as validation picked it, and with the offsets
      echo "== $t, bin $b: $CONT .$d against word ce (${#ce[@]} seeds)"
      "$PYTHON" lab/tools/bin_bootstrap.py -train "$OUT/tok/train.en" -ref "$OUT/tok/$t.en" -bin "$b" \
        -a "${cont[@]/%//$t.$d.en}" -b "${ce[@]/%//$t.block.en}"
    done
  done
done | tee "$OUT/calibration.txt"
exit
}
