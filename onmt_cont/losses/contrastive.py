"""Contrastive losses of continuous-output models: the prediction ê [N, m] against its gold word
and negative words of the frozen unit table, found by :mod:`onmt_cont.losses.negatives`.

- ``maxmargin``: Lazaridou et al.'s max-margin loss with the K hardest negatives among the
  candidates (``-negatives exact -num_negatives 1`` is the paper's loss over the whole table);
- ``infonce``: cross-entropy of the gold word among itself and the negatives, logits
  cos(ê, e_j)/τ (a sampled softmax over the fixed table; new here);
- ``nllvmf_nce``: NLLvMF plus a weighted cross-entropy of the gold word among itself and the
  negatives with logits êᵀe_j, i.e. the vMF density renormalised over those words (new here).

All return per-token losses [N] in float32. infonce and nllvmf_nce also take

- a learned per-word bias b (-word_bias: the generator's output is a :class:`BiasedVector`), added
  to every logit, the gold word's included: logits (cos(ê, e_j) + b_j)/τ and êᵀe_j + b_j;
- the correction for how the candidates were drawn (-sampling_correction): each negative's logit
  minus log E(j), its expected count among the candidates
  (:meth:`~onmt_cont.losses.negatives.Negatives.log_expected_counts`). The gold word is always
  there and keeps its logit.
"""

from argparse import Namespace

import torch
import torch.nn.functional as F
from torch import Tensor

from onmt_cont.losses.continuous import VMF_OPTIONS, nll_vmf, vmf_options
from onmt_cont.losses.negatives import PREFIX_WINDOW, Negatives, candidate_ids, invalid, parse_sources
from onmt_cont.losses.shared_block import shared_logsumexp
from onmt_cont.losses.spec import Loss, LossFn
from onmt_cont.losses.token_dots import candidate_dots, table_rows
from onmt_cont.opts import upgrade
from onmt_cont.outputs import BiasedVector
from onmt_cont.utils.amp import outside_autocast


def hardest_negatives(
    unit: Tensor, target: Tensor, table: Tensor, shared: Tensor | None, per_token: Tensor | None, k: int
) -> tuple[Tensor, Tensor]:
    """The k candidates with the largest cos(ê, e_j) − cos(e(w), e_j) (Lazaridou et al.'s most
    informative negatives), chosen without gradient. unit [N, m] (ê/‖ê‖), target [N] ->
    (ids [N, k'], valid [N, k']) with k' = min(k, candidates); invalid where fewer than k' of a
    token's candidates are negatives."""
    with torch.no_grad():
        # cos(ê, e_j) − cos(e(w), e_j) = (ê/‖ê‖ − e(w))ᵀe_j: one product instead of two
        crit = candidate_dots(unit - table_rows(table, target), table, shared, per_token)
        crit.masked_fill_(invalid(target, shared, per_token), float("-inf"))
        top = crit.topk(min(k, crit.size(1)), dim=1)
        return candidate_ids(top.indices, shared, per_token), torch.isfinite(top.values)


def max_margin_k(pred: Tensor, target: Tensor, table: Tensor, negatives: Negatives, margin: float, k: int) -> Tensor:
    """mean over the k hardest negatives w′ of max(0, γ + cos(ê, e(w′)) − cos(ê, e(w))); a token
    with fewer valid negatives averages over those it has (none: loss 0)."""
    unit = F.normalize(pred, dim=-1, eps=1e-8)
    shared, per_token = negatives(unit, target)
    ids, valid = hardest_negatives(unit, target, table, shared, per_token, k)
    with outside_autocast(unit.device.type):  # float32, as candidate_dots
        neg_cos = torch.einsum("nm,nkm->nk", unit.float(), table_rows(table, ids.clamp_min(0)).float())
    pos_cos = (unit * table_rows(table, target)).sum(-1, keepdim=True)
    hinge = torch.relu(margin + neg_cos - pos_cos) * valid
    return hinge.sum(-1) / valid.sum(-1).clamp_min(1)


def unique_shared(shared: Tensor | None, n_per_token: int) -> tuple[Tensor, Tensor] | tuple[None, None]:
    """The shared candidate ids [S] (the in-batch ones repeat the batch's frequent words) -> (each
    word once [U], the [U + n_per_token] log-count offsets of the candidate logits, 0 for the
    per-token ones), or (None, None) without shared ids. A candidate that is k times in the list
    weighs in the softmax as one with logit + log k, and every copy has the same logit and the
    same expected count, so the losses are unchanged while they score U ≤ S words (a batch of
    short sentences repeats its frequent words many times)."""
    if shared is None:
        return None, None
    words, counts = torch.unique(shared, return_counts=True)
    offsets = torch.cat([counts.float().log(), counts.new_zeros(n_per_token, dtype=torch.float32)])
    return words, offsets


def candidate_cross_entropy(pos: Tensor, dots: Tensor, mask: Tensor) -> Tensor:
    """−log softmax of the gold logit ``pos`` [N] among itself and the negatives' ``dots`` [N, C]
    (``mask`` [N, C]: True where a candidate is no negative and is left out)."""
    logits = torch.cat([pos.unsqueeze(1), dots.masked_fill(mask, float("-inf"))], 1)
    return torch.logsumexp(logits, 1) - pos


