#!/usr/bin/env bash
# Decoding beyond the paper (docs/open_vocabulary.md) on the continuous rows of docs/recipes/multi30k.sh:
# for each ROW's model_best.pt, translate the tests greedily, greedily over the open vocabulary
# (-tgt_emb_extend with the full target vector file), and with k-NN beam search (beam 5, both length
# normalisations); all with -replace_unk -lookup_dict, like the main tables. Then the open-vocabulary
# statistics (tools/open_vocab_eval.py). Logs go to RESULTS/ROW/.
#
#   bash docs/recipes/decoding.sh                       # fr->en, rows nllvmf_reg12_tied.s1 synmargin_proj.s1
#   ROWS="cosine.s1" TESTS=test_2016_flickr bash docs/recipes/decoding.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${SRC:-fr}; TGT=${TGT:-en}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/m30k_$SRC-$TGT}
ROWS=${ROWS:-nllvmf_reg12_tied.s1 synmargin_proj.s1}
TESTS=${TESTS:-test_2016_flickr test_2017_flickr}
RESULTS=${RESULTS:-docs/results/decoding_$SRC-$TGT}
export OMP_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
T=$OUT/tok
for row in $ROWS; do
  run=$OUT/$row; res=$RESULTS/$row
  mkdir -p "$res"
  for t in $TESTS; do
    for mode in greedy open beam5_avg beam5_none; do
      case $mode in
        greedy)     flags=() ;;
        open)       flags=(-tgt_emb_extend "$EMB") ;;
        beam5_avg)  flags=(-beam_size 5 -length_penalty avg) ;;
        beam5_none) flags=(-beam_size 5 -length_penalty none) ;;
      esac
      hyp=$run/$t.$mode.$TGT
      if [ ! -s "$res/$t.$mode.log" ]; then
        echo "[$(date -u +%H:%M:%S)] $row $t $mode"
        python translate.py -model "$run/model_best.pt" -src "$T/$t.$SRC" -tgt "$T/$t.$TGT" -tgt_lang "$TGT" \
          -output "$hyp" -replace_unk -lookup_dict "$OUT/lexicon.txt" "${flags[@]}" > "$res/$t.$mode.log"
      fi
    done
    [ -s "$res/$t.open_vocab.txt" ] || python tools/open_vocab_eval.py -train_tgt "$T/train.$TGT" \
      -vocab "$OUT/data.vocab.tgt.txt" -ref "$T/$t.$TGT" -hyp "$run/$t.greedy.$TGT" "$run/$t.open.$TGT" \
      > "$res/$t.open_vocab.txt"
  done
done
echo "[$(date -u +%H:%M:%S)] done"
