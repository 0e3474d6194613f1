#!/usr/bin/env bash
# The papers' rows of docs/results.md: every loss of lab/recipes/multi30k.sh on the small LSTM (128 units, one
# decoder layer, batch 32, Adam 1e-3), fr->en and de->en after 2 epochs (seed 1; ce, nllvmf_reg12_tied and
# synmargin_proj on fr->en also seed 2), the subword rows (fr->en), the main fr->en rows continued exactly
# (-train_from) to 10 epochs, and the contrastive losses of lab/recipes/continuous_quality.sh (10 epochs, fr->en;
# also at multi30k.sh's default 256-unit size).
# Every test is decoded greedily with -replace_unk -lookup_dict (softmax rows also with beam 5), again without
# -replace_unk (lab/recipes/unk_analysis.sh), and tabulated by lab/tools/m30k_report.py and lab/tools/quality_report.py.
#
#   bash lab/recipes/papers.sh
#
# Environment: SHARED [../shared/data]; RUNS [runs: the run folders go to RUNS/m30k_{fr,de}-en,
# RUNS/m30k_long_fr-en, RUNS/quality_fr-en and RUNS/quality256_fr-en]; RESULTS [RUNS/papers: the small metric files
# and logs multi30k.sh copies, and the tables, RESULTS/*/tables.md and RESULTS/quality*.md]; THREADS [1].
# One { ... } block that ends in exit: bash parses all of it before running any of it, so an edit of this
# file while it runs cannot change what the running script does (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SHARED=${SHARED:-../shared/data} THREADS=${THREADS:-1}
RUNS=${RUNS:-runs}
RESULTS=${RESULTS:-$RUNS/papers}
M="-brnn -enc_layers 1 -dec_layers 1 -rnn_size 128 -word_vec_size 128 -dropout 0.3 -batch_size 32 -learning_rate 1e-3"
M30K=lab/recipes/multi30k.sh
two_epochs() {  # SRC CONFIGS [SEEDS [SOFTMAX_BEAMS]]: 2 epochs, a checkpoint every 227 updates for the convergence rows
  SRC=$1 OUT=$RUNS/m30k_$1-en RESULTS=$RESULTS/m30k_$1-en MODEL="$M" EPOCHS=2 SAVE_STEPS=227 CONFIGS="$2" \
    SEEDS="${3:-1}" SOFTMAX_BEAMS="${4:-1}" bash $M30K
}

# 1. fr->en, 2 epochs: every word-level row; seed 2 of the main rows; beam 5 for rewe and joint; the subword rows
two_epochs fr "ce l2 cosine maxmargin nllvmf_reg1 nllvmf_reg1_tied nllvmf_reg12 nllvmf_reg12_tied synmargin_proj \
synmargin_diff margin_random rewe joint"
two_epochs fr "nllvmf_reg12_tied synmargin_proj ce" "1 2"
two_epochs fr "rewe joint" 1 "1 5"
two_epochs fr "nllvmf_bpe2word_tied ce_word2bpe ce_bpe2bpe"
# 2. de->en, 2 epochs
two_epochs de "nllvmf_reg12_tied synmargin_proj ce rewe joint maxmargin margin_random"
# 3. without the lexicon
for src in fr de; do
  SRC=$src OUT=$RUNS/m30k_$src-en RESULTS=$RESULTS/m30k_$src-en bash lab/recipes/unk_analysis.sh
done
# 4. fr->en, 10 epochs: the 2-epoch runs of these rows copied and continued exactly by multi30k.sh
LONG=$RUNS/m30k_long_fr-en
R10="ce nllvmf_reg12_tied synmargin_proj joint rewe maxmargin margin_random"
mkdir -p "$LONG"
for f in data.train.0.pt data.valid.0.pt data.vocab.pt data.vocab.src.txt data.vocab.tgt.txt emb.dec.pt lexicon.txt tok; do
  [ -e "$LONG/$f" ] || ln -s "../m30k_fr-en/$f" "$LONG/$f"
done
for r in $R10; do [ -e "$LONG/$r.s1" ] || cp -r "$RUNS/m30k_fr-en/$r.s1" "$LONG/"; done
OUT=$LONG RESULTS=$RESULTS/m30k_long_fr-en MODEL="$M" EPOCHS=10 CONVERGE="$R10" SOFTMAX_BEAMS="1 5" CONFIGS="$R10" \
  bash $M30K
OUT=$LONG RESULTS=$RESULTS/m30k_long_fr-en bash lab/recipes/unk_analysis.sh
# 5. the contrastive losses at a cost flat in the vocabulary, 10 epochs (infonce and nllvmf_nce_tied: 2 seeds)
OUT=$RUNS/quality_fr-en bash lab/recipes/continuous_quality.sh
OUT=$RUNS/quality_fr-en SEEDS=2 CONFIGS="infonce nllvmf_nce_tied" bash lab/recipes/continuous_quality.sh
# and at multi30k.sh's default size, Adam 5e-4 for every row, ce included
OUT=$RUNS/quality256_fr-en CONFIGS="infonce maxmargin_flat ce" \
  MODEL="-brnn -enc_layers 1 -dec_layers 2 -rnn_size 256 -word_vec_size 256 -dropout 0.3 -batch_size 64 -learning_rate 5e-4" \
  bash lab/recipes/continuous_quality.sh
# 6. the tables
for d in m30k_fr-en m30k_de-en m30k_long_fr-en; do
  "$PYTHON" lab/tools/m30k_report.py -results "$RESULTS/$d" -png "$RESULTS/$d/convergence.png" \
    -converge ce nllvmf_reg12_tied synmargin_proj joint rewe maxmargin margin_random > "$RESULTS/$d/tables.md"
done
"$PYTHON" lab/tools/quality_report.py "$RUNS"/quality_fr-en/*.s[0-9] | tee "$RESULTS/quality_fr-en.md"
"$PYTHON" lab/tools/quality_report.py "$RUNS"/quality256_fr-en/*.s[0-9] | tee "$RESULTS/quality256_fr-en.md"
exit
}
