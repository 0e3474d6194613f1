#!/usr/bin/env bash
# Your own parallel corpus, raw text, to a trained continuous-output model and running-text translations:
# tokenize (Moses, lowercase) -> subword pieces for the source (optional) -> target vectors (yours, or trained on the
# target side) -> preprocess -> train a preset -> translate the raw test source into detokenized text -> BLEU.
#
#   SRC_LANG=de TGT_LANG=en TRAIN=corpus/train VALID=corpus/valid TEST=corpus/test bash docs/recipes/own_data.sh
#
# Files: $TRAIN.$SRC_LANG and $TRAIN.$TGT_LANG (aligned lines), the same for $VALID, and $TEST.$SRC_LANG; with
# $TEST.$TGT_LANG as well, the output is scored with sacreBLEU. One sentence per line, UTF-8, raw text.
#
# Environment (defaults in brackets):
#   OUT          where everything goes [runs/own_data in the checkout]
# Relative paths (TRAIN, VALID, TEST, OUT, VECTORS, VEC_TEXT) are read from the folder you run the recipe in.
#   VECTORS      a fastText .vec/.vec.gz file for the target language, made from text tokenized as here (Moses, no
#                escaping, lowercase; ../shared/data/embeddings are); "random": a random unit vector per target word;
#                "train": vectors trained on the target training side plus VEC_TEXT (more raw monolingual target
#                text, one file) with tools/train_vectors.py [empty: "train" when that text holds at least
#                MIN_VEC_LINES lines; else the vectors the project ships for that language (data/$TGT_LANG.vec.gz,
#                English only), else "random"; vectors from too little text are worse than random ones]
#   MIN_VEC_LINES  [20000]
#   VEC_DIM, VEC_EPOCHS  size and passes of trained vectors [300, 10]
#   SRC_MERGES   subword-nmt merges for the source side, 0 for whole words [10000 for de, else 0]: the results found
#                pieces help a German source and change little for French (docs/results.md)
#   SUBWORD      the source's subword tool: bpe (subword-nmt, SRC_MERGES merges) or sentencepiece (a unigram model of
#                SPM_VOCAB pieces [8000], on the tokenized source) [bpe]; recorded in the checkpoint either way
#   CASED        1: keep case end to end (tokenization, vocabularies, vectors trained or random: the shipped and the
#                shared vectors are lowercase), case-sensitive BLEU; 0: lowercase, as the shared vectors [0]
#   PRESET       a preset in configs/ [transformer_continuous]
#   EPOCHS       at most this many epochs [the preset's]
#   TRAIN_FLAGS  more train.py flags, which override the preset's (e.g. "-epochs 2" for a first try, "-gpu 0")
#   THREADS      CPU threads for training and translation [train.py's default]
#   DECODE       translate.py's search flags [-beam_size 5 -block_ngram_repeat 3]
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
: "${SRC_LANG:?set SRC_LANG, e.g. de}" "${TGT_LANG:?set TGT_LANG, e.g. en}"
: "${TRAIN:?set TRAIN, the path of the training files without .LANG}" "${VALID:?set VALID}" "${TEST:?set TEST}"
# the paths a caller gives are relative to where the caller stands, not to the checkout the recipe runs in
from_caller() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
TRAIN=$(from_caller "$TRAIN"); VALID=$(from_caller "$VALID"); TEST=$(from_caller "$TEST")
[ -n "${OUT:-}" ] && OUT=$(from_caller "$OUT")
[ -n "${VEC_TEXT:-}" ] && VEC_TEXT=$(from_caller "$VEC_TEXT")
case ${VECTORS:-} in ""|random|train) ;; *) VECTORS=$(from_caller "$VECTORS") ;; esac
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/own_data}
PRESET=${PRESET:-transformer_continuous}
VECTORS=${VECTORS:-}
VEC_TEXT=${VEC_TEXT:-}
if [ "$SRC_LANG" = de ]; then SRC_MERGES=${SRC_MERGES:-10000}; else SRC_MERGES=${SRC_MERGES:-0}; fi
MIN_VEC_LINES=${MIN_VEC_LINES:-20000}; VEC_DIM=${VEC_DIM:-300}; VEC_EPOCHS=${VEC_EPOCHS:-10}
SUBWORD=${SUBWORD:-bpe}; SPM_VOCAB=${SPM_VOCAB:-8000}; CASED=${CASED:-0}
case $CASED in 0|1) ;; *) echo "CASED must be 0 or 1, got '$CASED'" >&2; exit 2 ;; esac
case $SUBWORD in bpe|sentencepiece) ;; *) echo "SUBWORD must be bpe or sentencepiece, got '$SUBWORD'" >&2; exit 2 ;; esac
# every numeric setting is a whole number, checked here: a bad one inside a later `if [ ... ]` fails the test, which
# set -e does not stop, and the recipe took a random table for MIN_VEC_LINES=abc, 1e1 or 20,000
for v in SRC_MERGES SPM_VOCAB MIN_VEC_LINES VEC_DIM VEC_EPOCHS ${THREADS:+THREADS} ${EPOCHS:+EPOCHS}; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$v must be a whole number, got '${!v}'" >&2; exit 2; }
done
[ -f "configs/$PRESET.yaml" ] || { echo "PRESET: no configs/$PRESET.yaml" >&2; exit 2; }
for f in "$TRAIN.$SRC_LANG" "$TRAIN.$TGT_LANG" "$VALID.$SRC_LANG" "$VALID.$TGT_LANG" "$TEST.$SRC_LANG" \
         ${VEC_TEXT:+"$VEC_TEXT"}; do
  [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
done
if [ -n "$VECTORS" ] && [ "$VECTORS" != random ] && [ "$VECTORS" != train ] && [ ! -f "$VECTORS" ]; then
  echo "no such file: $VECTORS" >&2; exit 2
fi
threads=(); [ -n "${THREADS:-}" ] && threads=(-threads "$THREADS")
TOK=$OUT/tok
mkdir -p "$TOK"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

case_flag=(); [ "$CASED" = 1 ] && case_flag=(-no_lower)
log "1. tokenize (Moses$([ "$CASED" = 1 ] && echo ", case kept" || echo ", lowercase"))"
for split in train valid; do
  path=$TRAIN; [ $split = valid ] && path=$VALID
  for lang in "$SRC_LANG" "$TGT_LANG"; do
    "$PYTHON" tools/moses_tok.py -lang "$lang" "${case_flag[@]}" < "$path.$lang" > "$TOK/$split.$lang"
  done
done
[ -f "$TEST.$TGT_LANG" ] && "$PYTHON" tools/moses_tok.py -lang "$TGT_LANG" "${case_flag[@]}" < "$TEST.$TGT_LANG" \
  > "$TOK/test.$TGT_LANG"

SRC_TXT=$TOK; codes=()
if [ "$SUBWORD" = sentencepiece ]; then
  log "2. a SentencePiece model of $SPM_VOCAB pieces on the (tokenized) source side"
  SRC_TXT=$OUT/pieces; mkdir -p "$SRC_TXT"
  "$PYTHON" -c 'import re, sys, sentencepiece as s
try:
    s.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2], vocab_size=int(sys.argv[3]),
                                 character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
