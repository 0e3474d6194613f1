#!/usr/bin/env bash
# The first 1,000 updates of the Tiny continuous preset on en->de under -amp with the shared block's bf16 shifted
# product (commit 302f72d, branch shared-bf16), seeds 1 and 2 side by side, against cont_fp32.s1/s2 (run_cont*.sh).
cd /work/runs/wt_302f72d
one() {  # NAME SEED FLAGS...
  local name=$1 seed=$2; shift 2
  local dir=/work/runs/quality/cont_$name.s$seed
  mkdir -p "$dir"
  [ -s "$dir/done" ] && return
  python3 train.py -config /work/runs/quality/tiny_continuous_q.yaml -data /work/runs/tiny_en-de/srcbpe/data \
    -tgt_emb /work/runs/tiny_en-de/srcbpe/emb.dec.pt -seed "$seed" -threads 1 -train_steps 1000 \
    -save_model "$dir/model" -resume auto -log_file "$dir/train.log" "$@" > "$dir/train.out" 2>&1 && date > "$dir/done"
}
one ampshift 1 -amp true &
one ampshift 2 -amp true &
wait
