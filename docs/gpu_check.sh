#!/usr/bin/env bash
# The first run on a GPU machine (docs/gpu.md): each check prints one line, PASS or FAIL with its
# log; about 5 minutes expected on one modern GPU (the first run's per-worker times; not yet run whole). Refuses (exit 2) where PyTorch sees no CUDA device.
#
#   bash docs/gpu_check.sh            # logs and models in runs/gpu_check/
#   OUT=/tmp/gc bash docs/gpu_check.sh
#   SKIP="train_speed" bash docs/gpu_check.sh   # leave out the named checks (a space list; each prints SKIP)
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_check}
SKIP=${SKIP:-}
NGPU=$("$PYTHON" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)
if [ "$NGPU" = 0 ]; then
  echo "gpu_check: PyTorch sees no CUDA device here ($("$PYTHON" -c 'import torch; print("torch", torch.__version__)' 2>&1)):" \
       "nothing to check; run it on a GPU machine" >&2
  exit 2
fi
mkdir -p "$OUT"
failed=0
check() {  # NAME COMMAND...: PASS/FAIL NAME (seconds) and the log's last error line
  local name=$1; shift
  case " $SKIP " in *" $name "*) printf 'SKIP %-22s (in SKIP)\n' "$name"; return 0 ;; esac
  local log=$OUT/$name.log start=$SECONDS
  if "$@" > "$log" 2>&1; then
    printf 'PASS %-22s %4ss\n' "$name" $((SECONDS - start))
  else
    failed=$((failed + 1))
    printf 'FAIL %-22s %4ss  %s (log: %s)\n' "$name" $((SECONDS - start)) "$(grep -m1 -h 'error' "$log" | cut -c1-100)" "$log"
  fi
}
expect() {  # PATTERN FILE: the check's own pass condition beyond the exit status
  grep -q -- "$1" "$2" || { echo "error: expected '$1' in $2"; return 1; }
}

# the sample's data, table and lexicon (CPU; seconds)
[ -s "$OUT/data.vocab.pt" ] || "$PYTHON" preprocess.py -train_src data/train.fr -train_tgt data/train.en \
  -valid_src data/valid.fr -valid_tgt data/valid.en -save_data "$OUT/data" -tgt_emb data/en.vec.gz > "$OUT/prepare.log" 2>&1
[ -s "$OUT/emb.dec.pt" ] || "$PYTHON" embeddings_to_torch.py -emb_file_dec data/en.vec.gz -dict_file "$OUT/data.vocab.pt" \
  -output_file "$OUT/emb" -normalize >> "$OUT/prepare.log" 2>&1
[ -s "$OUT/lexicon.txt" ] || "$PYTHON" build_lexicon.py -src data/train.fr -tgt data/train.en -output "$OUT/lexicon.txt" \
  >> "$OUT/prepare.log" 2>&1
LSTM="-data $OUT/data -tgt_emb $OUT/emb.dec.pt -loss nllvmf -tie_emb -brnn -rnn_size 256 -word_vec_size 256
-dec_layers 2 -batch_size 64 -report_every 10 -valid_steps 100000 -save_checkpoint_steps 30"

train_amp() {  # DTYPE
  # shellcheck disable=SC2086
  "$PYTHON" train.py $LSTM -gpu 0 -amp -amp_dtype "$1" -train_steps 60 -save_model "$OUT/amp_$1" -log_file "$OUT/amp_$1.train.log" &&
    expect "finished at step 60" "$OUT/amp_$1.train.log" && ! grep -q "loss nan" "$OUT/amp_$1.train.log"
}
check amp_bf16 train_amp bf16
check amp_fp16 train_amp fp16

torchrun_nccl() {
  # shellcheck disable=SC2086
  "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 train.py $LSTM -gpu 0 -train_steps 60 \
    -save_model "$OUT/ddp" -log_file "$OUT/ddp.train.log" &&
    expect "nccl" "$OUT/ddp.train.log" && expect "parameters identical on all 2 ranks: yes" "$OUT/ddp.train.log"
}
resume_other_count() {  # a 2-GPU checkpoint resumed on one GPU; or a 1-GPU one resumed on the CPU
  local from=$OUT/ddp_step_30.pt
  if [ "$NGPU" -lt 2 ]; then
    from=$OUT/amp_bf16_step_30.pt
    # shellcheck disable=SC2086
    "$PYTHON" train.py $LSTM -train_from "$from" -train_steps 40 -save_model "$OUT/resumed" -log_file "$OUT/resumed.train.log"
  else
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=0 "$PYTHON" train.py $LSTM -gpu 0 -train_from "$from" -train_steps 40 \
      -save_model "$OUT/resumed" -log_file "$OUT/resumed.train.log"
  fi && expect "resumed from step 30" "$OUT/resumed.train.log" && expect "finished at step 40" "$OUT/resumed.train.log"
}
torchrun_gloo() {  # gloo ranks on the CPU of a machine that has a GPU (the first GPU run's suite failed every such test)
  # shellcheck disable=SC2086
  "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 train.py $LSTM -train_steps 20 \
    -save_model "$OUT/gloo" -log_file "$OUT/gloo.train.log" &&
    expect "gloo" "$OUT/gloo.train.log" && expect "parameters identical on all 2 ranks: yes" "$OUT/gloo.train.log"
}
check torchrun_gloo_cpu torchrun_gloo
if [ "$NGPU" -ge 2 ]; then
  check torchrun_nccl torchrun_nccl
else
  echo "SKIP torchrun_nccl            (1 GPU: nccl needs 2; run it where 2 are visible)"
fi
check train_from_other_count resume_other_count
ann_decode() {
  "$PYTHON" translate.py -model "$OUT/amp_bf16_step_60.pt" -src data/test.fr -tgt data/test.en -output "$OUT/test.ann.en" \
    -gpu 0 -ann faiss &&
  "$PYTHON" translate.py -model "$OUT/amp_bf16_step_60.pt" -src data/test.fr -output "$OUT/test.exact.en" -gpu 0 &&
  echo "lines differing between -ann faiss and exact: $(diff "$OUT/test.ann.en" "$OUT/test.exact.en" | grep -c '^<')"
}
check ann_decode ann_decode
# last, as the longest: five rows (every row at three sizes took over 4 minutes on an H200: one worker process per row and size)
ROWS="ce,nllvmf tied,nllvmf_nce tied both,ReWE,joint sampled"
check train_speed "$PYTHON" lab/bench/train_speed.py -gpu 0 -sizes small,paper -vocabs 50000,300000 -rows "$ROWS" \
  -paper_rows "$ROWS" -sweep "" -reps 3 -paper_reps 3 -json "$OUT/train_speed.json"
[ "$failed" = 0 ] && echo "gpu_check: all checks passed (logs in $OUT)" || echo "gpu_check: $failed check(s) failed (logs in $OUT)"
exit $(( failed > 0 ))
exit
}