def _corrected_logits(
    dots: Tensor,
    target: Tensor,
    negatives: Negatives,
    shared: Tensor | None,
    per_token: Tensor | None,
    repeats: Tensor | None,
    correct: bool,
) -> Tensor:
    """The negatives' logits from their dots [N, S + C] (bias included): −log E subtracted with
    ``correct``, the log of the shared words' copies added."""
    if correct:
        dots = dots - negatives.log_expected_counts(target, shared, per_token)
    return dots if repeats is None else dots + repeats


def _corrected_cross_entropy(
    pos: Tensor,
    dots: Tensor,
    target: Tensor,
    negatives: Negatives,
    shared: Tensor | None,
    per_token: Tensor | None,
    repeats: Tensor | None,
    correct: bool,
) -> Tensor:
    """The contrastive term from the gold logits pos [N] and the negatives' dots [N, S + C]."""
    dots = _corrected_logits(dots, target, negatives, shared, per_token, repeats, correct)
    return candidate_cross_entropy(pos, dots, invalid(target, shared, per_token))


def _with_bias(
    pos: Tensor, dots: Tensor, target: Tensor, shared: Tensor | None, per_token: Tensor | None, bias: Tensor
) -> tuple[Tensor, Tensor]:
    """The gold logits [N] and the negatives' [N, S + C] plus the word bias b [V] of their words."""
    parts = []
    if shared is not None:
        parts.append(bias[shared].expand(target.numel(), -1))
    if per_token is not None:
        parts.append(bias[per_token.clamp_min(0)])
    return pos + bias[target], dots + torch.cat(parts, 1)


def _split(output: Tensor | BiasedVector) -> tuple[Tensor, Tensor | None]:
    """A continuous generator's output -> (ê float32 [N, m], bias [V] or None)."""
    if isinstance(output, BiasedVector):
        return output.vector.float(), output.bias.float()
    return output.float(), None


def info_nce(
    pred: Tensor,
    target: Tensor,
    table: Tensor,
    negatives: Negatives,
    temperature: float,
    bias: Tensor | None = None,
    correct: bool = False,
) -> Tensor:
    """InfoNCE / sampled softmax: −log exp(s(w)) / Σ_{j ∈ {w} ∪ negatives} exp(s(j)), with
    s(j) = (cos(ê, e_j) + b_j)/τ (− log E(j) for the negatives with ``correct``)."""
    unit = F.normalize(pred, dim=-1, eps=1e-8)
    shared, per_token = negatives(unit, target)
    shared, repeats = unique_shared(shared, 0 if per_token is None else per_token.size(1))
    pos, dots = (unit * table_rows(table, target)).sum(-1), candidate_dots(unit, table, shared, per_token)
    if bias is not None:  # in cosine units: the temperature scales it with the cosine
        pos, dots = _with_bias(pos, dots, target, shared, per_token, bias)
    pos, dots = pos / temperature, dots / temperature
    return _corrected_cross_entropy(pos, dots, target, negatives, shared, per_token, repeats, correct)


def nll_vmf_nce(
    pred: Tensor,
    target: Tensor,
    table: Tensor,
    negatives: Negatives,
    weight: float,
    lambda1: float,
    lambda2: float,
    approx: bool,
    bias: Tensor | None = None,
    correct: bool = False,
    form: str = "paper",
    vmf_lambda: float = 0.2,
) -> Tensor:
    """NLLvMF(ê, e(w)) (in ``form``: continuous.nll_vmf) + weight · (−log of the vMF density of w
    renormalised over {w} ∪ negatives).

    log C_m(‖ê‖) is the same for every word, so that renormalised density is a softmax of êᵀe_j:
    ‖ê‖ = κ plays the part of InfoNCE's 1/τ and is learned, so there is no temperature. With a
    bias the logits are êᵀe_j + b_j (the NLLvMF term does not see it)."""
    pred = pred.float()
    shared, per_token = negatives(F.normalize(pred, dim=-1, eps=1e-8), target)
    shared, repeats = unique_shared(shared, 0 if per_token is None else per_token.size(1))
    gold = table_rows(table, target)
    parts = _chunked_parts(pred, target, gold, table, negatives, shared, per_token, repeats, bias, correct)
    if parts is not None:
        contrast = parts
    else:
        pos, dots = (pred * gold).sum(-1), candidate_dots(pred, table, shared, per_token)
        if bias is not None:
            pos, dots = _with_bias(pos, dots, target, shared, per_token, bias)
        contrast = _corrected_cross_entropy(pos, dots, target, negatives, shared, per_token, repeats, correct)
    return nll_vmf(pred, gold, lambda1, lambda2, approx, form, vmf_lambda) + weight * contrast


# Far below any logit, finite: a token none of whose per-token candidates is a negative gets exp(·) = 0 from
# them, and a gradient of 0 (an all −inf row's logsumexp has a NaN gradient)
_DEAD = -1e30


