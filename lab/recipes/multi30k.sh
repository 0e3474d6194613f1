#!/usr/bin/env bash
# Multi30k (task 1) recipe on the shared data: tokenize -> preprocess -tgt_emb -> embeddings_to_torch
# -normalize -> build_lexicon -> train each configuration -> translate test_2016_flickr and
# test_2017_flickr with -replace_unk -lookup_dict -> BLEU, rare-word F1, accuracy@k, and val BLEU per
# epoch for the convergence plot. Every stage is skipped when its output exists, so a rerun resumes;
# a row trained for fewer epochs than EPOCHS is continued exactly (-train_from) and re-evaluated.
# lab/recipes/papers.sh runs it for the papers' table of docs/results.md (at a smaller MODEL than the default).
#
#   bash lab/recipes/multi30k.sh                                  # fr->en, the default configs
#   SRC=de CONFIGS="ce nllvmf_reg12_tied" EPOCHS=20 SEEDS="1 2 3" bash lab/recipes/multi30k.sh
#
# Environment (defaults in brackets):
#   SRC, TGT        direction [fr, en]; the target needs $SHARED/embeddings/$TGT.ft300.vec.gz
#   SHARED          the shared data folder [../shared/data beside the checkout]
#   OUT             run folder [runs/m30k_$SRC-$TGT]
#   CONFIGS         configurations to train, names from config_flags below [all of them]
#   SEEDS           training seeds [1]
#   EPOCHS          epochs for every configuration [10]
#   MODEL           model-size flags shared by every row
#   CE_BEAMS        beams for the ce row [1 5]; SOFTMAX_BEAMS: for rewe and joint [1 5]
#                   (continuous rows decode greedily by nearest neighbour)
#   CONVERGE        configurations whose per-epoch (and SAVE_STEPS) checkpoints are translated on val [ce nllvmf_reg12_tied synmargin_proj]
#   SAVE_STEPS      also write PREFIX_step_N.pt every N steps (translated on val for CONVERGE rows) [1000000]
#   RESULTS         where the small metric files and logs (gzipped: train.log.gz) are copied [lab/results/m30k_$SRC-$TGT]
#   THREADS         torch/OMP threads per process [2]
#   BPE_MERGES      subword-nmt merge operations per language for the *bpe* rows [10000]
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
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/m30k_$SRC-$TGT}
SEEDS=${SEEDS:-1}
EPOCHS=${EPOCHS:-10}
MODEL=${MODEL:--brnn -enc_layers 1 -dec_layers 2 -rnn_size 256 -word_vec_size 256 -dropout 0.3 -batch_size 64}
ALL_CONFIGS="ce l2 cosine maxmargin nllvmf_reg1 nllvmf_reg1_tied nllvmf_reg12 nllvmf_reg12_tied synmargin_proj synmargin_diff margin_random rewe joint ce_word2bpe ce_bpe2bpe nllvmf_bpe2word_tied"
CONFIGS=${CONFIGS:-$ALL_CONFIGS}
CE_BEAMS=${CE_BEAMS:-1 5}
SOFTMAX_BEAMS=${SOFTMAX_BEAMS:-1 5}
CONVERGE=${CONVERGE:-ce nllvmf_reg12_tied synmargin_proj}
RESULTS=${RESULTS:-lab/results/m30k_$SRC-$TGT}
SAVE_STEPS=${SAVE_STEPS:-1000000}
BPE_MERGES=${BPE_MERGES:-10000}
export OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2}
TESTS="test_2016_flickr test_2017_flickr"
EMB=$SHARED/embeddings/$TGT.ft300.vec.gz
TOK=$OUT/tok
mkdir -p "$TOK" "$RESULTS"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

config_flags() {  # the training flags of one configuration (besides MODEL)
  case $1 in
    ce)                echo "-loss ce" ;;
    l2)                echo "-loss l2" ;;
    cosine)            echo "-loss cosine" ;;
    maxmargin)         echo "-loss maxmargin -margin 0.5" ;;
    nllvmf_reg1)       echo "-loss nllvmf -lambda1 0.02 -lambda2 1" ;;
    nllvmf_reg1_tied)  echo "-loss nllvmf -lambda1 0.02 -lambda2 1 -tie_emb" ;;
    nllvmf_reg12)      echo "-loss nllvmf -lambda1 0.02 -lambda2 0.1" ;;
    nllvmf_reg12_tied) echo "-loss nllvmf -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    synmargin_proj)    echo "-loss synmargin_proj -margin 0.5 -tie_emb" ;;
    synmargin_diff)    echo "-loss synmargin_diff -margin 0.5 -tie_emb" ;;
    margin_random)     echo "-loss margin_random -margin 0.5 -num_negatives 5 -tie_emb" ;;
    rewe)              echo "-loss ce -rewe_lambda 20 -rewe_loss cosine" ;;
    joint)             echo "-loss ce -generator joint -joint_dim 256" ;;
    # the vMF paper's subword rows (its Table 1): a softmax over BPE target pieces from word or BPE
    # sources, and NLLvMF with a BPE source and word-vector targets (its large-vocabulary setup)
    ce_word2bpe)       echo "-loss ce" ;;
    ce_bpe2bpe)        echo "-loss ce" ;;
    nllvmf_bpe2word_tied) echo "-loss nllvmf -lambda1 0.02 -lambda2 0.1 -tie_emb" ;;
    *) echo "unknown config $1 (known: $ALL_CONFIGS)" >&2; return 1 ;;
  esac
}
# which side of a configuration's data is BPE: word (neither), tgtbpe, bpe2bpe (both) or srcbpe
variant() { case $1 in ce_word2bpe) echo tgtbpe ;; ce_bpe2bpe) echo bpe2bpe ;; nllvmf_bpe2word_tied) echo srcbpe ;; *) echo word ;; esac; }

