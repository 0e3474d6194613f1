#!/usr/bin/env bash
# The English->German table of docs/results.md: Transformer ce (configs/transformer_softmax.yaml) against the
# continuous preset (configs/transformer_continuous.yaml), SEEDS each, on two German target vocabularies:
#   - every German training word, with vectors trained on the German side of the training data
#     (tools/train_vectors.py: fastText skip-gram, 300 d), so that nothing is <unk> but words never seen in training;
#   - the words the shared vectors hold ($SHARED/embeddings/de.ft300.vec.gz: 12,193 words, 98.4% of the training
#     tokens), the others <unk>, replaced through the lexicon (-replace_unk).
# Each through lab/recipes/word_choice.sh (data, training, checkpoint / prior / blocking picked on validation, both
# tests, beam BEAM). Then per vocabulary, in $OUT/report.md: BLEU with and without the lexicon, the <unk> rate and
# the output/reference ratio per training-frequency bin (lab/tools/quality_report.py, the decodes validation picked),
# and the time to ce's best validation BLEU - 1 (lab/tools/time_to_quality.py: validations times EPOCH_COST, every pair
# of seeds).
#
#   bash lab/recipes/english_german.sh
#
# Environment: SHARED [../shared/data], SEEDS ["1 2"], JOBS [2: runs trained at once, one thread each], BEAM [5],
# EPOCH_COST_M30K, EPOCH_COST_SHARED [seconds per epoch of the preset over ce's, measured side by side on each
# vocabulary: 0.49 and 0.64 (SRC=en TGT=de [OUT=...] bash lab/recipes/epoch_cost.sh)].
# One { ... } block that ends in exit (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SRC=en TGT=de SHARED=${SHARED:-../shared/data} THREADS=1 BEAM=${BEAM:-5}
SEEDS=${SEEDS:-1 2}
JOBS=${JOBS:-2}
CE=t_ce_d01_avg
CONT=t_nce_both_avg_d00_lr1_ns2048
WC=lab/recipes/word_choice.sh
SHARED_OUT=runs/word_choice_en-de
M30K_OUT=runs/word_choice_en-de_m30kvec
VEC=$SHARED_OUT/de.m30k.vec.gz

OUT=$SHARED_OUT PREPARE_ONLY=1 CONFIGS="$CE $CONT" bash $WC  # the tokenized German training side
[ -s "$VEC" ] || "$PYTHON" tools/train_vectors.py -input "$SHARED_OUT/tok/train.de" -output "$VEC"
OUT=$M30K_OUT EMB=$VEC CONFIGS="$CE $CONT" SEEDS="$SEEDS" JOBS=$JOBS bash $WC
OUT=$SHARED_OUT CONFIGS="$CE $CONT" SEEDS="$SEEDS" JOBS=$JOBS bash $WC

report() {  # OUT EPOCH_COST
  local ce=() cont=() s
  for s in $SEEDS; do ce+=("$1/$CE.s$s"); cont+=("$1/$CONT.s$s"); done
  {
    "$PYTHON" lab/tools/quality_report.py -suffix .block -calibration_ref "$CE" "${ce[@]}" "${cont[@]}"
    echo
    "$PYTHON" lab/tools/quality_report.py -suffix .beam$BEAM "${ce[@]}" "${cont[@]}"
    echo
    "$PYTHON" lab/tools/time_to_quality.py -ref "${ce[@]/%//train.log}" -runs "${cont[@]/%//train.log}" -epoch_cost "$2"
  } > "$1/report.md"
  echo "wrote $1/report.md"
}
report $M30K_OUT "${EPOCH_COST_M30K:-0.49}"
report $SHARED_OUT "${EPOCH_COST_SHARED:-0.64}"
exit
}
