#!/usr/bin/env bash
# A short sanity run of each contrastive loss on the shipped sample (data/): 3 epochs of a small
# model on one thread (OMP_NUM_THREADS=1), validation after each epoch
# (loss, cosine, nearest-neighbour accuracy), then greedy decoding of the 200 test sentences with
# BLEU. Not a quality comparison (3,000 training pairs): it checks that each loss trains (its
# loss falls, NN accuracy rises) and decodes. About 10 minutes per loss on one busy core.
#
#     bash docs/recipes/contrastive_sanity.sh            # every row below
#     ROWS="infonce" bash docs/recipes/contrastive_sanity.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/contrastive_sanity}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

if [ ! -f "$OUT/data.vocab.pt" ]; then
  python3 preprocess.py -train_src data/train.fr -train_tgt data/train.en \
    -valid_src data/valid.fr -valid_tgt data/valid.en -save_data "$OUT/data" -tgt_emb data/en.vec.gz
  python3 embeddings_to_torch.py -emb_file_dec data/en.vec.gz -dict_file "$OUT/data.vocab.pt" \
    -output_file "$OUT/emb" -normalize
fi

declare -A ARGS=(
  [maxmargin]="-loss maxmargin"
  [maxmargin_gold_nn]="-loss maxmargin -negatives gold_nn -num_negatives 5"
  [maxmargin_ann]="-loss maxmargin -negatives ann"
  [infonce]="-loss infonce"
  [nllvmf_nce]="-loss nllvmf_nce"
)
for row in ${ROWS:-maxmargin maxmargin_gold_nn maxmargin_ann infonce nllvmf_nce}; do
  # shellcheck disable=SC2086
  python3 train.py -data "$OUT/data" -save_model "$OUT/$row" -tgt_emb "$OUT/emb.dec.pt" ${ARGS[$row]} \
    -tie_emb -brnn -rnn_size 128 -word_vec_size 128 -dropout 0 -batch_size 32 -epochs 3 \
    -valid_steps 100000 -save_checkpoint_steps 100000 -report_every 47 -log_file "$OUT/$row.log" > /dev/null
  python3 translate.py -model "$OUT/${row}_last.pt" -src data/test.fr -tgt data/test.en \
    -output "$OUT/$row.test.en" > "$OUT/$row.translate.log" 2>&1
  echo "== $row"
  grep -E "step 47:|validation at|finished" "$OUT/$row.log" | sed 's/^\[[^]]*\] //'
  grep -E "BLEU" "$OUT/$row.translate.log" || tail -1 "$OUT/$row.translate.log"
done
