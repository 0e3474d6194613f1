#!/usr/bin/env bash
# the recommended rows' bin quotients against every word ce seed (with and without the moving average);
# output: bin_bootstrap_pooled.txt (bins 100-999 and 1000+ were run for .matchce only)
cd "$(dirname "$0")/../../.."  # repo root; needs runs/word_choice_{fr,de}-en/tok from lab/recipes/word_choice.sh
W=lab/results/word_choice_fr-en; D=lab/results/word_choice_de-en
for t in test_2016_flickr test_2017_flickr; do
  for b in 1 2-4 5-9 10-99 100-999 1000+; do
    for s in block matchce; do  # the row without offsets (its picked decode), with them
      echo "== fr-en $t bin $b row .$s vs word ce (7 seeds: t_ce_d01 s1-2, t_ce_d01_avg s1-5)"
      python lab/tools/bin_bootstrap.py -train runs/word_choice_fr-en/tok/train.en -ref runs/word_choice_fr-en/tok/$t.en -bin $b \
        -a $W/t_nce_both_avg_d00_lr1.s{1,2,5}/$t.$s.en -b $W/t_ce_d01.s{1,2}/$t.block.en $W/t_ce_d01_avg.s{1,2,3,4,5}/$t.block.en
      echo "== de-en $t bin $b row .$s vs word ce (4 seeds: t_ce_dfp_d01 s1-2, t_ce_dfp_d01_avg s1-2)"
      python lab/tools/bin_bootstrap.py -train runs/word_choice_de-en/tok/train.en -ref runs/word_choice_de-en/tok/$t.en -bin $b \
        -a $D/t_srcbpe_nce_both_avg_dfp_d00_lr1.s{1,2,3,6}/$t.$s.en -b $D/t_ce_dfp_d01.s{1,2}/$t.block.en $D/t_ce_dfp_d01_avg.s{1,2}/$t.block.en
    done
  done
done
