"""Conversions between privacy notions and closed-form RDP curves.

Every function here is a pure float computation (stdlib, numpy, scipy only). The module is
longer than most (about 750 lines) because it is one cohesive thing: every conversion shares the
same error-bound helpers and the same directed-rounding contract below, and splitting it by
notion would spread that contract over several files.

Directed rounding (docs/accounting.md, *Rounding*):

* functions returning a *cost* (an ε, a δ for a fixed ε, an RDP value, a ρ charge) return an
  upper bound of the exact real value: the floating-point result is increased by a bound on the
  accumulated rounding error of the evaluation and then nudged up with ``math.nextafter``;
* functions returning a *budget* (largest ρ or μ meeting a target) return a value that was
  verified with the upward-rounded cost function, which is therefore below the exact supremum.

Invalid inputs (NaN, negative parameters, probabilities outside [0, 1], orders ≤ 1) raise
``ValueError``; NaN is never returned. ``math.inf`` is a legitimate cost.

Conventions: natural logarithms; RDP orders are called α; ``delta``/``epsilon``/``rho``/``mu``
are the usual privacy parameters; sensitivities are ℓ₁ (Laplace) or ℓ₂ (Gaussian).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_MACH_EPS = 2.0**-52
"""Distance from 1.0 to the next float; rounding-error allowances are multiples of it."""

_ALPHA_MIN_CKS = 1.01
"""Smallest order at which the CKS/BBGHS conversion is evaluated (as dp_accounting does)."""

_MAX_BISECTION_STEPS = 4000
"""Hard cap on float bisection loops (a float interval is exhausted after ≈ 2100 halvings)."""


# --------------------------------------------------------------------------------------------
# validation and rounding helpers (shared with subsampling.py)
# --------------------------------------------------------------------------------------------


def _check_nonneg(name: str, value: float, *, allow_inf: bool = True) -> float:
    """Return ``value`` as a float, raising ValueError if it is NaN, negative or disallowed ∞."""
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must not be NaN")
    if x < 0.0:
        raise ValueError(f"{name} must be >= 0, got {x!r}")
    if math.isinf(x) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {x!r}")
    return x


def _check_unit(name: str, value: float) -> float:
    """Return ``value`` as a float in [0, 1], raising ValueError otherwise."""
    x = _check_nonneg(name, value)
    if x > 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {x!r}")
    return x


def _check_orders(orders: npt.ArrayLike, *, allow_one: bool = False) -> FloatArray:
    """Validate RDP orders: a 1-D float array, no NaN, every α > 1 (α ≥ 1 if allowed), ∞ ok."""
    a = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    if a.ndim != 1:
        raise ValueError("orders must be a scalar or a 1-D sequence")
    if np.any(np.isnan(a)):
        raise ValueError("orders must not contain NaN")
    if allow_one:
        if np.any(a < 1.0):
            raise ValueError("RDP orders must be >= 1")
    elif np.any(a <= 1.0):
        raise ValueError("RDP orders must be > 1")
    return a


def _round_up(x: float, abs_err: float = 0.0) -> float:
    """Upper bound of a computed cost: add the error allowance, then step up two ulps."""
    if math.isnan(x):
        raise ValueError("internal error: NaN in a cost computation")
    if math.isinf(x):
        return x
    y = x + abs_err + _MACH_EPS * abs(x)
    return math.nextafter(math.nextafter(y, math.inf), math.inf)


def _round_up_array(x: FloatArray, abs_err: FloatArray | float = 0.0) -> FloatArray:
    """Vectorised :func:`_round_up` (∞ stays ∞; NaN raises)."""
    if np.any(np.isnan(x)):
        raise ValueError("internal error: NaN in a cost computation")
    with np.errstate(invalid="ignore", over="ignore"):
        y = x + abs_err + _MACH_EPS * np.abs(x)
    y = np.where(np.isinf(x), x, y)
    y = np.nextafter(y, np.inf)
    return np.asarray(np.nextafter(y, np.inf), dtype=np.float64)


def _log1m_inv(a: float) -> float:
    """log(1 − 1/a) for a > 1, accurate near a = 1 (a − 1 is exact there) and for large a."""
    if a <= 2.0:
        return math.log(a - 1.0) - math.log(a)
    return math.log1p(-1.0 / a)


def _log1m_inv_array(a: FloatArray) -> FloatArray:
    """Vectorised :func:`_log1m_inv` for an array of orders a > 1 (∞ gives 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        near = np.log(a - 1.0) - np.log(a)
        far = np.log1p(-1.0 / a)
    return np.asarray(np.where(a <= 2.0, near, far), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# RDP → (ε, δ)
# --------------------------------------------------------------------------------------------


def _check_curve(orders: npt.ArrayLike, rdp: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    a = _check_orders(orders)
    r = np.atleast_1d(np.asarray(rdp, dtype=np.float64))
    if r.shape != a.shape:
        raise ValueError("orders and rdp must have the same length")
    if a.size == 0:
        raise ValueError("orders must not be empty")
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise ValueError("RDP values must be >= 0 and not NaN")
    return a, r


def rdp_to_epsilon(orders: npt.ArrayLike, rdp: npt.ArrayLike, delta: float) -> tuple[float, float]:
    """Smallest ε over the given orders such that an RDP curve implies (ε, δ)-DP.

    For each order α with RDP value τ (Canonne–Kamath–Steinke 2020, "The Discrete Gaussian
    for Differential Privacy", Prop. 12 (arXiv 2004.00010 v4) = Balle–Barthe–Gaboardi–Hsu–Sato
    2020, "Hypothesis Testing Interpretations and Rényi DP", Thm 21):

        ε(α) = τ + log((α − 1)/α) − (log δ + log α)/(α − 1),

    and ε = max(0, min_α ε(α)). As in dp_accounting ``compute_epsilon``:

    * orders with 1 < α ≤ 1.01 are not used by this formula (numerically unstable there);
    * if δ ≥ √(1 − e^{−τ}) at some order, ε = 0 (τ bounds the KL divergence, and Pinsker-type
      bound δ(0) = TV ≤ √(1 − e^{−KL}); Bretagnolle–Huber);
    * orders with τ = ∞ give ε = ∞ and are thereby ignored.

    Differences from dp_accounting, all conservative or limits of the same formula: orders must
    be > 1 (ValueError otherwise); negative or NaN RDP values raise instead of being treated as
    0; α = ∞ gives ε = τ (the limit, i.e. pure ε-DP from the max-divergence); δ = 0 gives the
    smallest τ at α = ∞ (∞ if there is none, 0 if all τ are 0); the KL test carries a small
    safety margin; the result is rounded up.

    Args:
      orders: RDP orders α > 1 (may include ∞).
      rdp: RDP values τ(α) ≥ 0, same length (may include ∞).
      delta: target δ in [0, 1].

    Returns:
      (ε, α*) with α* the order attaining the minimum.
    """
    a, r = _check_curve(orders, rdp)
    delta = _check_unit("delta", delta)

    if delta == 0.0:
        if np.all(r == 0.0):
            return 0.0, float(a[0])
        pure = np.where(np.isinf(a), r, np.inf)
        i = int(np.argmin(pure))
        return (_round_up(float(pure[i])) if pure[i] > 0 else 0.0), float(a[i])

    log_delta = math.log(delta)
    eps = np.full(a.shape, np.inf)
    err = np.zeros(a.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # KL route: δ ≥ √(1 − e^{−τ})  ⇒  ε = 0 (with a relative safety margin of 8 ulps).
        kl_ok = delta * delta * (1.0 - 8 * _MACH_EPS) > -np.expm1(-r) * (1.0 + 8 * _MACH_EPS)
        finite = np.isfinite(a) & np.isfinite(r) & (a > _ALPHA_MIN_CKS)
        af = np.where(finite, a, 2.0)
        l1 = _log1m_inv_array(af)
        tail = (log_delta + np.log(af)) / (af - 1.0)
        cks = r + l1 - tail
        eps = np.where(finite, cks, eps)
        err = np.where(finite, 8 * _MACH_EPS * (np.abs(r) + np.abs(l1) + np.abs(tail) + 1.0), 0)
        at_inf = np.isinf(a)
        eps = np.where(at_inf, r, eps)
        eps = np.where(kl_ok, 0.0, eps)
        err = np.where(kl_ok | at_inf, 0.0, err)
    i = int(np.argmin(eps))
    best = float(eps[i])
    if best == 0.0 and bool(kl_ok[i]):
        return 0.0, float(a[i])
    if math.isinf(best):
        return math.inf, float(a[i])
    up = _round_up(best, float(err[i]))
    return (up if up > 0.0 else 0.0), float(a[i])


def rdp_to_epsilon_rows(
    orders: npt.ArrayLike, rdp: npt.ArrayLike, deltas: Sequence[float]
) -> list[tuple[float, float]]:
    """:func:`rdp_to_epsilon` of each row of ``rdp`` (one curve per row, on ``orders``) at its
    own δ ``deltas[j]``: the same formula (Canonne–Kamath–Steinke 2020, Prop. 12), the same
    floating-point operations in the same order on each element, so every (ε, α*) is the
    scalar function's to the last bit (``tests/accounting/test_shaped_placement.py`` compares
    them). One pass of numpy over all rows instead of one call per row; a row at δ = 0 is
    handed to the scalar function. The same inputs raise the same ``ValueError``."""
    a = _check_orders(orders)
    r = np.asarray(rdp, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] != a.shape[0]:
        raise ValueError("rdp must have one row per curve, each as long as orders")
    if a.size == 0:
        raise ValueError("orders must not be empty")
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise ValueError("RDP values must be >= 0 and not NaN")
    ds = [_check_unit("delta", d) for d in deltas]
    if len(ds) != r.shape[0]:
        raise ValueError("one delta per row")
    if not ds:
        return []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # per element exactly the scalar function's expressions (broadcast over the rows)
        d = np.array(ds, dtype=np.float64)[:, None]
        log_delta = np.array([math.log(x) if x > 0 else 0.0 for x in ds], dtype=np.float64)
        kl_ok = d * d * (1.0 - 8 * _MACH_EPS) > -np.expm1(-r) * (1.0 + 8 * _MACH_EPS)
        finite = np.isfinite(a) & np.isfinite(r) & (a > _ALPHA_MIN_CKS)
        af = np.where(finite, a, 2.0)
        l1 = _log1m_inv_array(af)
        tail = (log_delta[:, None] + np.log(af)) / (af - 1.0)
        cks = r + l1 - tail
        eps = np.where(finite, cks, np.inf)
        err = np.where(finite, 8 * _MACH_EPS * (np.abs(r) + np.abs(l1) + np.abs(tail) + 1.0), 0)
        at_inf = np.isinf(a)
        eps = np.where(at_inf, r, eps)
        eps = np.where(kl_ok, 0.0, eps)
        err = np.where(kl_ok | at_inf, 0.0, err)
    best_at = np.argmin(eps, axis=1).tolist()
    out: list[tuple[float, float]] = []
    for j, i in enumerate(best_at):
        if ds[j] == 0.0:
            out.append(rdp_to_epsilon(a, r[j], 0.0))
            continue
        best = float(eps[j, i])
        if best == 0.0 and bool(kl_ok[j, i]):
            out.append((0.0, float(a[i])))
        elif math.isinf(best):
            out.append((math.inf, float(a[i])))
        else:
            up = _round_up(best, float(err[j, i]))
            out.append(((up if up > 0.0 else 0.0), float(a[i])))
    return out


def rdp_to_delta(orders: npt.ArrayLike, rdp: npt.ArrayLike, epsilon: float) -> tuple[float, float]:
    """Smallest δ over the given orders such that an RDP curve implies (ε, δ)-DP.

    For each order α with RDP value τ (Canonne–Kamath–Steinke 2020, Prop. 12 (arXiv
    2004.00010 v4) = Balle et al. 2020, Thm 21):

        δ(α) = exp((α − 1)(τ − ε)) / (α − 1) · (1 − 1/α)^α
             = exp((α − 1)(τ − ε + log(1 − 1/α)) − log α),

    evaluated in log space for α > 1.01, and at every order also the KL bound
    δ ≤ √(1 − e^{−τ}) (as dp_accounting ``compute_delta``). At α = ∞ the limit is used:
    δ = 0 if τ ≤ ε (pure ε-DP), else no bound. The minimum over orders is capped at 1 and
    rounded up.

    Args:
      orders: RDP orders α > 1 (may include ∞).
      rdp: RDP values τ(α) ≥ 0 (may include ∞).
      epsilon: target ε ≥ 0.

    Returns:
      (δ, α*) with α* the order attaining the minimum.
    """
    a, r = _check_curve(orders, rdp)
    epsilon = _check_nonneg("epsilon", epsilon)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # KL bound (accurate for small τ: log(−expm1(−τ)) instead of log1p(−exp(−τ))).
        log_kl = np.where(r == 0.0, -np.inf, 0.5 * np.log(-np.expm1(-r)))
        err_kl = 4 * _MACH_EPS * (np.abs(np.where(np.isfinite(log_kl), log_kl, 0.0)) + 1.0)
        finite = np.isfinite(a) & (a > _ALPHA_MIN_CKS) & np.isfinite(r)
        af = np.where(finite, a, 2.0)
        rf = np.where(finite, r, 0.0)
        l1 = _log1m_inv_array(af)
        log_a = np.log(af)
        cks = (af - 1.0) * (rf - epsilon + l1) - log_a
        err_cks = (
            8 * _MACH_EPS * ((af - 1.0) * (np.abs(rf) + epsilon + np.abs(l1)) + np.abs(log_a) + 1.0)
        )
        cks = np.where(finite, cks, np.inf)
        if not math.isinf(epsilon):
            pure = np.isinf(a) & (r <= epsilon)
            cks = np.where(pure, -np.inf, cks)
        use_cks = cks < log_kl
        log_delta = np.where(use_cks, cks, log_kl)
        err = np.where(use_cks, err_cks, err_kl)
    i = int(np.argmin(log_delta))
    best = float(log_delta[i])
    if best == -math.inf:
        return 0.0, float(a[i])
    d = math.exp(min(best + float(err[i]), 0.0))
    return min(1.0, _round_up(d)), float(a[i])


# --------------------------------------------------------------------------------------------
# zCDP → (ε, δ) and back
# --------------------------------------------------------------------------------------------


def _bisect_float(is_right: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """Bisect on floats: returns adjacent (lo, hi) with is_right(hi) true (as far as tested).

    The caller guarantees ``is_right(hi)`` and (conceptually) not ``is_right(lo)``; ``lo`` itself
    is never evaluated.
    """
    for _ in range(_MAX_BISECTION_STEPS):
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            break
        if is_right(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def _largest_within(delta_of: Callable[[float], float], delta: float) -> float:
    """Largest x ≥ 0 with ``delta_of(x) <= delta`` as computed, for ``delta_of`` increasing
    (a budget: the exact root is never exceeded because ``delta_of`` is rounded up)."""

    def too_big(x: float) -> bool:
        return delta_of(x) > delta

    hi = 1.0
    while not too_big(hi):
        hi *= 2.0
        if math.isinf(hi):  # pragma: no cover - δ < 1 always fails eventually
            raise ValueError("no finite budget")
    lo, _ = _bisect_float(too_big, 0.0, hi)
    return lo


def _zcdp_log_delta_at(rho: float, epsilon: float, a: float) -> tuple[float, float]:
    """log δ of CKS20 Cor. 13 at one order α, and an absolute rounding-error bound for it.

    log δ(α) = (α − 1)(αρ − ε) + α·log(1 − 1/α) − log(α − 1).
    """
    am1 = a - 1.0
    ar = a * rho
    t1 = am1 * (ar - epsilon)
    l1 = _log1m_inv(a)
    t2 = a * l1
    t3 = math.log(am1)
    err = 8 * _MACH_EPS * (abs(t1) + am1 * (ar + epsilon) + abs(t2) + abs(t3) + 1.0)
    return t1 + t2 - t3, err


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ(ε) implied by ρ-zCDP, tight conversion of CKS20.

    Canonne–Kamath–Steinke 2020, Cor. 13 (arXiv 2004.00010):

        δ(ε) = inf_{α>1} exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α.

    The infimum is found by bisection on the sign of the derivative of the log-objective,
    (2α − 1)ρ − ε + log(1 − 1/α) (increasing in α), as OpenDP ``cdp_delta`` does; the objective
    is then evaluated in log space at the final order (any α > 1 gives a valid bound), rounded up
    with an error allowance and capped at 1.

    ρ = 0 or ε = ∞ → 0; ρ = ∞ → 1.
    """
    rho = _check_nonneg("rho", rho)
    epsilon = _check_nonneg("epsilon", epsilon)
    if rho == 0.0 or math.isinf(epsilon):
        return 0.0
    if math.isinf(rho):
        return 1.0

    def deriv_nonneg(a: float) -> bool:
        return (2.0 * a - 1.0) * rho - epsilon + _log1m_inv(a) >= 0.0

    hi = (epsilon + 1.0) / (2.0 * rho) + 2.0
    if math.isinf(hi):
        hi = math.ldexp(1.0, 1023)
    _, a = _bisect_float(deriv_nonneg, 1.0, hi)
    log_delta, err = _zcdp_log_delta_at(rho, epsilon, a)
    if log_delta == -math.inf:  # exact δ underflows: smallest positive float bounds it
        return math.nextafter(0.0, 1.0)
    if log_delta + err >= 0.0:
        return 1.0
    return min(1.0, _round_up(math.exp(log_delta + err)))


def _zcdp_epsilon_at(rho: float, log_inv_delta: float, a: float) -> tuple[float, float]:
    """ε of CKS20 Cor. 13 at one order α and an absolute rounding-error bound.

    ε(α) = αρ + log(1 − 1/α) + (log(1/δ) − log α)/(α − 1).
    """
    t1 = a * rho
    t2 = _log1m_inv(a)
    log_a = math.log(a)
    t3 = (log_inv_delta - log_a) / (a - 1.0)
    err = 8 * _MACH_EPS * (abs(t1) + abs(t2) + (abs(log_inv_delta) + abs(log_a)) / (a - 1.0))
    return t1 + t2 + t3, err


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε such that ρ-zCDP implies (ε, δ)-DP, by the CKS20 conversion.

    Canonne–Kamath–Steinke 2020, Cor. 13 (arXiv 2004.00010):

        ε(δ) = inf_{α>1} [ αρ + (log(1/δ) + (α − 1)·log(1 − 1/α) − log α)/(α − 1) ],

    clipped at 0 from below. The derivative in α has the sign of ρ(α − 1)² + log(αδ), which is
    increasing, so the minimiser is found by bisection (as OpenDP ``cdp_epsilon``); the objective
    is evaluated at the final order and rounded up. Reproduces OpenDP, e.g. ρ = 0.03125,
    δ = 1e-3 → 0.6880024554878085.

    ρ = 0 or δ = 1 → 0; δ = 0 or ρ = ∞ → ∞.
    """
    rho = _check_nonneg("rho", rho)
    delta = _check_unit("delta", delta)
    if rho == 0.0 or delta == 1.0:
        return 0.0
    if delta == 0.0 or math.isinf(rho):
        return math.inf
    log_delta = math.log(delta)

    def deriv_pos(a: float) -> bool:
        am1 = a - 1.0
        return rho * am1 * am1 + math.log(a) + log_delta > 0.0

    hi = 2.0
    while not deriv_pos(hi):
        hi *= 2.0
    _, a = _bisect_float(deriv_pos, 1.0, hi)
    eps, err = _zcdp_epsilon_at(rho, -log_delta, a)
    up = _round_up(eps, err)
    return up if up > 0.0 else 0.0


def zcdp_rho_budget(epsilon: float, delta: float) -> float:
    """Largest ρ such that ρ-zCDP implies (ε, δ)-DP by the CKS20 conversion (a budget).

    ρ_B = sup{ρ ≥ 0 : δ_CKS(ρ, ε) ≤ δ} with δ_CKS = :func:`zcdp_delta` (Canonne–Kamath–Steinke
    2020, Cor. 13), found by float bisection on ρ. The returned ρ satisfies
    ``zcdp_delta(result, epsilon) <= delta`` as computed; since that δ is rounded up, the result
    is below the exact supremum (rounded down). Used for ``zcdp`` mode's ρ_B.

    Args:
      epsilon: target ε, finite and ≥ 0.
      delta: target δ in [0, 1).
    """
    epsilon = _check_nonneg("epsilon", epsilon, allow_inf=False)
    delta = _check_unit("delta", delta)
    if delta >= 1.0:
        raise ValueError("delta must be < 1 for a finite rho budget")
    if delta == 0.0:
        return 0.0

    return _largest_within(lambda rho: zcdp_delta(rho, epsilon), delta)


def simple_zcdp_epsilon(rho: float, delta: float) -> float:
    """Simple (looser) zCDP → (ε, δ) conversion: ε = ρ + 2√(ρ·log(1/δ)).

    Bun–Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
    Bounds", Prop. 1.3. A fallback / comparison only: :func:`zcdp_epsilon` is never larger.
    Rounded up. ρ = 0 → 0; δ = 0 (with ρ > 0) → ∞.
    """
    rho = _check_nonneg("rho", rho)
    delta = _check_unit("delta", delta)
    if rho == 0.0 or delta == 1.0:
        return 0.0
    if delta == 0.0 or math.isinf(rho):
        return math.inf
    root = math.sqrt(rho * -math.log(delta))
    val = rho + 2.0 * root
    return _round_up(val, 4 * _MACH_EPS * val)


# --------------------------------------------------------------------------------------------
# Gaussian DP and the analytic Gaussian mechanism
# --------------------------------------------------------------------------------------------


def _gdp_delta_checked(mu: float, epsilon: float) -> float:
    from scipy import special

    if mu == 0.0 or math.isinf(epsilon):
        return 0.0
    if math.isinf(mu):
        return 1.0
    ratio = epsilon / mu
    x1 = mu / 2.0 - ratio
    x2 = -ratio - mu / 2.0
    la = float(special.log_ndtr(x1))
    if la == -math.inf:
        # Φ underflowed in log space: the exact δ is below e^{-(huge)}; smallest positive float.
        return math.nextafter(0.0, 1.0)
    lb = epsilon + float(special.log_ndtr(x2))
    # log_ndtr has a few ulps of relative error; its argument carries ≈ 2 ulps, amplified by
    # |d log Φ(x)/dx| ≈ |x| in the tail, i.e. an absolute error ≈ x²·ulp ≈ |log Φ|·ulps.
    err_a = 16 * _MACH_EPS * (abs(la) + abs(x1) + 1.0)
    err_b = 16 * _MACH_EPS * (abs(lb) + abs(x2) + epsilon + 1.0)
    gap = lb - la - err_a - err_b
    # gap ≥ 0: the difference cannot be resolved; fall back to the first term alone.
    log_d = la + err_a if gap >= 0.0 else la + err_a + math.log(-math.expm1(gap))
    if log_d >= 0.0:
        return 1.0
    return min(1.0, _round_up(math.exp(log_d)))


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-Gaussian DP (exact trade-off curve → (ε, δ)), rounded up.

    Dong–Roth–Su 2019, "Gaussian Differential Privacy", Cor. 2.13 (arXiv 1905.02383; label
    ``GDPtoDPrep``): a mechanism is μ-GDP iff it is (ε, δ(ε))-DP for all ε ≥ 0 with

        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).

    Evaluated stably as exp(a)·(−expm1(b − a)) with a = log Φ(−ε/μ + μ/2) and
    b = ε + log Φ(−ε/μ − μ/2) (scipy ``log_ndtr``), with an error allowance on a and b.

    μ = 0 or ε = ∞ → 0; μ = ∞ → 1.
    """
    mu = _check_nonneg("mu", mu)
    epsilon = _check_nonneg("epsilon", epsilon)
    return _gdp_delta_checked(mu, epsilon)


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with μ-GDP ⇒ (ε, δ)-DP, by root finding on :func:`gdp_delta`; rounded up.

    Dong–Roth–Su 2019, Cor. 2.13 (see :func:`gdp_delta`). δ(ε) is decreasing in ε; the returned
    ε is the left-most float at which the upward-rounded δ(ε) is ≤ δ, so it is an upper bound of
    the exact root. δ(0) = 2Φ(μ/2) − 1 ≤ δ → 0. δ = 0 with μ > 0 → ∞.
    """
    mu = _check_nonneg("mu", mu)
    delta = _check_unit("delta", delta)
    if mu == 0.0 or delta == 1.0:
        return 0.0
    if math.isinf(mu) or delta == 0.0:
        return math.inf

    def ok(eps: float) -> bool:
        return _gdp_delta_checked(mu, eps) <= delta

    if ok(0.0):
        return 0.0
    hi = 1.0
    while not ok(hi):
        hi *= 2.0
        if math.isinf(hi):  # pragma: no cover - δ(ε) → 0 as ε → ∞
            return math.inf
    _, hi = _bisect_float(ok, 0.0, hi)
    return hi


def gdp_mu_budget(epsilon: float, delta: float) -> float:
    """Largest μ such that μ-GDP implies (ε, δ)-DP (a budget, rounded down).

    μ_B = sup{μ ≥ 0 : δ_GDP(μ, ε) ≤ δ} with δ_GDP of Dong–Roth–Su 2019, Cor. 2.13, found by float
    bisection on μ (δ_GDP is increasing in μ). The result satisfies
    ``gdp_delta(result, epsilon) <= delta`` as computed, hence is below the exact root.
    Used for ``gdp`` mode's μ_B.

    Args:
      epsilon: target ε, finite and ≥ 0.
      delta: target δ in [0, 1).
    """
    epsilon = _check_nonneg("epsilon", epsilon, allow_inf=False)
    delta = _check_unit("delta", delta)
    if delta >= 1.0:
        raise ValueError("delta must be < 1 for a finite mu budget")
    if delta == 0.0:
        return 0.0

    return _largest_within(lambda mu: _gdp_delta_checked(mu, epsilon), delta)


def _gaussian_mu_up(sigma: float, sensitivity: float) -> float:
    sigma = _check_nonneg("sigma", sigma)
    sensitivity = _check_nonneg("sensitivity", sensitivity, allow_inf=False)
    if sensitivity == 0.0:
        return 0.0
    if sigma == 0.0:
        return math.inf
    return _round_up(sensitivity / sigma)


def analytic_gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism N(0, σ²) with ℓ₂-sensitivity Δ; rounded up.

    Balle–Wang 2018, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
    Calibration and Optimal Denoising", Thm 8:

        δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ),

    which is :func:`gdp_delta` at μ = Δ/σ (Dong–Roth–Su 2019, Thm 2.5/Cor. 2.13; also Steinke
    2022, "Composition of Differential Privacy & Privacy Amplification by Subsampling", Cor. 8,
    with ρ* = Δ²/(2σ²)). μ is rounded up before use (δ is increasing in μ). σ = 0 (with Δ > 0)
    → 1; Δ = 0 → 0.
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    return _gdp_delta_checked(_gaussian_mu_up(sigma, sensitivity), epsilon)


def analytic_gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """Smallest ε with the Gaussian mechanism (σ, Δ) (ε, δ)-DP; root finding, rounded up.

    Balle–Wang 2018, Thm 8 (see :func:`analytic_gaussian_delta`); equals :func:`gdp_epsilon`
    at μ = Δ/σ rounded up. Example: σ = 4.530877117, Δ = 1, δ = 1e-6 → ε ≈ 0.9274, whereas the
    RDP route gives ε ≈ 1.0.
    """
    return gdp_epsilon(_gaussian_mu_up(sigma, sensitivity), delta)


# --------------------------------------------------------------------------------------------
# RDP curves of basic mechanisms (vectorised over orders)
# --------------------------------------------------------------------------------------------


def pure_dp_rdp(epsilon: float, orders: npt.ArrayLike) -> FloatArray:
    """Tight RDP curve of an ε-DP mechanism (the randomized-response curve).

    Steinke 2024, "Tight RDP & zCDP Bounds from Pure DP" (differentialprivacy.org blog), Thm 4;
    also the curve dp_accounting uses for ``EpsilonDeltaDpEvent``:

        ε(α) = ε − log((1 + e^{−ε}) / (1 + e^{−(2α−1)ε})) / (α − 1)
             = [αε + log(1 + e^{(1−2α)ε}) − log(1 + e^{ε})] / (α − 1),

    evaluated with log1p/logaddexp; the result is also capped at ε (valid for every α).
    α = 1 gives the KL limit ε·tanh(ε/2); α = ∞ gives ε. Rounded up elementwise.

    Args:
      epsilon: the pure-DP ε ≥ 0 (∞ gives ∞ at every order).
      orders: orders α ≥ 1 (∞ allowed).
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    a = _check_orders(orders, allow_one=True)
    if epsilon == 0.0:
        return np.zeros_like(a)
    if math.isinf(epsilon):
        return np.full_like(a, np.inf)
    finite = np.isfinite(a) & (a > 1.0)
    af = np.where(finite, a, 2.0)
    with np.errstate(over="ignore", under="ignore"):
        t_small = np.logaddexp(0.0, -epsilon)  # log(1 + e^{−ε})
        t_big = np.logaddexp(0.0, -(2.0 * af - 1.0) * epsilon)  # log(1 + e^{−(2α−1)ε})
        val = epsilon - (t_small - t_big) / (af - 1.0)
    err = 8 * _MACH_EPS * (epsilon + (np.abs(t_small) + np.abs(t_big)) / (af - 1.0))
    out = _round_up_array(np.where(finite, val, 0.0), np.where(finite, err, 0.0))
    out = np.where(np.isinf(a), epsilon, out)
    out = np.where(a == 1.0, pure_dp_zcdp(epsilon), out)
    return np.asarray(np.minimum(out, epsilon), dtype=np.float64)


def pure_dp_zcdp(epsilon: float) -> float:
    """Tight zCDP parameter of an ε-DP mechanism: ρ = ε·tanh(ε/2) (≤ ε²/2); rounded up.

    Steinke 2024, "Tight RDP & zCDP Bounds from Pure DP" (differentialprivacy.org blog), Thm 5
    (sharpening Bun–Steinke 2016, Prop. 3.3, ρ = ε²/2). ρ equals KL(RR_ε) = sup_α ε(α)/α of
    the randomized-response curve.
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    if epsilon == 0.0:
        return 0.0
    if math.isinf(epsilon):
        return math.inf
    val = epsilon * math.tanh(epsilon / 2.0)
    return _round_up(val, 4 * _MACH_EPS * val)


def _laplace_eps(scale: float, sensitivity: float) -> float:
    scale = _check_nonneg("scale", scale)
    sensitivity = _check_nonneg("sensitivity", sensitivity, allow_inf=False)
    if sensitivity == 0.0:
        return 0.0
    if scale == 0.0:
        return math.inf
    return _round_up(sensitivity / scale)


def laplace_rdp(scale: float, sensitivity: float, orders: npt.ArrayLike) -> FloatArray:
    """Exact RDP curve of the Laplace mechanism with scale b and ℓ₁-sensitivity Δ.

    Mironov 2017, "Rényi Differential Privacy", Prop. 6 (arXiv 1702.07476), with ε = Δ/b:

        ε(α) = (1/(α−1)) log( α/(2α−1)·e^{(α−1)ε} + (α−1)/(2α−1)·e^{−αε} )
             = ε + log1p((α − 1)·c)/(α − 1),   c = expm1((1 − 2α)ε)/(2α − 1),

    the form used by dp_accounting ``_laplace_rdp``; log1p(x)/(α−1) is evaluated as
    c·log1p(x)/x, accurate for α → 1 without a series. α = 1 gives the KL limit ε + e^{−ε} − 1,
    α = ∞ gives ε. Capped at ε, rounded up.

    Args:
      scale: Laplace scale b ≥ 0 (b = 0 with Δ > 0 gives ∞).
      sensitivity: ℓ₁-sensitivity Δ ≥ 0.
      orders: orders α ≥ 1 (∞ allowed).
    """
    eps = _laplace_eps(scale, sensitivity)
    a = _check_orders(orders, allow_one=True)
    if eps == 0.0:
        return np.zeros_like(a)
    if math.isinf(eps):
        return np.full_like(a, np.inf)
    finite = np.isfinite(a) & (a > 1.0)
    af = np.where(finite, a, 2.0)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        c = np.expm1((1.0 - 2.0 * af) * eps) / (2.0 * af - 1.0)
        x = (af - 1.0) * c
        ratio = np.where(x == 0.0, 1.0, np.log1p(x) / np.where(x == 0.0, 1.0, x))
        corr = c * ratio  # = log1p((α−1)c)/(α−1) ≤ 0
    val = eps + corr
    err = 8 * _MACH_EPS * (eps + np.abs(corr))
    out = _round_up_array(np.where(finite, val, 0.0), np.where(finite, err, 0.0))
    kl = _round_up(eps + math.expm1(-eps), 4 * _MACH_EPS * eps)
    out = np.where(a == 1.0, kl, out)
    out = np.where(np.isinf(a), eps, out)
    return np.asarray(np.minimum(out, eps), dtype=np.float64)


def gaussian_rdp(sigma: float, sensitivity: float, orders: npt.ArrayLike) -> FloatArray:
    """RDP curve of the Gaussian mechanism: ε(α) = αΔ²/(2σ²).

    Bun–Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
    Bounds", Prop. 1.6 (the Gaussian mechanism is Δ²/(2σ²)-zCDP, i.e. this RDP curve; also
    Mironov 2017, "Rényi Differential Privacy", Gaussian entry of Table II — number not
    re-checked). σ is the noise standard deviation, Δ the
    ℓ₂-sensitivity. α = 1 is the KL divergence; α = ∞ gives ∞ (unless Δ = 0). σ = 0 with Δ > 0
    gives ∞. Rounded up elementwise.
    """
    sigma = _check_nonneg("sigma", sigma)
    sensitivity = _check_nonneg("sensitivity", sensitivity, allow_inf=False)
    a = _check_orders(orders, allow_one=True)
    if sensitivity == 0.0 or math.isinf(sigma):
        return np.zeros_like(a)
    if sigma == 0.0:
        return np.full_like(a, np.inf)
    with np.errstate(over="ignore", under="ignore"):
        ratio = np.float64(sensitivity) / np.float64(sigma)
        rho = ratio * ratio / 2.0
        val = a * rho
    return _round_up_array(np.asarray(val, dtype=np.float64), 4 * _MACH_EPS * val)


def exponential_rdp(epsilon: float, orders: npt.ArrayLike) -> FloatArray:
    """RDP curve of the exponential mechanism with privacy parameter ε (bounded range).

    Cesar–Rogers 2021, "Bounding, Concentrating, and Truncating: Unifying Privacy Loss
    Composition for Data Analytics" (arXiv 2004.07223), §3: an ε-DP exponential mechanism is
    ε-bounded-range, hence (ξ, ε²/8)-zCDP with

        ξ = ε/(e^ε − 1) − 1 − log(ε/(e^ε − 1)) − ε²/8,

    and ε-DP bounds every order by ε. The curve is min(ξ + (ε²/8)·α, ε), exactly as
    dp_accounting's ``ExponentialMechanismDpEvent`` in ``RdpAccountant`` (upstream HEAD; not
    present in dp-accounting 0.6.0). α = 1 gives the KL bound ξ + ε²/8; α = ∞ gives ε.
    Evaluated as kl + (α − 1)ε²/8 with kl = r − 1 − log r, r = ε/expm1(ε) (no overflow for
    large ε); rounded up.
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    a = _check_orders(orders, allow_one=True)
    if epsilon == 0.0:
        return np.zeros_like(a)
    if math.isinf(epsilon):
        return np.full_like(a, np.inf)
    # log r = log ε − log(expm1 ε), with log(expm1 ε) = ε + log(−expm1(−ε)) (no overflow).
    log_r = math.log(epsilon) - (epsilon + math.log(-math.expm1(-epsilon)))
    r = math.exp(log_r)
    kl = (r - 1.0) - log_r
    slope = epsilon * epsilon / 8.0
    finite = np.isfinite(a)
    af = np.where(finite, a, 1.0)
    with np.errstate(over="ignore"):
        val = kl + (af - 1.0) * slope
    err = 8 * _MACH_EPS * (abs(r) + 1.0 + abs(log_r) + (af - 1.0) * slope + epsilon)
    out = _round_up_array(np.asarray(val, dtype=np.float64), err)
    out = np.where(finite, out, epsilon)
    return np.asarray(np.minimum(out, epsilon), dtype=np.float64)


def mcdp_to_zcdp(mu: float, tau: float) -> tuple[float, float]:
    """(μ, τ)-mean-concentrated DP ⇒ (ξ, ρ)-zCDP with ξ = μ − τ²/2, ρ = τ²/2.

    Bun–Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
    Bounds", Lemma 4.2 (mCDP of Dwork–Rothblum 2016, Def. 4.1 there). Both outputs are costs and
    are rounded up (any larger ξ or ρ is still valid); ξ is clipped at 0 from below, which is
    also valid and keeps the pair acceptable to consumers that require ξ ≥ 0.

    Returns:
      (ξ, ρ).
    """
    mu = _check_nonneg("mu", mu, allow_inf=False)
    tau = _check_nonneg("tau", tau, allow_inf=False)
    half_sq = tau * tau / 2.0
    rho = _round_up(half_sq) if half_sq > 0.0 else 0.0
    # ξ = μ − τ²/2: subtract a lower bound of τ²/2 so the difference is an upper bound.
    half_sq_down = math.nextafter(math.nextafter(half_sq, 0.0), 0.0) if half_sq > 0 else 0.0
    xi = mu - half_sq_down
    xi = _round_up(xi) if xi > 0.0 else 0.0
    return xi, rho