except RuntimeError as exc:  # too few pieces for the characters: say the smallest value that works
    need = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
    sys.exit(f"SPM_VOCAB={sys.argv[3]} is too small: the source has {int(need.group(1)) - 3} distinct characters and "
             f"SentencePiece needs a piece for each and 3 of its own: give SPM_VOCAB of at least {need.group(1)}"
             if need else f"SentencePiece cannot train on {sys.argv[1]}: {str(exc).splitlines()[0]}")' \
    "$TOK/train.$SRC_LANG" "$OUT/spm.$SRC_LANG" "$SPM_VOCAB" || exit 2
  for split in train valid; do
    "$PYTHON" -c 'import sys, sentencepiece as s
sp = s.SentencePieceProcessor(model_file=sys.argv[1])
for line in sys.stdin:
    print(" ".join(sp.encode(line.strip(), out_type=str)) if line.strip() else "")' \
      "$OUT/spm.$SRC_LANG.model" < "$TOK/$split.$SRC_LANG" > "$SRC_TXT/$split.$SRC_LANG"
  done
  codes=(-src_spm "$OUT/spm.$SRC_LANG.model")
elif [ "$SRC_MERGES" != 0 ]; then
  log "2. $SRC_MERGES subword merges on the source side"
  SRC_TXT=$OUT/pieces; mkdir -p "$SRC_TXT"
  "$PYTHON" -m subword_nmt.learn_bpe -s "$SRC_MERGES" < "$TOK/train.$SRC_LANG" > "$OUT/codes.$SRC_LANG"
  for split in train valid; do
    "$PYTHON" -m subword_nmt.apply_bpe -c "$OUT/codes.$SRC_LANG" < "$TOK/$split.$SRC_LANG" > "$SRC_TXT/$split.$SRC_LANG"
  done
  codes=(-src_bpe_codes "$OUT/codes.$SRC_LANG")
fi

