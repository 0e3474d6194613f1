#!/usr/bin/env bash
# The "Results at a glance" table of docs/results.md, one language pair per call: Transformer ce
# (configs/transformer_softmax.yaml; de->en with subword pieces on both sides, the strongest softmax row there)
# against the recommended continuous Transformer (configs/transformer_continuous.yaml, as it is and as it was with
# 64 random negatives a batch; de->en with -drop_final_punct 0.05 and subword pieces on the source), every seed the
# table reports, through
# lab/recipes/word_choice.sh (data, training, checkpoint / prior / blocking picked on validation, both tests).
# Then the table:
#   - BLEU on both tests, mean ± std over seeds, and the <unk> rate (lab/tools/quality_report.py);
#   - time to ce's best validation BLEU - 1 as a ratio of ce's time: on the wall clock for the first seed of each
#     row, trained side by side from the same minute (one thread each), and over every pair of seeds as
#     validations needed times EPOCH_COST (lab/tools/time_to_quality.py).
#
#   bash lab/recipes/results_at_a_glance.sh                 # fr->en
#   SRC=de bash lab/recipes/results_at_a_glance.sh          # de->en
#
# Environment: SRC [fr; or de], SHARED [../shared/data], OUT [runs/word_choice_$SRC-en, shared with the other table
# scripts, which reuse finished runs], JOBS [2: runs trained at once after the timed pair, one thread each],
# EPOCH_COST [seconds per epoch of the continuous row over ce's, measured side by side: 0.53 fr, 0.58 de; for the
# preset as it is 0.70 fr, 0.78 de (lab/recipes/epoch_cost.sh)]. The
# table is written to $OUT/results_at_a_glance.md.
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
# CONT: the continuous row as the preset was with 64 random negatives; NOW: the preset as it is (2,048)
case $SRC in
  fr) CE=t_ce_d01_avg; CE_SEEDS="5 1 2 3 4"; CONT=t_nce_both_avg_d00_lr1; CONT_SEEDS="5 1 2"; COST=0.53
      NOW=t_nce_both_avg_d00_lr1_ns2048; NOW_SEEDS="1 2"; NOW_COST=0.70 ;;
  de) CE=t_bpe_ce_avg_d01; CE_SEEDS="6 1 2 3 4 5"; CONT=t_srcbpe_nce_both_avg_dfp_d00_lr1; CONT_SEEDS="6 1 2 3"
      COST=0.58; NOW=t_srcbpe_nce_both_avg_dfp_d00_lr1_ns2048; NOW_SEEDS="1 2 3"; NOW_COST=0.78 ;;
  *) echo "SRC must be fr or de, got $SRC" >&2; exit 2 ;;
esac
export SRC TGT=en SHARED=${SHARED:-../shared/data} OUT=${OUT:-runs/word_choice_$SRC-en} THREADS=1
JOBS=${JOBS:-2}
EPOCH_COST=${EPOCH_COST:-$COST}
WC=lab/recipes/word_choice.sh
read -r CE_PAIR CE_REST <<< "$CE_SEEDS"
read -r CONT_PAIR CONT_REST <<< "$CONT_SEEDS"

# 1. the data once, before two jobs use it
PREPARE_ONLY=1 CONFIGS="$CE $CONT" bash $WC
# 2. the timed pair, side by side from the same minute
CONFIGS=$CE SEEDS=$CE_PAIR bash $WC &
CONFIGS=$CONT SEEDS=$CONT_PAIR bash $WC &
wait
# 3. the other seeds, JOBS at a time
CONFIGS=$CE SEEDS="$CE_REST" JOBS=$JOBS bash $WC
CONFIGS=$CONT SEEDS="$CONT_REST" JOBS=$JOBS bash $WC
CONFIGS=$NOW SEEDS="$NOW_SEEDS" JOBS=$JOBS bash $WC

# 4. the table
runs() {  # ROW SEEDS...: the run folders
  local row=$1 s; shift
  for s in "$@"; do echo "$OUT/$row.s$s"; done
}
# shellcheck disable=SC2046,SC2086
{
  echo "## $SRC->en: BLEU (the decode validation picked: TEST.block.*), mean ± std over seeds, <unk> rate"
  "$PYTHON" lab/tools/quality_report.py -suffix .block $(runs $CE $CE_SEEDS) $(runs $CONT $CONT_SEEDS) $(runs $NOW $NOW_SEEDS)
  echo "## time to ce's best validation BLEU - 1, the pair trained side by side"
  "$PYTHON" lab/tools/time_to_quality.py -ref "$OUT/$CE.s$CE_PAIR/train.log" -runs "$OUT/$CONT.s$CONT_PAIR/train.log"
  echo "## the same over every pair of seeds: validations x $EPOCH_COST"
  "$PYTHON" lab/tools/time_to_quality.py -ref $(runs $CE $CE_SEEDS | sed 's|$|/train.log|') \
    -runs $(runs $CONT $CONT_SEEDS | sed 's|$|/train.log|') -epoch_cost "$EPOCH_COST"
  echo "## the preset as it is (2,048 random negatives), over every pair of seeds: validations x $NOW_COST"
  "$PYTHON" lab/tools/time_to_quality.py -ref $(runs $CE $CE_SEEDS | sed 's|$|/train.log|') \
    -runs $(runs $NOW $NOW_SEEDS | sed 's|$|/train.log|') -epoch_cost "$NOW_COST"
} | tee "$OUT/results_at_a_glance.md"
exit
}
