"""One decoding configuration: translate.py's decoding flags, typed, with their help and defaults.

translate.py, :func:`onmt_cont.load` (and so the server) fill a :class:`DecodingConfig` from their flags or
keywords and build their translator from it (translate/build.py), so that every entry point checks, defaults
and sets up decoding the same way, whichever engine (the checkpoint's torch search or a CTranslate2 export)
decodes. translate.py's -ann flags are an :class:`AnnConfig`, which gives the configuration's ``ann``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onmt_cont.config import option
from onmt_cont.models.transformer import parse_alignment_layer
from onmt_cont.translate.beam import COVERAGE_PENALTIES
from onmt_cont.translate.checks import (
    DEFAULT_BEAM,
    DEFAULT_BLOCK,
    LENGTH_PENALTIES,
    check_decoding_options,
    sampling_on,
    search_defaults,
)
from onmt_cont.translate.search import MAX_OUTPUT_LENGTH
from onmt_cont.translate.strategies import AUTO, STRATEGIES
from onmt_cont.utils.errors import UserError

# translate.py's flags that the configuration (and the Python API) names otherwise
FLAG_NAMES = {"ban_unk_token": "ban_unk", "lookup_dict": "lexicon"}


@dataclass
class DecodingConfig:
    """What a translator decodes with: translate.py's decoding flags under the Python API's names, each field
    with its flag's help (:func:`onmt_cont.config.add_flags` builds translate.py's flags from them). None where a
    default depends on other options: :meth:`resolved` fills them."""

    search: str = option(
        AUTO,
        help=lambda: (
            "the decoding strategy: auto (the default: sampling under -random_sampling_topk/-topp, "
            "beam search with -beam_size above 1, else greedy); "
            + "; ".join(f"{s.name}: {s.summary}" for s in STRATEGIES.values())
            + " (onmt_cont.translate.strategies)"
        ),
    )
    beam_size: int | None = option(
        None,
        type=int,  # None: DEFAULT_BEAM, or n_best's; under sampling 1
        help=f"default {DEFAULT_BEAM} (1 with random sampling); "
        "1: greedy. Beam search sums log-probabilities: a "
        "softmax model's, or for continuous models a softmax over the vocabulary of the generator's word "
        "scores (criterion, word bias, prior, offsets) at the model's own temperature times "
        "-beam_temperature (docs/usage.md, section 6)",
    )
    block_ngram_repeat: int | None = option(
        None,
        type=int,  # None: DEFAULT_BLOCK
        help="never put out a word that would repeat an "
        "n-gram of this size already in the sentence's output (OpenNMT-py's flag; greedy and beam, every "
        "model; over the model's tokens, so BPE pieces with -remove_bpe). 1: no word twice; 0: "
        f"off; default {DEFAULT_BLOCK}. A greedy sentence whose every candidate is blocked ends there",
    )
    max_length: int | None = option(
        None,
        type=int,
        help=f"longest output in words, at most {MAX_OUTPUT_LENGTH}; default -max_length_ratio × source "
        f"length + 10, capped at {MAX_OUTPUT_LENGTH}",
    )
    max_length_ratio: float = option(2.0, type=float, help="see -max_length")
    min_length: int = option(
        0,
        type=int,
        help="no output shorter than this many words unless its length "
        "limit comes first (OpenNMT-py's -min_length; 0: off)",
    )
    length_penalty: str = option(
        "avg",
        choices=LENGTH_PENALTIES,
        help="beam search: rank finished hypotheses by score / length (avg) or GNMT's penalty (wu). "
        "Continuous models: per-step scores (cosines, vMF log-densities) are mostly positive, so "
        "'none' favours long outputs; 'avg' ranks by the mean per-step score",
    )
    alpha: float = option(0.0, type=float, help="exponent of -length_penalty wu")
    coverage_penalty: str = option(
        "none",
        choices=COVERAGE_PENALTIES,
        help="beam search (OpenNMT-py's flag): rank finished hypotheses by score / length penalty minus "
        "-beta x a penalty on their attention's coverage c_j of each source word: wu (GNMT): "
        "-sum_j log min(c_j, 1), for source words left untranslated; summary: sum_j max(c_j, 1) - "
        "source length, for words translated twice. Over the output words' attention (OpenNMT-py also "
        "counts the </s> step's)",
    )
    beta: float = option(0.0, type=float, help="weight of -coverage_penalty (GNMT: 0.2)")
    ignore_when_blocking: Sequence[str] = option(
        (),
        nargs="+",
        metavar="WORD",
        help="target words that -block_ngram_repeat lets repeat: an n-gram holding one is never blocked "
        "(OpenNMT-py's flag; e.g. punctuation). The checkpoint engine only",
    )
    ban_unk: bool = option(
        False,
        flag="ban_unk_token",
        help="never produce <unk> (OpenNMT-py's flag). For "
        "continuous models whose training targets had no <unk> (preprocess.py -tgt_emb), its row, the "
        "mean of the out-of-vocabulary vectors, is a hub that uncertain predictions fall on",
    )
    replace_unk: bool = option(
        False,
        help="replace each <unk> through the attention: the "
        "most-attended source word, translated by -lookup_dict, or copied when it is not there",
    )
    lexicon: str | None = option(
        None,
        flag="lookup_dict",  # a build_lexicon.py file (-lookup_dict)
        help="bilingual lexicon: 'source_word target_word' per line (build_lexicon.py)",
    )
    alignment_layer: int | str | None = option(
        None,
        type=parse_alignment_layer,
        help="Transformer decoder: "
        "the attention -replace_unk reads: mean (default: the cross-attention of every layer and head, "
        "averaged) or one layer's, averaged over its heads (0-based, -1 the last); default: the "
        "checkpoint's",
    )
    n_best: int = option(
        1,
        type=int,
        help="write the N best hypotheses of each sentence, best first, "
        "N lines per input line (at most -beam_size; BLEU scores the first)",
    )
    with_score: bool = option(
        False,
        help="append a tab and the hypothesis's score to each "
        "output line: its log-probability under beam search's scores divided by the length penalty "
        "(greedy: beam 1, the same words)",
    )
    report_align: bool = option(
        False,
        help="append ' ||| ' and each output's word alignment "
        "to its line, OpenNMT-py's format: 'S-T' (0-based) for each output token T and the source token S "
        "its attention weighs most (the model's tokens, before -detokenize; with -alignment_layer for a "
        "Transformer). With -n_best or -with_score each hypothesis's line holds its own alignment, before "
        "the tab and score",
    )
    attn_debug: bool = option(
        False,
        help="print each sentence's attention on standard error "
        "(OpenNMT-py's flag): a row per output token, a column per source token, '*' at each row's "
        "largest weight",
    )
    random_sampling_topk: int = option(
        0,
        type=int,
        help="draw each word instead of the argmax "
        "(OpenNMT-py's name; back-translation): -1 from the whole distribution, K > 1 from the K most "
        "likely words; 0 or 1: off. A continuous model draws from its beam distribution "
        "(softmax(score / tau), -beam_temperature). -beam_size K: K draws of each sentence, the best by "
        "log-probability / length penalty put out (-n_best N: the N best); default one (-n_best's)",
    )
    random_sampling_topp: float = option(
        0.0,
        type=float,
        help="draw each word from the smallest set of "
        "most likely words whose probability reaches P (nucleus sampling), 0 < P < 1; 0: off",
    )
    random_sampling_temp: float = option(1.0, type=float, help="divide the scores by this before sampling")
    seed: int = option(
        0, type=int, help="random sampling's seed: the same seed, batches and device draw the same words"
    )
    decode_prior: float | None = option(
        None,
        type=float,  # None: 0, or a -freq_offsets file's β
        help="score each word by the nearest-neighbour score "
        "+ this beta x log p_train(w), its add-one smoothed frequency in the training targets (stored in "
        "checkpoints of this version): a frequency prior that nearest-neighbour search lacks. Pick beta on "
        "validation BLEU; negative values favour rarer words; 0: off (the default, or with -freq_offsets "
        "the beta the file was fitted under)",
    )
    decode_prior_cap: int = option(
        0,
        type=int,
        help="with -decode_prior: the prior is flat (0) for "
        "words seen at least this many times in training and log((c+1)/(cap+1)) for a word seen c < cap "
        "times, so it only penalises rare words instead of pushing every word towards the most frequent "
        "ones; at least 2; 0 (default): the plain prior",
    )
    csls: int = option(
        0,
        type=int,
        help="rank words by CSLS (Conneau et al. 2018): 2 cos(e^, e_w) - "
        "r(w), r(w) the mean cosine of e_w to its K nearest table words (a penalty for hubs), in the "
        "decoding criterion's units; K > 0 turns it on (the paper: 10)",
    )
    freq_offsets: str | None = option(
        None,  # a tools/calibrate_offsets.py file
        help="add to each word's score the offset of its bin of training counts (1, "
        "2-4, 5-9, 10-99, 100-999, 1000+) from this file, written by tools/calibrate_offsets.py, which "
        "fits them on validation so that every bin comes out as often as in the reference. They decode "
        "under the -decode_prior beta the file was fitted under (it says which; another is refused). "
        "Softmax models too: their log-probabilities plus the offsets",
    )
    beam_temperature: float = option(
        1.0,
        type=float,
        help="continuous models, -beam_size > 1: beam "
        "search scores each word by the log of a softmax of the word scores over the vocabulary, at the "
        "model's own temperature (nllvmf_nce 1: its contrastive distribution; infonce its -temperature) "
        "times this",
    )
    tgt_emb_extend: str | None = option(
        None,
        help="decode over every word of this table too (.vec/.vec.gz, or a .pt "
        "written by embeddings_to_torch.py with -tgt_emb_extend_vocab): the training target "
        "vocabulary keeps its rows, the other words are appended, unit length. Tied models feed a "
        "new word's vector to the next step, untied ones feed <unk>",
    )
    tgt_emb_extend_vocab: str | None = option(
        None, help="the vocabulary (PREFIX.vocab.pt or PREFIX.vocab.tgt.txt) whose rows a .pt -tgt_emb_extend follows"
    )
    # FaissIndex's arguments (kind, nlist, nprobe, hnsw_m, ef_search); None: exact search. translate.py's -ann
    # flags: AnnConfig
    ann: dict[str, Any] | None = None
    engine: str | None = option(
        None,
        choices=["torch", "ctranslate2"],  # None: read from the model
        help="what decodes: torch (a train.py checkpoint) or ctranslate2 (a directory onmt_cont_convert "
        "wrote); default: read from -model",
    )

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def resolved(self) -> DecodingConfig:
        """A copy with the search defaults filled in and the checks that need no model passed (UserError)."""
        sampling = sampling_on(self.random_sampling_topk, self.random_sampling_topp)
        check_search(self.search, sampling, self.beam_size)
        beam_size = 1 if self.search == "greedy" and self.beam_size is None else self.beam_size
        beam, block = search_defaults(beam_size, self.block_ngram_repeat, sampling, self.n_best)
        config = dataclasses.replace(self, beam_size=beam, block_ngram_repeat=block)
        check_decoding_options(
            beam,
            config.max_length,
            config.max_length_ratio,
            config.alpha,
            config.decode_prior or 0.0,
            config.decode_prior_cap,
            config.csls,
            block,
            ann=config.ann,
            length_penalty=config.length_penalty,
        )
        if config.lexicon and not config.replace_unk:
            raise UserError("-lookup_dict is only used with -replace_unk")
        if config.tgt_emb_extend_vocab and not config.tgt_emb_extend:
            raise UserError("-tgt_emb_extend_vocab is only used with -tgt_emb_extend")
        if config.freq_offsets and config.decode_prior_cap:
            raise UserError(
                "-freq_offsets: tools/calibrate_offsets.py fits them under the plain -decode_prior, not "
                "under -decode_prior_cap"
            )
        return config


@dataclass
class AnnConfig:
    """translate.py's approximate-search flags, which its options fold into one :attr:`DecodingConfig.ann` (the
    Python API's dict of FaissIndex's arguments) by :meth:`index`. Their ranges are checked with the API's, in
    check_decoding_options, and only under -ann."""

    ann: str | None = option(
        None,
        choices=["faiss"],
        help="approximate nearest-neighbour search (faiss-cpu) instead of exact search, for tables "
        "of 300K words and more; the index proposes beam_size+2 words, rescored exactly",
    )
    ann_index: str = option(
        "ivf",
        choices=["ivf", "hnsw"],
        help="IndexIVFFlat (k-means cells, built in seconds) or IndexHNSWFlat (minutes to build at "
        "300K words on one core); inner product on unit rows. See docs/open_vocabulary.md",
    )
    ann_nlist: int | None = option(
        None, type=int, help="ivf: number of cells (default 4·sqrt(words), faiss's guideline)"
    )
    ann_nprobe: int = option(64, type=int, help="ivf: cells searched per query")
    ann_hnsw_m: int = option(16, type=int, help="hnsw: links per node")
    ann_ef_search: int = option(64, type=int, help="hnsw: candidate list size when searching")

    def index(self) -> dict[str, Any] | None:
        """DecodingConfig.ann: FaissIndex's arguments under -ann faiss, else None (exact search)."""
        if not self.ann:
            return None
        return {
            "kind": self.ann_index,
            "nlist": self.ann_nlist,
            "nprobe": self.ann_nprobe,
            "hnsw_m": self.ann_hnsw_m,
            "ef_search": self.ann_ef_search,
        }


def check_search(name: str, sampling: bool, beam_size: int | None) -> None:
    """-search against the options that pick auto's strategy: an explicit name must not contradict them
    (UserError)."""
    if name != AUTO and name not in STRATEGIES:
        raise UserError(f"-search {name}: not a decoding strategy; choose auto, {', '.join(STRATEGIES)}")
    if name == "sample" and not sampling:
        raise UserError(
            "-search sample draws each word: give -random_sampling_topk K (or -1) or -random_sampling_topp P"
        )
    if name in ("greedy", "beam") and sampling:
        raise UserError(f"-search {name} does not draw words: it does not go with -random_sampling_topk/-topp")
    if name == "greedy" and beam_size is not None and beam_size > 1:
        raise UserError(f"-search greedy keeps one hypothesis: it does not go with -beam_size {beam_size}")
