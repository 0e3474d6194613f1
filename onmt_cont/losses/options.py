"""train.py's "Loss" options: the loss (its choices from the registry, losses/spec.py) and the constants of each
family, as one typed configuration (:class:`LossConfig`) from which the group's flags are built and their ranges
checked (:mod:`onmt_cont.config`). The checks that combine options are in :mod:`onmt_cont.train.checks`."""

from __future__ import annotations

from argparse import ArgumentParser
from dataclasses import dataclass, fields

from onmt_cont.config import add_flags, option
from onmt_cont.losses import LOSSES

# -num_sampled, -ann_candidates, -num_negatives, -prefix_window: words drawn or compared per batch
# or per token; a step's memory grows with them ([tokens, K] scores), and no vocabulary needs more
MAX_CANDIDATES = 1 << 16
CANDIDATES_NOTE = "words per batch or per token; a step's memory grows with it"


@dataclass
class LossConfig:
    """train.py's "Loss" flags, each field with its help, default and range; -loss's choices and help are read
    from the loss registry when the parser is built."""

    loss: str = option(
        "ce",
        choices=lambda: sorted(LOSSES),
        help=lambda: "; ".join(  # from the registry (losses/spec.py)
            f"{name}: {LOSSES[name].summary}" for name in sorted(LOSSES)
        ),
    )
    label_smoothing: float = option(0.0, type=float, help="ce only", low=0.0, high=1.0, high_open=True)
    margin: float = option(
        0.5,
        type=float,
        help="margin γ of the margin losses (maxmargin, synmargin_*, "
        "margin_random; Bhat et al. tune it on development data and do not report it)",
        low=0,
    )
    num_negatives: int | None = option(
        None,
        type=int,
        help="margin_random: negatives drawn uniformly per "
        "token, the loss averaged over them (default 5, Bhat et al.'s); maxmargin: the K hardest "
        "negatives among -negatives' candidates, the hinge averaged over them (default 1, Lazaridou "
        "et al.'s single most informative negative)",
        low=1,
        high=MAX_CANDIDATES,
        high_note=CANDIDATES_NOTE,
    )
    negatives: str | None = option(
        None,
        help="maxmargin, infonce, nllvmf_nce: comma list of where negatives "
        "come from: exact (the whole table: cost grows with the vocabulary), inbatch (the batch's target "
        "words), random (-num_sampled uniform words), gold_nn (the gold word's -ann_candidates nearest "
        "words, found once before training with a faiss index over the frozen table: flat in the "
        "vocabulary), ann (the prediction's -ann_candidates nearest words, searched in that index at "
        "every step), prefix (the -prefix_window words before the token in its own target sentence: "
        "unlikelihood on words already written, against repetition). Default: exact for maxmargin, "
        "inbatch,random,gold_nn for the others",
    )
    num_sampled: int = option(
        64,
        type=int,
        help="-negatives random: uniform words per batch, shared by its tokens",
        low=1,
        high=MAX_CANDIDATES,
        high_note=CANDIDATES_NOTE,
    )
    ann_candidates: int = option(
        32,
        type=int,
        help="-negatives gold_nn and ann: nearest words per token",
        low=1,
        high=MAX_CANDIDATES,
        high_note=CANDIDATES_NOTE,
    )
    prefix_window: int | None = option(
        None,
        type=int,
        help="-negatives prefix: how many earlier words of the token's own target sentence are negatives (default 16)",
        low=1,
        high=MAX_CANDIDATES,
        high_note=CANDIDATES_NOTE,
    )
    temperature: float = option(0.1, type=float, help="infonce: τ of the logits cos(ê, e_j)/τ", low=0, low_open=True)
    contrastive_weight: float = option(
        1.0,
        type=float,
        help="nllvmf_nce: weight of the contrastive "
        "term (−log of the vMF density renormalised over the gold word and the negatives)",
        low=0,
    )
    sampling_correction: bool = option(
        False,
        help="infonce, nllvmf_nce: subtract from each "
        "negative's logit the log of its expected count among the candidates (in-batch: see "
        "-expected_counts; random: -num_sampled/V; gold_nn/ann: 1), the sampled softmax's correction "
        "for how the candidates were drawn (Bengio & Senecal 2008)",
    )
    expected_counts: str = option(
        "unigram",
        choices=["unigram", "batch", "sentence"],
        help="-sampling_correction: "
        "an in-batch candidate's expected count. unigram: the batch's tokens x its smoothed training "
        "frequency, as if they were independent draws (they are not, so the normaliser's estimate is "
        "biased; the results' rows; needs a vocabulary that records the sentence count); batch: its "
        "count in the batch, which makes that estimate unbiased on the batches as they are, but trained "
        "about 1 validation BLEU lower (docs/results.md); sentence: its count in the token's own sentence "
        "plus, for </s>, one per other sentence and, for a word, the other sentences' words x its "
        "training frequency (unbiased over how batches are drawn, given the token)",
    )
    word_bias: bool = option(
        False,
        help="infonce, nllvmf_nce: learn a bias b_w per target word, "
        "added to the contrastive logits (only the candidates' entries get a gradient) and to every "
        "word's score when decoding, as a softmax's output bias is",
    )
    word_bias_update: str = option(
        "dense",
        choices=["dense", "lazy"],
        help="-word_bias: dense: "
        "Adam updates every bias at every step, so a bias goes on moving on its momentum long after its "
        "word was last a candidate (the results' rows); lazy: only the biases of this step's candidates "
        "move, the others keep their value and Adam state (LazyAdam)",
    )
    train_table: bool = option(
        False,
        help="infonce, nllvmf_nce: train the target table the "
        "outputs are scored against, starting from -tgt_emb (each step the rows of the gold words and of "
        "the candidates get a gradient; rows are put back to unit length after every update). The "
        "decoder's input embeddings (-tie_emb) stay the frozen pretrained vectors; -average_decay leaves "
        "the table out of its average. Adam updates the whole [vocab, dim] table each step",
    )
    table_lr_scale: float = option(
        1.0,
        type=float,
        help="-train_table: the table's learning rate is "
        "this times the model's (schedule included), so the table can move slower than the network "
        "and keep more of the pretrained geometry. -train_from keeps the checkpoint's unless given",
        low=0,
        low_open=True,
    )
    rewe_lambda: float | None = option(
        None,
        type=float,
        help="ReWE (Jauregi Unanue et al.): add a head that "
        "regresses the gold word's pretrained vector (-tgt_emb) and train on NLL + λ·ReWE loss "
        "(paper: 20); needs -loss ce -generator linear. The head is ignored at inference. 0 builds the "
        "head but trains exactly like plain -loss ce",
        low=0,
    )
    rewe_loss: str = option(
        "cosine",
        choices=["cosine", "mse"],
        help="ReWE: 1 − cos (the paper's cosine embedding loss, its best) or the squared error ‖ê − e(y)‖²",
    )
    vmf_form: str = option(
        "paper",
        choices=["paper", "code"],
        help="nllvmf, nllvmf_nce: paper: the "
        "printed loss −log C_m(κ) − λ2·êᵀe(w) + λ1·κ (-lambda1, -lambda2); code: the loss Kumar & "
        "Tsvetkov's public code trains, −log C_m(κ) + log(1 + κ)·(λ − cos(ê, e(w))) (-vmf_lambda)",
    )
    vmf_lambda: float = option(0.2, type=float, help="-vmf_form code: λ (the authors' code: 0.2)", low=0)
    lambda1: float = option(0.02, type=float, help="nllvmf, -vmf_form paper: weight of ‖ê‖ (reg1; paper 0.02)", low=0)
    lambda2: float = option(
        0.1,
        type=float,
        help="nllvmf, -vmf_form paper: weight of êᵀe(w) (reg2; paper 0.1; -lambda1 0 -lambda2 1 is plain NLLvMF)",
        low=0,
    )
    vmf_approx: bool = option(
        False,
        help="nllvmf: replace −log C_m(κ) by the appendix's "
        "√((v+1)²+κ²) − (v−1)·log(v−1+√((v+1)²+κ²)), v=m/2−1, whose derivative approximates the exact "
        "one; its value is NOT equal to −log C_m, so reported losses are not NLLs",
    )


def add_loss_options(p: ArgumentParser) -> None:
    """Add the "Loss" group to train.py's parser ``p``, a flag per :class:`LossConfig` field."""
    add_flags(p.add_argument_group("Loss"), LossConfig, [f.name for f in fields(LossConfig)])
