#!/usr/bin/env bash
# The whole chain on the shipped sample (data/: Multi30k fr->en, 3,000 training pairs):
# preprocess -> embeddings_to_torch -> lexicon -> train (README's recommended continuous row: a Transformer,
# NLLvMF + contrastive, tied, sampling correction, word bias, no dropout) -> translate
# -replace_unk -> BLEU;
# then frequency-bin offsets fitted on validation, and the test set again with them.
# A small model that trains in a few minutes on 2 CPU cores. Outputs go to runs/quickstart/.
#
#   bash docs/quickstart.sh                     # the Transformer (README's recommended row, sample-sized schedule)
#   ARCH=lstm bash docs/quickstart.sh           # the same loss on the paper's LSTM (bidirectional encoder, 2-layer decoder)
#
# The recommended row's schedule is for Multi30k's 29,000 pairs (noam factor 2, warm-up 1,000, batch 64); the
# sample's 1,152 updates take noam factor 1, warm-up 400 and batch 32. Validation sacreBLEU on 2026-11-26: factor 2
# 9.71, factor 1 30.97, factor 1 with the row's moving average (-average_decay 1e-4, kept) 31.22; with the LSTM the
# average cost 3.4 BLEU, so ARCH=lstm leaves it out. No dropout, as in README's Multi30k row: on the sample
# (2026-11-28, three seeds, -seed 3435 (the default) / 1 / 2, two runs side by side with one thread each) tokenized
# validation BLEU was 31.00 / 31.50 / 32.28 without dropout against 31.04 / 28.60 / 29.90 with -dropout 0.1, and
# 31.14 / 31.80 / 32.28 against 31.63 / 28.72 / 30.28 with the offsets validation picks; test sacreBLEU 31.95 / 31.57 /
# 35.24 against 31.60 / 30.53 / 31.41, with the offsets 30.98 / 30.96 / 35.24 against 31.25 / 29.91 / 31.55. All 0.0%
# <unk>. Test output/reference per training-count bin 1 / 2-4 / 5-9 / 10-99 / 100-999 / 1000+ (tools/rare_word_f1.py,
# mean of the seeds), without offsets: 1.07 / 0.45 / 0.62 / 1.01 / 1.08 / 1.13 at 0, 0.83 / 0.33 / 0.46 / 1.06 / 1.10 /
# 1.12 at 0.1; with them 0.93 / 0.74 / 0.79 / 0.99 / 1.04 / 1.12 and 0.56 / 0.67 / 0.69 / 1.03 / 1.08 / 1.12.
# This script as it stands, from a fresh clone with the default threads (2, the machine idle), 2026-11-28: validation
# 30.99, test 29.49, with the offsets 29.94 (the thread count changes the sums, so this is another draw, not a repeat);
# 0.0% <unk>; per bin 1.18 / 0.55 / 0.69 / 1.02 / 1.14 / 1.09, with the offsets 0.74 / 0.86 / 0.95 / 0.99 / 1.06 / 1.10.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/quickstart}
ARCH=${ARCH:-transformer}
SRC_MERGES=${SRC_MERGES:-0}  # described at its use below
[[ $SRC_MERGES =~ ^[0-9]+$ ]] || { echo "SRC_MERGES must be a number of merges (0: words), got $SRC_MERGES" >&2; exit 2; }
mkdir -p "$OUT"
case $ARCH in
  lstm)        MODEL="-brnn -rnn_size 256 -word_vec_size 256 -enc_layers 1 -dec_layers 2 -dropout 0.2" ;;
  transformer) MODEL="-encoder_type transformer -decoder_type transformer -rnn_size 128 -word_vec_size 128 -layers 2
                      -heads 4 -transformer_ff 512 -dropout 0 -param_init 0 -param_init_glorot
                      -decay_method noam -learning_rate 1 -warmup_steps 400 -adam_beta2 0.998 -average_decay 1e-4" ;;
  *) echo "ARCH must be lstm or transformer, got $ARCH" >&2; exit 2 ;;
esac

