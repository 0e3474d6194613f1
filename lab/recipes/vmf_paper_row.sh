#!/usr/bin/env bash
# Issue 67's decomposition of the gap between the vMF paper's NLLvMF row (configs/lstm_nllvmf_paper.yaml) and ce on
# Multi30k fr->en: each difference between this toolkit's row and the authors' code and command, alone and together,
# then the target table and the model size. One run folder per row, $OUT/ROW, on the data of lab/recipes/word_choice.sh
# (PREPARE_ONLY=1: Moses tokenization, the target vocabulary of the words with a vector, the unit table, the lexicon).
# Per row: training (seed SEED, one thread), then test_2016 and test_2017 decoded greedily with -replace_unk
# -lookup_dict into ROW/TEST.bleu.txt (translate.py prints the BLEU before the replacement and the <unk> rate too).
# Every step is skipped when its output exists.
#
#   bash lab/recipes/vmf_paper_row.sh                          # every row, two at a time
#   ROWS="paper code" JOBS=1 bash lab/recipes/vmf_paper_row.sh
#
# Environment: SHARED [../shared/data], DATA [runs/word_choice_fr-en], OUT [runs/vmf_row_fr-en], ROWS [all of row()
# below], SEED [1], JOBS [2: runs trained at once, one thread each].
# One { ... } block that ends in exit (lab/recipes/word_choice.sh says why).
{
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
SHARED=${SHARED:-../shared/data}
DATA=${DATA:-runs/word_choice_fr-en}
OUT=${OUT:-runs/vmf_row_fr-en}
SEED=${SEED:-1}
JOBS=${JOBS:-2}
for v in SEED JOBS; do [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$v must be a whole number, got '${!v}'" >&2; exit 2; }; done
# the paper's row as the toolkit trained it before this comparison (configs/lstm_nllvmf_paper.yaml until then; the
# preset is now the code_d0_conv row): the printed loss, dropout 0.3, batch 32, Adam 1e-3, 10 epochs, best val loss
P0="-brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32"
P0="$P0 -learning_rate 1e-3 -loss nllvmf -lambda1 0.02 -lambda2 0.1 -tie_emb -epochs 10"
S=configs/lstm_softmax.yaml
# the authors' command: dropout 0, Adam 5e-4, 64 sentences a batch, the summed loss over the sentences
AUTHORS="-dropout 0 -learning_rate 5e-4 -batch_size 64 -normalization sents"
CODE="-vmf_form code -vmf_lambda 0.2"
# to convergence: validation BLEU at each epoch's end, stop after 3 without a new best (mean of 2), 30 epochs at most
CONV="-epochs 30 -valid_metric bleu -early_stopping 3 -early_stopping_window 2"
L256="-rnn_size 256 -word_vec_size 256 -dec_layers 2"
L512="-rnn_size 512 -word_vec_size 512 -dec_layers 2"
ALL="ce_conv paper code authors_code paper_d0 paper_opt paper_sents authors_paper code_d0_conv paper_d0_conv
authors_code_conv code_d0_conv_softmax code_d0_conv_random code_d0_conv_256 maxmargin_d0_conv cosine_d0_conv"
ROWS=${ROWS:-$ALL}
# ROW -> "train.py flags|table": table emb (the pretrained vectors), random (a random unit table of 300 d) or softmax
# (the output layer of ce_conv's model, tools' -init softmax)
row() {
  case $1 in
    # ce: configs/lstm_softmax.yaml, the same LSTM (dropout 0.3, batch 32, Adam 1e-3), untied; 10 epochs and the
    # best validation loss like the paper's row, or its own stopping rule (validation BLEU, 40 epochs at most)
    ce)                  echo "-config $S -epochs 10 -valid_metric loss -early_stopping 0|emb" ;;
    ce_conv)             echo "-config $S|emb" ;;
    paper)               echo "$P0|emb" ;;
    code)                echo "$P0 $CODE|emb" ;;
    paper_d0)            echo "$P0 -dropout 0|emb" ;;
    paper_opt)           echo "$P0 -learning_rate 5e-4 -batch_size 64|emb" ;;
    paper_sents)         echo "$P0 -normalization sents|emb" ;;
    authors_paper)       echo "$P0 $AUTHORS|emb" ;;
    authors_code)        echo "$P0 $AUTHORS $CODE|emb" ;;
    authors_code_conv)   echo "$P0 $AUTHORS $CODE $CONV|emb" ;;
    # the two changes that helped alone at 10 epochs, with the row's own optimiser and batch, to convergence
    code_d0_conv)        echo "$P0 $CODE -dropout 0 $CONV|emb" ;;
    paper_d0_conv)       echo "$P0 -dropout 0 $CONV|emb" ;;
    authors_code_conv_random)  echo "$P0 $AUTHORS $CODE $CONV|random" ;;
    authors_code_conv_softmax) echo "$P0 $AUTHORS $CODE $CONV|softmax" ;;
    authors_cosine_conv)       echo "$P0 $AUTHORS -loss cosine $CONV|emb" ;;
    authors_maxmargin_conv)    echo "$P0 $AUTHORS -loss maxmargin $CONV|emb" ;;
    # the vectors and the other losses at code_d0_conv's settings (the code form, dropout 0, the row's optimiser)
    code_d0_conv_random)       echo "$P0 $CODE -dropout 0 $CONV|random" ;;
    code_d0_conv_softmax)      echo "$P0 $CODE -dropout 0 $CONV|softmax" ;;
    cosine_d0_conv)            echo "$P0 -loss cosine -dropout 0 $CONV|emb" ;;
    maxmargin_d0_conv)         echo "$P0 -loss maxmargin -dropout 0 $CONV|emb" ;;
    code_d0_conv_256)          echo "$P0 $CODE -dropout 0 $CONV $L256|emb" ;;
    # the size: a 2-layer decoder of 256 (lab/recipes/multi30k.sh's default model) or 512 units
    ce_conv_256)               echo "-config $S $L256|emb" ;;
    authors_code_conv_256)     echo "$P0 $AUTHORS $CODE $CONV $L256|emb" ;;
    ce_conv_512)               echo "-config $S $L512|emb" ;;
    authors_code_conv_512)     echo "$P0 $AUTHORS $CODE $CONV $L512|emb" ;;
    *) echo "unknown row $1" >&2; return 1 ;;
  esac
}
for r in $ROWS; do row "$r" > /dev/null; done  # every name checked before anything runs
for f in data.vocab.pt emb.dec.pt lexicon.txt tok/test_2016_flickr.fr; do
  [ -s "$DATA/$f" ] || { echo "$DATA/$f is missing: run PREPARE_ONLY=1 CONFIGS=lstm_ce bash lab/recipes/word_choice.sh" >&2
                         exit 2; }
