r"""The von Mises-Fisher normaliser C_m(kappa) and its derivative, in log space.

Kumar & Tsvetkov (2019), section 3 and appendix 8.2, use the vMF density on the
unit sphere of R^m with concentration kappa = ||e_hat||::

    C_m(k) = k^(m/2-1) / ((2 pi)^(m/2) I_{m/2-1}(k))
    log C_m(k) = (m/2-1) log k - (m/2) log(2 pi) - log I_{m/2-1}(k)
    d/dk log C_m(k) = -I_{m/2}(k) / I_{m/2-1}(k)          (= -vmf_ratio)
    log C_m(0) = log Gamma(m/2) - log 2 - (m/2) log pi     (the limit k -> 0)

I_v is the modified Bessel function of the first kind.  Evaluating it directly
(``scipy.special.ive``) underflows for the sizes used in practice: ive(511, k)
is 0 for k below about 120 (m = 1024), so log C_m becomes inf and the loss and
its gradient are lost.  Everything here is computed in log space, with the
``log k`` that appears in both terms cancelled analytically, so no step ever
forms I_v itself and k = 0, 1e-30 or 1e5 need no special case.

Method.  Write v = m/2 - 1.
  * Order mu >= 16: Debye's uniform asymptotic expansion (DLMF 10.41.3),
    with s = sqrt(mu^2 + k^2), p = mu/s and S(p) = sum_{j<8} u_j(p) / mu^j::

        log I_mu(k) = mu log k - D_mu(k),
        D_mu(k) = -s + mu log(mu + s) + log(s)/2 + log(2 pi)/2 - log S(p),
        I_{mu+1}/I_mu = -D_mu'(k) = k/(mu+s) - k/(2 s^2) - (p k/s^2) S'(p)/S(p).

    It is uniform in k/mu over [0, inf), so one formula covers every kappa.
    The u_j are built exactly (fractions) from the recurrence DLMF 10.41.9;
    the first omitted term, max|u_8|/16^8 ~ 4e-11, estimates the error.
  * Order v < 16 (m < 34): start at mu = v + n (n = ceil(16 - v) steps) and
    run the three-term recurrence downward, which is stable for I_v and is a
    Perron continued fraction for the ratio r_v = I_{v+1}/I_v::

        r_{o-1} = k / (2 o + k r_o),   log I_v = log I_mu - sum log r_o,

    which gives log C_m = D_mu - sum_o log(2 o + k r_o) - (m/2) log(2 pi).

Accuracy (float64, against mpmath at 50 digits): worst error 4e-11 for log C_m
(relative to max(|value|, 1), as log C_m crosses zero) and 1e-10 relative for
the ratio, over kappa in [0, 1e5] (0, 1e-300, 1e-30, 1e-8, log grid, points
near v and sqrt(v)) for all m < 40 and every 7th m up to 1100; larger orders
only make the expansion more accurate.  tests/unit/test_vmf.py asserts 1e-9 for
m in {2, 3, 4, 10, 33, 34, 35, 50, 64, 100, 299, 300, 301, 512, 777, 1024}.  kappa must
be >= 0 (it is a norm); negative input is not checked.  Inputs of any floating
dtype are computed in float64 on their own device and cast back; float32
results are finite over the whole range.

``neg_log_cmk_approx`` is the paper's closed-form surrogate (appendix 8.2).
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from functools import lru_cache

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["LogCmk", "log_cmk", "neg_log_cmk_approx", "vmf_ratio"]

# Smallest order at which the Debye expansion is used, and its number of terms.
# Error ~ max_p |u_8(p)| / 16^8 = 0.17 / 4.3e9 ~ 4e-11: far below the 1e-6
# target, while the downward recurrence below 16 stays a short fixed loop.
_MIN_DEBYE_ORDER = 16
_DEBYE_TERMS = 8
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _debye_polynomials(n_terms: int) -> list[list[Fraction]]:
    """Exact coefficients (ascending powers of p) of u_0..u_{n_terms-1}.

    DLMF 10.41.9: u_{j+1}(p) = p^2 (1-p^2) u_j'(p) / 2 + (1/8) int_0^p (1 - 5t^2) u_j(t) dt.
    Built from the recurrence rather than typed in, so no coefficient can be mistyped.
    """
    polys = [[Fraction(1)]]
    for _ in range(n_terms - 1):
        u = polys[-1]
        nxt = [Fraction(0)] * (len(u) + 3)
        for i, c in enumerate(u):
            if i > 0:  # p^2 (1 - p^2) * i c p^(i-1) / 2
                nxt[i + 1] += i * c / 2
                nxt[i + 3] -= i * c / 2
            nxt[i + 1] += c / (8 * (i + 1))  # integral of c t^i / 8
            nxt[i + 3] -= 5 * c / (8 * (i + 3))  # integral of -5 c t^(i+2) / 8
        polys.append(nxt)
    return polys


_U = _debye_polynomials(_DEBYE_TERMS)


@lru_cache(maxsize=64)
def _debye_coeffs(mu: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Coefficients of S(p) = sum_j u_j(p)/mu^j and S'(p), highest power first.

    mu is a Python scalar (m is an int), so the sum over j collapses into one
    polynomial in p per order: one Horner pass per tensor instead of eight.
    """
    degree = 3 * (_DEBYE_TERMS - 1)
    coef = [Fraction(0)] * (degree + 1)
    mu_frac = Fraction(mu)
    for j, u in enumerate(_U):
        for i, c in enumerate(u):
            coef[i] += c / mu_frac**j
    s_coef = tuple(float(c) for c in reversed(coef))
    ds_coef = tuple(float(i * c) for i, c in reversed(list(enumerate(coef))[1:]))
    return s_coef, ds_coef


