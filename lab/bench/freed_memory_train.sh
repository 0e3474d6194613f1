#!/usr/bin/env bash
# Training time with and without freed memory kept (onmt_cont/utils/memory.py): 250 steps of each Transformer preset
# on fr->en (lab/recipes/word_choice.sh's data), one thread, whole processes, alternating, REPS rounds. "default"
# runs with ONMT_CONT_KEEP_FREED_MEMORY=0 (glibc's own behaviour); "kept" is train.py as it runs.
#
#   bash lab/bench/freed_memory_train.sh            # seconds per run: round, preset, mode
#
# Environment: OUT [runs/word_choice_fr-en], REPS [2], WORK [/tmp/freed_memory_train].
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/word_choice_fr-en}
REPS=${REPS:-2}
WORK=${WORK:-/tmp/freed_memory_train}
mkdir -p "$WORK"
for rep in $(seq "$REPS"); do
  for cfg in continuous softmax; do
    for mode in default kept; do
      env=(ONMT_CONT_KEEP_FREED_MEMORY=1)
      [ "$mode" = default ] && env=(ONMT_CONT_KEEP_FREED_MEMORY=0)
      start=$(date +%s.%N)
      env "${env[@]}" "$PYTHON" train.py -data "$OUT/data" -tgt_emb "$OUT/emb.dec.pt" \
        -config "configs/transformer_$cfg.yaml" -train_steps 250 -epochs 1 -valid_steps 100000 -threads 1 \
        -save_model "$WORK/m" -save_checkpoint_steps 100000 -seed 3 > "$WORK/$cfg.$mode.out" 2>&1
      echo "$rep $cfg $mode $("$PYTHON" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f} s')" \
        "$start" "$(date +%s.%N)")"
    done
  done
done
