#!/usr/bin/env bash
# The continuous preset's epoch cost relative to ce's, measured side by side: both train from the same minute, one
# thread each, for 3 epochs on the data lab/recipes/word_choice.sh prepared (run it once for the pair first); the
# cost is the continuous epoch's seconds over ce's, from the first two epochs' validation stamps (both runs are
# still side by side then). lab/tools/time_to_quality.py -epoch_cost takes the ratio.
#
#   bash lab/recipes/epoch_cost.sh                      # fr->en: word ce against the preset
#   SRC=de bash lab/recipes/epoch_cost.sh               # de->en: BPE ce against the preset on source pieces
#   SRC=en TGT=de bash lab/recipes/epoch_cost.sh        # en->de: word ce against the preset
#
# Environment: SRC, TGT [fr, en; or de, en; or en, de], OUT [runs/word_choice_$SRC-$TGT, word_choice.sh's; e.g.
# runs/word_choice_en-de_m30kvec for German vectors of every training word], FLAGS [extra flags of the continuous
# run, e.g. "-num_sampled 64" for the preset as it was], WORK [runs/epoch_cost_$SRC, or runs/epoch_cost_$SRC-$TGT].
# One { ... } block that ends in exit (lab/recipes/word_choice.sh says why).
{
PYTHON=${PYTHON:-python3}  # the interpreter: python3, as the README calls it ("python" may not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's onmt_cont and lab, also for the tools/ and lab/ scripts run from a worktree pinned at one commit
# (the editable install points at the main checkout)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SRC=${SRC:-fr}; TGT=${TGT:-en}
OUT=${OUT:-runs/word_choice_$SRC-$TGT}
if [ "$TGT" = en ]; then WORK=${WORK:-runs/epoch_cost_$SRC}; else WORK=${WORK:-runs/epoch_cost_$SRC-$TGT}; fi
FLAGS=${FLAGS:-}
mkdir -p "$WORK"
common=(-epochs 3 -seed 11 -threads 1 -save_checkpoint_steps 1000000 -valid_metric bleu)
case $SRC-$TGT in
  fr-en|en-de) ce=(-data "$OUT/data" -tgt_emb "$OUT/emb.dec.pt")
      cont=(-data "$OUT/data" -tgt_emb "$OUT/emb.dec.pt") ;;
  de-en) ce=(-data "$OUT/bpe/data" -valid_remove_bpe)
      cont=(-data "$OUT/srcbpe/data" -tgt_emb "$OUT/srcbpe/emb.dec.pt" -drop_final_punct 0.05) ;;
  *) echo "SRC-TGT must be fr-en, de-en or en-de, got $SRC-$TGT" >&2; exit 2 ;;
esac
"$PYTHON" train.py "${ce[@]}" -config configs/transformer_softmax.yaml -save_model "$WORK/ce" "${common[@]}" \
  -log_file "$WORK/ce.log" > "$WORK/ce.out" 2>&1 &
# shellcheck disable=SC2086
"$PYTHON" train.py "${cont[@]}" -config configs/transformer_continuous.yaml $FLAGS -save_model "$WORK/cont" \
  "${common[@]}" -log_file "$WORK/cont.log" > "$WORK/cont.out" 2>&1 &
wait
"$PYTHON" - "$WORK/ce.log" "$WORK/cont.log" <<'EOF'
import re, sys
from datetime import datetime

def epochs(log):
    """Seconds of the first two epochs: from the log's first line to each validation's."""
    stamps = []
    with open(log, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\[(\d\d:\d\d:\d\d)\]", line)
            if m and (not stamps or "validation at step" in line):
                stamps.append(datetime.strptime(m.group(1), "%H:%M:%S"))
    return [(b - a).seconds for a, b in zip(stamps, stamps[1:3])]

ce, cont = epochs(sys.argv[1]), epochs(sys.argv[2])
print(f"ce epochs {ce} s, continuous epochs {cont} s: epoch cost {sum(cont) / sum(ce):.2f}")
EOF
exit
}
