"""preprocess.py: vocabularies and data shards from tokenized parallel text.

Reads the training corpus twice, streaming: once to count words for the vocabularies
(and to find bad input before anything is written), once to write shards of at most
``-shard_size`` examples. Nothing from a failed run is left behind.
"""

import contextlib
import os
import time

from onmt_cont import opts
from onmt_cont.config import check_ranges
from onmt_cont.constants import UNK_ID
from onmt_cont.inputters.corpus import (
    check_parallel,
    data_files,
    manifest_path,
    save_shard,
    vocab_fingerprint,
    write_manifest,
)
from onmt_cont.inputters.options import REQUIRED, DataConfig, add_data_options
from onmt_cont.inputters.preprocessing import (
    count_corpus,
    kept_ids,
    remove_dead_work_folders,
    remove_stale_shards,
    write_train_shards,
)
from onmt_cont.inputters.vocab import Vocab, build_vocab, lowercase_only, read_vocab_text, save_vocabs
from onmt_cont.text.record import text_record
from onmt_cont.text.subwords import check_cut_with, read_spm
from onmt_cont.utils.errors import UserError, cli_main
from onmt_cont.utils.locks import prefix_lock
from onmt_cont.utils.overwrite import refuse_output_over_inputs
from onmt_cont.utils.progress import summary


def build_parser():
    p = opts.new_parser("Build vocabularies and training/validation shards from tokenized parallel text.")
    add_data_options(p)  # a flag per DataConfig field (inputters/options.py)
    return p


def _coverage(counts, vocab):
    total = sum(counts.values())
    covered = sum(c for tok, c in counts.items() if vocab.index(tok) != UNK_ID)
    return covered / total if total else 0.0


def _make_folders(folder):
    """mkdir -p ``folder`` -> the folders made, outermost first (a UserError if one cannot be made)."""
    missing = []
    while not os.path.exists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UserError(f"-save_data: cannot make the folder {path} ({exc.strerror or exc})") from None
    return list(reversed(missing))


@contextlib.contextmanager
def _removed_on_failure(folders):
    """A failed run leaves no folder it made (those still empty, innermost first)."""
    try:
        yield
    except BaseException:
        for path in reversed(folders):
            try:
                os.rmdir(path)
            except OSError:
                break
        raise