done
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

table() {  # KIND -> the -tgt_emb file
  case $1 in
    emb) echo "$DATA/emb.dec.pt" ;;
    random) [ -s "$OUT/random.dec.pt" ] || $PY embeddings_to_torch.py -init random_sphere -dim 300 \
              -dict_file "$DATA/data.vocab.pt" -output_file "$OUT/random" > /dev/null
            echo "$OUT/random.dec.pt" ;;
    softmax) while [ ! -s "$OUT/ce_conv/done" ]; do  # ce_conv trains first, in the same invocation or an earlier one
               [[ " $ROWS " == *" ce_conv "* ]] || [ -s "$OUT/ce_conv/model_best.pt" ] \
                 || { echo "the softmax table needs the ce_conv row" >&2; return 1; }
               sleep 30
             done
             [ -s "$OUT/softmax.dec.pt" ] || $PY embeddings_to_torch.py -init softmax \
               -from_model "$OUT/ce_conv/model_best.pt" -dict_file "$DATA/data.vocab.pt" -normalize \
               -output_file "$OUT/softmax" > /dev/null
             echo "$OUT/softmax.dec.pt" ;;
  esac
}

run() {  # ROW
  local dir=$OUT/$1 flags kind emb t
  IFS='|' read -r flags kind <<< "$(row "$1")"
  emb=$(table "$kind")
  mkdir -p "$dir"
  if [ ! -s "$dir/done" ]; then
    log "train $1"
    local start; start=$(date +%s)
    # shellcheck disable=SC2086  # flags holds several flags
    $PY train.py $flags -data "$DATA/data" -tgt_emb "$emb" -seed "$SEED" -threads 1 -save_model "$dir/model" \
      -resume auto -valid_steps 0 -save_checkpoint_steps 1000000 -log_file "$dir/train.log" > "$dir/train.out" 2>&1
    echo "train_wall_s $(( $(date +%s) - start ))" > "$dir/done"
  fi
  for t in test_2016_flickr test_2017_flickr; do
    [ -s "$dir/$t.bleu.txt" ] && continue
    $PY translate.py -model "$dir/model_best.pt" -src "$DATA/tok/$t.fr" -output "$dir/$t.en" -threads 1 \
      -replace_unk -lookup_dict "$DATA/lexicon.txt" -tgt "$DATA/tok/$t.en" > "$dir/$t.log" 2>&1
    grep -E "BLEU|<unk>" "$dir/$t.log" > "$dir/$t.bleu.txt"
  done
  log "done $1"
}
running=0
for r in $ROWS; do
  run "$r" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
# the table: tokenized BLEU with / without -replace_unk and the <unk> rate per test, epochs trained, training time
$PY - "$OUT" $ROWS > "$OUT/report.md" <<'EOF'
import re, sys
from pathlib import Path

out, rows = Path(sys.argv[1]), sys.argv[2:]
print("| row | test_2016: BLEU / without lexicon / <unk> | test_2017: BLEU / without lexicon / <unk> | epochs | "
      "train s |")
print("| --- | --- | --- | ---: | ---: |")
for row in rows:
    cells = []
    for t in ("test_2016_flickr", "test_2017_flickr"):
        f = out / row / f"{t}.bleu.txt"
        text = f.read_text() if f.exists() else ""
        tok = re.search(r"^tokenized BLEU: ([\d.]+)", text, re.M)
        raw = re.search(r"tokenized BLEU ([\d.]+)$", text, re.M)
        unk = re.search(r"\(([\d.]+)%\)", text)
        cells.append(f"{tok.group(1) if tok else '-'} / {raw.group(1) if raw else '='} / "
                     f"{unk.group(1) + '%' if unk else '-'}")
    log = out / row / "train.log"
    epochs = len(re.findall(r"epoch \d+ done", log.read_text())) if log.exists() else 0
    done = out / row / "done"
    secs = done.read_text().split()[-1] if done.exists() else "-"
    print(f"| {row} | {cells[0]} | {cells[1]} | {epochs} | {secs} |")
EOF
echo "wrote $OUT/report.md"
exit
}
