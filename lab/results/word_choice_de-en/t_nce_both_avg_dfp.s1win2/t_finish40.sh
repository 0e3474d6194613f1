#!/usr/bin/env bash
# after runs/t_more40.sh SEED: the window-2 stop j and best epoch k from the joined logs, then the recipe's steps 3-5
# on a folder holding model_best (epoch k), the epoch checkpoints j-4..j and model_last (j)
set -euo pipefail
cd /work/main
seed=$1
R=runs/word_choice_de-en; W=runs/wc_win2_de-en; M=$W/t_nce_both_avg_dfp.s$seed.more; F=$W/t_nce_both_avg_dfp.s$seed
if [ "$seed" = 1 ]; then PREV=runs/wc_more_de-en/t_nce_both_avg_dfp.s1; LOGS=$R/t_nce_both_avg_dfp.s1/train.log,$PREV/train.log
else PREV=$R/t_nce_both_avg_dfp.s2; LOGS=$PREV/train.log; fi
row=$(python lab/tools/stopping_rule.py -windows 2 -runs $LOGS,$M/train.log | tail -1)
echo "$row"
case "$row" in *"runs past"*) echo "the continuation ended before the rule stops (at most 40 epochs: the recipe's cap)";; esac
j=$(echo "$row" | awk -F'|' '{print $5}' | sed 's/^ *\([0-9]*\),.*/\1/')
k=$(echo "$row" | awk -F'|' '{print $5}' | sed 's/.*(\([0-9]*\)).*/\1/')
echo "stop after epoch $j, best at epoch $k"
mkdir -p $F
cp $M/model_resume32.pt $M/model_epoch_32.pt
if [ "$k" -gt 32 ]; then cp $M/model_epoch_$k.pt $F/model_best.pt; else cp $PREV/model_best.pt $F/model_best.pt; fi
for e in $(seq $((j-4)) $j); do [ -e $M/model_epoch_$e.pt ] && cp $M/model_epoch_$e.pt $F/; done
cp $M/model_epoch_$j.pt $F/model_last.pt
if [ "$seed" = 1 ]; then cat $R/t_nce_both_avg_dfp.s1/train.log $PREV/train.log $M/train.log > $F/train.log
else cat $PREV/train.log $M/train.log > $F/train.log; fi
echo "window-2 stop after epoch $j (best at $k); joined logs ($LOGS,$M/train.log)" > $F/stop.txt
SRC=de OUT=$W CONFIGS=t_nce_both_avg_dfp SEEDS=$seed EPOCHS=40 BLOCKS="2 3" bash docs/recipes/.wc_run_fin.sh
