"""Losses of continuous-output models: the prediction ê [N, m] against the pretrained
unit-length embedding e(w) of the reference word, ``table[target]``.

All return per-token losses [N]; constants come from the options with the papers' defaults.
"""

from argparse import Namespace
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from onmt_cont.losses.spec import Loss, LossFn
from onmt_cont.losses.token_dots import table_rows
from onmt_cont.opts import upgrade
from onmt_cont.vmf import log_cmk, neg_log_cmk_approx


def l2(pred: Tensor, target_vec: Tensor) -> Tensor:
    """Squared Euclidean distance ‖ê − e(w)‖²."""
    return ((pred - target_vec) ** 2).sum(-1)


def cosine(pred: Tensor, target_vec: Tensor) -> Tensor:
    """1 − cos(ê, e(w))."""
    return 1.0 - F.cosine_similarity(pred, target_vec, dim=-1, eps=1e-8)


def most_informative_negative(pred: Tensor, target: Tensor, table: Tensor) -> Tensor:
    """Lazaridou et al. (2015): argmax_j cos(ê, e_j) − cos(e(w), e_j) over the vocabulary,
    the target itself excluded. Chosen without gradient. Returns ids [N]."""
    with torch.no_grad():
        unit = F.normalize(pred.float(), dim=-1, eps=1e-8)
        diff = unit @ table.t() - table_rows(table, target) @ table.t()  # table rows are unit length
        diff.scatter_(1, target.unsqueeze(1), float("-inf"))
        diff[:, 0] = float("-inf")  # the padding row is no word
        return diff.argmax(dim=1)


def max_margin(pred: Tensor, target: Tensor, table: Tensor, margin: float) -> Tensor:
    """max(0, γ + cos(ê, e(w′)) − cos(ê, e(w))) with the most informative negative w′: the
    reference for ``-loss maxmargin`` (onmt_cont.losses.contrastive), which with ``-negatives
    exact -num_negatives 1`` computes the same."""
    neg = most_informative_negative(pred, target, table)
    pos_cos = F.cosine_similarity(pred, table_rows(table, target), dim=-1, eps=1e-8)
    neg_cos = F.cosine_similarity(pred, table_rows(table, neg), dim=-1, eps=1e-8)
    return torch.relu(margin + neg_cos - pos_cos)


def synthetic_negative(unit_pred: Tensor, target_vec: Tensor, how: str) -> Tensor:
    """Bhat et al.'s synthetic negative for û (unit) and u = e(w), detached from the graph:

    - ``proj``: u_orth = normalize(û − (ûᵀu)u), the part of û orthogonal to u;
    - ``diff``: u_diff = normalize(û − u).

    When û = u the residual is zero and so is the negative (normalize divides by max(‖·‖, eps)),
    hence u_negᵀû = 0 and no NaN. Near there u_orthᵀû = sin θ and u_diffᵀû = sin(θ/2), θ the angle
    between û and u, so the loss is continuous across that point."""
    with torch.no_grad():
        if how == "proj":
            residual = unit_pred - (unit_pred * target_vec).sum(-1, keepdim=True) * target_vec
        elif how == "diff":
            residual = unit_pred - target_vec
        else:
            raise ValueError(f"how must be 'proj' or 'diff', got {how!r}")
        return F.normalize(residual, dim=-1, eps=1e-12)


def syn_margin(pred: Tensor, target_vec: Tensor, margin: float, how: str) -> Tensor:
    """max(0, γ + u_negᵀû − uᵀû) with û = ê/‖ê‖ and the detached :func:`synthetic_negative`.
    In closed form: max(0, γ + sin θ − cos θ) (proj) and max(0, γ + sin(θ/2) − cos θ) (diff)."""
    unit = F.normalize(pred, dim=-1, eps=1e-8)
    neg = synthetic_negative(unit, target_vec, how)
    return torch.relu(margin + (neg * unit).sum(-1) - (target_vec * unit).sum(-1))


def random_negatives(target: Tensor, vocab_size: int, k: int) -> Tensor:
    """k word ids per target [N] -> [N, k], uniform over the words other than padding (id 0) and the
    target itself: a draw from 1..vocab−2 (global RNG) is shifted up by one when it is at or past the
    target, so it never hits the target and nothing is redrawn."""
    draws = torch.randint(1, vocab_size - 1, (target.numel(), k), device=target.device)
    return draws + (draws >= target.unsqueeze(1)).long()


def margin_random(pred: Tensor, target: Tensor, table: Tensor, margin: float, k: int) -> Tensor:
    """mean over k random negatives e(w′) of max(0, γ + cos(ê, e(w′)) − cos(ê, e(w))): the
    negative-sampling baseline of Bhat et al. The table rows are unit length."""
    unit = F.normalize(pred, dim=-1, eps=1e-8)
    neg = table_rows(table, random_negatives(target, table.size(0), k))  # [N, k, m]
    neg_cos = (neg @ unit.unsqueeze(-1)).squeeze(-1)
    pos_cos = (unit * table_rows(table, target)).sum(-1, keepdim=True)
    return torch.relu(margin + neg_cos - pos_cos).mean(-1)


