#!/usr/bin/env bash
# How much of each Multi30k row's BLEU comes from -replace_unk: after lab/recipes/multi30k.sh, translate
# the tests again from each row's model_best.pt (greedy) (a) without -replace_unk, scoring the raw
# output, and (b) with -ban_unk_token -replace_unk; the share of <unk> among the decoded words is in
# both logs ("decoded N words, K of them <unk>"), and the rare-word F1 of the raw output. Word-target rows
# only (the BPE-target rows decode pieces). Writes RESULTS/ROW/TEST.{raw,banunk}.bleu.txt and
# TEST.raw.f1.txt; lab/tools/m30k_report.py tabulates them.
#
#   bash lab/recipes/unk_analysis.sh                      # fr->en, every finished row of runs/m30k_fr-en
#   SRC=de bash lab/recipes/unk_analysis.sh
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}; TGT=${TGT:-en}
OUT=${OUT:-runs/m30k_$SRC-$TGT}
RESULTS=${RESULTS:-lab/results/m30k_$SRC-$TGT}
export OMP_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
TESTS="test_2016_flickr test_2017_flickr"
for run in "$OUT"/*.s[0-9]*; do
  row=${run##*/}
  [ -s "$run/model_best.pt" ] && [ -d "$RESULTS/$row" ] || continue
  case $row in ce_word2bpe.*|ce_bpe2bpe.*) continue ;; esac
  src_txt=$OUT/tok; dict=$OUT/lexicon.txt
  case $row in nllvmf_bpe2word*) src_txt=$OUT/bpe; dict=$OUT/srcbpe/lexicon.txt ;; esac
  for t in $TESTS; do
    for mode in raw banunk; do
      f=$run/$t.$mode.bleu.txt
      if [ ! -s "$f" ]; then
        echo "[$(date -u +%H:%M:%S)] $row $t $mode"
        flags=(); [ $mode = banunk ] && flags=(-ban_unk_token -replace_unk -lookup_dict "$dict")
        "$PYTHON" translate.py -model "$run/model_best.pt" -src "$src_txt/$t.$SRC" -tgt "$OUT/tok/$t.$TGT" \
          -tgt_lang "$TGT" -output "$run/$t.$mode.$TGT" "${flags[@]}" > "$f" 2>&1
      fi
      cp "$f" "$RESULTS/$row/"
    done
    # rare-word F1 of the raw output: which rare words the model itself produces
    [ -s "$run/$t.raw.f1.txt" ] || "$PYTHON" lab/tools/rare_word_f1.py -train "$OUT/tok/train.$TGT" -ref "$OUT/tok/$t.$TGT" \
      -hyp "$run/$t.raw.$TGT" > "$run/$t.raw.f1.txt"
    cp "$run/$t.raw.f1.txt" "$RESULTS/$row/"
  done
done
echo "[$(date -u +%H:%M:%S)] done"
exit
}
