#!/usr/bin/env bash
# Issue 21: the capped decoding prior (translate.py -decode_prior BETA -decode_prior_cap CAP) on rows that
# docs/recipes/word_choice.sh finished. The plain prior (-decode_prior alone) pushes every word towards the most
# frequent ones: at the beta that validation picks, words seen once are no longer over-produced, but words seen
# 2-99 times are under-produced. The capped prior is flat for words seen CAP times or more and penalises only
# the rarer ones. Per run folder, on top of step 3's checkpoint and blocking (choice.txt, block.txt):
#   - every BETA x CAP of CAP_BETAS x CAPS is scored on the validation set (greedy, no -replace_unk);
#   - the best is kept in cap.txt if it beats step 3's choice (the plain prior's beta, 0 included), else "none";
#   - where one is kept, both tests are decoded with it (-replace_unk, the lexicon) into TEST.cap.*, with
#     tools/rare_word_f1.py -bins calibration beside them.
#
#   SRC=de bash docs/recipes/capped_prior.sh runs/word_choice_de-en/t_nce_both_avg_dfp.s2 ...
#
# Environment: SRC/TGT [fr/en]; CAPS ["2 5 10"]; CAP_BETAS ["0.5 1 2"]; THREADS [1]. The folder's parent holds
# the recipe's tok/ and lexicon.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${SRC:-fr}; TGT=${TGT:-en}
CAPS=${CAPS:-2 5 10}
CAP_BETAS=${CAP_BETAS:-0.5 1 2}
THREADS=${THREADS:-1}
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

valid_bleu() {  # RUN CHECKPOINT BETA CAP BLOCK -> sacreBLEU of the validation set
  local prior=(); [ "$3" != 0 ] && prior=(-decode_prior "$3")
  [ "$4" != 0 ] && prior+=(-decode_prior_cap "$4")
  python translate.py -model "$1/$2" -src "$TOK/val.$SRC" -output "$1/$2.val.$3.cap$4.$5.$TGT" -tgt "$TOK/val.$TGT" \
    -tgt_lang "$TGT" -threads "$THREADS" "${prior[@]}" -block_ngram_repeat "$5" \
    | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p'
}

for run in "$@"; do
  [ -s "$run/choice.txt" ] || { echo "error: $run/choice.txt: not there (run docs/recipes/word_choice.sh first)" >&2; exit 2; }
  TOK=$(dirname "$run")/tok; LEX=$(dirname "$run")/lexicon.txt
  read -r _ ckpt _ beta _ < "$run/choice.txt"
  block=0; [ -s "$run/block.txt" ] && read -r _ block _ < "$run/block.txt"
  if [ ! -s "$run/cap.txt" ]; then
    base=$(valid_bleu "$run" "$ckpt" "$beta" 0 "$block"); best=$base; pick=none
    for b in $CAP_BETAS; do
      for c in $CAPS; do
        bleu=$(valid_bleu "$run" "$ckpt" "$b" "$c" "$block")
        log "$run: -decode_prior $b -decode_prior_cap $c: $bleu (step 3's beta $beta: $base)"
        if awk "BEGIN{exit !($bleu > $best)}"; then best=$bleu; pick="$b $c"; fi
      done
    done
    echo "cap $pick valid_bleu $best (step 3: $ckpt beta $beta block $block: $base; among CAP_BETAS $CAP_BETAS x CAPS $CAPS)" \
      > "$run/cap.txt"
  fi
  read -r _ b c _ < "$run/cap.txt"
  [ "$b" = none ] && { log "$run: no capped prior beats step 3's choice on validation"; continue; }
  for t in test_2016_flickr test_2017_flickr; do
    [ -s "$run/$t.cap.bleu.txt" ] || python translate.py -model "$run/$ckpt" -src "$TOK/$t.$SRC" -output "$run/$t.cap.$TGT" \
      -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -threads "$THREADS" -decode_prior "$b" -decode_prior_cap "$c" \
      -block_ngram_repeat "$block" -replace_unk -lookup_dict "$LEX" > "$run/$t.cap.bleu.txt"
    [ -s "$run/$t.cap.calibration.json" ] || python tools/rare_word_f1.py -train "$TOK/train.$TGT" -ref "$TOK/$t.$TGT" \
      -hyp "$run/$t.cap.$TGT" -bins calibration -json "$run/$t.cap.calibration.json" > /dev/null
    log "$run $t, -decode_prior $b -decode_prior_cap $c: $(grep -h '^sacreBLEU' "$run/$t.cap.bleu.txt" | cut -c1-30) |" \
      "$(grep -h '^without' "$run/$t.cap.bleu.txt")"
  done
done
