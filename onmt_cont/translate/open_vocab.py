"""Open-vocabulary decoding (``translate.py -tgt_emb_extend FILE``): a continuous model decodes
over every word of a larger embedding table, not only its training target vocabulary.

The extended output vocabulary is the training target vocabulary (same ids, same rows of the
training table, so in-vocabulary behaviour is unchanged, ``</s>`` included) followed by every
word of FILE that is not in it, each row made unit length like the training table.

What the decoder consumes after producing a new word:

- ``-tie_emb`` models read the frozen pretrained table (through their trained projection), so
  the new word's own vector feeds the next step;
- untied models have trained input embeddings for the training vocabulary only: a new word is
  fed to the next step as ``<unk>`` (its output is still the new word).
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from onmt_cont.constants import SPECIALS
from onmt_cont.inputters.embeddings import read_embedding_words, read_embeddings
from onmt_cont.inputters.vocab import Vocab, load_vocabs, read_vocab_text
from onmt_cont.models.generators import ContinuousGenerator, normalize_table
from onmt_cont.models.model import NMTModel
from onmt_cont.utils.errors import UserError
from onmt_cont.utils.loading import load_checkpoint_data


def read_extension(path: str, vocab_path: str | None = None) -> tuple[list[str], Tensor]:
    """The words and vectors of an extension table -> (list of words, FloatTensor [n, dim]).

    ``path``: a ``.vec``/``.txt`` (optionally ``.gz``) vector file, or a ``.pt`` tensor written by
    embeddings_to_torch.py, whose rows follow the target vocabulary of ``vocab_path``
    (``PREFIX.vocab.pt`` or ``PREFIX.vocab.tgt.txt``). Specials are left out."""
    if path.endswith(".pt"):
        if vocab_path is None:
            raise UserError(
                f"-tgt_emb_extend {path}: a .pt table needs -tgt_emb_extend_vocab, the vocabulary "
                "its rows follow (PREFIX.vocab.pt or PREFIX.vocab.tgt.txt)"
            )
        words = _vocab_words(vocab_path)
        table = load_checkpoint_data(path)
        if not torch.is_tensor(table) or table.dim() != 2 or table.size(0) != len(words):
            shape = list(table.shape) if torch.is_tensor(table) else type(table).__name__
            raise UserError(
                f"-tgt_emb_extend {path}: expected a [{len(words)}, dim] tensor (one row per word of "
                f"{vocab_path}), got {shape}"
            )
        if not table.is_floating_point() or not torch.isfinite(table).all():  # .vec files skip such lines
            raise UserError(f"-tgt_emb_extend {path}: expected finite float vectors, found NaN, inf or integers")
        keep = [i for i, w in enumerate(words) if w not in SPECIALS]
        return [words[i] for i in keep], table[keep].float()
    words = sorted(w for w in read_embedding_words(path) if w not in SPECIALS)
    emb = read_embeddings(path, {w: i for i, w in enumerate(words)})
    found = emb.found.nonzero()[0]  # a word on a malformed line has no vector
    return [words[i] for i in found], torch.from_numpy(emb.vectors[found])


def _vocab_words(path: str) -> list[str]:
    if path.endswith(".pt"):
        return load_vocabs(path)[1].itos
    return read_vocab_text(path).itos


def extend_model(model: NMTModel, tgt_vocab: Vocab, words: Sequence[str], vectors: Tensor) -> tuple[Vocab, int]:
    """Append the words of ``words`` [n] / ``vectors`` [n, m] that ``tgt_vocab`` lacks to the
    model's output table (and, tied, its decoder input table). Returns (extended Vocab, number
    of words added)."""
    gen = model.generator
    if not isinstance(gen, ContinuousGenerator):
        raise UserError(
            "-tgt_emb_extend needs a continuous-output model: a softmax has one trained row per "
            "training word and cannot score others"
        )
    if vectors.size(1) != gen.table.size(1):
        raise UserError(
            f"-tgt_emb_extend: vectors of dimension {vectors.size(1)}, but the model's target "
            f"table has dimension {gen.table.size(1)}"
        )
    if getattr(gen, "bias", None) is not None:
        raise UserError(
            "-tgt_emb_extend: this model learned a bias per training word (-word_bias); the added words "
            "have none, so it cannot decode over them"
        )
    if gen.trains_table:
        raise UserError(
            "-tgt_emb_extend: this model trained its target table (-train_table); the added words' "
            "pretrained vectors were never trained beside those rows, so it cannot decode over them"
        )
    known = set(tgt_vocab.itos)
    new = [i for i, w in enumerate(words) if w not in known]
    extra = normalize_table(vectors[new]).to(gen.table.device)
    table = torch.cat([gen.table, extra], 0)
    gen.set_table(table)
    model.decoder.embeddings.extend(extra)
    return Vocab(list(tgt_vocab.itos) + [words[i] for i in new]), len(new)
