# Sourced by lab/recipes/continuous_quality.sh and word_choice.sh (not run on its own): tokenize
# Multi30k (Moses, no escaping, lowercase), preprocess with the target restricted to words that
# have a vector, the unit target table and the lexicon, as lab/recipes/multi30k.sh does. Each
# step is skipped when its output exists. Needs SRC, TGT, SHARED, OUT, TOK and EMB.
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
for split in train val test_2016_flickr test_2017_flickr; do
  for l in $SRC $TGT; do
    [ -s "$TOK/$split.$l" ] || "$PYTHON" tools/moses_tok.py -lang "$l" < "$SHARED/multi30k/$split.$l" > "$TOK/$split.$l"
  done
done
[ -s "$OUT/data.vocab.pt" ] || "$PYTHON" preprocess.py -train_src "$TOK/train.$SRC" -train_tgt "$TOK/train.$TGT" \
  -valid_src "$TOK/val.$SRC" -valid_tgt "$TOK/val.$TGT" -save_data "$OUT/data" -tgt_emb "$EMB" -shuffle
[ -s "$OUT/emb.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -emb_file_dec "$EMB" -dict_file "$OUT/data.vocab.pt" \
  -output_file "$OUT/emb" -normalize
[ -s "$OUT/lexicon.txt" ] || "$PYTHON" build_lexicon.py -src "$TOK/train.$SRC" -tgt "$TOK/train.$TGT" \
  -output "$OUT/lexicon.txt"
