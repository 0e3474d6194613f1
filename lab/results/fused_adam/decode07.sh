#!/usr/bin/env bash
# the ce factor-0.7 runs' model_best on both tests, decoded as the recipe's step 4 decodes (beta 0, no blocking,
# -replace_unk with the lexicon), to set beside the factor-0.5 seed-1 runs' TEST.bleu.txt
cd /work/main
for t in test_2016_flickr test_2017_flickr; do
  python translate.py -model runs/s46/screens/bpe_ce_lr07_conv/model_best.pt -src runs/word_choice_de-en/bpe/$t.de \
    -output runs/s46/screens/bpe_ce_lr07_conv/$t.en -tgt runs/word_choice_de-en/tok/$t.en -tgt_lang en -threads 1 \
    -block_ngram_repeat 0 -remove_bpe -replace_unk -lookup_dict runs/word_choice_de-en/lexicon.txt \
    > runs/s46/screens/bpe_ce_lr07_conv/$t.bleu.txt
  python translate.py -model runs/s46/screens/ce_lr07_conv/model_best.pt -src runs/word_choice_fr-en/tok/$t.fr \
    -output runs/s46/screens/ce_lr07_conv/$t.en -tgt runs/word_choice_fr-en/tok/$t.en -tgt_lang en -threads 1 \
    -block_ngram_repeat 0 -replace_unk -lookup_dict runs/word_choice_fr-en/lexicon.txt \
    > runs/s46/screens/ce_lr07_conv/$t.bleu.txt
done
