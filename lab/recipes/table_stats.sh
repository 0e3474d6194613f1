#!/usr/bin/env bash
# Dispersion and hubness of the Multi30k target tables (docs/tables.md): the recipe's table
# (embeddings_to_torch.py -normalize on the fastText vectors) and its variants: -center,
# -center_pcs, -unk_vector random/zero/vocab_mean, -init random_sphere / random_cube / mixed. Tokenization and
# preprocessing are those of lab/recipes/multi30k.sh (same OUT, so either reuses the other's files);
# nothing is trained.
#
#   bash lab/recipes/table_stats.sh                  # fr->en, writes lab/results/table_stats_fr-en.txt
#   SRC=de bash lab/recipes/table_stats.sh
#
# Environment: SRC, TGT [fr, en]; SHARED [../shared/data]; OUT [runs/m30k_$SRC-$TGT];
# SEED [1]; ALPHA (for -init mixed) [0.5]; PCS (for -center_pcs) [3]; THREADS [1].
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/m30k_$SRC-$TGT}
SEED=${SEED:-1}; ALPHA=${ALPHA:-0.5}; PCS=${PCS:-3}
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
TOK=$OUT/tok; TAB=$OUT/tables
mkdir -p "$TOK" "$TAB" lab/results
for split in train val; do
  for l in $SRC $TGT; do
    [ -s "$TOK/$split.$l" ] || $PY tools/moses_tok.py -lang $l < "$SHARED/multi30k/$split.$l" > "$TOK/$split.$l"
  done
done
[ -s "$OUT/data.vocab.pt" ] || $PY preprocess.py -train_src "$TOK/train.$SRC" -train_tgt "$TOK/train.$TGT" \
  -valid_src "$TOK/val.$SRC" -valid_tgt "$TOK/val.$TGT" -save_data "$OUT/data" -tgt_emb "$EMB" -shuffle

table() {  # table NAME FLAGS...: OUT/tables/NAME.dec.pt from the fastText vectors
  local name=$1; shift
  [ -s "$TAB/$name.dec.pt" ] || $PY embeddings_to_torch.py -emb_file_dec "$EMB" -dict_file "$OUT/data.vocab.pt" \
    -output_file "$TAB/$name" -seed "$SEED" "$@" > "$TAB/$name.log"
}
table pretrained -normalize                      # exactly the table lab/recipes/multi30k.sh trains on
table pretrained_center -normalize -center
table pretrained_center_pcs$PCS -normalize -center_pcs "$PCS"
table pretrained_unk_random -normalize -unk_vector random
table pretrained_unk_zero -normalize -unk_vector zero
table pretrained_unk_vocab_mean -normalize -unk_vector vocab_mean
table random_sphere -init random_sphere
table random_cube -init random_cube
table mixed$ALPHA -init mixed -alpha "$ALPHA" -normalize
table mixed${ALPHA}_center -init mixed -alpha "$ALPHA" -normalize -center

$PY tools/table_stats.py -vocab "$OUT/data.vocab.pt" -threads "${THREADS:-1}" \
  "$TAB"/pretrained.dec.pt "$TAB"/pretrained_center.dec.pt "$TAB"/pretrained_center_pcs$PCS.dec.pt \
  "$TAB"/pretrained_unk_random.dec.pt "$TAB"/pretrained_unk_zero.dec.pt "$TAB"/pretrained_unk_vocab_mean.dec.pt \
  "$TAB"/random_sphere.dec.pt \
  "$TAB"/random_cube.dec.pt "$TAB"/mixed$ALPHA.dec.pt "$TAB"/mixed${ALPHA}_center.dec.pt \
  | tee "lab/results/table_stats_$SRC-$TGT.txt"
exit
}
