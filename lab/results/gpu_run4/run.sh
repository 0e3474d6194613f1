#!/usr/bin/env bash
# one device call: amp_shapes, the fr->en rows end to end in fp32 / bf16 / bf16 without cuDNN attention,
# gpu_check's amp_bf16 + ann_decode (faiss carried), and the suite with CUDA visible
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
G=${G--gpu 0}; STEPS=${STEPS:-300}; REP=${REP:-100}
if [ -d /opt/torch/.venv/bin ]; then export PATH=/opt/torch/.venv/bin:$PATH; fi
export PYTHONUNBUFFERED=1
if [ -n "$G" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 3
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$O/env.txt" 2>&1
fi
python -c "import torch,faiss,sys;print(sys.version.split()[0], torch.__version__, faiss.__version__)" >> "$O/env.txt" 2>&1
cat "$O/env.txt"
echo "== amp_shapes $(date +%T)"
timeout ${T1:-150} python lab/bench/amp_shapes.py $G ${AS:-} -json "$O/amp_shapes.json" 2>&1 | tee "$O/amp_shapes.txt"
echo "== end to end $(date +%T)"
D=/tmp/e2e; mkdir -p $D  # the sample's data and table, as docs/gpu_check.sh prepares them
python preprocess.py -train_src data/train.fr -train_tgt data/train.en -valid_src data/valid.fr -valid_tgt data/valid.en \
  -save_data $D/data -tgt_emb data/en.vec.gz > $D/prep.log 2>&1
python embeddings_to_torch.py -emb_file_dec data/en.vec.gz -dict_file $D/data.vocab.pt -output_file $D/emb -normalize >> $D/prep.log 2>&1
TM="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2 -heads 4
-transformer_ff 512 -dropout 0.1 -attention_dropout 0.1 -batch_size 64 -param_init 0 -param_init_glorot
-decay_method noam -warmup_steps 1000 -adam_beta2 0.998 -average_decay 1e-4 -seed 1 -train_steps $STEPS
-report_every $REP -valid_steps 1000000 -save_checkpoint_steps 1000000 -data $D/data"
NCE="-tgt_emb $D/emb.dec.pt -learning_rate 1 -loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias"
CE="-learning_rate 0.5 -loss ce -label_smoothing 0.1"
for row in nce ce; do
  [ $row = nce ] && F=$NCE || F=$CE
  for mode in fp32 bf16 bf16_no_cudnn_sdpa; do
    case $mode in fp32) P="python train.py"; A="" ;; bf16) P="python train.py"; A="-amp -amp_dtype bf16" ;;
      *) P="python .dev/gpu/nocudnn.py"; A="-amp -amp_dtype bf16" ;; esac
    # shellcheck disable=SC2086
    timeout ${T2:-40} $P $TM $F $G $A -save_model /tmp/e2e_${row}_$mode -log_file "$O/e2e_${row}_$mode.log" > /dev/null 2>&1
    echo "$row $mode rc $?: $(grep -o 'step [0-9]*:.*tgt tok/s' "$O/e2e_${row}_$mode.log" | sed 's/:.*; / /' | tr '\n' ' ')"
  done
done | tee "$O/e2e.txt"
if [ -n "$G" ]; then
  echo "== gpu_check $(date +%T)"
  SKIP="amp_fp16 torchrun_gloo_cpu train_from_other_count train_speed" OUT=/tmp/gc timeout ${T3:-100} bash docs/gpu_check.sh 2>&1 | tee "$O/gpu_check.txt"
  cp /tmp/gc/ann_decode.log "$O/" 2>/dev/null
  echo "== suite $(date +%T)"
  T4=$(( ${DEADLINE:-555} - SECONDS )); echo "suite gets ${T4}s"
  timeout $T4 python -m pytest -rf -q -n 15 -p no:cacheprovider tests/ > "$O/pytest.txt" 2>&1
  echo "pytest rc $?"; grep -E "passed|failed|^FAILED|^ERROR" "$O/pytest.txt" | tail -40
fi
echo "== done $(date +%T)"