if [ -z "$VECTORS" ]; then
  lines=$(cat "$TOK/train.$TGT_LANG" ${VEC_TEXT:+"$VEC_TEXT"} | wc -l)
  if [ "$lines" -ge "$MIN_VEC_LINES" ]; then VECTORS=train
  elif [ -f "data/$TGT_LANG.vec.gz" ] && [ "$CASED" != 1 ]; then  # the shipped sample's (lowercase) vectors
    VECTORS=data/$TGT_LANG.vec.gz
  else VECTORS=random; fi
  log "3. no VECTORS given: $lines lines of target text, so VECTORS=$VECTORS (MIN_VEC_LINES $MIN_VEC_LINES)"
fi
case $VECTORS in
  random) tgt_emb=(); table=(-init random_sphere -dim "$VEC_DIM") ;;
  train)  tgt_emb=(-tgt_emb "$OUT/vectors.$TGT_LANG.vec.gz"); table=(-emb_file_dec "$OUT/vectors.$TGT_LANG.vec.gz") ;;
  *)      tgt_emb=(-tgt_emb "$VECTORS"); table=(-emb_file_dec "$VECTORS") ;;
esac
if [ "$VECTORS" = train ]; then
  log "3. target vectors trained on the target side"
  inputs=(-input "$TOK/train.$TGT_LANG")
  if [ -n "$VEC_TEXT" ]; then
    "$PYTHON" tools/moses_tok.py -lang "$TGT_LANG" "${case_flag[@]}" < "$VEC_TEXT" > "$TOK/vec_text.$TGT_LANG"
    inputs+=(-input "$TOK/vec_text.$TGT_LANG")
  fi
  "$PYTHON" tools/train_vectors.py "${inputs[@]}" -output "$OUT/vectors.$TGT_LANG.vec.gz" -dim "$VEC_DIM" \
    -epochs "$VEC_EPOCHS"
fi

log "4. preprocess and the target table"
"$PYTHON" preprocess.py -train_src "$SRC_TXT/train.$SRC_LANG" -train_tgt "$TOK/train.$TGT_LANG" \
  -valid_src "$SRC_TXT/valid.$SRC_LANG" -valid_tgt "$TOK/valid.$TGT_LANG" \
  -save_data "$OUT/data" "${tgt_emb[@]}" -shuffle -src_lang "$SRC_LANG" -tgt_lang "$TGT_LANG" "${codes[@]}"
"$PYTHON" embeddings_to_torch.py "${table[@]}" -dict_file "$OUT/data.vocab.pt" -output_file "$OUT/emb" -normalize

log "5. train configs/$PRESET.yaml"
dfp=(); [ "$SRC_LANG" = de ] && dfp=(-drop_final_punct 0.05)  # German sources often lack a final . ! ?
# shellcheck disable=SC2086  # TRAIN_FLAGS holds several flags
"$PYTHON" train.py -config "configs/$PRESET.yaml" -data "$OUT/data" -tgt_emb "$OUT/emb.dec.pt" -save_model "$OUT/model" \
  "${dfp[@]}" "${threads[@]}" ${EPOCHS:+-epochs "$EPOCHS"} ${TRAIN_FLAGS:-} -log_file "$OUT/train.log"
model=$OUT/model_best.pt; [ -f "$model" ] || model=$OUT/model_last.pt

log "6. translate the raw test source into running text (the model records its preprocessing: no flags for it)"
ref=(); [ -f "$TEST.$TGT_LANG" ] && ref=(-tgt "$TEST.$TGT_LANG")
# beam 5 with 3-gram blocking: ahead of greedy search on Multi30k (docs/results.md, "Beam search") and on the
# quickstart's validation set; DECODE overrides it (e.g. DECODE="-beam_size 1" for greedy search)
# shellcheck disable=SC2086  # DECODE holds several flags
"$PYTHON" translate.py -model "$model" -src "$TEST.$SRC_LANG" "${ref[@]}" "${threads[@]}" ${DECODE:--beam_size 5 -block_ngram_repeat 3} \
  -output "$OUT/test.$TGT_LANG"
if [ -f "$TEST.$TGT_LANG" ]; then
  if [ "$CASED" = 1 ]; then
    echo "sacreBLEU of $OUT/test.$TGT_LANG against the raw reference $TEST.$TGT_LANG (case-sensitive: the model keeps case):"
    "$PYTHON" -m sacrebleu "$TEST.$TGT_LANG" -i "$OUT/test.$TGT_LANG" -b
  else
    echo "sacreBLEU of $OUT/test.$TGT_LANG against the raw reference $TEST.$TGT_LANG (case-insensitive; the model writes lowercase):"
    "$PYTHON" -m sacrebleu "$TEST.$TGT_LANG" -i "$OUT/test.$TGT_LANG" -lc -b
  fi
fi
log "done: the model is $model; translate more raw text with
  "$PYTHON" translate.py -model $model -src FILE -output OUT   (raw $SRC_LANG in, running $TGT_LANG text out)"
exit
}
