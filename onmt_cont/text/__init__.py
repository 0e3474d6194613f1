"""Raw text to the model's tokens and back: Moses tokenization, lowercasing, source subword pieces,
detokenization. One module per part: :mod:`.pipeline` (the whole way, both directions), :mod:`.moses`
(the Moses Perl processes), :mod:`.subwords` (subword-nmt codes, SentencePiece models) and :mod:`.record`
(what a checkpoint records of the raw text).

The shared fastText vectors, the shipped sample and every recipe use Moses tokenization with no
escaping (aggressive hyphen splitting), then lowercase. A model trained on such text reads raw input
through :class:`~onmt_cont.text.pipeline.TextPipeline` (``translate.py -src_lang fr``,
:func:`onmt_cont.api.load`) and its output is turned back into running text: Moses detokenization, and
the first letter of each sentence in upper case (the model's words are lowercase).

    with TextPipeline(src_lang="fr", tgt_lang="en", bpe_codes="codes.fr") as text:
        tokens = text.encode("Un chien court dans l'herbe.")   # "un chien court dans l' herbe ." in pieces
        text.decode("a dog runs through the grass .")          # "A dog runs through the grass."
"""