# 1. tokenize exactly as the shared README says (Moses, no escaping, lowercase)
for split in train val $TESTS; do
  for l in $SRC $TGT; do
    [ -s "$TOK/$split.$l" ] || "$PYTHON" tools/moses_tok.py -lang $l < "$SHARED/multi30k/$split.$l" > "$TOK/$split.$l"
  done
done

# 2. preprocess (target vocabulary restricted to words with a vector), 3. table, 4. lexicon; for the
#    BPE rows the same on the BPE'd text (subword-nmt, BPE_MERGES merges learnt per language on the
#    tokenized training text), in $OUT/VARIANT; a BPE target has no vectors, so no -tgt_emb or table
prepare() {  # prepare VARIANT: sets DIR (data, table, lexicon) and SRC_TXT / TGT_TXT (text folders)
  local v=$1 src_bpe=0 tgt_bpe=0
  case $v in tgtbpe) tgt_bpe=1 ;; bpe2bpe) src_bpe=1; tgt_bpe=1 ;; srcbpe) src_bpe=1 ;; esac
  DIR=$OUT; SRC_TXT=$TOK; TGT_TXT=$TOK
  if [ "$v" != word ]; then
    DIR=$OUT/$v; mkdir -p "$DIR" "$OUT/bpe"
    for l in $SRC $TGT; do
      [ -s "$OUT/bpe/codes.$l" ] || "$PYTHON" -m subword_nmt.learn_bpe -s "$BPE_MERGES" < "$TOK/train.$l" > "$OUT/bpe/codes.$l"
      for split in train val $TESTS; do
        [ -s "$OUT/bpe/$split.$l" ] || "$PYTHON" -m subword_nmt.apply_bpe -c "$OUT/bpe/codes.$l" \
          < "$TOK/$split.$l" > "$OUT/bpe/$split.$l"
      done
    done
    [ $src_bpe = 1 ] && SRC_TXT=$OUT/bpe
    [ $tgt_bpe = 1 ] && TGT_TXT=$OUT/bpe
  fi
  local emb=(-tgt_emb "$EMB"); [ $tgt_bpe = 1 ] && emb=()
  [ -s "$DIR/data.vocab.pt" ] || "$PYTHON" preprocess.py -train_src "$SRC_TXT/train.$SRC" -train_tgt "$TGT_TXT/train.$TGT" \
    -valid_src "$SRC_TXT/val.$SRC" -valid_tgt "$TGT_TXT/val.$TGT" -save_data "$DIR/data" "${emb[@]}" -shuffle \
    2>&1 | tee "$DIR/preprocess.log"
  [ $tgt_bpe = 1 ] || [ -s "$DIR/emb.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -emb_file_dec "$EMB" \
    -dict_file "$DIR/data.vocab.pt" -output_file "$DIR/emb" -normalize 2>&1 | tee "$DIR/emb.log"
  [ -s "$DIR/lexicon.txt" ] || "$PYTHON" build_lexicon.py -src "$SRC_TXT/train.$SRC" -tgt "$TGT_TXT/train.$TGT" \
    -output "$DIR/lexicon.txt" 2>&1 | tee "$DIR/lexicon.log"
  [ "$v" = word ] || gzip -9c "$DIR/preprocess.log" > "$RESULTS/preprocess.$v.log.gz"  # RESULTS keeps logs gzipped
  TRAIN_TABLE=(-tgt_emb "$DIR/emb.dec.pt"); DECODE_BPE=()
  [ $tgt_bpe = 1 ] && TRAIN_TABLE=() && DECODE_BPE=(-remove_bpe)
  return 0
}
prepare word
for f in preprocess emb; do if [ -f "$OUT/$f.log" ]; then gzip -9c "$OUT/$f.log" > "$RESULTS/$f.log.gz"; fi; done