def _horner(coeffs: tuple[float, ...], p: Tensor) -> Tensor:
    acc = torch.full_like(p, coeffs[0])
    for c in coeffs[1:]:
        acc = acc * p + c
    return acc


def _check_m(m: int, minimum: int = 2) -> int:
    try:
        m_int = operator.index(m)
    except TypeError:
        raise ValueError(f"m must be an integer dimension >= {minimum}, got {m!r}") from None
    if isinstance(m, bool) or m_int < minimum:
        raise ValueError(f"m must be an integer dimension >= {minimum}, got {m!r}")
    return m_int


def _log_cmk_and_ratio(x: Tensor, m: int, need_ratio: bool) -> tuple[Tensor, Tensor | None]:
    """log C_m(x) and (if asked, or free) I_{m/2}(x)/I_{m/2-1}(x); x is float64, >= 0."""
    nu = m / 2 - 1
    n_up = max(0, math.ceil(_MIN_DEBYE_ORDER - nu))
    mu = nu + n_up
    # Debye at order mu.  mu >= 16, so s >= 16 and every log/division is safe
    # for all x >= 0: no torch.where, hence no NaN hiding in an unused branch.
    s = torch.hypot(x, torch.full_like(x, mu))
    p = mu / s
    s_coef, ds_coef = _debye_coeffs(mu)
    big_s = _horner(s_coef, p)  # 1 + O(1/mu), positive
    log_c = -s + mu * torch.log(mu + s) + 0.5 * torch.log(s) + _HALF_LOG_2PI - torch.log(big_s)
    ratio = None
    if need_ratio or n_up > 0:
        ratio = x / (mu + s) - x / (2 * s * s) - (p * x / (s * s)) * _horner(ds_coef, p) / big_s
    # Downward recurrence mu -> nu: denominators 2o + x r_o >= 2 (o >= 1).
    for j in range(n_up, 0, -1):
        denom = 2 * (nu + j) + x * ratio
        log_c = log_c - torch.log(denom)
        ratio = x / denom
    log_c = log_c - (m / 2) * (2 * _HALF_LOG_2PI)
    return log_c, ratio


