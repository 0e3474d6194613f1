"""BLEU: sacreBLEU on detokenized text (with its signature) and tokenized BLEU (as the papers report)."""

import sacrebleu
from mosestokenizer import MosesDetokenizer


def detokenize(lines, lang):
    with MosesDetokenizer(lang) as detok:
        return [detok(line.split()) if line.strip() else "" for line in lines]


class CorpusBleu:
    """BLEU of a corpus fed in pieces (translate.py streams), equal to sacreBLEU's ``corpus_score``
    over all lines at once. sacreBLEU's corpus BLEU is a function of sums over sentences (output
    and reference lengths, matched and total n-grams for n = 1..4: 10 integers), so only those
    sums are kept: memory does not grow with the corpus. One Moses detokenizer (a Perl process)
    serves every piece; use as a context manager, or call :meth:`close`.

    ``lang``: Moses detokenizer language; ``refs_tokenized``: references are tokenized (they are
    detokenized like the outputs, and tokenized BLEU is reported too) or raw text (scored as they
    are; with ``tokenize_ref``, a function from a raw reference to the model's tokens, tokenized
    BLEU is reported too); ``lowercase``: case-insensitive BLEU (for a model that writes lowercase;
    the signature says ``case:lc``)."""

    def __init__(self, lang="en", refs_tokenized=True, lowercase=False, tokenize_ref=None):
        self.metric = sacrebleu.BLEU(lowercase=lowercase)
        # force: scoring tokenized text is the point here, so no "forgot to detokenize" warning
        tokenized = refs_tokenized or tokenize_ref is not None
        self.tok_metric = sacrebleu.BLEU(tokenize="none", lowercase=lowercase, force=True) if tokenized else None
        self.refs_tokenized, self.tokenize_ref = refs_tokenized, tokenize_ref
        self.lines = 0
        self._sums = self._tok_sums = None
        self._detok = MosesDetokenizer(lang)

    def _detokenize(self, lines):
        return [self._detok(line.split()) if line.strip() else "" for line in lines]

    @staticmethod
    def _add(sums, metric, hyps, refs):
        # sacreBLEU's per-sentence sufficient statistics (what corpus_score sums), summed here per piece
        stats = metric._extract_corpus_statistics(hyps, [refs])
        piece = [sum(col) for col in zip(*stats, strict=True)]
        return piece if sums is None else [a + b for a, b in zip(sums, piece, strict=True)]

    def add(self, hyps, refs):
        """hyps: tokenized output lines; refs: their references, as many."""
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
        if not hyps:
            return
        self.lines += len(hyps)
        detok_refs = self._detokenize(refs) if self.refs_tokenized else [r.strip() for r in refs]
        self._sums = self._add(self._sums, self.metric, self._detokenize(hyps), detok_refs)
        if self.tok_metric is not None:
            tok_refs = [r.strip() for r in refs] if self.refs_tokenized else [self.tokenize_ref(r) for r in refs]
            self._tok_sums = self._add(self._tok_sums, self.tok_metric, [h.strip() for h in hyps], tok_refs)

    def report(self):
        """-> (printable lines, detokenized score): detokenized sacreBLEU with its signature, then
        tokenized BLEU (tokenize='none' on the tokenized text, like multi-bleu.perl); the score is
        NaN for no sentences."""
        if not self.lines:  # sacreBLEU cannot score an empty corpus
            return ["BLEU: no sentences to score"], float("nan")
        score = self.metric._compute_score_from_stats(self._sums)
        lines = [f"sacreBLEU (detokenized): {score.score:.2f}  {self.metric.get_signature()}", f"  {score}"]
        if self.tok_metric is not None:
            tok = self.tok_metric._compute_score_from_stats(self._tok_sums)
            lines.append(f"tokenized BLEU: {tok.score:.2f}  {self.tok_metric.get_signature()}")
        return lines, score.score

    def scores(self):
        """-> (detokenized sacreBLEU, tokenized BLEU or None); NaN for no sentences."""
        if not self.lines:
            return float("nan"), (float("nan") if self.tok_metric is not None else None)
        detok = self.metric._compute_score_from_stats(self._sums).score
        tok = self.tok_metric._compute_score_from_stats(self._tok_sums).score if self.tok_metric is not None else None
        return detok, tok

    def close(self):
        self._detok.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bleu_report(hyps, refs, lang="en", refs_tokenized=True, lowercase=False):
    """hyps: tokenized output lines; refs: reference lines (tokenized, or raw with
    ``refs_tokenized=False``). Returns :meth:`CorpusBleu.report` for the whole corpus at once."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    with CorpusBleu(lang, refs_tokenized, lowercase) as bleu:
        bleu.add(hyps, refs)
        return bleu.report()


def tokenized_bleu(hyps, refs, lowercase=False):
    """BLEU of tokenized text as it stands (sacreBLEU tokenize='none', like multi-bleu.perl; the
    papers' figure, and train.py's -valid_metric bleu) -> (score, sacreBLEU signature)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    # force: scoring tokenized text is the point here, so no "forgot to detokenize" warning
    metric = sacrebleu.BLEU(tokenize="none", lowercase=lowercase, force=True)
    score = metric.corpus_score([h.strip() for h in hyps], [[r.strip() for r in refs]])
    return score.score, metric.get_signature()
