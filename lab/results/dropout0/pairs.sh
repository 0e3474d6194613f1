#!/usr/bin/env bash
# The dropout-0 continuous rows side by side with ce from the same minute, one thread each (issue 21's time to
# quality as wall clock, not validation counts x epoch cost). Each run repeats a finished recipe run of the same
# seed and flags (lab/results/word_choice_*/<row>.sN), so ce stops once it passes its full run's best - 1
# (lab/tools/time_to_quality.py -best_from checks that it repeats that run's curve). Then, per pair:
#   python lab/tools/time_to_quality.py -ref $SCREENS/<ce>/train.log -runs $SCREENS/<cont>/train.log \
#     -best_from lab/results/word_choice_*/<ce row>.sN/train.log
# Usage: SCREENS=runs/s52/screens bash lab/results/dropout0/pairs.sh [de] [fr]
cd "$(dirname "$0")/../../.."  # the repository root
S=lab/results/word_choice_fr-en/lr_screen/screen.sh
KEEP="-early_stopping 3 -early_stopping_window 2 -save_checkpoint_epochs 1"  # as the recipe saves and stops
pairs=("$@"); [ ${#pairs[@]} -gt 0 ] || pairs=(de fr)
for pair in "${pairs[@]}"; do
  case $pair in
    # de->en: BPE ce with the average seed 6 passes 39.75 - 1 at its 9th validation; the source-piece row without
    # dropout seed 6 stops at its 15th (about as long side by side)
    # shellcheck disable=SC2086
    de) bash $S bpe_de pair_bpe_ce_s6 9 6 $KEEP &
        bash $S src_de pair_src_d0_s6 40 6 -learning_rate 1 -dropout 0 $KEEP & ;;
    # fr->en: word ce with the average seed 5 passes 49.88 - 1 at its 10th; the word row without dropout seed 5
    # stops at its 15th
    # shellcheck disable=SC2086
    fr) bash $S ce_fr pair_ce_s5 10 5 $KEEP &
        bash $S nce_fr pair_nce_d0_s5 40 5 -learning_rate 1 -dropout 0 $KEEP & ;;
    *) echo "unknown pair $pair (de, fr)" >&2; exit 2 ;;
  esac
  wait
done
