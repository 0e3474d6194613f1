#!/usr/bin/env bash
# The field's Multi30k yardstick: Transformer-Tiny (Wu et al. 2021; configs/transformer_tiny_softmax.yaml) against
# the continuous model at the same size (configs/transformer_tiny_continuous.yaml), SEEDS each. Per direction:
#   1. data: Moses tokenization (no escaping, lowercase: tools/moses_tok.py); one joint subword-nmt BPE of MERGES
#      merges learnt on both training sides together; preprocess.py -share_vocab over the pieces (the softmax
#      preset), and the same source pieces against target words with a vector for every training word
#      (tools/train_vectors.py on the tokenized training target; the continuous preset);
#   2. training, a checkpoint at each epoch's end;
#   3. the average of the last AVG epoch checkpoints (tools/average_models.py), as the anchor decodes;
#   4. both tests, greedy and beam BEAM (-length_penalty avg: fairseq's score / length), into
#      RUN/TEST.{greedy,beamK}.{tok,bleu.txt}: tokenized BLEU of the lowercased tokens against the tokenized reference
#      (fairseq's BLEU4 on --remove-bpe output: sacreBLEU with -tokenize none, what translate.py prints as
#      "tokenized BLEU"), sacreBLEU on the Moses-detokenized output and reference, and for the continuous rows the
#      BLEU before -replace_unk and the <unk> rate; RUN/TEST.*.calibration.json holds the output /
#      reference ratio and F1 per training-frequency bin (lab/tools/rare_word_f1.py -bins calibration).
# Every step is skipped when its output exists, so a rerun resumes; a killed training goes on (-resume auto).
# Only the last AVG epoch checkpoints are kept (-keep_checkpoint). Time on a 2-core CPU with bf16 dot products
# (train.py's -amp auto): about 0.95 s an update alone, 1.2-1.3 s with validation when two runs share the machine
# (JOBS=2): 8,000 updates in about 2.7 hours; in float32 on an AVX2 CPU (no bf16 dot products: -amp auto picks
# float32 there) 3.3-4.6 s with validation beside other jobs, 8,000 updates in 7-10 hours; the data takes 2 minutes. Start it from a worktree pinned at one
# commit, into a folder outside the work tree (OUT=...), first thing in a session.
#
#   bash lab/recipes/transformer_tiny.sh                                  # en->de, both presets, seed 1
#   SRC=fr TGT=en ROWS=softmax SEEDS="1 2" bash lab/recipes/transformer_tiny.sh
#   GPU=0 JOBS=4 SEEDS="1 2" bash lab/recipes/transformer_tiny.sh         # on a GPU: runs side by side on one card
#
# Environment: SRC, TGT [en, de], SHARED [../shared/data], OUT [runs/tiny_$SRC-$TGT], ROWS ["softmax continuous"],
# SEEDS [1], JOBS [1: runs trained at once], THREADS [1 torch thread a run], GPU [empty: CPU; N: -gpu N],
# MERGES [10000, the anchor's codes], AVG [10], BEAM [5], FLAGS [extra train.py flags for every run, e.g.
# "-train_steps 300" to screen], PREPARE_ONLY [0; 1: step 1 only].
# One { ... } block that ends in exit (lab/recipes/word_choice.sh says why).
{
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
SRC=${SRC:-en}; TGT=${TGT:-de}
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/tiny_$SRC-$TGT}
ROWS=${ROWS:-softmax continuous}
SEEDS=${SEEDS:-1}
JOBS=${JOBS:-1}
THREADS=${THREADS:-1}
GPU=${GPU:-}
MERGES=${MERGES:-10000}
AVG=${AVG:-10}
BEAM=${BEAM:-5}
FLAGS=${FLAGS:-}
PREPARE_ONLY=${PREPARE_ONLY:-0}
for v in SEEDS JOBS THREADS MERGES AVG BEAM; do
  for x in ${!v}; do [[ $x =~ ^[0-9]+$ ]] || { echo "$v must hold whole numbers, got '${!v}'" >&2; exit 2; }; done
done
[ -z "$GPU" ] || [[ $GPU =~ ^[0-9]+$ ]] || { echo "GPU must be a device number, got '$GPU'" >&2; exit 2; }
for r in $ROWS; do
  case $r in softmax|continuous) ;; *) echo "ROWS: softmax and/or continuous, got '$r'" >&2; exit 2 ;; esac
done
TESTS="test_2016_flickr test_2017_flickr"
TOK=$OUT/tok; BPE=$OUT/bpe
mkdir -p "$TOK" "$BPE" "$OUT/joint" "$OUT/srcbpe"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

# 1. data
for split in train val $TESTS; do
  for l in $SRC $TGT; do
    [ -s "$TOK/$split.$l" ] || $PY tools/moses_tok.py -lang "$l" < "$SHARED/multi30k/$split.$l" > "$TOK/$split.$l"
  done
