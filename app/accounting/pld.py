"""Tight (ε, δ) of one invocation with a *fixed* internal schedule, by PLD accounting.

Privacy-loss-distribution (PLD) accounting (Koskela–Jälkö–Honkela 2020; Meiser–Mohammadi 2018;
implemented by Google's dp_accounting, ``dp_accounting.pld.PLDAccountant``) composes the exact
privacy-loss distributions of a fixed sequence of mechanisms and reads off the hockey-stick
curve. It is valid only when the whole schedule is fixed in advance, which is why the service
uses it *inside* one invocation (a DP-SGD run, a count of identical Gaussian/Laplace releases)
and never as a filter across adaptively chosen invocations (docs/accounting.md, *basic*).

This is the only module of ``app.accounting`` allowed to import dp_accounting.

Soundness of the returned ε as an upper bound (a *cost*):

* ``pessimistic_estimate=True`` (dp_accounting's default, asserted here): the discretised PLD
  dominates the exact one (losses rounded up onto the grid; truncated upper tail moved to the
  mass at +∞), so ε is an upper bound of the exact ε up to floating-point error;
* the FFT composition has floating-point noise in the probabilities; the hockey stick is
  therefore evaluated at a slightly smaller target δ·(1 − 1e-6), which covers absolute errors up
  to 1e-6·δ in the computed δ(ε);
* the result is then rounded up by two ulps.

The discretisation interval trades speed for tightness. Measured with dp-accounting 0.6.0 for
q = 0.01, σ = 1.1, T = 10 000, δ = 1e-5 (reference 5.192620 at interval 1e-4, 0.8 s):
interval 1e-3 gives 5.19625 (+0.07 %) in ≈ 0.1 s, which is the default here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from app.accounting.conversions import _check_nonneg, _check_unit, _round_up

if TYPE_CHECKING:  # dp_accounting pulls in scipy.stats: import it only when PLD is needed
    from dp_accounting import dp_event


def _dp_event() -> Any:
    from dp_accounting import dp_event as module

    return module


DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-3
"""Width of the privacy-loss grid. ≤ 0.1 % above the 1e-4 value on the reference DP-SGD run."""

_DELTA_SAFETY = 1e-6
"""Relative reduction of the target δ that absorbs floating-point noise of the FFT composition."""


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _check_interval(value: float) -> float:
    v = _check_nonneg("value_discretization_interval", value, allow_inf=False)
    if v == 0.0:
        raise ValueError("value_discretization_interval must be > 0")
    return v


def _pld_epsilon(event: dp_event.DpEvent, count: int, delta: float, interval: float) -> float:
    """ε at δ of ``event`` composed ``count`` times (add/remove relation), rounded up."""
    from dp_accounting import privacy_accountant
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval=interval,
    )
    accountant.compose(event, count)
    eps = float(accountant.get_epsilon(delta * (1.0 - _DELTA_SAFETY)))
    if math.isnan(eps):  # pragma: no cover - dp_accounting does not return NaN here
        raise ValueError("PLD accounting returned NaN")
    if math.isinf(eps):
        return math.inf
    return _round_up(max(eps, 0.0))


def pld_epsilon_dp_sgd(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """ε at δ of DP-SGD: ``steps`` Poisson-subsampled Gaussian steps, by PLD accounting.

    Each step releases x ↦ Σ_{i∈S} f(x_i) + N(0, σ²Δ²) with S a Poisson sample of rate q
    (add/remove relation). The PLD of one step is the pessimistic "connect-the-dots"
    discretisation (Doroshenko–Ghazi–Kamath–Kumar–Manurangsi 2022, "Connect the Dots: Tighter
    Discrete Approximations of Privacy Loss Distributions", PETS 2022) of the privacy loss of
    the mixture (1 − q)·N(0, σ²) + q·N(1, σ²) against N(0, σ²), in both directions (the remove
    and add PMFs of dp_accounting), composed ``steps`` times by FFT (Koskela–Jälkö–Honkela 2020,
    "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS) with dp_accounting's
    ``PLDAccountant``. (Theorem numbers of these papers were not checked; the implementation is
    dp_accounting's.)

    Reference: q = 0.01, σ = 1.1, T = 10 000, δ = 1e-5 → 5.1963 (interval 1e-3) versus 5.192620
    at interval 1e-4 and 5.632011 by RDP. Takes ≈ 0.1 s at the default interval.

    Args:
      noise_multiplier: σ = noise std / ℓ₂-sensitivity (0 → ∞).
      sample_rate: Poisson rate q in [0, 1] (0 → 0).
      steps: number of steps T ≥ 0 (0 → 0).
      delta: target δ in [0, 1] (0 → ∞ unless the run is trivially private).
      value_discretization_interval: width of the privacy-loss grid.

    Returns:
      ε, rounded up.
    """
    sigma = _check_nonneg("noise_multiplier", noise_multiplier)
    q = _check_unit("sample_rate", sample_rate)
    steps = _check_count("steps", steps)
    delta = _check_unit("delta", delta)
    interval = _check_interval(value_discretization_interval)
    if q == 0.0 or steps == 0 or math.isinf(sigma) or delta == 1.0:
        return 0.0
    if sigma == 0.0 or delta == 0.0:
        return math.inf
    ev = _dp_event()
    event = ev.PoissonSampledDpEvent(q, ev.GaussianDpEvent(sigma))
    return _pld_epsilon(event, steps, delta, interval)


def pld_epsilon_gaussian(
    noise_multiplier: float,
    count: int,
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """ε at δ of ``count`` Gaussian mechanisms with noise multiplier σ (std / ℓ₂-sensitivity).

    The composition of k Gaussians with multiplier σ is one Gaussian with multiplier σ/√k, i.e.
    (√k/σ)-GDP (Dong–Roth–Su 2019, Cor. 3.3); dp_accounting's ``PLDAccountant`` builds its PLD
    directly (pessimistic discretisation). Within discretisation error this equals
    :func:`app.accounting.conversions.analytic_gaussian_epsilon` (Balle–Wang 2018, Thm 8) at
    σ/√k, which is exact; this PLD route exists for cross-checking and for uniformity.

    Args:
      noise_multiplier: σ ≥ 0 (0 → ∞).
      count: number of releases k ≥ 0 (0 → 0).
      delta: target δ in [0, 1].
      value_discretization_interval: width of the privacy-loss grid.

    Returns:
      ε, rounded up.
    """
    sigma = _check_nonneg("noise_multiplier", noise_multiplier)
    count = _check_count("count", count)
    delta = _check_unit("delta", delta)
    interval = _check_interval(value_discretization_interval)
    if count == 0 or math.isinf(sigma) or delta == 1.0:
        return 0.0
    if sigma == 0.0 or delta == 0.0:
        return math.inf
    return _pld_epsilon(_dp_event().GaussianDpEvent(sigma), count, delta, interval)


def pld_epsilon_laplace(
    scale_over_sensitivity: float,
    count: int,
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """ε at δ of ``count`` Laplace mechanisms with scale b = ``scale_over_sensitivity``·Δ₁.

    The PLD of the Laplace mechanism (privacy loss bounded by 1/b, exact distribution e.g.
    Koskela–Jälkö–Honkela 2020, §6) is discretised pessimistically and self-composed by FFT with
    dp_accounting's ``PLDAccountant``. Reference: b = 1, k = 10, δ = 1e-5 → 9.989962 at interval
    1e-4 (RDP gives 9.990334; basic composition gives 10). At δ = 0 the result is the pure bound
    k/b (basic composition, which is tight for δ = 0).

    Args:
      scale_over_sensitivity: b/Δ₁ ≥ 0 (0 → ∞).
      count: number of releases k ≥ 0 (0 → 0).
      delta: target δ in [0, 1].
      value_discretization_interval: width of the privacy-loss grid.

    Returns:
      ε, rounded up.
    """
    b = _check_nonneg("scale_over_sensitivity", scale_over_sensitivity)
    count = _check_count("count", count)
    delta = _check_unit("delta", delta)
    interval = _check_interval(value_discretization_interval)
    if count == 0 or math.isinf(b) or delta == 1.0:
        return 0.0
    if b == 0.0:
        return math.inf
    pure = _round_up(count / b)
    if delta == 0.0:
        return pure
    return min(pure, _pld_epsilon(_dp_event().LaplaceDpEvent(b), count, delta, interval))
