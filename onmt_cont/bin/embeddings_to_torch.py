"""Turn pretrained word vectors into embedding tables aligned with a vocabulary.

    python embeddings_to_torch.py -emb_file_dec en.ft300.vec.gz -dict_file data/demo.vocab.pt \\
        -output_file data/demo.emb -normalize

writes ``data/demo.emb.dec.pt``, a float32 tensor ``[len(tgt vocab), dim]`` whose row i is the
vector of target token i, and ``data/demo.emb.dec.missing.txt``, the vocabulary words that
had no vector (``.enc.*`` likewise for the source with ``-emb_file_enc``).
"""

import argparse
import os
import time
from contextlib import ExitStack

import numpy as np
import torch

from onmt_cont.config import check_ranges
from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID
from onmt_cont.inputters.embeddings import read_embeddings
from onmt_cont.inputters.table_options import TableConfig, add_table_options
from onmt_cont.inputters.tables import TABLE_HELP, check_table_args, empty_table, softmax_table, transform_target
from onmt_cont.inputters.vocab import load_vocabs
from onmt_cont.utils.atomic import atomic_path, torch_save_to
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.overwrite import Prefix, refuse_output_over_inputs
from onmt_cont.utils.progress import summary

ROWS_HELP = """\
what each row of the table gets:
  <blank> (padding, row 0)  zeros
  <unk> (row 1)             the average of the vectors of ALL words of the file that are not
                            in the vocabulary; with -normalize each of them is made unit
                            length first, then averaged, then the average is made unit length
  <s>, </s> (rows 2, 3)     their vector in the file if it has one (fastText files have </s>);
                            otherwise a random vector, so they differ from every word
  a vocabulary word         its vector in the file; if the file has none, a random vector
                            (listed in OUT.dec.missing.txt / OUT.enc.missing.txt)

Random vectors come from -seed, so reruns give identical tables: a Gaussian direction scaled
to the root-mean-square length of the file's vectors (unit length with -normalize).
A first line of two integers ('COUNT DIM') is read as a word2vec/fastText header whatever
-type says. Malformed lines (wrong number of values, a value that is nan, inf or beyond float32,
a word that is not UTF-8) are skipped and reported; duplicate words keep their first vector.
"""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="embeddings_to_torch.py",
        description="Align pretrained word vectors (GloVe, word2vec or fastText text files,\n"
        "plain or .gz) with the vocabulary of preprocess.py; save them as torch tensors.",
        epilog=ROWS_HELP + TABLE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_table_options(parser)  # a flag per TableConfig field (inputters/table_options.py)
    return parser


def _unit(rows):
    """Rows scaled to unit length in place; zero rows stay zero. Lengths are summed in float64:
    in float32 the squares of values beyond 1.8e19 would overflow to inf and zero the row."""
    norms = np.sqrt(np.einsum("...i,...i->...", rows, rows, dtype=np.float64))[..., None]
    np.divide(rows, norms, out=rows, where=norms > 0)
    return rows


def _pct(part, whole):
    return f"{100.0 * part / whole:.2f}%" if whole else "n/a"


def make_table(emb_path, vocab, side, opt):
    """Read ``emb_path`` and build the ``[len(vocab), dim]`` table for one side.

    Returns ``(table float32, missing words, report lines, number of vectors read)``."""
    wanted = {tok: i for i, tok in enumerate(vocab.itos) if i not in (PAD_ID, UNK_ID)}
    emb = read_embeddings(emb_path, wanted, len(vocab), opt.normalize, opt.chunk_bytes)
    report = [f"{side} embeddings: {emb_path}"]
    report += _file_report(emb, opt.type)

    n_words = len(vocab) - len(SPECIALS)
    word_found = emb.found[len(SPECIALS) :]
    if n_words == 0:
        raise UserError(f"{opt.dict_file}: the {side} vocabulary has no words besides the specials")
    if not word_found.any():
        raise UserError(
            f"{emb_path}: none of the {n_words} {side} vocabulary words has a vector in this file "
            "(wrong language, or different tokenization or lowercasing?)"
        )

    table = emb.vectors
    if opt.normalize:
        _unit(table)
    rng = np.random.default_rng(opt.seed)
    random_ids = [i for i in range(BOS_ID, len(vocab)) if not emb.found[i]]
    scale = 1.0 if opt.normalize or emb.rms_norm == 0 else emb.rms_norm
    table[random_ids] = _unit(rng.standard_normal((len(random_ids), emb.dim))) * scale
    table[PAD_ID] = 0.0
    if emb.other_count:
        unk = emb.other_sum / emb.other_count
        table[UNK_ID] = _unit(unk) if opt.normalize else unk
        unk_note = f"average of the {emb.other_count:,} file vectors not in the vocabulary"
    else:
        table[UNK_ID] = _unit(rng.standard_normal(emb.dim)) * scale
        unk_note = "random (every word of the file is in the vocabulary)"
    if opt.normalize:
        unk_note += ", each made unit length, average made unit length"

    counts = np.asarray(vocab.counts[len(SPECIALS) :], dtype=np.int64)
    covered_tokens = int(counts[word_found].sum())
    n_found = int(word_found.sum())
    missing = [tok for tok, ok in zip(vocab.itos[len(SPECIALS) :], word_found, strict=True) if not ok]
    specials = ", ".join(f"{SPECIALS[i]}: {'from the file' if emb.found[i] else 'random'}" for i in (BOS_ID, EOS_ID))
    report += [
        f"  {side} vocabulary: {n_words:,} words (+{len(SPECIALS)} specials)",
        f"  coverage: {n_found:,} of {n_words:,} word types ({_pct(n_found, n_words)}); "
        f"{covered_tokens:,} of {vocab.total_tokens:,} training tokens ({_pct(covered_tokens, vocab.total_tokens)})",
        f"  rows: {SPECIALS[PAD_ID]}: zeros; {SPECIALS[UNK_ID]}: {unk_note}; {specials}",
        f"  {len(missing):,} vocabulary words without a vector got random vectors "
        f"({'unit length' if opt.normalize else f'length {scale:.4g}, the RMS length of the file vectors'}, "
        f"seed {opt.seed})",
    ]
    return table, missing, report, emb.n_vectors