def _chunked_parts(pred, target, gold, table, negatives, shared, per_token, repeats, bias, correct):
    """The contrastive term of nll_vmf_nce with the shared candidates' part in row chunks
    (:mod:`onmt_cont.losses.shared_block`), on the CPU, for a frozen table and the unigram and batch rules;
    None where it does not apply (the unfused composition then runs)."""
    if shared is None or repeats is None or pred.device.type != "cpu" or table.requires_grad:
        return None  # repeats: unique_shared's offsets, which say the shared ids are distinct
    expected = negatives.log_expected_parts(target, shared, per_token) if correct else (None, None, None)
    if expected is None:  # the sentence rule
        return None
    col_expected, hits, own_expected = expected
    u = shared.numel()
    pos = (pred * gold).sum(-1)
    gold_dot = pos  # the shared block's reference near each row's top logit
    col = repeats[:u]
    if bias is not None:
        pos, col = pos + bias[target], col + bias[shared]
    add = None
    if col_expected is not None:
        col = col - col_expected
        if hits is not None:
            rows, cols, got = hits
            add = rows, cols, col_expected[cols] - got  # their own log E replaces the column's
    col = col.masked_fill(shared <= 0, float("-inf"))
    column = torch.full((table.size(0),), -1, dtype=torch.long, device=shared.device)
    column[shared] = torch.arange(u, device=shared.device)
    found = column[target]
    dead = (found >= 0).nonzero().squeeze(1)
    lse = [pos, shared_logsumexp(pred, table_rows(table, shared), col, add, (dead, found[dead]), shift=gold_dot)]
    if per_token is not None:
        dots = candidate_dots(pred, table, None, per_token)
        if bias is not None:
            dots = dots + bias[per_token.clamp_min(0)]
        if own_expected is not None:
            dots = dots - own_expected
        lse.append(torch.logsumexp(dots.masked_fill(invalid(target, None, per_token), _DEAD), 1))
    return torch.logsumexp(torch.stack(lse, 1), 1) - pos


def build_negatives(opt: Namespace, table: Tensor, log_prior: Tensor | None = None) -> Negatives:
    default = next(s.negatives for s in SPECS if s.name == opt.loss)  # every contrastive loss has one
    sources = parse_sources(opt.negatives or default or "")
    opt = upgrade(opt)
    window = opt.prefix_window or PREFIX_WINDOW
    counts = opt.expected_counts or "unigram"  # options saved before it: the unigram rule
    return Negatives(
        sources, table, opt.num_sampled, opt.ann_candidates, log_prior=log_prior, prefix_window=window, counts=counts
    )


def build_maxmargin(opt: Namespace, table: Tensor) -> LossFn:
    negatives, margin, k = build_negatives(opt, table), opt.margin, opt.num_negatives or 1
    return lambda output, target: max_margin_k(output.float(), target, table, negatives, margin, k)


def build_infonce(opt: Namespace, table: Tensor, log_prior: Tensor | None = None) -> LossFn:
    negatives, tau = build_negatives(opt, table, log_prior), opt.temperature
    correct = upgrade(opt).sampling_correction

    def loss(output: Tensor | BiasedVector, target: Tensor) -> Tensor:
        pred, bias = _split(output)
        return info_nce(pred, target, table, negatives, tau, bias, correct)

    return loss


def build_nllvmf_nce(opt: Namespace, table: Tensor, log_prior: Tensor | None = None) -> LossFn:
    negatives = build_negatives(opt, table, log_prior)
    w, kw = opt.contrastive_weight, vmf_options(opt)
    correct = upgrade(opt).sampling_correction

    def loss(output: Tensor | BiasedVector, target: Tensor) -> Tensor:
        pred, bias = _split(output)
        return nll_vmf_nce(
            pred,
            target,
            table,
            negatives,
            w,
            kw["lambda1"],
            kw["lambda2"],
            kw["approx"],
            bias,
            correct,
            kw["form"],
            kw["vmf_lambda"],
        )

    return loss


SPECS = [
    Loss(
        "maxmargin",
        build_maxmargin,
        "max-margin against the -num_negatives hardest of -negatives (Lazaridou et al.)",
        negatives="exact",
        num_negatives=1,
        reads=frozenset({"margin"}),
    ),
    Loss(
        "infonce",
        build_infonce,
        "cross-entropy of the gold word among -negatives, cosine logits / -temperature",
        vocab_logits="cosine",
        negatives="inbatch,random,gold_nn",
        candidate_logits=True,
        temperature=True,
        reads=frozenset({"temperature"}),
    ),
    Loss(
        "nllvmf_nce",
        build_nllvmf_nce,
        "NLLvMF + -contrastive_weight x the vMF renormalised over -negatives",
        criterion="vmf",
        vocab_logits="dot",
        negatives="inbatch,random,gold_nn",
        candidate_logits=True,
        vmf=True,
        reads=VMF_OPTIONS | {"contrastive_weight"},
    ),
]
