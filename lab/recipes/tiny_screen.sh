#!/usr/bin/env bash
# Screening the continuous Transformer-Tiny preset on validation: the preset with one setting changed per run,
# trained for STEPS updates (the schedule does not depend on -train_steps, so a screen's first STEPS updates are a
# full run's), then its validation loss and greedy BLEU beside the preset's (lab/tools/screen_table.py). No test
# set is read. Data from lab/recipes/transformer_tiny.sh (OUT=... PREPARE_ONLY=1); each run resumes where it was
# (-resume auto), so rerunning the same command carries the screen across sessions.
#
#   OUT=/work/runs/tiny_en-de SCREEN_OUT=/work/runs/screen_en-de \
#     SCREENS="drop0.0:-dropout 0.0;neg512:-num_sampled 512;nobias:-word_bias false" bash lab/recipes/tiny_screen.sh
#
# Environment: OUT [runs/tiny_en-de: the prepared data, and the preset's run in OUT/continuous.s1 to compare with],
# SCREEN_OUT [OUT/screen], SCREENS [NAME:FLAGS items separated by ";"], STEPS [2560], SEED [1], THREADS [1],
# JOBS [1: runs at once], FLAGS [for every run, e.g. "-dropout 0.2"].
{
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
OUT=${OUT:-runs/tiny_en-de}
SCREEN_OUT=${SCREEN_OUT:-$OUT/screen}
SCREENS=${SCREENS:?give SCREENS, e.g. \"drop0.0:-dropout 0.0;neg512:-num_sampled 512\"}
STEPS=${STEPS:-2560}; SEED=${SEED:-1}; THREADS=${THREADS:-1}; JOBS=${JOBS:-1}
FLAGS=${FLAGS:-}
for v in STEPS SEED THREADS JOBS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$v must be a whole number, got '${!v}'" >&2; exit 2; }
done
[ -f "$OUT/srcbpe/emb.dec.pt" ] || { echo "$OUT/srcbpe/emb.dec.pt missing: run transformer_tiny.sh with PREPARE_ONLY=1" >&2; exit 2; }
IFS=';' read -ra ITEMS <<< "$SCREENS"
names=()
for item in "${ITEMS[@]}"; do
  name=${item%%:*}; flags=${item#*:}
  [[ $name =~ ^[A-Za-z0-9._-]+$ && $item == *:* ]] || { echo "SCREENS: NAME:FLAGS items, got '$item'" >&2; exit 2; }
  names+=("$name")
  run=$SCREEN_OUT/continuous.$name.s$SEED
  mkdir -p "$run"
  # shellcheck disable=SC2086  # the flags are words
  "$PY" train.py -config configs/transformer_tiny_continuous.yaml -data "$OUT/srcbpe/data" \
    -tgt_emb "$OUT/srcbpe/emb.dec.pt" -seed "$SEED" -threads "$THREADS" -save_model "$run/model" -resume auto \
    -keep_checkpoint 2 -log_file "$run/train.log" -train_steps "$STEPS" $FLAGS $flags > "$run/train.out" 2>&1 &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done
wait
args=(-run preset "$OUT/continuous.s$SEED/train.log")
for name in "${names[@]}"; do args+=(-run "$name" "$SCREEN_OUT/continuous.$name.s$SEED/train.log"); done
"$PY" lab/tools/screen_table.py "${args[@]}"
exit
}