@cli_main
def main(argv=None):
    opt = opts.parse(build_parser(), argv, required=REQUIRED)
    refuse_output_over_inputs(
        {"-save_data": data_files(opt.save_data)},
        {
            "-train_src": opt.train_src,
            "-train_tgt": opt.train_tgt,
            "-valid_src": opt.valid_src,
            "-valid_tgt": opt.valid_tgt,
            "-tgt_emb": opt.tgt_emb,
            "-src_vocab": opt.src_vocab,
            "-tgt_vocab": opt.tgt_vocab,
            "-src_bpe_codes": opt.src_bpe_codes,
            "-src_spm": opt.src_spm,
            "-tgt_spm": opt.tgt_spm,
            "-config": opt.config,
        },
    )
    check_ranges(vars(opt), DataConfig)  # -shard_size, the sizes and lengths: the ranges on the fields
    if opt.tgt_emb and opt.tgt_vocab:  # the reused vocabulary would silently win
        raise UserError("give -tgt_vocab or -tgt_emb, not both: a reused vocabulary is taken as it is")
    if opt.save_data.endswith(("/", os.sep)) or os.path.isdir(opt.save_data):  # would write hidden .train.0.pt
        raise UserError(
            f"-save_data {opt.save_data} is a folder: -save_data takes a prefix, such as "
            f"{os.path.join(opt.save_data, 'data')} (files PREFIX.vocab.pt, PREFIX.train.0.pt, ...)"
        )
    out_dir = os.path.dirname(os.path.abspath(opt.save_data))
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"-save_data {opt.save_data}: {out_dir} is a file, not a folder")
    start = time.time()
    # bad codes or models: refused before any work
    text = text_record(opt.src_lang, opt.tgt_lang, opt.src_bpe_codes, src_spm=opt.src_spm, tgt_spm=opt.tgt_spm)
    for flag, model, corpus in (("-src_spm", opt.src_spm, opt.train_src), ("-tgt_spm", opt.tgt_spm, opt.train_tgt)):
        if model and text is not None:  # the model recorded must be the one the data was cut with (issue 77.14)
            check_cut_with(read_spm(model, flag), corpus, flag, opt.lower)
    n_train = check_parallel(opt.train_src, opt.train_tgt)
    n_valid = check_parallel(opt.valid_src, opt.valid_tgt)

    # Everything that can fail on bad input happens before the first file is written.
    src_counts, tgt_counts, stats = count_corpus(opt.train_src, opt.train_tgt, opt, n_train)
    _, _, vstats = count_corpus(opt.valid_src, opt.valid_tgt, opt, n_valid)
    # an empty validation set would score every checkpoint 0.0 and make the first one "best"
    for split, (src, tgt), st in (
        ("training", (opt.train_src, opt.train_tgt), stats),
        ("validation", (opt.valid_src, opt.valid_tgt), vstats),
    ):
        if st["kept"] == 0:
            raise UserError(
                f"no {split} pair of {src} / {tgt} survives filtering ({st['read']} read: {st['empty']} with an "
                f"empty side, {st['too_long']} longer than -src_seq_length {opt.src_seq_length} / "
                f"-tgt_seq_length {opt.tgt_seq_length})"
            )
    allowed = None
    if opt.share_vocab:
        if opt.src_vocab or opt.tgt_vocab or opt.tgt_emb:
            raise UserError(
                "-share_vocab builds one vocabulary from both sides' counts: it does not go with "
                "-src_vocab, -tgt_vocab or -tgt_emb"
            )
        joint = build_vocab(src_counts + tgt_counts, opt.tgt_vocab_size, opt.tgt_words_min_frequency)
        src_vocab, tgt_vocab = Vocab(joint.itos), Vocab(joint.itos)  # each side's counts are set below
    else:
        if opt.src_vocab:
            src_vocab = read_vocab_text(opt.src_vocab)
        else:
            src_vocab = build_vocab(src_counts, opt.src_vocab_size, opt.src_words_min_frequency)
        if opt.tgt_emb:
            from onmt_cont.inputters.embeddings import read_embedding_words

            allowed = read_embedding_words(opt.tgt_emb)
        if opt.tgt_vocab:
            tgt_vocab = read_vocab_text(opt.tgt_vocab)
        else:
            tgt_vocab = build_vocab(tgt_counts, opt.tgt_vocab_size, opt.tgt_words_min_frequency, allowed)
    for side, vocab, size, freq in (
        ("src", src_vocab, opt.src_vocab_size, opt.src_words_min_frequency),
        ("tgt", tgt_vocab, opt.tgt_vocab_size, opt.tgt_words_min_frequency),
    ):
        if len(vocab) <= 4:  # every token would be <unk>
            if getattr(opt, f"{side}_vocab"):
                why = f"-{side}_vocab {getattr(opt, f'{side}_vocab')} lists no word"
            else:
                why = f"check -{side}_vocab_size {size}, -{side}_words_min_frequency {freq}" + (
                    "" if side == "src" or allowed is None else f", -tgt_emb {opt.tgt_emb} (its words)"
                )
            raise UserError(
                f"the {'source' if side == 'src' else 'target'} vocabulary has no word, only the 4 "
                f"specials, so every token would be <unk>: {why}"
            )
    src_vocab.total_tokens = sum(src_counts.values())
    tgt_vocab.total_tokens = sum(tgt_counts.values())
    src_vocab.sentences = tgt_vocab.sentences = stats["kept"]
    # counts of reused vocabularies describe this corpus, so coverage reports stay meaningful
    src_vocab.counts = [src_counts.get(t, 0) if i >= 4 else 0 for i, t in enumerate(src_vocab.itos)]
    tgt_vocab.counts = [tgt_counts.get(t, 0) if i >= 4 else 0 for i, t in enumerate(tgt_vocab.itos)]

    made = _make_folders(out_dir)  # a missing -save_data folder is made (mkdir -p), now that the input is good
    with prefix_lock(opt.save_data, "-save_data"), _removed_on_failure(made):
        # an older run's PREFIX.shards.json stays until this run's replaces it: if this run is killed before,
        # the shards it rewrote no longer match that list, and train.py refuses the mix
        if text is not None:  # lowercased here, or before (no word of either side has an upper-case letter)
            text["lower"] = bool(opt.lower) or lowercase_only(src_vocab, tgt_vocab)
        remove_dead_work_folders(out_dir)
        written = []  # two runs on one prefix would replace each other's files: the lock refuses the second
        try:
            n_shards = write_train_shards(opt, src_vocab, tgt_vocab, stats["kept"], written, n_lines=n_train)
            written.append(f"{opt.save_data}.valid.0.pt")
            valid_text = []
            valid = list(kept_ids(opt.valid_src, opt.valid_tgt, opt, src_vocab, tgt_vocab, n_valid, valid_text))
            save_shard(written[-1], valid, valid_text, vocab_fingerprint(src_vocab, tgt_vocab))
            written += [f"{opt.save_data}.vocab.{x}" for x in ("src.txt", "tgt.txt", "pt")]
            save_vocabs(opt.save_data, src_vocab, tgt_vocab, opt.lower, text)
            written.append(manifest_path(opt.save_data))
            write_manifest(opt.save_data, n_shards)  # last: it commits this run's shards as a set
        except BaseException:
            for path in written:
                if os.path.exists(path):
                    os.remove(path)
            raise
        remove_stale_shards(opt.save_data, n_shards)

    print(
        f"train: {stats['read']} pairs read, {stats['kept']} kept, dropped: {stats['empty']} with an empty side, "
        f"{stats['too_long']} too long (> {opt.src_seq_length} source or > {opt.tgt_seq_length} target tokens)"
    )
    print(
        f"valid: {vstats['read']} pairs read, {vstats['kept']} kept, dropped: {vstats['empty']} with an empty side, "
        f"{vstats['too_long']} too long"
    )
    note = f" (restricted to the {len(allowed)} words of {opt.tgt_emb})" if allowed is not None else ""
    print(f"vocabulary: source {len(src_vocab)} types, target {len(tgt_vocab)} types{note} (4 specials each)")
    print(
        f"token coverage of the training corpus: source {_coverage(src_counts, src_vocab):.2%}, "
        f"target {_coverage(tgt_counts, tgt_vocab):.2%}"
    )
    shards = f"{opt.save_data}.train.0.pt" if n_shards == 1 else f"{opt.save_data}.train.{{0..{n_shards - 1}}}.pt"
    vocab = f"{opt.save_data}.vocab.{{pt,src.txt,tgt.txt}}"
    summary(
        f"preprocessed {stats['read'] + vstats['read']:,} pairs",
        time.time() - start,
        [
            f"{shards} ({stats['kept']:,} pairs in {n_shards} shard(s) of at most {opt.shard_size:,})",
            f"{opt.save_data}.valid.0.pt ({vstats['kept']:,} pairs)",
            f"{vocab} ({len(src_vocab):,} source, {len(tgt_vocab):,} target types)",
        ],
    )


if __name__ == "__main__":
    main()
