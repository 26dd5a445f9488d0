"""Private selection (``repeat_and_select``): the Rényi bounds of Papernot–Steinke 2022 on an
order grid, rounded towards more privacy loss.

A ``repeat_and_select`` declaration runs its inner mechanism Q a random number K of times and
releases the best output (Papernot–Steinke 2022, "Hyperparameter tuning with Rényi differential
privacy", ICLR; PS22 below). Everything here takes Q's RDP curve ε(·) as *upper bounds* at given
orders (what :func:`odometer_core.accounting.modes.rdp.rdp_curve` charges Q) and returns upper
bounds on the selection's curve at the same orders:

- K from the truncated negative binomial D_{η,γ} of shape η ≥ 0 (PS22 Def. 1; η = 0
  logarithmic, η = 1 geometric), PS22 Thm 2 at every order λ, with λ̂ over the given orders:

      ε(λ) + (1 + η)·min_λ̂ [(1 − 1/λ̂)·ε(λ̂) + log(1/γ)/λ̂] + log(E[K])/(λ − 1),

  γ from E[K] = η(1 − γ)/(γ(1 − γ^η)) (E[K] = (1/γ − 1)/log(1/γ) for η = 0), rounded down
  (:func:`log_inv_gamma`);
- K ~ Poisson(μ), PS22 Thm 6 at every order λ, with ε̂ = log(1 + 1/(λ − 1)) (the largest its
  condition e^ε̂ ≤ 1 + 1/(λ − 1) allows, rounded down) and δ̂ the δ at which Q's curve gives
  (ε̂, δ̂)-DP (Canonne–Kamath–Steinke 2020 Prop. 12, the least over the orders,
  :func:`odometer_core.accounting.conversions.rdp_to_delta`):

      ε(λ) + μ·δ̂ + log(μ)/(λ − 1);

- then at each order the least bound at that order or a higher one (Rényi divergence is
  non-decreasing in the order, van Erven–Harremoës 2014 Thm 3).

When Q is ε-DP and K is a truncated negative binomial, the selection is (2 + η)ε-DP (PS22
Cor. 3, the limit λ = λ̂ → ∞ of Thm 2; for the geometric distribution the 3ε of Liu–Talwar
2019): :func:`pure_epsilon`. These are the same theorems dp_accounting's ``RdpAccountant``
implements for ``RepeatAndSelectDpEvent``; the orders λ̂ and the orders of δ̂ here are the
dataset's grid together with :data:`SELECTION_ORDERS`, so the curve is at most dp_accounting's
on the same grid (up to rounding up).
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from typing import Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import conversions as cv
from odometer_core.accounting.declarations import (
    GDP,
    ApproxDP,
    ChargedAs,
    Composed,
    Declaration,
    Exponential,
    Laplace,
    PureDP,
    RandomizedResponse,
    RepeatAndSelect,
)
from odometer_core.accounting.exact import (
    ONE,
    UP,
    ZERO,
    add_up,
    mul_up,
    to_float_up,
)

FloatArray = npt.NDArray[np.float64]

#: Orders at which the inner curve is evaluated besides the dataset's grid, as candidates for
#: λ̂ (Thm 2) and for the conversion to δ̂ (Thm 6): dp_accounting's coarse default orders.
SELECTION_ORDERS: Final[tuple[float, ...]] = (
    *(1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 8.0, 10.0, 12.0),
    *(16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0),
)

#: γ is taken where the mean computed in floats is at least E[K] + (E[K] − 1)·MEAN_MARGIN +
#: MEAN_SLACK·E[K]: the slack is far above the float error of that computation (a few ulps,
#: ~1e-15·E[K]), so the true mean there is ≥ E[K]; the margin keeps the bisection's decisions
#: clear of ties.
MEAN_MARGIN: Final = 1e-12
MEAN_SLACK: Final = 1e-14

_EPS: Final = float(np.finfo(np.float64).eps)


def _up(x: float) -> float:
    """A non-negative result of a few float operations on upper bounds, rounded up (a relative
    margin of 8 machine epsilons, then one ulp); ∞ stays ∞."""
    if not math.isfinite(x):
        return x
    return math.nextafter(x * (1.0 + 8.0 * _EPS), math.inf)


def _down(x: float) -> float:
    """A non-negative result of a few float operations, rounded down."""
    return max(math.nextafter(x * (1.0 - 8.0 * _EPS), 0.0), 0.0)


def _up_array(x: FloatArray) -> FloatArray:
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.nextafter(x * (1.0 + 8.0 * _EPS), np.inf)
    return np.asarray(np.where(np.isfinite(x), y, x), dtype=np.float64)


def _non_decreasing(curve: FloatArray) -> FloatArray:
    """At each order (sorted) the least value at that order or a higher one."""
    return np.asarray(np.minimum.accumulate(curve[::-1])[::-1], dtype=np.float64)


# ---------------------------------------------------------------------------- the distribution
def _one_minus_exp_over(t: float) -> float:
    """(1 − e^{−t})/t for t ≥ 0 (1 at t = 0), to a few ulps (a series below 10⁻⁵: the next
    term, t³/24, is below 10⁻¹⁶ there)."""
    if t < 1e-5:
        return 1.0 - t / 2.0 + t * t / 6.0
    return -math.expm1(-t) / t


def tnb_mean(gamma: float, shape: float) -> float:
    """E[K] of D_{η,γ} (PS22 Def. 1), γ in (0, 1), η ≥ 0: η(1 − γ)/(γ(1 − γ^η)), and
    (1 − γ)/(γ·log(1/γ)) at η = 0 — both (1 − γ)/(γ·x·h(ηx)) with x = log(1/γ) and
    h(t) = (1 − e^{−t})/t, evaluated to a few ulps (1 − γ and γ − 1 are exact for γ ≥ ½)."""
    x = -math.log1p(gamma - 1.0) if gamma >= 0.5 else -math.log(gamma)
    return (1.0 - gamma) / (gamma * x * _one_minus_exp_over(shape * x))


@functools.lru_cache(maxsize=512)
def log_inv_gamma(mean: Decimal, shape: Decimal) -> float:
    """log(1/γ) of the truncated negative binomial of shape η whose mean is ``mean`` (> 1),
    rounded up.

    E[K] decreases in γ: D_{η,γ} is an exponential family in log(1 − γ) with sufficient
    statistic k, so its mean grows with 1 − γ. Bisection keeps a γ whose mean, computed to a
    few ulps, is above ``mean`` by the margin and slack of :data:`MEAN_MARGIN`: the true mean
    there is ≥ ``mean``, so γ is at most the true γ and log(1/γ) at least the true one (within
    a relative 10⁻¹⁰ of it: near E[K] = 1, log(1/γ) ≈ 2(E[K] − 1) is set by the excess over 1,
    which the margin is relative to). For η = 1 (geometric) γ = 1/E[K] exactly."""
    target = to_float_up(mean)
    if shape == ONE:
        return _up(math.log(target))
    eta = float(shape)
    want = 1.0 + (target - 1.0) * (1.0 + MEAN_MARGIN) + MEAN_SLACK * target
    lo, hi = 1e-300, 1.0  # E[K] at 1e-300 is above 10²⁹⁶, beyond any mean declared
    if not tnb_mean(lo, eta) >= want:  # pragma: no cover - means are at most 10⁶
        return math.inf
    for _ in range(2000):
        mid = math.sqrt(lo * hi) if hi > 4.0 * lo else 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if tnb_mean(mid, eta) >= want:
            lo = mid
        else:
            hi = mid
    log_inv = -math.log1p(lo - 1.0) if lo >= 0.5 else -math.log(lo)
    return _up(log_inv)


def log_mean(mean: Decimal) -> float:
    """log E[K] for E[K] ≥ 1, rounded up (log1p of the exact E[K] − 1)."""
    return _up(math.log1p(to_float_up(UP.subtract(mean, ONE))))


# ---------------------------------------------------------------------------- the curves
def truncated_negative_binomial_rdp(
    orders: FloatArray, inner: FloatArray, mean: Decimal, shape: Decimal
) -> FloatArray:
    """PS22 Thm 2 at each of ``orders`` (increasing, > 1), ``inner`` the inner curve there
    (upper bounds, ∞ allowed), λ̂ over the same orders; then non-decreasing (module
    docstring). Rounded up."""
    big_l = log_inv_gamma(mean, shape)
    one_plus_eta = to_float_up(add_up(ONE, shape))
    with np.errstate(over="ignore", invalid="ignore"):
        per_order = (1.0 - 1.0 / orders) * inner + big_l / orders
    best = float(np.min(per_order))
    constant = _up(one_plus_eta * _up(best))
    with np.errstate(over="ignore", invalid="ignore"):
        bound = inner + constant + log_mean(mean) / (orders - 1.0)
    return _non_decreasing(_up_array(bound))


def poisson_rdp(orders: FloatArray, inner: FloatArray, mean: Decimal) -> FloatArray:
    """PS22 Thm 6 at each of ``orders`` (increasing, > 1), ``inner`` the inner curve there
    (upper bounds, ∞ allowed): δ̂ converted from the inner curve at every order; then
    non-decreasing (module docstring). Rounded up."""
    mu = to_float_up(mean)
    log_mu = log_mean(mean)
    out = np.empty_like(orders)
    for i, lam in enumerate(orders.tolist()):
        eps_hat = _down(math.log1p(1.0 / (lam - 1.0)))
        delta_hat, _ = cv.rdp_to_delta(orders, inner, eps_hat)
        out[i] = float(inner[i]) + _up(mu * delta_hat) + log_mu / (lam - 1.0)
    return _non_decreasing(_up_array(out))


def selection_rdp(decl: RepeatAndSelect, orders: FloatArray, inner: FloatArray) -> FloatArray:
    """The curve of ``decl`` at ``orders`` (increasing, > 1) from its inner curve there: Thm 2
    or Thm 6, and for an ε-DP inner mechanism under a truncated negative binomial at most the
    randomized-response curve of (2 + η)ε (:func:`pure_epsilon`; the tight RDP of a pure-DP
    mechanism, Steinke 2024 Thm 4)."""
    if decl.shape is None:
        return poisson_rdp(orders, inner, decl.mean)
    curve = truncated_negative_binomial_rdp(orders, inner, decl.mean, decl.shape)
    pure = pure_epsilon(decl)
    if pure is not None:
        curve = np.minimum(curve, cv.pure_dp_rdp(to_float_up(pure), orders))
    return curve


# ---------------------------------------------------------------------------- pure DP
def pure_epsilon(decl: Declaration) -> Decimal | None:
    """ε when ``decl`` is ε-DP by its definition, else ``None``: the pure kinds (and those
    charged as one), (ε, 0)-DP, 0-GDP, a composition of pure items (Σ count·ε, basic
    composition), and a selection over a truncated negative binomial of shape η from an
    ε-DP mechanism: (2 + η)ε (PS22 Cor. 3). A Poisson number of runs has no pure-DP bound
    (PS22 Thm 6 holds at orders λ with e^ε̂ ≤ 1 + 1/(λ − 1) only)."""
    if isinstance(decl, ChargedAs):
        return pure_epsilon(decl.charged_as())
    if isinstance(decl, PureDP | RandomizedResponse | Exponential | Laplace):
        return decl.epsilon
    if isinstance(decl, ApproxDP):
        return decl.epsilon if decl.delta == 0 else None
    if isinstance(decl, GDP):
        return ZERO if decl.mu == 0 else None
    if isinstance(decl, Composed):
        total = ZERO
        for item, count in decl.items:
            eps = pure_epsilon(item)
            if eps is None:
                return None
            total = add_up(total, mul_up(Decimal(count), eps))
        return total
    if isinstance(decl, RepeatAndSelect) and decl.shape is not None:
        inner = pure_epsilon(decl.mechanism)
        if inner is None:
            return None
        return mul_up(add_up(Decimal(2), decl.shape), inner)
    return None


# ---------------------------------------------------------------------------- refusals
def refusal(mode: str, form: str) -> str:
    """Why mode ``mode`` (``zcdp``, ``gdp``) refuses ``repeat_and_select``."""
    return (
        f"mode '{mode}' cannot account 'repeat_and_select': Papernot–Steinke 2022 bound the "
        "selection's Rényi divergence order by order (Thms 2 and 6), with a term "
        f"log(E[K])/(α − 1) that is not of the form {form}; use a dataset or sub-budget in mode "
        "'rdp' (or 'basic', which converts that curve at its conversion δ)"
    )


#: Why no mode charges a selection over an inner mechanism that declares a δ > 0.
APPROXIMATE_INNER: Final = (
    "'repeat_and_select' needs the inner mechanism's Rényi DP (Papernot–Steinke 2022, Thms 2 "
    "and 6); an (ε, δ) guarantee with δ > 0 gives none, and no theorem bounds the selection "
    "from it: declare the inner mechanism by its RDP curve ('rdp'), its ρ ('zcdp' with δ = 0) "
    "or its noise (e.g. 'gaussian')"
)
