# -max_length_ratio on validation (de->en LSTM rows), with each row's checkpoint, beta and block
T=runs/word_choice_de-en/tok
for run in runs/word_choice_lstm_de-en/lstm_ce.s2 runs/word_choice_lstm_de-en/lstm_nce_bias.s2 runs/wc_more_de-en/lstm_nce_bias.s1; do
  read -r _ ckpt _ beta _ < $run/choice.txt; read -r _ block _ < $run/block.txt
  prior=(); [ "$beta" != 0 ] && prior=(-decode_prior $beta)
  for r in 2 1.5 1.3; do
    b=$(python translate.py -model $run/$ckpt -src $T/val.de -output /tmp/val.$r.en -tgt $T/val.en -tgt_lang en -threads 1 "${prior[@]}" -block_ngram_repeat $block -max_length_ratio $r | sed -n 's/^sacreBLEU (detokenized): \([0-9.]*\).*/\1/p')
    echo "$run ratio $r valid $b"
  done
done
