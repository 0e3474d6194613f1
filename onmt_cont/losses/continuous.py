"""Losses of continuous-output models: the prediction ê [N, m] against the pretrained
unit-length embedding e(w) of the reference word, ``table[target]``.

All return per-token losses [N]; constants come from the options with the papers' defaults.
"""

import torch
import torch.nn.functional as F

from onmt_cont.vmf import log_cmk, neg_log_cmk_approx


def l2(pred, target_vec):
    """Squared Euclidean distance ‖ê − e(w)‖²."""
    return ((pred - target_vec) ** 2).sum(-1)


def cosine(pred, target_vec):
    """1 − cos(ê, e(w))."""
    return 1.0 - F.cosine_similarity(pred, target_vec, dim=-1, eps=1e-8)


def most_informative_negative(pred, target, table):
    """Lazaridou et al. (2015): argmax_j cos(ê, e_j) − cos(e(w), e_j) over the vocabulary,
    the target itself excluded. Chosen without gradient. Returns ids [N]."""
    with torch.no_grad():
        unit = F.normalize(pred.float(), dim=-1, eps=1e-8)
        diff = unit @ table.t() - table[target] @ table.t()  # table rows are unit length
        diff.scatter_(1, target.unsqueeze(1), float("-inf"))
        diff[:, 0] = float("-inf")  # the padding row is no word
        return diff.argmax(dim=1)


def max_margin(pred, target, table, margin):
    """max(0, γ + cos(ê, e(w′)) − cos(ê, e(w))) with the most informative negative w′."""
    neg = most_informative_negative(pred, target, table)
    pos_cos = F.cosine_similarity(pred, table[target], dim=-1, eps=1e-8)
    neg_cos = F.cosine_similarity(pred, table[neg], dim=-1, eps=1e-8)
    return torch.relu(margin + neg_cos - pos_cos)


def nll_vmf(pred, target_vec, lambda1=0.02, lambda2=0.1, approx=False):
    """−log C_m(‖ê‖) − λ2·êᵀe(w) + λ1·‖ê‖ (the paper's reg1 and reg2; λ1=0, λ2=1 is plain NLLvMF).

    With ``approx`` the appendix's expression replaces −log C_m (its derivative approximates
    the exact one; the value is not equal). Computed in float32 at least."""
    pred = pred.float()
    m = pred.size(-1)
    kappa = torch.linalg.vector_norm(pred, dim=-1)
    neg_log_c = neg_log_cmk_approx(kappa, m) if approx else -log_cmk(kappa, m)
    return neg_log_c - lambda2 * (pred * target_vec).sum(-1) + lambda1 * kappa


def build_l2(opt, table):
    return lambda output, target: l2(output.float(), table[target])


def build_cosine(opt, table):
    return lambda output, target: cosine(output.float(), table[target])


def build_maxmargin(opt, table):
    margin = opt.margin
    return lambda output, target: max_margin(output.float(), target, table, margin)


def build_nllvmf(opt, table):
    l1, l2_, approx = opt.lambda1, opt.lambda2, opt.vmf_approx
    return lambda output, target: nll_vmf(output, table[target], l1, l2_, approx)
