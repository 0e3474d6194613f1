"""train.py's "Loss" options: the loss (its choices from the registry, losses/spec.py) and the constants
of each family. What the parser cannot check is in :mod:`onmt_cont.train.checks`."""

from argparse import ArgumentParser

from onmt_cont.losses import LOSSES


def add_loss_options(p: ArgumentParser) -> None:
    """Add the "Loss" group to train.py's parser ``p``."""
    g = p.add_argument_group("Loss")
    g.add_argument(
        "-loss",
        choices=sorted(LOSSES),
        default="ce",
        help="; ".join(  # from the registry (losses/spec.py)
            f"{name}: {LOSSES[name].summary}" for name in sorted(LOSSES)
        ),
    )
    g.add_argument("-label_smoothing", type=float, default=0.0, help="ce only")
    g.add_argument(
        "-margin",
        type=float,
        default=0.5,
        help="margin γ of the margin losses (maxmargin, synmargin_*, "
        "margin_random; Bhat et al. tune it on development data and do not report it)",
    )
    g.add_argument(
        "-num_negatives",
        type=int,
        default=None,
        help="margin_random: negatives drawn uniformly per "
        "token, the loss averaged over them (default 5, Bhat et al.'s); maxmargin: the K hardest "
        "negatives among -negatives' candidates, the hinge averaged over them (default 1, Lazaridou "
        "et al.'s single most informative negative)",
    )
    g.add_argument(
        "-negatives",
        default=None,
        help="maxmargin, infonce, nllvmf_nce: comma list of where negatives "
        "come from: exact (the whole table: cost grows with the vocabulary), inbatch (the batch's target "
        "words), random (-num_sampled uniform words), gold_nn (the gold word's -ann_candidates nearest "
        "words, found once before training with a faiss index over the frozen table: flat in the "
        "vocabulary), ann (the prediction's -ann_candidates nearest words, searched in that index at "
        "every step), prefix (the -prefix_window words before the token in its own target sentence: "
        "unlikelihood on words already written, against repetition). Default: exact for maxmargin, "
        "inbatch,random,gold_nn for the others",
    )
    g.add_argument(
        "-num_sampled", type=int, default=64, help="-negatives random: uniform words per batch, shared by its tokens"
    )
    g.add_argument("-ann_candidates", type=int, default=32, help="-negatives gold_nn and ann: nearest words per token")
    g.add_argument(
        "-prefix_window",
        type=int,
        default=None,
        help="-negatives prefix: how many earlier words of the token's own target sentence are negatives (default 16)",
    )
    g.add_argument("-temperature", type=float, default=0.1, help="infonce: τ of the logits cos(ê, e_j)/τ")
    g.add_argument(
        "-contrastive_weight",
        type=float,
        default=1.0,
        help="nllvmf_nce: weight of the contrastive "
        "term (−log of the vMF density renormalised over the gold word and the negatives)",
    )
    g.add_argument(
        "-sampling_correction",
        action="store_true",
        help="infonce, nllvmf_nce: subtract from each "
        "negative's logit the log of its expected count among the candidates (in-batch: see "
        "-expected_counts; random: -num_sampled/V; gold_nn/ann: 1), the sampled softmax's correction "
        "for how the candidates were drawn (Bengio & Senecal 2008)",
    )
    g.add_argument(
        "-expected_counts",
        choices=["unigram", "batch", "sentence"],
        default="unigram",
        help="-sampling_correction: "
        "an in-batch candidate's expected count. unigram: the batch's tokens x its smoothed training "
        "frequency, as if they were independent draws (they are not, so the normaliser's estimate is "
        "biased; the results' rows; needs a vocabulary that records the sentence count); batch: its "
        "count in the batch, which makes that estimate unbiased on the batches as they are, but trained "
        "about 1 validation BLEU lower (docs/results.md); sentence: its count in the token's own sentence "
        "plus, for </s>, one per other sentence and, for a word, the other sentences' words x its "
        "training frequency (unbiased over how batches are drawn, given the token)",
    )
    g.add_argument(
        "-word_bias",
        action="store_true",
        help="infonce, nllvmf_nce: learn a bias b_w per target word, "
        "added to the contrastive logits (only the candidates' entries get a gradient) and to every "
        "word's score when decoding, as a softmax's output bias is",
    )
    g.add_argument(
        "-word_bias_update",
        choices=["dense", "lazy"],
        default="dense",
        help="-word_bias: dense: "
        "Adam updates every bias at every step, so a bias goes on moving on its momentum long after its "
        "word was last a candidate (the results' rows); lazy: only the biases of this step's candidates "
        "move, the others keep their value and Adam state (LazyAdam)",
    )
    g.add_argument(
        "-train_table",
        action="store_true",
        help="infonce, nllvmf_nce: train the target table the "
        "outputs are scored against, starting from -tgt_emb (each step the rows of the gold words and of "
        "the candidates get a gradient; rows are put back to unit length after every update). The "
        "decoder's input embeddings (-tie_emb) stay the frozen pretrained vectors; -average_decay leaves "
        "the table out of its average. Adam updates the whole [vocab, dim] table each step",
    )
    g.add_argument(
        "-table_lr_scale",
        type=float,
        default=1.0,
        help="-train_table: the table's learning rate is "
        "this times the model's (schedule included), so the table can move slower than the network "
        "and keep more of the pretrained geometry. -train_from keeps the checkpoint's unless given",
    )
    g.add_argument(
        "-rewe_lambda",
        type=float,
        default=None,
        help="ReWE (Jauregi Unanue et al.): add a head that "
        "regresses the gold word's pretrained vector (-tgt_emb) and train on NLL + λ·ReWE loss "
        "(paper: 20); needs -loss ce -generator linear. The head is ignored at inference. 0 builds the "
        "head but trains exactly like plain -loss ce",
    )
    g.add_argument(
        "-rewe_loss",
        choices=["cosine", "mse"],
        default="cosine",
        help="ReWE: 1 − cos (the paper's cosine embedding loss, its best) or the squared error ‖ê − e(y)‖²",
    )
    g.add_argument(
        "-vmf_form",
        choices=["paper", "code"],
        default="paper",
        help="nllvmf, nllvmf_nce: paper: the "
        "printed loss −log C_m(κ) − λ2·êᵀe(w) + λ1·κ (-lambda1, -lambda2); code: the loss Kumar & "
        "Tsvetkov's public code trains, −log C_m(κ) + log(1 + κ)·(λ − cos(ê, e(w))) (-vmf_lambda)",
    )
    g.add_argument("-vmf_lambda", type=float, default=0.2, help="-vmf_form code: λ (the authors' code: 0.2)")
    g.add_argument(
        "-lambda1", type=float, default=0.02, help="nllvmf, -vmf_form paper: weight of ‖ê‖ (reg1; paper 0.02)"
    )
    g.add_argument(
        "-lambda2",
        type=float,
        default=0.1,
        help="nllvmf, -vmf_form paper: weight of êᵀe(w) (reg2; paper 0.1; -lambda1 0 -lambda2 1 is plain NLLvMF)",
    )
    g.add_argument(
        "-vmf_approx",
        action="store_true",
        help="nllvmf: replace −log C_m(κ) by the appendix's "
        "√((v+1)²+κ²) − (v−1)·log(v−1+√((v+1)²+κ²)), v=m/2−1, whose derivative approximates the exact "
        "one; its value is NOT equal to −log C_m, so reported losses are not NLLs",
    )
