"""Mixtures of Gaussians, and the two sampling schemes whose Gaussian mechanism reduces to them:
the bounds of ``mixture_of_gaussians``, ``sampled_with_replacement`` and
``truncated_subsampled_gaussian``, rounded towards more privacy loss.

Every function here is a pure float computation (numpy, scipy), with the directed-rounding
contract of :mod:`odometer_core.accounting.conversions`: a cost is an upper bound of the exact
value (error allowances, then rounded up). The derivations are in ``docs/accounting.md``,
*Mixtures of Gaussians and sampling schemes*.

**Mixture of Gaussians** (Choquette-Choo–Ganesh–Steinke–Thakurta 2023, "Privacy amplification
for matrix mechanisms", arXiv 2310.15526, MMCC): against N(0, σ²) the mechanism outputs
P = Σ_i p_i N(c_i, σ²), c_i ≥ 0 (a vector-valued mixture is dominated by the scalar one with
the norms of its shifts, their Cor. 4.7). In units of σ (s_i = c_i/σ) the privacy loss of P
against Q = N(0, 1) is L(x) = log Σ_i p_i exp(s_i x − s_i²/2), non-decreasing in x (L' is an
average of the s_i ≥ 0), so by Neyman–Pearson the hockey-stick divergence of either direction
is attained on a half-line, and the threshold t parametrises the exact privacy profile:

* remove (P against Q): ε = L(t), δ = Σ_i p_i Φ(s_i − t) − e^{L(t)} Φ(−t);
* add (Q against P): ε = −L(t), δ = Φ(t) − e^{−L(t)} Σ_i p_i Φ(t − s_i).

:func:`mixture_epsilon` searches t for the least ε whose bound on δ (from rigorous error
allowances on L and on log Φ) is at most the target in both directions — the exact profile, no
discretisation (dp_accounting's ``MixtureGaussianPrivacyLoss`` computes the same privacy loss,
discretised; its PLD needs about 1 s of CPU at a 10⁻³ grid for two components).

Its Rényi divergences: e^{(α−1)D_α} is an f-divergence (f(u) = u^α, convex for α > 1) and hence
jointly convex (Csiszár 1967), so coupling component i of P with a copy of Q gives, in **both**
directions, D_α ≤ log(Σ_i p_i e^{α(α−1)s_i²/2})/(α − 1) (:func:`mixture_rdp`), at every real
order; exact for one component. The exact add-direction value has a closed form at integer
orders (the multinomial expansion of E_Q[(P/Q)^α]) but the remove direction has none, and no
theorem that the first dominates the second is known to us beyond the two components of the
Poisson-subsampled Gaussian (Mironov–Talwar–Zhang 2019), so the closed form alone would not be a
sound charge: the convexity bound, which covers both and is never below the closed form, is used
(it amplifies to first order only).

**Sampling with replacement** (m draws out of n, replace-one): the differing record is drawn
K ~ Binomial(m, 1/n) times, and the two samples differ in K places. Balle–Barthe–Gaboardi 2018
("Privacy amplification by subsampling: tight analyses via couplings and divergences", NeurIPS)
Thm 10: with η = 1 − (1 − 1/n)^m and ε' = log(1 + η(e^ε − 1)), the subsampled mechanism is
(ε', Σ_{k≥1} P[K = k]·δ_k(ε))-DP, δ_k the inner mechanism's group privacy profile at distance k:
the Gaussian's of sensitivity kΔ (Balle–Wang 2018 Thm 8, :func:`wr_gaussian_epsilon`), or for
an ε₀-DP mechanism (kε₀-DP by group privacy) (e^{kε₀} − e^ε)₊/(1 + e^{kε₀}), the largest
P(E) − e^ε·Q(E) two distributions within a factor e^{kε₀} on E and on its complement allow
(:func:`wr_pure_epsilon`). Rényi: by joint convexity over the draws, as above,
D_α ≤ log(Σ_k P[K = k]·e^{(α−1)ε_k(α)})/(α − 1) with ε_k the inner curve at distance k
(αk²Δ²/(2σ²), or the pure-DP curve of kε₀, Steinke 2024 Thm 4) (:func:`wr_rdp`).

**Truncated Poisson sampling** (n records, rate q, batches truncated to B by a uniformly random
subset, then the Gaussian mechanism of noise multiplier σ; add/remove): with K ~ Binomial(n − 1,
q) the number of other records sampled, the record changes the batch's sum by at most one
clipping norm when K < B (the Poisson-subsampled Gaussian of rate q), and when K ≥ B it is kept
with probability r_K = q·B/(K + 1) and then displaces another record (at most two clipping
norms). Conditioning on the other records' sample (joint convexity of the hockey-stick and of
e^{(α−1)D_α}), and since both are convex in the rate r with value 0 (resp. 1) at r = 0 — so at
most r/R times their value at any R ≥ r — the divergence is at most

    (1 − P[K ≥ B])·D(q, 1) + Σ_j ρ_j·D(R_j, 2),   ρ_j = Σ_{k in part j} P[K = k]·r_k/R_j,

with Σ_{k≥j} P[K = k]·r_k = (B/n)·P[Bin(n, q) ≥ j + 1], one part R = qB/(B + 1) (split in two
where most batches are truncated, :data:`SPLIT_DEVIATIONS`) and D(r, c) the divergence of the
Poisson-subsampled Gaussian of rate r and shift c (plus P[K ≥ B] − Σρ_j times that of identical
distributions). This is the reduction of dp_accounting's
``from_truncated_subsampled_gaussian_mechanism`` ("Tighter privacy analysis for truncated
Poisson sampling", arXiv 2508.15089, 2025), except that dp_accounting takes the average rate
E[r_K | K ≥ B] for R — which needs that paper's argument, whose theorem we have not checked —
where the chord above needs only convexity, and is never smaller. The modes take the larger of
n and n + 1 records (a record removed, a record added: :func:`truncations_of`).
:func:`truncation` gives the weights; the PLDs are
:func:`odometer_core.accounting.pld.pld_epsilon_truncated`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting.conversions import _round_up
from odometer_core.accounting.declarations import (
    ChargedAs,
    Declaration,
    Exponential,
    Gaussian,
    Laplace,
    MixtureOfGaussians,
    PureDP,
    RandomizedResponse,
    SampledWithReplacement,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import UP, to_float_down, to_float_up

FloatArray = npt.NDArray[np.float64]

_U: Final = 2.0**-52
"""Distance from 1.0 to the next float; error allowances are multiples of it."""

_MAX_DOUBLINGS: Final = 1100
"""Doublings of a search bracket before a bound is declared infinite (2^1100 overflows)."""

_MAX_BISECTIONS: Final = 200
"""Most halvings of a search bracket (it is stopped earlier at :data:`_RELATIVE_WIDTH`)."""

_RELATIVE_WIDTH: Final = 1e-13
"""A threshold search stops when its bracket is this narrow relative to its end: the ε found
is then within about that relative distance of the least one (and is an upper bound in any
case: it is the end at which the bound on δ was verified)."""

BINOMIAL_MARGIN: Final = 1e-9
"""Relative margin on scipy's binomial tails (incomplete beta, accurate to ~1e-14 relative)."""

