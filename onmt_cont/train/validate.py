"""Validation BLEU: greedy decoding of the validation shard with translate.py's Translator."""

import torch

from onmt_cont.constants import UNK
from onmt_cont.evaluate import tokenized_bleu
from onmt_cont.train.log import logger
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.translator import Translator
from onmt_cont.translate.unk import remove_bpe

# the validation numbers -tensorboard writes (those a run has: cosine for continuous models, ppl for softmax)
VALID_SCALARS = ("loss", "cosine", "accuracy", "ppl", "bleu", "unk_share")


class ValidBleu:
    """BLEU of greedy decoding of the validation shard, with translate.py's Translator (no
    -replace_unk: model selection sees the model's own words). References are the shard's target
    text; shards from an older preprocess.py hold only ids, so the references' unknown words are
    then written as a token no output can match (a pessimistic but consistent score). With
    ``join_bpe`` (-valid_remove_bpe) the subword-nmt pieces of the output and of the references are
    joined first, so the score is over words, as translate.py -remove_bpe scores a test set."""

    def __init__(self, examples, tgt_text, src_vocab, tgt_vocab, batch_size, join_bpe=False):
        self.src_lines = [" ".join(src_vocab.decode(src.tolist())) for src, _ in examples]
        if tgt_text is None:
            logger.warning(
                "the validation shard has no target text (made by an older preprocess.py): BLEU "
                "references have <unk> where the vocabulary lacks a word; rerun preprocess.py to fix"
            )
            tgt_text = [
                " ".join(tok if tok != UNK else "<unk-ref>" for tok in tgt_vocab.decode(tgt.tolist()))
                for _, tgt in examples
            ]
        self.join_bpe = join_bpe
        self.refs = [remove_bpe(line) for line in tgt_text] if join_bpe else tgt_text
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.batch_size = batch_size

    def __call__(self, model, device):
        greedy = DecodingConfig(beam_size=1, block_ngram_repeat=0)
        translator = Translator(model, self.src_vocab, self.tgt_vocab, greedy, device=device)
        with torch.no_grad():
            hyps = translator.translate_lines(self.src_lines, self.batch_size)
        if self.join_bpe:
            hyps = [remove_bpe(line) for line in hyps]
        return {
            "bleu": tokenized_bleu(hyps, self.refs)[0],
            "unk_share": translator.unk_out / max(translator.words_out, 1),
        }
