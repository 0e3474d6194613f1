#!/usr/bin/env bash
# The "Every Transformer row" table of docs/results.md, one language pair per call: the softmax rows (word ce,
# subword ce) and the continuous rows (the preset, the same at dropout 0.1, words or subword pieces on the source),
# every seed the table reports, through lab/recipes/word_choice.sh. The continuous rows are also decoded with
# frequency-bin offsets fitted on validation to one word ce run's validation output (word_choice.sh step 6,
# TEST.matchce.*). Then the table: BLEU mean ± std over seeds and the <unk> rate without and with the offsets
# (lab/tools/quality_report.py), and time to the first softmax row's best validation BLEU - 1 over every pair of seeds
# (validations x the row's epoch cost relative to that ce, measured side by side; lab/tools/time_to_quality.py).
# Runs that lab/recipes/results_at_a_glance.sh finished in the same OUT are reused.
#
#   bash lab/recipes/transformer_rows.sh                    # fr->en
#   SRC=de bash lab/recipes/transformer_rows.sh             # de->en
#
# Environment: SRC [fr; or de], SHARED [../shared/data], OUT [runs/word_choice_$SRC-en], JOBS [2: runs trained at
# once, one thread each]. The table is written to $OUT/transformer_rows.md.
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
export SRC TGT=en SHARED=${SHARED:-../shared/data} OUT=${OUT:-runs/word_choice_$SRC-en} THREADS=1
JOBS=${JOBS:-2}
WC=lab/recipes/word_choice.sh
# "ROW|SEEDS" (softmax; the first is the time column's reference) and "ROW|SEEDS|EPOCH_COST" (continuous: seconds
# per epoch over the reference's, measured side by side; - : no time column). MATCH: the word ce run whose
# validation output the offsets are fitted to.
case $SRC in
  fr) MATCH=t_ce_d01.s1
      SOFTMAX=("t_ce_d01_avg|1 2 3 4 5" "t_bpe_ce_avg_d01|1 2")
      CONTINUOUS=("t_nce_both_avg_d00_lr1|1 2 5|0.53" "t_nce_both_avg_d01_lr1|1 2 3 4 5 6|0.53"
                  "t_srcbpe_nce_both_avg_d01_lr1|1|-") ;;
  de) MATCH=t_ce_dfp_d01.s2
      SOFTMAX=("t_bpe_ce_avg_d01|1 2 3 4 5 6" "t_ce_dfp_d01_avg|1 2" "t_srcbpe_ce_avg_d01|1 2")
      CONTINUOUS=("t_srcbpe_nce_both_avg_dfp_d00_lr1|6 1 2 3|0.58" "t_srcbpe_nce_both_avg_dfp_d01_lr1|1 2 3 4 5 6|0.58"
                  "t_nce_both_avg_dfp_d01_lr1|1 2 3|0.76") ;;
  *) echo "SRC must be fr or de, got $SRC" >&2; exit 2 ;;
esac
runs() {  # ROW SEEDS [FILE]: the run folders (or FILE in each)
  local s
  for s in $2; do echo "$OUT/$1.s$s${3:+/$3}"; done
}

# 1. the data once, before jobs use it
configs=${MATCH%.s*}
for r in "${SOFTMAX[@]}" "${CONTINUOUS[@]}"; do configs="$configs ${r%%|*}"; done
PREPARE_ONLY=1 CONFIGS="$configs" bash $WC
# 2. the word ce run the offsets are fitted to, and the softmax rows
CONFIGS=${MATCH%.s*} SEEDS=${MATCH##*.s} bash $WC
for r in "${SOFTMAX[@]}"; do
  IFS='|' read -r row seeds <<< "$r"
  CONFIGS=$row SEEDS="$seeds" JOBS=$JOBS bash $WC
done
# 3. the continuous rows, with the offsets (12 rounds, beta 0.25, the round nearest the target)
for r in "${CONTINUOUS[@]}"; do
  IFS='|' read -r row seeds _ <<< "$r"
  CONFIGS=$row SEEDS="$seeds" JOBS=$JOBS CALIBRATE=1 CAL_BETAS=0.25 CAL_NAME=matchce CAL_MATCH_RUNS=$MATCH bash $WC
done

# 4. the table
all=(); cont=()
for r in "${SOFTMAX[@]}"; do IFS='|' read -r row seeds <<< "$r"; mapfile -t -O "${#all[@]}" all < <(runs "$row" "$seeds"); done
for r in "${CONTINUOUS[@]}"; do IFS='|' read -r row seeds _ <<< "$r"; mapfile -t -O "${#cont[@]}" cont < <(runs "$row" "$seeds"); done
IFS='|' read -r ref ref_seeds <<< "${SOFTMAX[0]}"
{
  echo "## $SRC->en: every Transformer row, BLEU mean ± std over seeds (TEST.block.*), <unk> rate"
  "$PYTHON" lab/tools/quality_report.py -suffix .block "${all[@]}" "${cont[@]}"
  echo "## the continuous rows with the offsets (TEST.matchce.*)"
  "$PYTHON" lab/tools/quality_report.py -suffix .matchce "${cont[@]}"
  for r in "${CONTINUOUS[@]}"; do
    IFS='|' read -r row seeds cost <<< "$r"
    [ "$cost" = - ] && continue
    echo "## $row: time to $ref's best validation BLEU - 1, validations x $cost"
    # shellcheck disable=SC2046
    "$PYTHON" lab/tools/time_to_quality.py -ref $(runs "$ref" "$ref_seeds" train.log) -runs $(runs "$row" "$seeds" train.log) \
      -epoch_cost "$cost" | tail -1
  done
} | tee "$OUT/transformer_rows.md"
exit
}
