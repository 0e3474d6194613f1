#!/usr/bin/env bash
# The "Target vectors for your own data" table of docs/results.md: docs/recipes/own_data.sh on the shipped sample
# (data/raw/: 3,000 fr->en pairs, raw text), with the quickstart's schedule, once per choice of target table:
# the shipped pretrained vectors, vectors trained on the sample's target side, the same plus Multi30k's 29,000
# English training sentences, a random table; and the softmax twin. Prints test BLEU per row.
#
#   bash lab/recipes/own_data_tables.sh
#
# Environment: OUT [runs/own_data_tables], SHARED [../shared/data], THREADS [1], JOBS [2: runs side by side].
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-runs/own_data_tables}
SHARED=${SHARED:-../shared/data}
JOBS=${JOBS:-2}
export SRC_LANG=fr TGT_LANG=en TRAIN=data/raw/train VALID=data/raw/valid TEST=data/raw/test THREADS=${THREADS:-1}
# the sample's schedule, as docs/quickstart.sh: batch 32, warm-up 400, 12 epochs, the best validation loss
export TRAIN_FLAGS="-batch_size 32 -warmup_steps 400 -epochs 12 -valid_metric loss -early_stopping 0"
row() {  # NAME VAR=VALUE...
  local name=$1; shift
  [ -s "$OUT/$name/test.en" ] || env OUT="$OUT/$name" "$@" bash docs/recipes/own_data.sh > "$OUT/$name.log" 2>&1
}
mkdir -p "$OUT"
row pretrained VECTORS=data/en.vec.gz &
row trained VECTORS=train &
wait
row trained_more VECTORS=train VEC_TEXT="$SHARED/multi30k/train.en" &
[ "$JOBS" -gt 1 ] || wait
row random VECTORS=random &
wait
row softmax VECTORS=random PRESET=transformer_softmax
for name in pretrained trained trained_more random softmax; do
  printf '%-14s %s\n' "$name" "$(grep -h '^tokenized BLEU' "$OUT/$name.log" | tail -n 1)"
done
exit
}
