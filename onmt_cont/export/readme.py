"""The README.md onmt_cont_convert writes into an export folder: how to decode it with the ``ctranslate2`` package
alone, spelled out for this model's own text record (issue 79), and the subword models beside model.bin under
the names CTranslate2 users know (``source.spm``/``target.spm`` as in OPUS-MT's folders, ``bpe.codes``)."""

from onmt_cont.translate.search import MAX_LENGTH_RATIO, MAX_OUTPUT_LENGTH

SUBWORD_FILES = {"src_spm": "source.spm", "tgt_spm": "target.spm", "src_bpe": "bpe.codes"}


def subword_files(text):
    """The raw-text record's embedded subword models -> {file name: bytes} to write beside model.bin."""
    files = {}
    for key, name in SUBWORD_FILES.items():
        entry = (text or {}).get(key)
        if entry:
            files[name] = entry["model"] if key != "src_bpe" else entry["codes"].encode("utf-8")
    return files


def readme(record, positions):
    """The README's text for an export whose onmt_cont.json is ``record`` (``text`` decoded from JSON)."""
    text, lower = record.get("text"), record.get("lower")
    kind = "continuous-output" if record.get("continuous") else "softmax"
    limit = min(MAX_OUTPUT_LENGTH, positions - 1)
    steps = []
    if text:
        steps.append(
            f"Moses-tokenize it as `{text['src_lang']}`, without escaping (the `mosestokenizer` package: "
            f'`MosesTokenizer("{text["src_lang"]}", no_escape=True)(line)`; or Moses\'s '
            f"`tokenizer.perl -l {text['src_lang']} -no-escape`)"
        )
        if text.get("lower", True):
            steps.append("lowercase the tokens")
    else:
        steps.append(
            "tokenize it as the model's training data was (its checkpoint records no raw-text "
            "preprocessing: it reads tokens)"
        )
        if lower:
            steps.append("lowercase the tokens (the model was trained on lowercased text)")
    if text and text.get("src_spm"):
        steps.append(
            "cut the tokenized line into pieces with `source.spm` (`sentencepiece`: "
            '`SentencePieceProcessor(model_file="source.spm").encode(line, out_type=str)`)'
        )
    if text and text.get("src_bpe"):
        steps.append(
            "cut it into pieces with `bpe.codes` (`subword-nmt apply-bpe -c bpe.codes`, pieces joined by `@@ `)"
        )
    back = []
    if text and text.get("tgt_spm"):
        back.append(
            'join the pieces with `target.spm` (`SentencePieceProcessor(model_file="target.spm").decode_pieces(words)`)'
        )
    if text and text.get("tgt_lang"):
        back.append(
            f'Moses-detokenize as `{text["tgt_lang"]}` (`MosesDetokenizer("{text["tgt_lang"]}")(words)`), '
            "then upper-case the first letter unless the line starts with a `<...>` token"
        )
    else:
        back.append("join the words with spaces: the output is tokens, as the training targets were")
    numbered = "\n".join(f"   {i}. {s}" for i, s in enumerate(steps, 1))
    finish = "\n".join(f"   {i}. {s}" for i, s in enumerate(back, 1))
    return f"""# {record.get("onmt_cont_checkpoint", "the checkpoint")}, exported for CTranslate2

A {kind} Transformer written by `onmt_cont_convert` ({record.get("quantization", "float32")} weights).
With onmt_cont installed, `onmt_cont_translate -model THIS_FOLDER -src FILE` and `onmt_cont.load("THIS_FOLDER")`
read this folder as it is and apply every step below themselves. With the `ctranslate2` package alone:

1. Each source line to tokens, as the model was trained:
{numbered}
2. Translate a batch of token lists:

       import ctranslate2

       translator = ctranslate2.Translator("THIS_FOLDER", device="cpu")
       limits = [min(int({MAX_LENGTH_RATIO:g} * len(tokens)) + 10, {limit}) for tokens in batch]
       results = translator.translate_batch(batch, beam_size=5, no_repeat_ngram_size=3, max_input_length=0,
                                            max_decoding_length=max(limits))
       outputs = [result.hypotheses[0][:n] for result, n in zip(results, limits)]

   The limits are onmt_cont's ({MAX_LENGTH_RATIO:g} × the source's tokens + 10, at most {limit} words): without them
   a search that runs away stops at CTranslate2's default of 256, not where onmt_cont stops.
   Sentences longer than {positions} tokens are past the model's positions. Greedy search (`beam_size=1`) gives
   onmt_cont's output word for word; under beam search CTranslate2 divides a hypothesis's score by its length with
   `</s>` and onmt_cont without it, so the two can rank a few hypotheses differently.
3. The output tokens to text:
{finish}

Files: `model.bin`, `config.json` and the vocabularies are CTranslate2's; `onmt_cont.json` is onmt_cont's record
(the vocabularies' counts, the raw-text preprocessing, the options fixed at conversion and every file's sha256,
which onmt_cont checks when it loads the folder).{
        " The subword models sit beside them: "
        + ", ".join(f"`{n}`" for k, n in SUBWORD_FILES.items() if text and text.get(k))
        + "."
        if text and any(text.get(k) for k in SUBWORD_FILES)
        else ""
    }
"""