def _out_dtype(kappa: Tensor) -> torch.dtype:
    return kappa.dtype if kappa.is_floating_point() else torch.get_default_dtype()


class LogCmk(torch.autograd.Function):
    """log C_m(kappa) with the analytic derivative -I_{m/2}/I_{m/2-1} in backward."""

    @staticmethod
    def forward(ctx, kappa: Tensor, m: int) -> Tensor:  # type: ignore[override]
        need = bool(ctx.needs_input_grad[0])
        log_c, ratio = _log_cmk_and_ratio(kappa.to(torch.float64), m, need)
        out_dtype = _out_dtype(kappa)
        if need:
            # The ratio falls out of the same expansion almost for free, so it
            # is saved instead of being recomputed in backward.
            ctx.save_for_backward(ratio.to(out_dtype))
        return log_c.to(out_dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (ratio,) = ctx.saved_tensors
        return -grad_output * ratio, None


def log_cmk(kappa: Tensor, m: int) -> Tensor:
    """Elementwise log C_m(kappa) for kappa >= 0, differentiable in kappa.

    Accurate to ~1e-9 relative (float64) for kappa in [0, 1e5] and any m >= 2;
    the gradient is -vmf_ratio(kappa, m), exactly 0 at kappa = 0.  Raises
    ValueError unless m is an integer >= 2.
    """
    m = _check_m(m)
    return LogCmk.apply(torch.as_tensor(kappa), m)


def vmf_ratio(kappa: Tensor, m: int) -> Tensor:
    """I_{m/2}(kappa) / I_{m/2-1}(kappa) = -d/dkappa log C_m(kappa), in [0, 1).

    Same accuracy and range as :func:`log_cmk`; 0 at kappa = 0, tends to 1 as
    kappa grows.  Plain torch ops, so it is itself differentiable.
    """
    m = _check_m(m)
    kappa = torch.as_tensor(kappa)
    _, ratio = _log_cmk_and_ratio(kappa.to(torch.float64), m, need_ratio=True)
    return ratio.to(_out_dtype(kappa))


def neg_log_cmk_approx(kappa: Tensor, m: int) -> Tensor:
    """The paper's surrogate for -log C_m(kappa) (appendix 8.2, ``-vmf_approx``).

    With v = m/2 - 1 and s = sqrt((v+1)^2 + kappa^2)::

        neg_log_cmk_approx = s - (v-1) log(v - 1 + s)

    Its derivative kappa / (v - 1 + s) is the Ruiz-Antolin & Segura (2016)
    bound on the exact derivative I_{m/2}/I_{m/2-1} of -log C_m: it lies
    slightly ABOVE the exact ratio (the paper writes it as a lower bound on
    d log C_m / dkappa = -ratio).  The relative gap is largest as kappa -> 0,
    where it is 1/v (0.7% for m = 300, 25% for m = 10).  The VALUE is not
    -log C_m: it is an antiderivative of the bound, so it differs from -log C_m
    by an offset that is nearly constant in kappa (about -258 to -266 over
    kappa in [0, 1e5] at m = 300); only its gradient is meaningful for training.

    Requires m >= 3 (ValueError otherwise): for m = 2, v - 1 + s = s - 1 reaches
    0 at kappa = 0 and the log diverges; for m >= 3, v - 1 + s >= 2v > 0.
    Plain autograd; the result has kappa's dtype.
    """
    m = _check_m(m, minimum=3)
    kappa = torch.as_tensor(kappa)
    v = m / 2 - 1
    # hypot rather than sqrt(a^2 + k^2): no overflow of k^2 in float32, and its
    # gradient k/s is 0 (not NaN) at k = 0 because s >= v + 1 > 0.
    s = torch.hypot(kappa, torch.full_like(kappa, v + 1))
    return s - (v - 1) * torch.log((v - 1) + s)
