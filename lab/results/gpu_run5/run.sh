#!/usr/bin/env bash
# The fifth GPU run (docs/gpu.md), one device call; prepared 2026-11-28 and not yet run (no machine was lent then).
# It runs the fused ce loss on CUDA (its test and its benchmark),
# docs/gpu_check.sh with faiss carried (train_speed left out), issue 21's fr->en rows' epoch cost on the GPU at the
# recipe's batch of 64 sentences and at 256, then the whole suite with CUDA visible.
# Carried: .whl and .dev/fr. Here, in the repo's root (both folders in .git/info/exclude):
#   pip wheel --no-deps -w .whl mosestokenizer==1.2.1 uctools==1.3.0 toolwrapper==2.1.0 subword-nmt docopt openfile mock
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d .whl faiss-cpu       # 18 MB
#   mkdir -p .dev/fr && cp runs/word_choice_fr-en/{data.train.0,data.valid.0,data.vocab,emb.dec}.pt .dev/fr/
# then run(command="DEADLINE=430 bash lab/results/gpu_run5/run.sh", carry=[".whl", ".dev"], timeout_s=520).
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
if [ -d /opt/torch/.venv/bin ]; then export PATH=/opt/torch/.venv/bin:$PATH; fi
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site || exit 3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$O/env.txt" 2>&1
python -c "import torch,faiss,sys;print(sys.version.split()[0], torch.__version__, faiss.__version__)" >> "$O/env.txt" 2>&1
cat "$O/env.txt"

echo "== CUDA tests $(date +%T)"
timeout 120 python -m pytest -q -p no:cacheprovider -rs tests/unit/losses/test_losses.py tests/unit/losses/test_contrastive.py tests/unit/test_vmf.py \
  -k "gpu or cuda" 2>&1 | tail -5

echo "== ce loss on the GPU $(date +%T)"
timeout 90 python lab/bench/label_smoothing.py -gpu 0 -tokens 830 3320 13280 -vocab 9799 50000 2>&1 | tee "$O/label_smoothing.txt"

echo "== gpu_check $(date +%T)"
SKIP="train_speed" OUT=/tmp/gc timeout 150 bash docs/gpu_check.sh 2>&1 | tee "$O/gpu_check.txt"

echo "== fr->en epoch cost $(date +%T)"
D=.dev/fr
# lab/recipes/word_choice.sh's TMODEL, rows t_ce_d01_avg and t_nce_both_avg_d01_lr1, float32
TM="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4
-transformer_ff 512 -dropout 0.1 -attention_dropout 0.1 -param_init 0 -param_init_glorot -decay_method noam
-warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -valid_metric bleu -valid_steps 1000000
-save_checkpoint_steps 1000000 -save_checkpoint_epochs 1 -report_every 100 -gpu 0 -data $D/data"
CE="-learning_rate 0.5 -loss ce -label_smoothing 0.1"
NCE="-tgt_emb $D/emb.dec.pt -learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias"
for batch in 64 256; do
  for row in ce nce; do
    [ $row = nce ] && F=$NCE || F=$CE
    log=$O/epochs_${row}_b$batch.log
    # shellcheck disable=SC2086
    timeout 80 python train.py $TM $F -batch_size $batch -epochs 2 -save_model /tmp/ep_${row}_$batch -log_file "$log" \
      > /dev/null 2>&1
    echo "$row batch $batch rc $?: start $(head -1 "$log" | cut -c2-9); $(grep -E 'epoch [0-9]+ done|validation at' "$log" | sed 's/; ppl.*greedy//' | tr '\n' ' ')"
  done
done | tee "$O/epochs.txt"

echo "== suite $(date +%T)"
T4=$(( ${DEADLINE:-440} - SECONDS )); echo "suite gets ${T4}s"
timeout $T4 python -m pytest -rfs -q -n 15 -p no:cacheprovider tests/ > "$O/pytest.txt" 2>&1
echo "pytest rc $?"; grep -E "passed|failed|^FAILED|^ERROR|^SKIPPED" "$O/pytest.txt" | tail -30
echo "== done $(date +%T)"
