#!/usr/bin/env bash
# the watch half of runs/t_more40.sh (its first version exited at the replay's error on a log with no validation yet)
set -uo pipefail
cd /work/main
seed=$1 pid=$2
R=runs/word_choice_de-en; W=runs/wc_win2_de-en; M=$W/t_nce_both_avg_dfp.s$seed.more
if [ "$seed" = 1 ]; then LOGS=$R/t_nce_both_avg_dfp.s1/train.log,runs/wc_more_de-en/t_nce_both_avg_dfp.s1/train.log
else LOGS=$R/t_nce_both_avg_dfp.s2/train.log; fi
while kill -0 "$pid" 2>/dev/null; do
  sleep 20
  grep -q "greedy BLEU" $M/train.log || continue
  row=$(python lab/tools/stopping_rule.py -windows 2 -runs $LOGS,$M/train.log | tail -1)
  case "$row" in *"runs past"*) ;; *) echo "stopped by the replay: $row"; sleep 5; kill "$pid"; break;; esac
done
python lab/tools/stopping_rule.py -windows 2 -runs $LOGS,$M/train.log
