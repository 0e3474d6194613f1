#!/usr/bin/env bash
# Issue 21: the de->en Transformer rows on a validation set without final . ! ? (lab/tools/strip_final_punct.py)
set -euo pipefail
cd /work/main
U=runs/wc_ul_de-en; W=runs/wc_win2_de-en; R=runs/word_choice_de-en
python lab/tools/strip_final_punct.py -src $W/tok/val.de -tgt $W/tok/val.en -out_src $U/val_nop.de -out_tgt $U/val_nop.en
dec() {  # MODEL BETA OUT
  local pr=(); [ "$2" != 0 ] && pr=(-decode_prior "$2")
  echo "$1 beta $2: $(python translate.py -model "$1" -src $U/val_nop.de -output "$3" -tgt $U/val_nop.en -tgt_lang en \
    -threads 1 "${pr[@]}" | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p')"
}
for s in 1 2; do dec $R/t_ce_dfp.s$s/model_best.pt 0 $U/ce_s$s.valnop.en; done
for d in t_nce_both_avg_dfp.s1 t_nce_both_avg_dfp.s1.ul0.n3.lr0.2 t_nce_both_avg_dfp.s1.ul16.n3.lr0.2 t_nce_both_avg_dfp.s2 \
         t_nce_both_avg_dfp.s2.ul0.n3.lr0.2 t_nce_both_avg_dfp.s2.ul16.n3.lr0.2; do
  read -r _ c _ b _ < $W/$d/choice.txt
  dec $W/$d/$c "$b" $W/$d/$c.valnop.$b.en
done
python lab/tools/repeats.py -train $W/tok/train.en -files $U/val_nop.en $U/ce_s*.valnop.en $W/t_nce_both_avg_dfp.s*/*.valnop.*.en