DROPPED_MASS: Final = math.exp(-40)
"""Draw counts K whose probability is below this fraction of the target δ are not summed one by
one: their total probability (at most m·δ·e^{−40}) is added to δ instead."""


# ---------------------------------------------------------------------------- small helpers
def _lse(terms: FloatArray, errs: FloatArray) -> tuple[float, float]:
    """log Σ e^{terms} and an absolute error bound, given absolute error bounds on the terms."""
    top = float(terms.max())
    if top == -math.inf:
        return -math.inf, 0.0
    if top == math.inf:
        return math.inf, 0.0
    total = float(np.exp(terms - top).sum())
    value = top + math.log(total)
    finite = np.isfinite(terms)
    worst = float(errs[finite].max()) if finite.any() else 0.0
    return value, worst + (2 * terms.size + 8) * _U * (1.0 + abs(value) + abs(top))


def _log_ndtr(x: FloatArray, scale: FloatArray | float) -> tuple[FloatArray, FloatArray]:
    """log Φ(x) and an error bound: scipy's value within a few ulps, plus the error of the
    argument (``scale`` bounds the magnitudes it was computed from) times |d log Φ/dx| ≤ |x| + 1."""
    from scipy import special

    v = np.asarray(special.log_ndtr(x), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        err = 16 * _U * (1.0 + np.abs(v) + (np.abs(x) + 1.0) * (np.abs(scale) + 1.0))
    return v, np.where(np.isfinite(v), err, 0.0)


def _exp_up(x: float) -> float:
    return math.inf if x > 709.0 else math.exp(x) * (1 + 4 * _U)


def _exp_down(x: float) -> float:
    return 0.0 if x < -745.0 else math.exp(x) * (1 - 4 * _U)


def _bisect(ok: object, lo: float, hi: float) -> float:
    """Shrink [lo, hi] (``ok(hi)`` true, ``ok(lo)`` taken false) towards the boundary; returns
    an end at which ``ok`` held. ``ok`` returns the value to keep or ``None``."""
    assert callable(ok)
    best = ok(hi)
    assert best is not None
    for _ in range(_MAX_BISECTIONS):
        if hi - lo <= _RELATIVE_WIDTH * max(1.0, abs(lo), abs(hi)):
            break
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            break
        found = ok(mid)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return float(best)


# ---------------------------------------------------------------------------- mixtures
@dataclass(frozen=True, slots=True)
class Mixture:
    """Σ_i p_i N(s_i, 1) against N(0, 1): the shifts s_i = c_i/σ (rounded up: the divergences
    only grow with them) and log p_i with an error bound (p_i within half an ulp of the exact
    decimal probability)."""

    shifts: FloatArray
    log_probs: FloatArray
    log_prob_errs: FloatArray

    @staticmethod
    def of(shifts: tuple[float, ...], probs: tuple[float, ...]) -> Mixture:
        s = np.asarray(shifts, dtype=np.float64)
        p = np.asarray(probs, dtype=np.float64)
        if s.shape != p.shape or s.size == 0 or (s < 0).any() or (p <= 0).any():
            raise ValueError("a mixture needs shifts ≥ 0 and probabilities > 0, as many")
        lp = np.log(p)
        return Mixture(s, lp, 2 * _U * (1.0 + np.abs(lp)))

    def loss(self, t: float) -> tuple[float, float]:
        """L(t) = log Σ p_i e^{s_i t − s_i²/2} and an error bound."""
        s = self.shifts
        with np.errstate(over="ignore", invalid="ignore"):
            terms = self.log_probs + s * t - s * s / 2.0
            errs = self.log_prob_errs + 8 * _U * (1.0 + np.abs(s * t) + s * s)
        return _lse(terms, errs)

    def remove(self, t: float) -> tuple[float, float]:
        """(ε, δ) at threshold t, P against Q: ε ≥ L(t), δ ≥ Σ p_i Φ(s_i − t) − e^{L(t)}Φ(−t),
        the exact δ at ε = L(t), hence at every ε ≥ L(t)."""
        loss, loss_err = self.loss(t)
        s = self.shifts
        v, v_err = _log_ndtr(s - t, s + abs(t))
        a, a_err = _lse(self.log_probs + v, self.log_prob_errs + v_err)
        b, b_err = _log_ndtr(np.asarray([-t]), abs(t))
        upper = _exp_up(a + a_err)
        lower = _exp_down(loss - loss_err + float(b[0]) - float(b_err[0]))
        return _round_up(loss, loss_err), max(0.0, upper - lower)

    def add(self, t: float) -> tuple[float, float]:
        """(ε, δ) at threshold t, Q against P: ε ≥ −L(t), δ ≥ Φ(t) − e^{−L(t)} Σ p_i Φ(t − s_i)."""
        loss, loss_err = self.loss(t)
        s = self.shifts
        a, a_err = _log_ndtr(np.asarray([t]), abs(t))
        v, v_err = _log_ndtr(t - s, s + abs(t))
        c, c_err = _lse(self.log_probs + v, self.log_prob_errs + v_err)
        upper = _exp_up(float(a[0]) + float(a_err[0]))
        lower = _exp_down(-loss - loss_err + c - c_err)
        return _round_up(-loss, loss_err), max(0.0, upper - lower)


def _remove_epsilon(mix: Mixture, delta: float) -> float:
    """Least ε (up to :data:`_RELATIVE_WIDTH`) of the remove direction at δ."""

    def ok(t: float) -> float | None:
        eps, d = mix.remove(t)
        return max(eps, 0.0) if d <= delta else None

    if ok(0.0) is not None:  # L(0) = log Σ p_i e^{−s_i²/2} ≤ 0: ε = 0 already has δ(0) ≤ δ
        return 0.0
    hi = 1.0
    for _ in range(_MAX_DOUBLINGS):
        if ok(hi) is not None:
            break
        hi *= 2.0
        if math.isinf(hi):
            return math.inf
    else:  # pragma: no cover - δ(t) → 0 as t → ∞
        return math.inf
    return _bisect(ok, hi / 2.0 if hi > 1.0 else 0.0, hi)


def _add_epsilon(mix: Mixture, delta: float) -> float:
    """Least ε (up to :data:`_RELATIVE_WIDTH`) of the add direction at δ: ε = −L(t) grows as the
    threshold t moves left, so the search runs from t₀ (L(t₀) ≥ 0, ε ≤ 0) to the left."""

    def ok(t: float) -> float | None:
        eps, d = mix.add(t)
        return max(eps, 0.0) if d <= delta else None

    j = int(np.argmax(mix.shifts))
    s_j = float(mix.shifts[j])
    # L(t) ≥ log p_j + s_j t − s_j²/2, which is 0 at t₀
    t0 = (-float(mix.log_probs[j]) + s_j * s_j / 2.0) / s_j
    found = ok(t0)
    if found is not None:
        return found
    step = 1.0
    for _ in range(_MAX_DOUBLINGS):
        if ok(t0 - step) is not None:
            break
        step *= 2.0
        if math.isinf(step):
            return math.inf
    else:  # pragma: no cover - δ(t) → 0 as t → −∞
        return math.inf
    lo = t0 - step  # ok here; t0 − step/2 was not

    def ok_left(u: float) -> float | None:  # search over u = t0 − t, ok for u large
        return ok(t0 - u)

    return _bisect(ok_left, step / 2.0 if step > 1.0 else 0.0, t0 - lo)


def mixture_epsilon(mix: Mixture, delta: float) -> float:
    """The least ε (up to a relative 1e-13, rounded up) such that the mixture is (ε, δ)-DP in
    both directions: the exact privacy profile of P = Σ p_i N(s_i, 1) against N(0, 1), with
    rigorous error allowances. δ = 0 → ∞ unless every shift is 0."""
    if not (mix.shifts > 0).any():
        return 0.0
    if not np.isfinite(mix.shifts).all() or delta <= 0.0:
        return math.inf
    if delta >= 1.0:
        return 0.0
    return max(_remove_epsilon(mix, delta), _add_epsilon(mix, delta))


def mixture_rdp(mix: Mixture, orders: FloatArray) -> FloatArray:
    """log(Σ p_i e^{α(α−1)s_i²/2})/(α − 1) at each order α > 1, rounded up: an upper bound on
    D_α in both directions (joint convexity of e^{(α−1)D_α})."""
    a = np.asarray(orders, dtype=np.float64)
    s2 = mix.shifts * mix.shifts
    out = np.empty_like(a)
    for i, alpha in enumerate(a.tolist()):
        with np.errstate(over="ignore", invalid="ignore"):
            expo = alpha * (alpha - 1.0) * s2 / 2.0
        terms = mix.log_probs + expo
        errs = mix.log_prob_errs + 8 * _U * (1.0 + expo)
        value, err = _lse(terms, errs)
        if math.isinf(value):
            out[i] = value
            continue
        out[i] = _round_up(max(value, 0.0) / (alpha - 1.0), (err + _U * value) / (alpha - 1.0))
    return out


# ---------------------------------------------------------------------------- with replacement
@dataclass(frozen=True, slots=True)
class Copies:
    """K ~ Binomial(m, 1/n), the copies of one record in m draws with replacement out of n:
    ``ks`` and upper bounds ``log_probs`` on log P[K = k] for the draws kept, ``dropped`` an
    upper bound on P[K ≥ 1, K not kept], ``eta`` an upper bound on P[K ≥ 1]."""

    ks: FloatArray
    log_probs: FloatArray
    dropped: float
    eta: float


def copies(n: int, m: int, keep_above: float = 0.0) -> Copies:
    """The law of K (every k when ``keep_above`` is 0; else only the k ≥ 1 with
    P[K = k] ≥ ``keep_above``, the rest counted in ``dropped``). log P[K = 0] = m·log(1 − 1/n),
    then the ratios P[K = k + 1]/P[K = k] = (m − k)/((k + 1)(n − 1)), summed in logs with an
    error allowance of a few ulps per term."""
    if n < 1 or m < 1:
        raise ValueError("copies needs n ≥ 1 and m ≥ 1")
    if n == 1:  # every draw is the record
        return Copies(np.asarray([float(m)]), np.zeros(1), 0.0, 1.0)
    log0 = m * math.log1p(-1.0 / n)
    k = np.arange(m, dtype=np.float64)
    ratios = np.log(m - k) - np.log(k + 1.0) - math.log(n - 1)
    logs = np.concatenate(([log0], log0 + np.cumsum(ratios)))
    sizes = np.concatenate(([0.0], np.cumsum(np.abs(ratios))))
    ks = np.arange(m + 1, dtype=np.float64)
    errs = 8 * _U * ((ks + 2.0) * (1.0 + abs(log0) + np.abs(logs)) + sizes)
    upper = np.minimum(logs + errs, 0.0)
    eta = _round_up(-math.expm1(log0), 4 * _U * (1.0 + abs(log0)))
    if keep_above <= 0.0:
        return Copies(ks, upper, 0.0, min(eta, 1.0))
    keep = upper >= math.log(keep_above)
    keep[0] = False  # K = 0: the samples are identical
    rest = np.exp(upper[1:][~keep[1:]])
    dropped = float(rest.sum()) * (1 + (rest.size + 4) * _U)
    return Copies(ks[keep], upper[keep], dropped, min(eta, 1.0))


def _amplified(eta: float, eps: float) -> float:
    """ε' = log(1 + η(e^ε − 1)) = ε + log(η + (1 − η)e^{−ε}), rounded up (BBG18 Thm 10)."""
    if math.isinf(eps):
        return math.inf
    inner = eta + (1.0 - eta) * math.exp(-eps)
    value = eps + math.log(inner)
    return _round_up(max(value, 0.0), 8 * _U * (1.0 + eps + abs(math.log(inner))))


def _log_gaussian_delta(mu: FloatArray, eps: float) -> FloatArray:
    """Upper bounds on log δ(ε) of the Gaussian mechanism at each μ = Δ/σ > 0 (Balle–Wang 2018
    Thm 8: Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)), as
    :func:`odometer_core.accounting.conversions.gdp_delta` evaluates it."""
    from scipy import special

    x1 = mu / 2.0 - eps / mu
    x2 = -eps / mu - mu / 2.0
    la = np.asarray(special.log_ndtr(x1), dtype=np.float64)
    lb = eps + np.asarray(special.log_ndtr(x2), dtype=np.float64)
    err_a = 16 * _U * (np.abs(la) + np.abs(x1) + 1.0)
    err_b = 16 * _U * (np.abs(lb) + np.abs(x2) + eps + 1.0)
    gap = lb - la - err_a - err_b
    with np.errstate(divide="ignore"):
        tail = np.log(-np.expm1(np.minimum(gap, -1e-300)))
    return np.where(gap >= 0.0, la + err_a, la + err_a + tail)


def _least_epsilon(total: object, delta: float, top: float = math.inf) -> float:
    """The least ε ≥ 0 (up to :data:`_RELATIVE_WIDTH`) with ``total(ε) ≤ δ`` (``total``
    non-increasing), searched by doubling then bisection; ``top``: a known answer."""
    assert callable(total)

    def ok(eps: float) -> float | None:
        return eps if total(eps) <= delta else None

    if ok(0.0) is not None:
        return 0.0
    hi = 1.0
    for _ in range(_MAX_DOUBLINGS):
        if hi >= top:
            hi = top
            break
        if ok(hi) is not None:
            break
        hi *= 2.0
    if math.isinf(hi):
        return math.inf
    return _bisect(ok, hi / 2.0 if hi > 1.0 else 0.0, hi)


def wr_gaussian_epsilon(draws: Copies, mu: float, delta: float) -> float:
    """ε' at δ of the Gaussian mechanism (μ = Δ/σ, rounded up) on m draws with replacement out of
    n (BBG18 Thm 10): the least ε with Σ_k P[K = k]·δ_G(ε; kμ) + dropped ≤ δ, then
    ε' = log(1 + η(e^ε − 1)), rounded up."""
    if mu == 0.0:
        return 0.0
    if math.isinf(mu) or delta <= 0.0:
        return math.inf
    mus = np.nextafter(draws.ks * mu, math.inf)
    log_b = draws.log_probs
    size = 1 + (log_b.size + 4) * _U

    def total(eps: float) -> float:
        terms = np.exp(log_b + _log_gaussian_delta(mus, eps))
        return float(terms.sum()) * size + draws.dropped

    return _amplified(draws.eta, _least_epsilon(total, delta))


def _log_group_delta(group: FloatArray, eps: float) -> FloatArray:
    """Upper bounds on log δ(ε) of a (kε₀)-DP mechanism, group = kε₀: log((e^{kε₀} − e^ε)₊/
    (1 + e^{kε₀})) = log(−expm1(ε − kε₀)) − log1p(e^{−kε₀}); −∞ where kε₀ ≤ ε."""
    out = np.full_like(group, -np.inf)
    live = group > eps
    gap = eps - group[live]
    value = np.log(-np.expm1(gap)) - np.log1p(np.exp(-group[live]))
    out[live] = value + 16 * _U * (1.0 + np.abs(value) + group[live] + eps)
    return out


def wr_pure_epsilon(draws: Copies, epsilon0: float, delta: float, m: int) -> tuple[float, bool]:
    """(ε', pure) of an ε₀-DP mechanism on m draws with replacement (BBG18 Thm 10): the least ε
    with Σ_k P[K = k]·(e^{kε₀} − e^ε)₊/(1 + e^{kε₀}) + dropped ≤ δ, amplified; ``pure`` when
    that needs ε = mε₀ anyway, where every δ_k is 0 and the charge is (ε', 0)."""
    if epsilon0 == 0.0:
        return 0.0, True
    if math.isinf(epsilon0):
        return math.inf, True
    full = _round_up(m * epsilon0)
    pure = _amplified(draws.eta, full)
    if delta <= 0.0:
        return pure, True
    groups = np.nextafter(draws.ks * epsilon0, math.inf)
    log_b = draws.log_probs
    size = 1 + (log_b.size + 4) * _U

    def total(eps: float) -> float:
        terms = np.exp(log_b + _log_group_delta(groups, eps))
        return float(terms.sum()) * size + draws.dropped

    found = _amplified(draws.eta, _least_epsilon(total, delta, top=full))
    return (pure, True) if found >= pure else (found, False)


def _pure_rdp_grid(group: FloatArray, orders: FloatArray) -> FloatArray:
    """The randomized-response curve of kε₀ at each order (rows: orders, columns: k), rounded
    up: [αε + log(1 + e^{(1−2α)ε}) − log(1 + e^ε)]/(α − 1), capped at ε (Steinke 2024 Thm 4,
    as :func:`odometer_core.accounting.conversions.pure_dp_rdp`)."""
    a = orders[:, None]
    e = group[None, :]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        t_small = np.logaddexp(0.0, -e)
        t_big = np.logaddexp(0.0, -(2.0 * a - 1.0) * e)
        val = e - (t_small - t_big) / (a - 1.0)
        err = 8 * _U * (e + (np.abs(t_small) + np.abs(t_big)) / (a - 1.0))
    out = np.nextafter(np.nextafter(val + err + _U * np.abs(val), np.inf), np.inf)
    return np.asarray(np.where(e == 0.0, 0.0, np.minimum(out, e)), dtype=np.float64)


def wr_rdp(
    draws: Copies, orders: FloatArray, *, mu: float | None, epsilon0: float | None
) -> FloatArray:
    """log(Σ_k P[K = k]·e^{(α−1)ε_k(α)})/(α − 1) at each order, rounded up, over every k
    (``draws`` with nothing dropped): ε_k(α) = αk²μ²/2 for the Gaussian (μ = Δ/σ), the
    randomized-response curve of kε₀ for an ε₀-DP mechanism. One order at a time: (m + 1)
    terms each."""
    a = np.asarray(orders, dtype=np.float64)
    k = draws.ks
    out = np.empty_like(a)
    for i, alpha in enumerate(a.tolist()):
        if mu is not None:
            mus = np.nextafter(k * mu, math.inf)
            with np.errstate(over="ignore", invalid="ignore"):
                cgf = (alpha - 1.0) * alpha * (mus * mus) / 2.0
            cgf_err = 8 * _U * (1.0 + cgf)
        else:
            assert epsilon0 is not None
            row = _pure_rdp_grid(np.nextafter(k * epsilon0, math.inf), np.asarray([alpha]))[0]
            cgf = (alpha - 1.0) * row
            cgf_err = 4 * _U * (1.0 + cgf)
        value, err = _lse(draws.log_probs + cgf, cgf_err)
        if math.isinf(value):
            out[i] = value
            continue
        out[i] = _round_up(max(value, 0.0) / (alpha - 1.0), (err + _U * value) / (alpha - 1.0))
    return out


# ---------------------------------------------------------------------------- truncation
SPLIT_DEVIATIONS: Final = 10.0
"""Where most batches are truncated (B below the mean of K), the chord is split at
k* = ⌊E[K] − 10·sd(K)⌋: the rates r_k for k ≥ k* are within a few standard deviations of the
typical one, and P[B ≤ K < k*] is at most about e^{−50}."""


@dataclass(frozen=True, slots=True)
class Truncation:
    """The weights of truncated Poisson sampling's bound (module docstring): ``untruncated`` ≥
    1 − P[K ≥ B] (the Poisson-subsampled Gaussian of rate q); ``parts``, pairs (R_j, ρ_j): the
    replace-one Poisson-subsampled Gaussian of rate R_j and two clipping norms, weight ρ_j ≥
    Σ_{k in part j} P[K = k]·r_k/R_j with R_j ≥ r_k there; ``idle`` ≤ P[K ≥ B] − Σ_j ρ_j
    (identical distributions; 0 when the bounds cross)."""

    untruncated: float
    parts: tuple[tuple[float, float], ...]
    idle: float


def _tail(k: int, n: int, q: float) -> float:
    """P[Bin(n, q) ≥ k + 1], scipy's value."""
    return float(_binom().sf(k, n, q))


def _binom() -> Any:
    """scipy's binomial law, imported when needed (scipy.stats takes a while to import)."""
    from scipy import stats

    return stats.binom


def truncation(n: int, q_low: float, q_high: float, batch: int) -> Truncation:
    """The weights for n records, a rate q in [``q_low``, ``q_high``] (the declared decimal
    rate's float neighbours; each weight is bounded by the end of the interval that makes it
    larger, as binomial tails only grow with q) and batches truncated to ``batch`` = B.

    With r_k = qB/(k + 1) and Σ_{k ≥ j} P[K = k]·r_k = (B/n)·P[Bin(n, q) ≥ j + 1] (K ~ Bin(n − 1,
    q)), the k ≥ B are split at k* = max(B, ⌊E[K] − 10·sd(K)⌋) (:data:`SPLIT_DEVIATIONS`):
    [B, k*) with R = qB/(B + 1) and [k*, n − 1] with R = qB/(k* + 1). Scipy's binomial tails
    are widened by :data:`BINOMIAL_MARGIN`."""
    if n < 1 or batch < 1 or not 0.0 <= q_low <= q_high <= 1.0:
        raise ValueError("truncation needs n ≥ 1, B ≥ 1 and 0 ≤ q ≤ 1")
    if batch >= n:  # K ≤ n − 1 < B: no batch is ever truncated
        return Truncation(1.0, (), 0.0)
    up, down = 1 + BINOMIAL_MARGIN, 1 - BINOMIAL_MARGIN
    truncated_low = _tail(batch - 1, n - 1, q_low) * down
    mean = (n - 1) * q_low
    split = max(batch, math.floor(mean - SPLIT_DEVIATIONS * math.sqrt(mean * (1 - q_low))))
    parts: list[tuple[float, float]] = []
    if split > batch:
        # P[B + 1 ≤ Bin(n, q) ≤ k*] ≤ P_{q_low}[Bin ≤ k*] − P_{q_high}[Bin ≤ B]
        low_mass = float(_binom().cdf(split, n, q_low)) * up
        low_mass -= float(_binom().cdf(batch, n, q_high)) * down
        rate = min(1.0, _round_up(q_high * batch / (batch + 1)))
        if low_mass > 0.0:
            parts.append((rate, min(1.0, _round_up(batch / n * low_mass / rate, 8 * _U))))
    high_mass = _tail(split, n, q_high) * up
    if high_mass > 0.0:
        rate = min(1.0, _round_up(q_high * batch / (split + 1)))
        parts.append((rate, min(1.0, _round_up(batch / n * high_mass / rate, 8 * _U))))
    untruncated = min(1.0, _round_up(1.0 - truncated_low))
    idle = max(0.0, (truncated_low - sum(w for _, w in parts)) * (1 - 8 * _U))
    return Truncation(untruncated, tuple(parts), idle)


def truncated_rdp(
    weights: Truncation, first: FloatArray, parts: tuple[FloatArray, ...], orders: FloatArray
) -> FloatArray:
    """log(u·e^{(α−1)ε₁(α)} + Σ_j ρ_j·e^{(α−1)ε_j(α)} + i)/(α − 1) at each order, rounded up:
    the Rényi bound of truncated Poisson sampling from the curves ε₁ (rate q, one clipping norm)
    and ε_j (rate R_j, two clipping norms) of the Poisson-subsampled Gaussian (upper bounds in
    both directions: Mironov–Talwar–Zhang 2019)."""
    a = np.asarray(orders, dtype=np.float64)
    out = np.empty_like(a)
    weights_all = (weights.untruncated, *(w for _, w in weights.parts), weights.idle)
    logs = np.asarray([math.log(w) if w > 0 else -math.inf for w in weights_all])
    for i, alpha in enumerate(a.tolist()):
        curves = [float(first[i]), *(float(c[i]) for c in parts), 0.0]
        with np.errstate(over="ignore", invalid="ignore"):
            cgf = (alpha - 1.0) * np.asarray(curves)
        terms = logs + cgf
        errs = 4 * _U * (1.0 + np.abs(np.where(np.isfinite(terms), terms, 0.0)))
        value, err = _lse(terms, errs)
        if math.isinf(value):
            out[i] = value
            continue
        out[i] = _round_up(max(value, 0.0) / (alpha - 1.0), (err + _U * value) / (alpha - 1.0))
    return out


# ---------------------------------------------------------------------------- from declarations
def of_declaration(decl: MixtureOfGaussians) -> Mixture | None:
    """The declared mixture in units of σ: s_i = c_i/σ rounded up, p_i the nearest floats;
    ``None`` when every c_i is 0 (the two outputs have the same law)."""
    if all(c == 0 for c in decl.sensitivities):
        return None
    shifts = tuple(to_float_up(UP.divide(c, decl.standard_deviation)) for c in decl.sensitivities)
    return Mixture.of(shifts, tuple(float(p) for p in decl.sampling_probs))


def inner_of(decl: SampledWithReplacement) -> tuple[float | None, float | None]:
    """(μ, ε₀) of the inner mechanism: μ = Δ/σ rounded up for the Gaussian (∞ for σ = 0 < Δ),
    else the ε of an ε-DP kind rounded up (the kind that states the guarantee of a
    ``discrete_laplace`` or ``report_noisy_max``); the other is ``None``."""
    inner: Declaration = decl.mechanism
    if isinstance(inner, ChargedAs):
        inner = inner.charged_as()
    if isinstance(inner, Gaussian):
        return to_float_up(inner.ratio), None
    if isinstance(inner, PureDP | RandomizedResponse | Exponential | Laplace):
        return None, to_float_up(inner.epsilon)
    raise ValueError(f"no group privacy profile for '{inner.kind}'")  # pragma: no cover


def truncations_of(decl: TruncatedSubsampledGaussian) -> tuple[Truncation, Truncation]:
    """:func:`truncation` of a declaration (its rate's float neighbours) for both pairs of
    neighbours of a dataset of n records: the record removed (n records with it, as
    dp_accounting counts) and a record added (n + 1). The bound is not monotone in n, so each
    mode charges the larger of the two."""
    q = decl.sampling_probability
    low, high = to_float_down(q), to_float_up(q)
    n, batch = decl.dataset_size, decl.truncated_batch_size
    return truncation(n, low, high, batch), truncation(n + 1, low, high, batch)


def refusal(mode: str, decl: Declaration) -> str:
    """Why mode ``mode`` (``zcdp``, ``gdp``) refuses ``decl`` (one of the kinds here)."""
    worst = {
        "mixture_of_gaussians": "c²/(2σ²), c its largest shift",
        "truncated_subsampled_gaussian": "1/(2σ²) (one clipping norm)",
        "sampled_with_replacement": "m²Δ²/(2σ²) (the record drawn m times)",
    }
    gaussian = not isinstance(decl, SampledWithReplacement) or inner_of(decl)[0] is not None
    if mode == "zcdp" and gaussian:
        why = (
            "ρ must bound D_α/α at every order, and as α → ∞ that ratio reaches at least the "
            f"unamplified Gaussian's {worst[decl.kind]}, so ρ cannot state the amplification"
        )
    elif mode == "zcdp":
        why = "no zCDP bound of sampling with replacement is implemented"
    else:
        why = (
            "no theorem makes a mixture of Gaussians or a sampled mechanism μ-GDP with an "
            "amplified μ (central-limit approximations are not certified bounds)"
        )
    return (
        f"mode '{mode}' cannot account '{decl.kind}': {why}; use a dataset or sub-budget in mode "
        "'basic' (an (ε, δ) at its conversion δ) or 'rdp' (a Rényi bound for both directions)"
    )