done
[ -s "$BPE/codes" ] || cat "$TOK/train.$SRC" "$TOK/train.$TGT" | $PY -m subword_nmt.learn_bpe -s "$MERGES" > "$BPE/codes"
for split in train val $TESTS; do
  for l in $SRC $TGT; do
    [ -s "$BPE/$split.$l" ] || $PY -m subword_nmt.apply_bpe -c "$BPE/codes" < "$TOK/$split.$l" > "$BPE/$split.$l"
  done
done
[ -s "$OUT/joint/data.vocab.pt" ] || $PY preprocess.py -train_src "$BPE/train.$SRC" -train_tgt "$BPE/train.$TGT" \
  -valid_src "$BPE/val.$SRC" -valid_tgt "$BPE/val.$TGT" -save_data "$OUT/joint/data" -share_vocab -shuffle > /dev/null
VEC=$OUT/$TGT.train.vec.gz  # a vector for every target training word (not needed again once the table is made)
if [ ! -s "$OUT/srcbpe/data.vocab.pt" ] || [ ! -s "$OUT/srcbpe/emb.dec.pt" ]; then
  [ -s "$VEC" ] || $PY tools/train_vectors.py -input "$TOK/train.$TGT" -output "$VEC" > /dev/null
fi
[ -s "$OUT/srcbpe/data.vocab.pt" ] || $PY preprocess.py -train_src "$BPE/train.$SRC" -train_tgt "$TOK/train.$TGT" \
  -valid_src "$BPE/val.$SRC" -valid_tgt "$TOK/val.$TGT" -save_data "$OUT/srcbpe/data" -tgt_emb "$VEC" -shuffle \
  > /dev/null
[ -s "$OUT/srcbpe/emb.dec.pt" ] || $PY embeddings_to_torch.py -emb_file_dec "$VEC" \
  -dict_file "$OUT/srcbpe/data.vocab.pt" -output_file "$OUT/srcbpe/emb" -normalize > /dev/null
[ -s "$OUT/srcbpe/lexicon.txt" ] || $PY build_lexicon.py -src "$TOK/train.$SRC" -tgt "$TOK/train.$TGT" \
  -output "$OUT/srcbpe/lexicon.txt" > /dev/null
[ "$PREPARE_ONLY" = 1 ] && { log "data ready in $OUT"; exit 0; }

device=(-threads "$THREADS"); [ -n "$GPU" ] && device+=(-gpu "$GPU")
# 2-4. one row and seed
run() {  # ROW SEED
  local row=$1 seed=$2 dir=$OUT/$1.s$2 data extra decode t k
  mkdir -p "$dir"
  if [ "$row" = softmax ]; then
    data=(-data "$OUT/joint/data" -valid_remove_bpe); decode=(-remove_bpe)
  else
    data=(-data "$OUT/srcbpe/data" -tgt_emb "$OUT/srcbpe/emb.dec.pt")
    decode=(-replace_unk -lookup_dict "$OUT/srcbpe/lexicon.txt")
  fi
  if [ ! -s "$dir/model_last.pt" ] || [ ! -s "$dir/done" ]; then
    log "train $row seed $seed"
    # shellcheck disable=SC2086  # FLAGS holds several flags
    $PY train.py -config "configs/transformer_tiny_$row.yaml" "${data[@]}" -seed "$seed" "${device[@]}" \
      -save_model "$dir/model" -resume auto -keep_checkpoint "$AVG" -log_file "$dir/train.log" $FLAGS \
      > "$dir/train.out" 2>&1
    touch "$dir/done"
  fi
  local n; n=$(find "$dir" -name 'model_epoch_*.pt' | wc -l)
  k=$(( n < AVG ? n : AVG ))
  [ -s "$dir/model_avg.pt" ] || $PY tools/average_models.py -last "$k" -prefix "$dir/model" -output "$dir/model_avg.pt" \
    > /dev/null
  for t in $TESTS; do
    for b in 1 "$BEAM"; do
      local name=greedy; [ "$b" != 1 ] && name=beam$b
      [ -s "$dir/$t.$name.bleu.txt" ] && continue
      $PY translate.py -model "$dir/model_avg.pt" -src "$BPE/$t.$SRC" -output "$dir/$t.$name.tok" "${decode[@]}" \
        -tgt "$TOK/$t.$TGT" -tgt_lang "$TGT" -beam_size "$b" -length_penalty avg "${device[@]}" \
        > "$dir/$t.$name.log" 2>&1
      grep -E "BLEU|<unk>" "$dir/$t.$name.log" > "$dir/$t.$name.bleu.txt.tmp" || true
      $PY lab/tools/rare_word_f1.py -bins calibration -train "$TOK/train.$TGT" -ref "$TOK/$t.$TGT" \
        -hyp "$dir/$t.$name.tok" -json "$dir/$t.$name.calibration.json" > /dev/null
      mv "$dir/$t.$name.bleu.txt.tmp" "$dir/$t.$name.bleu.txt"
    done
  done
  log "done $row seed $seed: $dir"
}
running=0
for seed in $SEEDS; do
  for row in $ROWS; do
    run "$row" "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
  done
done
wait
exit
}