# 5. per configuration and seed: train, translate the tests, evaluate; then greedy val BLEU of the
#    per-epoch (and, with SAVE_STEPS, per-N-step) checkpoints of the CONVERGE configurations
for cfg in $CONFIGS; do
  flags=$(config_flags "$cfg")
  prepare "$(variant "$cfg")"
  for seed in $SEEDS; do
    run=$OUT/$cfg.s$seed; res=$RESULTS/$cfg.s$seed
    mkdir -p "$run" "$res"
    # a finished run with fewer epochs than EPOCHS is resumed exactly (-train_from) up to EPOCHS
    # the epochs the last checkpoint has done, read from it: the appended train.log of a retrained run counts twice
    done_epochs=0
    [ -s "$run/model_last.pt" ] && done_epochs=$("$PYTHON" -c "import sys, torch
print(torch.load(sys.argv[1], weights_only=True)['progress']['epoch'])" "$run/model_last.pt")
    if [ "$done_epochs" -lt "$EPOCHS" ]; then
      log "train $cfg seed $seed (epochs $done_epochs -> $EPOCHS)"
      resume=(); [ "$done_epochs" -gt 0 ] && resume=(-train_from "$run/model_last.pt")
      rm -f "$run"/test_*.txt   # evaluation of the old best checkpoint
      start=$(date +%s)
      # shellcheck disable=SC2086
      "$PYTHON" train.py -data "$DIR/data" -save_model "$run/model" "${TRAIN_TABLE[@]}" $flags $MODEL \
        -epochs "$EPOCHS" -seed "$seed" -valid_steps 1000000 -save_checkpoint_steps "$SAVE_STEPS" \
        -save_checkpoint_epochs 1 -report_every 50 -log_file "$run/train.log" "${resume[@]}" >> "$run/train.stdout" 2>&1
      echo "train_wall_s $(( $(date +%s) - start )) epochs $done_epochs-$EPOCHS" >> "$run/train_time.txt"
    fi
    gzip -9c "$run/train.log" > "$res/train.log.gz"; cp "$run/train_time.txt" "$res/"  # lab/tools read either
    beams=1; [ "$cfg" = ce ] && beams=$CE_BEAMS; case $cfg in rewe|joint|ce_*) beams=$SOFTMAX_BEAMS ;; esac
    for t in $TESTS; do
      for b in $beams; do
        pred=$run/$t.beam$b.$TGT
        if [ ! -s "$pred.bleu.txt" ]; then
          log "translate $cfg seed $seed $t beam $b"
          "$PYTHON" translate.py -model "$run/model_best.pt" -src "$SRC_TXT/$t.$SRC" -output "$pred" -tgt "$TOK/$t.$TGT" \
            -tgt_lang "$TGT" -beam_size "$b" -replace_unk -lookup_dict "$DIR/lexicon.txt" "${DECODE_BPE[@]}" \
            > "$pred.bleu.txt" 2>&1
        fi
        cp "$pred.bleu.txt" "$res/"
        [ -s "$pred.f1.txt" ] || "$PYTHON" lab/tools/rare_word_f1.py -train "$TOK/train.$TGT" -ref "$TOK/$t.$TGT" \
          -hyp "$pred" > "$pred.f1.txt"
        cp "$pred.f1.txt" "$res/"
      done
      # accuracy@k ranks target words; a BPE target's positions are pieces, not words: left out
      [ ${#DECODE_BPE[@]} = 0 ] || continue
      [ -s "$run/$t.acc.txt" ] || "$PYTHON" lab/tools/accuracy_at_k.py -model "$run/model_best.pt" -src "$SRC_TXT/$t.$SRC" \
        -tgt "$TOK/$t.$TGT" -threads "${THREADS:-2}" > "$run/$t.acc.txt"
      cp "$run/$t.acc.txt" "$res/"
    done
    case " $CONVERGE " in *" $cfg "*) ;; *) continue ;; esac
    [ "$seed" = "${SEEDS%% *}" ] || continue
    for ck in "$run"/model_epoch_*.pt "$run"/model_step_*.pt; do
      [ -e "$ck" ] || continue
      tag=${ck##*/model_}; tag=${tag%.pt}; tag=${tag/_/}   # epoch3, step1000
      # the step checkpoint written at an epoch's end is the same model as that epoch's checkpoint
      [[ $tag == step* ]] && grep -q "done at step ${tag#step}\$" "$run/train.log" && continue
      f=$run/val.$tag.bleu.txt
      if [ ! -s "$f" ]; then
        log "val BLEU $cfg seed $seed $tag"
        "$PYTHON" translate.py -model "$ck" -src "$SRC_TXT/val.$SRC" -output "$run/val.$tag.$TGT" \
          -tgt "$TOK/val.$TGT" -tgt_lang "$TGT" -replace_unk -lookup_dict "$DIR/lexicon.txt" "${DECODE_BPE[@]}" > "$f" 2>&1
      fi
      cp "$f" "$res/"
    done
    grep -h "done at step" "$run/train.log" > "$res/epoch_steps.txt" || true
  done
done
log "done"
exit
}
