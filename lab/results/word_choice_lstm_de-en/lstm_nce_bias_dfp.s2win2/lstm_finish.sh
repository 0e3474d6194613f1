#!/usr/bin/env bash
# after runs/lstm_more.sh CFG 2: the exact window-2 stop j and best epoch k from the joined logs, then the
# recipe's steps 3-5 on a folder holding model_best (epoch k), the epoch checkpoints up to j and model_last (j)
set -euo pipefail
cd /work/main
cfg=$1; seed=2
R=runs/word_choice_lstm_de-en; W=runs/wc_win2_lstm_de-en; M=$W/$cfg.s$seed.more; F=$W/$cfg.s$seed
row=$(python lab/tools/stopping_rule.py -windows 2 -runs $R/$cfg.s$seed/train.log,$M/train.log | tail -1)
echo "$row"
j=$(echo "$row" | awk -F'|' '{print $5}' | sed 's/^ *\([0-9]*\),.*/\1/')
k=$(echo "$row" | awk -F'|' '{print $5}' | sed 's/.*(\([0-9]*\)).*/\1/')
case "$row" in *"runs past"*) echo "the continuation ended before the rule stops: $row"; exit 1;; esac
echo "stop after epoch $j, best at epoch $k"
mkdir -p $F
if [ -e $M/model_epoch_$k.pt ]; then cp $M/model_epoch_$k.pt $F/model_best.pt; else cp $R/$cfg.s$seed/model_best.pt $F/model_best.pt; fi
for e in $(seq $((j-4)) $j); do [ -e $M/model_epoch_$e.pt ] && cp $M/model_epoch_$e.pt $F/; done
cp $M/model_epoch_$j.pt $F/model_last.pt
cat $R/$cfg.s$seed/train.log $M/train.log > $F/train.log
echo "window-2 stop after epoch $j (best at $k); joined logs of $R/$cfg.s$seed and $M" > $F/stop.txt
SRC=de OUT=$W CONFIGS=$cfg SEEDS=$seed EPOCHS=40 BLOCKS="2 3" bash docs/recipes/.wc_run_a.sh
