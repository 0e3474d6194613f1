"""BLEU: sacreBLEU on detokenized text (with its signature) and tokenized BLEU (as the papers report)."""

import sacrebleu
from mosestokenizer import MosesDetokenizer


def detokenize(lines, lang):
    with MosesDetokenizer(lang) as detok:
        return [detok(line.split()) if line.strip() else "" for line in lines]


def bleu_report(hyps, refs, lang="en", refs_tokenized=True, lowercase=False):
    """hyps: tokenized output lines; refs: reference lines (tokenized, or raw with
    ``refs_tokenized=False``). Returns printable lines: detokenized sacreBLEU with its signature,
    then tokenized BLEU (tokenize='none' on the tokenized text, like multi-bleu.perl), and the
    detokenized score (NaN for no sentences)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:  # sacreBLEU cannot score an empty corpus
        return ["BLEU: no sentences to score"], float("nan")
    detok_hyps = detokenize(hyps, lang)
    detok_refs = detokenize(refs, lang) if refs_tokenized else [r.strip() for r in refs]
    metric = sacrebleu.BLEU(lowercase=lowercase)
    score = metric.corpus_score(detok_hyps, [detok_refs])
    lines = [f"sacreBLEU (detokenized): {score.score:.2f}  {metric.get_signature()}", f"  {score}"]
    if refs_tokenized:
        tok, signature = tokenized_bleu(hyps, refs, lowercase)
        lines.append(f"tokenized BLEU: {tok:.2f}  {signature}")
    return lines, score.score


def tokenized_bleu(hyps, refs, lowercase=False):
    """BLEU of tokenized text as it stands (sacreBLEU tokenize='none', like multi-bleu.perl; the
    papers' figure, and train.py's -valid_metric bleu) -> (score, sacreBLEU signature)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    # force: scoring tokenized text is the point here, so no "forgot to detokenize" warning
    metric = sacrebleu.BLEU(tokenize="none", lowercase=lowercase, force=True)
    score = metric.corpus_score([h.strip() for h in hyps], [[r.strip() for r in refs]])
    return score.score, metric.get_signature()