VMF_FORMS = ("paper", "code")


def nll_vmf(
    pred: Tensor,
    target_vec: Tensor,
    lambda1: float = 0.02,
    lambda2: float = 0.1,
    approx: bool = False,
    form: str = "paper",
    vmf_lambda: float = 0.2,
) -> Tensor:
    """NLLvMF of ê against the unit vector e(w), κ = ‖ê‖, in one of two forms:

    - ``paper`` (the printed equations): −log C_m(κ) − λ2·êᵀe(w) + λ1·κ (reg1 and reg2; λ1=0, λ2=1
      is plain NLLvMF);
    - ``code`` (what Kumar & Tsvetkov's public code trains): −log C_m(κ) + log(1 + κ)·(λ − cos θ),
      cos θ = êᵀe(w)/κ, λ = ``vmf_lambda`` (their default 0.2). The direction's weight log(1 + κ)
      grows only slowly with κ, and λ > 0 keeps κ from growing where cos θ stays below λ.

    With ``approx`` the appendix's expression replaces −log C_m (its derivative approximates
    the exact one; the value is not equal). Computed in float32 at least (float64 stays float64)."""
    pred = pred if pred.dtype == torch.float64 else pred.float()
    m = pred.size(-1)
    kappa = torch.linalg.vector_norm(pred, dim=-1)
    neg_log_c = neg_log_cmk_approx(kappa, m) if approx else -log_cmk(kappa, m)
    dot = (pred * target_vec).sum(-1)
    if form == "code":
        cos = dot / kappa.clamp(min=1e-8)
        return neg_log_c + torch.log1p(kappa) * (vmf_lambda - cos)
    if form != "paper":
        raise ValueError(f"form must be one of {VMF_FORMS}, got {form!r}")
    return neg_log_c - lambda2 * dot + lambda1 * kappa


def vmf_options(opt: Namespace | dict) -> dict[str, Any]:
    """The keyword arguments of :func:`nll_vmf` that the options set (options saved before -vmf_form
    existed: the paper's form)."""
    full = upgrade(opt)
    return {
        "lambda1": full.lambda1,
        "lambda2": full.lambda2,
        "approx": full.vmf_approx,
        "form": full.vmf_form,
        "vmf_lambda": full.vmf_lambda,
    }


def build_l2(opt: Namespace, table: Tensor) -> LossFn:
    return lambda output, target: l2(output.float(), table_rows(table, target))


def build_cosine(opt: Namespace, table: Tensor) -> LossFn:
    return lambda output, target: cosine(output.float(), table_rows(table, target))


def build_synmargin(how: str) -> Callable[[Namespace, Tensor], LossFn]:
    def build(opt: Namespace, table: Tensor) -> LossFn:
        margin = opt.margin
        return lambda output, target: syn_margin(output.float(), table_rows(table, target), margin, how)

    return build


def build_margin_random(opt: Namespace, table: Tensor) -> LossFn:
    margin, k = opt.margin, opt.num_negatives
    return lambda output, target: margin_random(output.float(), target, table, margin, k)


def build_nllvmf(opt: Namespace, table: Tensor) -> LossFn:
    kw = vmf_options(opt)
    return lambda output, target: nll_vmf(output, table_rows(table, target), **kw)


# the options of the NLLvMF terms (vmf_options)
VMF_OPTIONS = frozenset({"lambda1", "lambda2", "vmf_approx", "vmf_lambda"})

SPECS = [
    Loss("l2", build_l2, "squared distance to the target vector", criterion="l2"),
    Loss("cosine", build_cosine, "1 - cosine to the target vector"),
    Loss(
        "synmargin_proj",
        build_synmargin("proj"),
        "syn-margin, the synthetic negative by projection (Bhat et al.)",
        reads=frozenset({"margin"}),
    ),
    Loss(
        "synmargin_diff",
        build_synmargin("diff"),
        "syn-margin, the synthetic negative by difference (Bhat et al.)",
        reads=frozenset({"margin"}),
    ),
    Loss(
        "margin_random",
        build_margin_random,
        "margin against -num_negatives uniformly drawn words",
        num_negatives=5,
        reads=frozenset({"margin"}),
    ),
    Loss(
        "nllvmf",
        build_nllvmf,
        "von Mises-Fisher negative log-likelihood (Kumar & Tsvetkov)",
        criterion="vmf",
        vocab_logits="dot",
        vmf=True,
        reads=VMF_OPTIONS,
    ),
]
