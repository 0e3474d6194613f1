"""translate.py's options: the parser. The ranges of the decoding values are checked in
translate/checks.py (before any model is loaded) and the Translator."""



from onmt_cont import opts
from onmt_cont.models.transformer import parse_alignment_layer
from onmt_cont.translate.checks import DEFAULT_BEAM, DEFAULT_BLOCK, LENGTH_PENALTIES
from onmt_cont.translate.search import COVERAGE_PENALTIES, MAX_OUTPUT_LENGTH
from onmt_cont.utils import numbers
from onmt_cont.utils.device import gpu_option
from onmt_cont.utils.threads import add_threads_arg


def build_parser():
    p = opts.new_parser("Translate a tokenized source file (one sentence per line) with a trained model.")
    g = p.add_argument_group("Data")
    g.add_argument("-model", nargs="+", help="checkpoint written by train.py; several: an ensemble of models of one "
                   "vocabulary, softmax or continuous, that decodes with the mean of their log-probabilities (a "
                   "continuous model's: its beam distribution); the first model's options and record apply")
    g.add_argument("-src", help="source text, one sentence per line: tokenized as the training data, or raw "
                   "text with -src_lang; - or absent: standard input, read once, as it comes")
    g.add_argument("-output", help="where to write the translations (one line per input line); absent or -: "
                   "standard output")
    g.add_argument("-tgt", help="reference: report BLEU. With -detokenize it is raw text, scored as sacrebleu "
                   "would score the written output (case-insensitive for a lowercasing model) and, Moses-tokenized "
                   "as the model's data, by tokenized BLEU; without, it is tokenized as the model's output "
                   "(-tgt_tokenized says so with -detokenize too)")
    g.add_argument("-src_spm", help="with -src_lang: a SentencePiece model the tokenized source is cut with "
                   "(instead of -src_bpe_codes)")
    g.add_argument("-tgt_spm", help="the target's SentencePiece model: the output's pieces are joined into words "
                   "(before -detokenize and BLEU)")
    g.add_argument("-tokenized", action="store_true", help="-src is the model's tokens and the output is written as "
                   "tokens, also for a model whose checkpoint records the raw text it was trained on (preprocess.py "
                   "-src_lang/-tgt_lang/-src_bpe_codes: then raw text is read and written by default)")
    g.add_argument("-tgt_tokenized", action="store_true", help="-tgt is tokenized (and lowercased) as the model's "
                   "output, also with -detokenize: it is detokenized for sacreBLEU, as without -detokenize")
    g.add_argument("-tgt_lang", default="en", help="target language for Moses detokenization (BLEU, -detokenize)")
    g = p.add_argument_group("Raw text (docs/recipes/own_data.sh)")
    g.add_argument("-src_lang", default=None, help="-src is raw text in this language: Moses-tokenize it (no "
                   "escaping, aggressive hyphen splitting) and lowercase it, as tools/moses_tok.py does")
    g.add_argument("-src_bpe_codes", default=None, help="subword-nmt codes the model's source side was cut with: "
                   "cut -src into the same pieces (after -src_lang's tokenization)")
    g.add_argument("-detokenize", action="store_true", help="write running text: Moses-detokenized in -tgt_lang, "
                   "each sentence's first letter in upper case (BLEU with -tgt still scores the tokens)")
    g = p.add_argument_group("Decoding")
    g.add_argument("-batch_size", type=int, default=32, help="sentences per batch (-batch_type sents), or "
                   "padded source tokens per batch (-batch_type tokens)")
    g.add_argument("-batch_type", choices=["sents", "tokens"], default="sents",
                   help="what -batch_size counts; tokens: the longest source of a batch times its sentences (the "
                   "input is sorted by length, so long sentences share small batches)")
    g.add_argument("-chunk_size", type=int, default=10000, help="source lines read, translated and written at "
                   "a time: memory grows with it, not with the file. Batches are sorted by length within a chunk")
    g.add_argument("-engine", choices=["torch", "ctranslate2"], default=None,
                   help="what decodes: torch (a train.py checkpoint) or ctranslate2 (a directory onmt_cont_convert "
                        "wrote); default: read from -model")
    g.add_argument("-gpu", type=gpu_option, default=None, help="CUDA device id; CPU when absent or negative")
    add_threads_arg(g)
    g.add_argument("-max_length", type=int, default=None,
                   help=f"longest output in words, at most {MAX_OUTPUT_LENGTH}; default -max_length_ratio × source "
                   f"length + 10, capped at {MAX_OUTPUT_LENGTH}")
    g.add_argument("-max_length_ratio", type=float, default=2.0, help="see -max_length")
    g.add_argument("-min_length", type=int, default=0, help="no output shorter than this many words unless its length "
                   "limit comes first (OpenNMT-py's -min_length; 0: off)")
    g.add_argument("-beam_size", type=int, default=None, help=f"default {DEFAULT_BEAM} (1 with random sampling); "
                   "1: greedy. Beam search sums log-probabilities: a "
                   "softmax model's, or for continuous models a softmax over the vocabulary of the generator's word "
                   "scores (criterion, word bias, prior, offsets) at the model's own temperature times "
                   "-beam_temperature (docs/usage.md, section 6)")
    g.add_argument("-length_penalty", choices=LENGTH_PENALTIES, default="avg",
                   help="beam search: rank finished hypotheses by score / length (avg) or GNMT's penalty (wu). "
                   "Continuous models: per-step scores (cosines, vMF log-densities) are mostly positive, so "
                   "'none' favours long outputs; 'avg' ranks by the mean per-step score")
    g.add_argument("-alpha", type=float, default=0.0, help="exponent of -length_penalty wu")
    g.add_argument("-coverage_penalty", choices=COVERAGE_PENALTIES, default="none",
                   help="beam search (OpenNMT-py's flag): rank finished hypotheses by score / length penalty minus "
                   "-beta x a penalty on their attention's coverage c_j of each source word: wu (GNMT): "
                   "-sum_j log min(c_j, 1), for source words left untranslated; summary: sum_j max(c_j, 1) - "
                   "source length, for words translated twice. Over the output words' attention (OpenNMT-py also "
                   "counts the </s> step's)")
    g.add_argument("-beta", type=float, default=0.0, help="weight of -coverage_penalty (GNMT: 0.2)")
    g.add_argument("-beam_temperature", type=float, default=1.0, help="continuous models, -beam_size > 1: beam "
                   "search scores each word by the log of a softmax of the word scores over the vocabulary, at the "
                   "model's own temperature (nllvmf_nce 1: its contrastive distribution; infonce its -temperature) "
                   "times this")
    g.add_argument("-ban_unk_token", action="store_true", help="never produce <unk> (OpenNMT-py's flag). For "
                   "continuous models whose training targets had no <unk> (preprocess.py -tgt_emb), its row, the "
                   "mean of the out-of-vocabulary vectors, is a hub that uncertain predictions fall on")
    g.add_argument("-ignore_when_blocking", nargs="+", default=[], metavar="WORD",
                   help="target words that -block_ngram_repeat lets repeat: an n-gram holding one is never blocked "
                   "(OpenNMT-py's flag; e.g. punctuation). The checkpoint engine only")
    g.add_argument("-block_ngram_repeat", type=int, default=None, help="never put out a word that would repeat an "
                   "n-gram of this size already in the sentence's output (OpenNMT-py's flag; greedy and beam, every "
                   "model; over the model's tokens, so BPE pieces with -remove_bpe). 1: no word twice; 0: "
                   f"off; default {DEFAULT_BLOCK}. A greedy sentence whose every candidate is blocked ends there")
    g.add_argument("-replace_unk", action="store_true", help="replace each <unk> through the attention: the "
                   "most-attended source word, translated by -lookup_dict, or copied when it is not there")
    g.add_argument("-alignment_layer", type=parse_alignment_layer, default=None, help="Transformer decoder: "
                   "the attention -replace_unk reads: mean (default: the cross-attention of every layer and head, "
                   "averaged) or one layer's, averaged over its heads (0-based, -1 the last); default: the "
                   "checkpoint's")
    g.add_argument("-lookup_dict", help="bilingual lexicon: 'source_word target_word' per line (build_lexicon.py)")
    g.add_argument("-remove_bpe", action="store_true", help="the model's target side is subword-nmt BPE: join "
                   "the pieces ('@@ ' and a final '@@' removed) before writing the output and scoring it")
    g = p.add_argument_group("Word choice (continuous models; -freq_offsets: any model)")
    g.add_argument("-decode_prior", type=float, default=None, help="score each word by the nearest-neighbour score "
                   "+ this beta x log p_train(w), its add-one smoothed frequency in the training targets (stored in "
                   "checkpoints of this version): a frequency prior that nearest-neighbour search lacks. Pick beta on "
                   "validation BLEU; negative values favour rarer words; 0: off (the default, or with -freq_offsets "
                   "the beta the file was fitted under)")
    g.add_argument("-decode_prior_cap", type=int, default=0, help="with -decode_prior: the prior is flat (0) for "
                   "words seen at least this many times in training and log((c+1)/(cap+1)) for a word seen c < cap "
                   "times, so it only penalises rare words instead of pushing every word towards the most frequent "
                   "ones; at least 2; 0 (default): the plain prior")
    g.add_argument("-freq_offsets", help="add to each word's score the offset of its bin of training counts (1, "
                   "2-4, 5-9, 10-99, 100-999, 1000+) from this file, written by tools/calibrate_offsets.py, which "
                   "fits them on validation so that every bin comes out as often as in the reference. They decode "
                   "under the -decode_prior beta the file was fitted under (it says which; another is refused). "
                   "Softmax models too: their log-probabilities plus the offsets")
    g.add_argument("-csls", type=int, default=0, help="rank words by CSLS (Conneau et al. 2018): 2 cos(e^, e_w) - "
                   "r(w), r(w) the mean cosine of e_w to its K nearest table words (a penalty for hubs), in the "
                   "decoding criterion's units; K > 0 turns it on (the paper: 10)")
    g = p.add_argument_group("Open vocabulary and approximate search (continuous models)")
    g.add_argument("-tgt_emb_extend", help="decode over every word of this table too (.vec/.vec.gz, or a .pt "
                   "written by embeddings_to_torch.py with -tgt_emb_extend_vocab): the training target "
                   "vocabulary keeps its rows, the other words are appended, unit length. Tied models feed a "
                   "new word's vector to the next step, untied ones feed <unk>")
    g.add_argument("-tgt_emb_extend_vocab", help="the vocabulary (PREFIX.vocab.pt or PREFIX.vocab.tgt.txt) whose "
                   "rows a .pt -tgt_emb_extend follows")
    g.add_argument("-ann", choices=["faiss"], default=None,
                   help="approximate nearest-neighbour search (faiss-cpu) instead of exact search, for tables "
                   "of 300K words and more; the index proposes beam_size+2 words, rescored exactly")
    g.add_argument("-ann_index", choices=["ivf", "hnsw"], default="ivf",
                   help="IndexIVFFlat (k-means cells, built in seconds) or IndexHNSWFlat (minutes to build at "
                   "300K words on one core); inner product on unit rows. See docs/open_vocabulary.md")
    g.add_argument("-ann_nlist", type=int, default=None,
                   help="ivf: number of cells (default 4·sqrt(words), faiss's guideline)")
    g.add_argument("-ann_nprobe", type=int, default=64, help="ivf: cells searched per query")
    g.add_argument("-ann_hnsw_m", type=int, default=16, help="hnsw: links per node")
    g.add_argument("-ann_ef_search", type=int, default=64, help="hnsw: candidate list size when searching")
    g.add_argument("-n_best", type=int, default=1, help="write the N best hypotheses of each sentence, best first, "
                   "N lines per input line (at most -beam_size; BLEU scores the first)")
    g.add_argument("-with_score", action="store_true", help="append a tab and the hypothesis's score to each "
                   "output line: its log-probability under beam search's scores divided by the length penalty "
                   "(greedy: beam 1, the same words)")
    g.add_argument("-random_sampling_topk", type=int, default=0, help="draw each word instead of the argmax "
                   "(OpenNMT-py's name; back-translation): -1 from the whole distribution, K > 1 from the K most "
                   "likely words; 0 or 1: off. A continuous model draws from its beam distribution "
                   "(softmax(score / tau), -beam_temperature). -beam_size K: K draws of each sentence, the best by "
                   "log-probability / length penalty put out (-n_best N: the N best); default one (-n_best's)")
    g.add_argument("-random_sampling_topp", type=float, default=0.0, help="draw each word from the smallest set of "
                   "most likely words whose probability reaches P (nucleus sampling), 0 < P < 1; 0: off")
    g.add_argument("-random_sampling_temp", type=float, default=1.0, help="divide the scores by this before sampling")
    g.add_argument("-seed", type=int, default=0, help="random sampling's seed: the same seed, batches and device "
                   "draw the same words")
    g.add_argument("-tgt_prefix", action="store_true", help="each output starts with its -tgt line (tokens, as the "
                   "model writes), forced, and decoding goes on from there (OpenNMT-py's -tgt_prefix); no BLEU. "
                   "Greedy search, sampling or beam search (every hypothesis starts with it)")
    g.add_argument("-report_align", action="store_true", help="append ' ||| ' and each output's word alignment "
                   "to its line, OpenNMT-py's format: 'S-T' (0-based) for each output token T and the source token S "
                   "its attention weighs most (the model's tokens, before -detokenize; with -alignment_layer for a "
                   "Transformer). With -n_best or -with_score each hypothesis's line holds its own alignment, before "
                   "the tab and score")
    g.add_argument("-attn_debug", action="store_true", help="print each sentence's attention on standard error "
                   "(OpenNMT-py's flag): a row per output token, a column per source token, '*' at each row's "
                   "largest weight")
    g.add_argument("-log_file", help="also write what translate.py prints on standard error to this file")
    g.add_argument("-report_time", action="store_true", help="print OpenNMT-py's timing lines at the end: the total "
                   "and average translation time (s) and the output tokens per second")
    g.add_argument("-verbose", action="store_true", help="print each source and translation (with its score when "
                   "-with_score or -n_best give one) on standard error")
    for action in p._actions:  # every float option: nan, inf and a non-zero value that rounds to 0 are refused
        if action.type is float:
            action.type = numbers.finite_float
    return p