# SRC_MERGES [0: whole words on both sides]: subword-nmt merges learnt on the French training side; the model
# reads those pieces and the target stays words, the de->en row of README's recommended configuration
# (docs/results.md 5c, continued (14)). On fr->en the pieces changed little on Multi30k (one seed) and on this
# sample (2026-11-27, both runs side by side: validation sacreBLEU 28.69 with words, 28.65 with 2,000 merges of the
# sample's 3,800 French types; test 30.04 / 30.32), so the default stays words.
SRC_TXT=data
if [ "$SRC_MERGES" != 0 ]; then
  SRC_TXT=$OUT
  python -m subword_nmt.learn_bpe -s "$SRC_MERGES" < data/train.fr > "$OUT/codes.fr"
  for split in train valid test; do
    python -m subword_nmt.apply_bpe -c "$OUT/codes.fr" < "data/$split.fr" > "$OUT/$split.fr"
  done
fi

python preprocess.py -train_src "$SRC_TXT/train.fr" -train_tgt data/train.en \
  -valid_src "$SRC_TXT/valid.fr" -valid_tgt data/valid.en \
  -save_data "$OUT/data" -tgt_emb data/en.vec.gz -shard_size 1000 -shuffle

python embeddings_to_torch.py -emb_file_dec data/en.vec.gz -dict_file "$OUT/data.vocab.pt" \
  -output_file "$OUT/emb" -normalize

python build_lexicon.py -src data/train.fr -tgt data/train.en -output "$OUT/lexicon.txt"

# shellcheck disable=SC2086  # $MODEL holds several flags
# LOSS: the loss flags. The default, README's recommended continuous row, gave test sacreBLEU 31.87 and 30.50 (dropout 0.1) with
# 0% <unk> on the sample with the Transformer in two runs on 2026-11-26 (train.py's default -threads follows the
# machine's load, 2 and 1 threads there, and the sums change with it), 25.04 with ARCH=lstm (2026-11-25); with the
# LSTM the paper's LOSS="-loss nllvmf -tie_emb" gave 19.58 with -replace_unk and 6.45 without (35% <unk>), the same
# day on the same machine. -word_bias without -sampling_correction, the better LSTM row on Multi30k
# (docs/results.md 5c, continued (3)), gave 22.21 with the LSTM here: on the 3,000-pair sample the two flags stay ahead.
LOSS=${LOSS:--loss nllvmf_nce -lambda1 0.02 -lambda2 0.1 -tie_emb -sampling_correction -word_bias}
python train.py -data "$OUT/data" -save_model "$OUT/model" -tgt_emb "$OUT/emb.dec.pt" \
  $LOSS -generator linear $MODEL -batch_size 32 -epochs ${EPOCHS:-12} \
  -valid_steps 100000 -save_checkpoint_steps 100000 -report_every 50 -log_file "$OUT/train.log"

python translate.py -model "$OUT/model_best.pt" -src "$SRC_TXT/test.fr" -output "$OUT/test.pred.en" \
  -tgt data/test.en -replace_unk -lookup_dict "$OUT/lexicon.txt"

# Frequency-bin offsets (translate.py -freq_offsets): fitted on the validation set so that the words of each bin
# of training counts come out as often as in its reference (tools/calibrate_offsets.py; docs/results.md 5c,
# continued (9)); then the test set again with them. -keep bleu: validation BLEU picks the round (round 0, no
# offsets, included). On 2026-11-26 (Transformer) validation picked round 1 (29.95 against 29.47 without) and the
# test went from 31.87 to 31.34: the sample's 200 validation sentences hold 44-144 tokens in the rare bins, too few
# for a fit that carries over (Multi30k's validation set holds 103-7,823; docs/results.md 5c, continued (9)).
python tools/calibrate_offsets.py -model "$OUT/model_best.pt" -src "$SRC_TXT/valid.fr" -tgt data/valid.en -keep bleu \
  -output "$OUT/offsets.json" > "$OUT/offsets.log"
tail -n 1 "$OUT/offsets.log"
python translate.py -model "$OUT/model_best.pt" -src "$SRC_TXT/test.fr" -output "$OUT/test.calib.en" \
  -tgt data/test.en -replace_unk -lookup_dict "$OUT/lexicon.txt" -freq_offsets "$OUT/offsets.json"