def _file_report(emb, file_type):
    rate = emb.n_vectors / emb.seconds if emb.seconds > 0 else float("inf")
    lines = [
        f"  read {emb.n_vectors:,} vectors of dimension {emb.dim} in {emb.seconds:.2f} s ({rate:,.0f} vectors/s)",
    ]
    if emb.header is not None:
        note = "" if file_type == "word2vec" else " (read as word2vec/fastText format)"
        lines.append(f"  header: {emb.header[0]:,} words, dimension {emb.header[1]}{note}")
        if emb.header[0] != emb.n_lines:
            lines.append(
                f"  note: the header says {emb.header[0]:,} words but the file has {emb.n_lines:,} vector lines"
            )
    elif file_type == "word2vec":
        lines.append("  note: no 'COUNT DIM' header line; line 1 was read as a vector")
    examples = ", ".join(f"line {n}: {reason}" for n, reason in emb.malformed_examples)
    lines.append(f"  malformed lines skipped: {emb.n_malformed:,}" + (f" (first: {examples})" if examples else ""))
    if emb.n_duplicates:
        dups = ", ".join(f"line {n}: {word!r}" for n, word in emb.duplicate_examples)
        lines.append(f"  duplicate words skipped (first vector kept): {emb.n_duplicates:,} (first: {dups})")
    return lines


@cli_main
def main(argv=None):
    opt = build_parser().parse_args(argv)
    refuse_output_over_inputs(
        {"-output_file": Prefix(opt.output_file, r"\.(enc|dec)\.(pt|missing\.txt)")},
        {
            "-emb_file_dec": opt.emb_file_dec,
            "-emb_file_enc": opt.emb_file_enc,
            "-dict_file": opt.dict_file,
            "-from_model": opt.from_model,
        },
    )
    check_ranges(vars(opt), TableConfig)  # -alpha, -dim, -center_pcs: the ranges on the fields
    check_table_args(opt)
    out_dir = os.path.dirname(os.path.abspath(opt.output_file))
    if not os.path.isdir(out_dir):
        raise UserError(f"{opt.output_file}: output folder {out_dir} does not exist")
    try:
        src_vocab, tgt_vocab, _ = load_vocabs(opt.dict_file)
    except UserError:
        raise
    except Exception as exc:  # torch.load or Vocab on something that is not a vocab file
        raise UserError(f"{opt.dict_file}: not a vocabulary file written by preprocess.py ({exc})") from None

    # Everything is read and checked before anything is written.
    start = time.perf_counter()
    jobs = [("dec", opt.emb_file_dec, tgt_vocab, "target")]
    if opt.emb_file_enc:
        jobs.append(("enc", opt.emb_file_enc, src_vocab, "source"))
    results, n_read = [], 0
    for suffix, path, vocab, side in jobs:
        if suffix == "dec" and opt.init == "softmax":  # a trained softmax model's output rows
            table, missing, report = softmax_table(opt.from_model, vocab, opt)
            n_vectors = 0
        elif path is None:  # a random target table without a vector file
            table, missing, report = empty_table(vocab, opt.dim)
            n_vectors = 0
        else:
            table, missing, report, n_vectors = make_table(path, vocab, side, opt)
        if suffix == "dec":
            if opt.dim is not None and opt.dim != table.shape[1]:
                raise UserError(f"{path}: the vectors have dimension {table.shape[1]}, but -dim says {opt.dim}")
            table, lines = transform_target(table, opt)
            report += lines
        results.append((suffix, table, missing, report))
        n_read += n_vectors

    written = []
    # the tables and their missing-word lists belong together: each is written to a temporary file, and
    # all are renamed into place only once every one is written (a full disk leaves the earlier files as
    # they were, none of this run's)
    with ExitStack() as outputs:
        for suffix, table, missing, _ in results:
            pt_path = f"{opt.output_file}.{suffix}.pt"
            missing_path = f"{opt.output_file}.{suffix}.missing.txt"
            torch_save_to(
                torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32)),
                outputs.enter_context(atomic_path(pt_path)),
            )
            written.append(f"{pt_path} [{table.shape[0]}, {table.shape[1]}] float32")
            if missing is not None:  # None: no vector file, so no word can be missing from it
                with open(outputs.enter_context(atomic_path(missing_path)), "w", encoding="utf-8") as f:
                    f.write("".join(tok + "\n" for tok in missing))
                written.append(f"{missing_path} ({len(missing):,} words without a vector)")
    for *_, report in results:
        print("\n".join(report))
    files = " and ".join(path for _, path, _, _ in jobs if path) or "no vector file"
    summary(f"read {n_read:,} vectors from {files}", time.perf_counter() - start, written)


if __name__ == "__main__":
    main()
