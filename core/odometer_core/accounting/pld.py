"""Tight (ε, δ) of one invocation with a *fixed* internal schedule, by PLD accounting.

Privacy-loss-distribution (PLD) accounting (Koskela–Jälkö–Honkela 2020; Meiser–Mohammadi 2018;
implemented by Google's dp_accounting, ``dp_accounting.pld.PLDAccountant``) composes the exact
privacy-loss distributions of a fixed sequence of mechanisms and reads off the hockey-stick
curve. It is valid only when the whole schedule is fixed in advance, which is why the service
uses it *inside* one invocation (a DP-SGD run, a count of identical Gaussian/Laplace releases,
from accounting 1.5.0 a ``composed`` list: :func:`joint_epsilon`) and never as a filter across
adaptively chosen invocations (docs/accounting.md, *basic*).

This is the only module of ``odometer_core.accounting`` allowed to import dp_accounting.

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

Bounded work. The cost of a PLD is the length of its grids: the single-step PMF spans the
privacy-loss range [ε_lower, ε_upper] of the connect-the-dots bounds divided by the interval
(≈ 2.5 µs a point to build), and the T-fold self-composition is one FFT over the
Chernoff-truncated support dp_accounting computes (``compute_self_convolve_bounds``, ≈ 0.5 µs a
point with the hockey stick). Both lengths are known *before* the expensive step: the loss range
from the mechanism's privacy-loss object, the composed support from the single-step PMF. A
valid-looking declaration (σ = 0.01 with q = 0.99; 10^6 steps at σ = 0.5) needs grids of
10^7–10^8 points at the default interval: minutes of CPU. :func:`plan_poisson_gaussian` keeps the
estimated work within :data:`WORK_LIMIT_US` (≈ 0.6 s of CPU here) by doubling the interval as
needed. A coarser grid is still a pessimistic discretisation, so the ε stays an upper bound; it
is only less tight, and only where the default grid does not fit (ε in the hundreds, or step
counts in the 10^5s and more). Every declaration that fits at the default interval is computed
exactly as before, step for step as dp_accounting's ``PLDAccountant``. The rule is a pure
function of the parameters (never of the clock), so a replay recomputes the same ε.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from odometer_core.accounting.conversions import _check_nonneg, _check_unit, _round_up

if TYPE_CHECKING:  # dp_accounting pulls in scipy.stats: import it only when PLD is needed
    from dp_accounting import dp_event


def _dp_event() -> Any:
    from dp_accounting import dp_event as module

    return module


DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-3
"""Width of the privacy-loss grid. ≤ 0.1 % above the 1e-4 value on the reference DP-SGD run."""

_DELTA_SAFETY = 1e-6
"""Relative reduction of the target δ that absorbs floating-point noise of the FFT composition."""

WORK_LIMIT_US: Final = 600_000.0
"""Most estimated work of one PLD, in µs of CPU on the reference machine (see :func:`_work`)."""

_BUILD_US_PER_POINT: Final = 2.6
"""Building the single-step PMFs, per point (both directions counted)."""

_COMPOSE_US_PER_POINT: Final = 0.5
"""The FFT self-composition and the hockey stick, per point of the composed grids."""

_TAIL_MASS_TRUNCATION: Final = 1e-15
"""dp_accounting's default tail truncation of ``self_compose`` and ``compose``."""

_MAX_COARSENINGS: Final = 1100
"""Doublings of the interval before a PLD is declared unavailable (2^1100 overflows a float)."""

_MAX_REBUILDS: Final = 6
"""Single-step PMFs built at most while looking for a grid whose composition fits."""


class PldUnavailable(ValueError):
    """No PLD of bounded size exists for these parameters (the loss range is not finite, or
    not representable); the caller falls back to another sound bound."""


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
    return _epsilon_at(float(accountant.get_epsilon(delta * (1.0 - _DELTA_SAFETY))))


def _epsilon_at(eps: float) -> float:
    if math.isnan(eps):  # pragma: no cover - dp_accounting does not return NaN here
        raise ValueError("PLD accounting returned NaN")
    if math.isinf(eps):
        return math.inf
    return _round_up(max(eps, 0.0))


# ---------------------------------------------------------------------------- bounded grids
@functools.lru_cache(maxsize=64)
def _single_points(sigma: float, q: float, interval: float) -> int:
    """Points of the single-step PMF of the Poisson-subsampled Gaussian (both directions
    together, as dp_accounting builds them), from the connect-the-dots loss range alone."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    square = sigma * sigma
    if square == 0.0 or not math.isfinite(1.0 / square):
        raise PldUnavailable("σ² is below the float range")
    adjacencies = (plm.AdjacencyType.REMOVE,) if q == 1.0 else tuple(plm.AdjacencyType)
    total = 0
    for adjacency in adjacencies:
        try:
            bounds = plm.GaussianPrivacyLoss(
                sigma,
                sensitivity=1.0,
                pessimistic_estimate=True,
                log_mass_truncation_bound=-50,
                sampling_prob=q,
                adjacency_type=adjacency,
            ).connect_dots_bounds()
        except (ArithmeticError, ValueError):
            raise PldUnavailable("the privacy-loss range is not representable") from None
        upper, lower = bounds.epsilon_upper, bounds.epsilon_lower
        if upper is None or lower is None or not math.isfinite(upper - lower):
            raise PldUnavailable("the privacy-loss range is not finite")
        width = (upper - lower) / interval
        if not math.isfinite(width) or width > 1e15:
            raise PldUnavailable("the privacy-loss range is not representable")
        total += math.ceil(upper / interval) - math.floor(lower / interval) + 1
    return total


def _work(single: float, composed: float) -> float:
    """Estimated µs of CPU to build ``single`` and compose ``composed`` grid points."""
    return _BUILD_US_PER_POINT * single + _COMPOSE_US_PER_POINT * composed


def _coarser(interval: float, work: float, limit: float) -> float:
    """``interval`` doubled until ``work`` (which scales about as 1/interval) fits ``limit``."""
    doublings = max(0, math.ceil(math.log2(work / limit))) if work > limit else 0
    if doublings > _MAX_COARSENINGS:
        raise PldUnavailable("the privacy-loss range is too wide for a bounded grid")
    return math.ldexp(interval, doublings)


@dataclass(frozen=True, slots=True)
class PldPlan:
    """The grid one Poisson-subsampled Gaussian PLD is computed on, and what it costs.

    ``interval`` is the discretisation used; ``coarsened`` says it is wider than asked for
    (the default grid would have needed more than the limits); ``single_points`` and
    ``composed_points`` are the grid lengths at ``interval`` (both directions together).
    """

    sigma: float
    rate: float
    steps: int
    interval: float
    coarsened: bool
    single_points: int
    composed_points: int
    pld: Any
    moments: tuple[_Moments | None, ...] = ()


def _stays_sparse(size: int, steps: int) -> bool:
    """dp_accounting's test ``size**steps <= 1000`` for composing a sparse PMF directly,
    without building the power (a 10^7-fold composition would make a 10^7-digit integer)."""
    from dp_accounting.pld import pld_pmf

    limit = pld_pmf._MAX_PMF_SPARSE_SIZE
    return size <= 1 or (steps * math.log2(size) <= math.log2(limit) + 1 and size**steps <= limit)


def _self_compose(pld: Any, steps: int, moments: tuple[_Moments | None, ...] = ()) -> Any:
    """``pld.self_compose(steps)`` as dp_accounting computes it, except that a sparse PMF that
    would outgrow the sparse form is made dense here first — which is what dp_accounting does
    too, after computing ``size**steps`` as an exact integer (seconds of CPU for 10^7 steps) —
    and that a dense PMF whose :class:`_Moments` are known is composed by
    :func:`_dense_self_compose` (the same arithmetic, its truncation bounds not recomputed)."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    def compose(pmf: Any, known: _Moments | None) -> Any:
        sparse = isinstance(pmf, pld_pmf.SparsePLDPmf)
        if sparse and steps > 1 and not _stays_sparse(pmf.size, steps):
            pmf = pmf.to_dense_pmf()
        if known is not None and isinstance(pmf, pld_pmf.DensePLDPmf) and steps >= 1:
            return _dense_self_compose(pmf, steps, known)
        return pmf.self_compose(steps, _TAIL_MASS_TRUNCATION)

    known = list(moments) + [None] * (2 - len(moments))
    remove = compose(pld._pmf_remove, known[0])
    if pld._symmetric:
        return pld_lib.PrivacyLossDistribution(remove)
    return pld_lib.PrivacyLossDistribution(remove, compose(pld._pmf_add, known[1]))


# ---------------------------------------------------------------------------- truncation bounds
# The T-fold self-composition of a dense PMF (Koskela–Jälkö–Honkela 2020, one FFT raised to the
# T-th power) is computed on the support dp_accounting's Chernoff bounds leave after truncating
# tails of mass ≤ 10⁻¹⁵ (``common.compute_self_convolve_bounds``: for each of 40 orders t,
# ``(T·log E[e^{tX}] + log(2/10⁻¹⁵))/t``, the least of them above and the greatest below). The
# log moment generating functions do not depend on T: :class:`_Moments` keeps them with the
# single-step PMF, so that a new T (an instead search over steps, the work estimate and the
# composition of one plan) costs one FFT, not 40 log-sum-exps over the grid each time. The
# arithmetic is dp_accounting 0.6's, operation for operation, so that every ε is the one its
# accountant computes (tests/accounting/test_pld_reuse.py holds the two to bit equality).


@dataclass(frozen=True, slots=True)
class _Moments:
    """The log moment generating function of one dense PMF's index at dp_accounting's Chernoff
    orders (``orders``, numpy floats, and ``values``)."""

    size: int
    orders: tuple[Any, ...]
    values: tuple[Any, ...]


def _moments(pmf: Any) -> _Moments | None:
    """The :class:`_Moments` of ``pmf`` (``None`` for a sparse one)."""
    import numpy as np
    from dp_accounting.pld import pld_pmf
    from scipy import special

    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        return None
    probs = pmf._probs
    n = len(probs)
    orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / n
    values = [special.logsumexp(np.arange(n) * order, b=probs) for order in orders]
    return _Moments(n, tuple(orders), tuple(values))


def _truncation(moments: _Moments, steps: int) -> tuple[int, int]:
    """The index range (lower, upper) of the ``steps``-fold self-convolution outside which at
    most 10⁻¹⁵ of mass lies (Chernoff, at each of the orders of ``moments``)."""
    upper = (moments.size - 1) * steps
    lower = 0
    log_tail = math.log(2 / _TAIL_MASS_TRUNCATION)
    for order, value in zip(moments.orders, moments.values, strict=True):
        bound = (steps * value + log_tail) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        if order < 0:
            lower = max(lower, math.floor(bound))
    return lower, upper


def _dense_self_compose(pmf: Any, steps: int, moments: _Moments) -> Any:
    """The ``steps``-fold self-composition of the dense ``pmf`` (``steps`` ≥ 1): its FFT at a
    fast length covering the truncated support, raised to the ``steps``-th power and inverted,
    the support cut out; the truncated tails and the composed mass at +∞ go to +∞ (pessimistic),
    as dp_accounting's ``DensePLDPmf.self_compose``."""
    import numpy as np
    from dp_accounting.pld import pld_pmf
    from scipy import fft

    lower, upper = _truncation(moments, steps)
    probs = pmf._probs
    length = upper - lower + 1
    size = fft.next_fast_len(max(length, len(probs)))
    wrapped = np.real(fft.ifft(fft.fft(probs, size) ** steps))
    composed = np.array(np.roll(wrapped, -lower)[:length])
    infinity = _TAIL_MASS_TRUNCATION - math.expm1(steps * math.log1p(-pmf._infinity_mass))
    return pld_pmf.DensePLDPmf(
        pmf._discretization,
        pmf._lower_loss * steps + lower,
        composed,
        infinity,
        pmf._pessimistic_estimate,
    )


def _composed_points(pld: Any, steps: int, moments: tuple[_Moments | None, ...] = ()) -> int:
    """Length of the T-fold self-composition's grids, as dp_accounting will compute them: a
    small (sparse) PMF is composed directly while the result stays small and made dense
    otherwise; a dense one is composed by one FFT over the support its Chernoff bounds give
    (``compute_self_convolve_bounds``)."""
    from dp_accounting.pld import common, pld_pmf

    total = 0
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    known = list(moments) + [None] * (len(pmfs) - len(moments))
    for pmf, moment in zip(pmfs, known, strict=True):
        if steps == 0:  # no self-composition (a Gaussian's count is folded into its σ)
            total += pmf.size
            continue
        if isinstance(pmf, pld_pmf.SparsePLDPmf):
            if steps == 1:
                total += pmf.size
                continue
            if _stays_sparse(pmf.size, steps):
                total += pmf.size**steps
                continue
            pmf = pmf.to_dense_pmf()
        if moment is not None:
            lower, upper = _truncation(moment, steps)
        else:
            lower, upper = common.compute_self_convolve_bounds(
                pmf._probs, steps, _TAIL_MASS_TRUNCATION
            )
        total += upper - lower + 1
    return total


@functools.lru_cache(maxsize=32)
def _single_step(sigma: float, q: float, interval: float) -> Any:
    """dp_accounting's pessimistic PLD of one Poisson-subsampled Gaussian step (noise multiplier
    ``sigma``, rate ``q``, add/remove) on ``interval`` (memoised: the plans of several step
    counts of one step share it, as an instead search over steps tries them)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    try:
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=sigma,
            value_discretization_interval=interval,
            sampling_prob=q,
        )
    except (ArithmeticError, ValueError):
        raise PldUnavailable("dp_accounting could not discretise this PLD") from None


@functools.lru_cache(maxsize=32)
def _step_moments(sigma: float, q: float, interval: float) -> tuple[_Moments | None, ...]:
    """The :class:`_Moments` of :func:`_single_step`'s PMFs (remove, then add unless symmetric),
    memoised with it."""
    pld = _single_step(sigma, q, interval)
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    return tuple(_moments(pmf) for pmf in pmfs)


class _Planner:
    """:func:`plan_poisson_gaussian`: its arguments made positional before the memo, so that a
    call with the defaults spelt out (``basic``'s charge) finds the plan a call without them
    (:func:`fits_default_grid`) built; ``cache_clear`` empties the memos of this module's
    Poisson-subsampled Gaussian PLDs."""

    def __call__(
        self,
        sigma: float,
        q: float,
        steps: int,
        *,
        interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
        share: int = 1,
    ) -> PldPlan:
        return _planned(sigma, q, steps, interval, share)

    @staticmethod
    def cache_clear() -> None:
        _planned.cache_clear()
        _single_step.cache_clear()
        _step_moments.cache_clear()
        _single_points.cache_clear()


@functools.lru_cache(maxsize=32)
def _planned(sigma: float, q: float, steps: int, interval: float, share: int) -> PldPlan:
    """The bounded grid for ``steps`` Poisson-subsampled Gaussian steps (σ > 0, 0 < q ≤ 1;
    ``steps = 0``: one Gaussian release, no self-composition, as dp_accounting builds a
    ``GaussianDpEvent``).

    The interval is doubled until the estimated work (:func:`_work`) of building the single
    step and composing it fits :data:`WORK_LIMIT_US`: first from the loss range alone, then,
    with the single-step PMF built, from the composed support (rebuilding a smaller PMF each
    time). With ``share = k`` the limit is divided by k (k PLDs of one declaration share one's
    work).
    Raises :class:`PldUnavailable` when no finite grid exists (σ so small that the loss range
    overflows a float). Memoised (a few plans): deciding whether the default grid fits and then
    computing ε build the PMF once. The plan is never mutated (dp_accounting's ``compose`` and
    ``self_compose`` return new objects).
    """
    wanted = interval
    limit = WORK_LIMIT_US / share
    single = _single_points(sigma, q, interval)
    # The composed grid is at least as long as the single one: count it twice before building.
    interval = _coarser(interval, _work(single, single), limit)
    previous = math.inf
    for _ in range(_MAX_REBUILDS):
        if interval != wanted:
            single = _single_points(sigma, q, interval)
        pld = _single_step(sigma, q, interval)
        moments = _step_moments(sigma, q, interval) if steps >= 1 else ()
        composed = _composed_points(pld, steps, moments)
        work = _work(single, composed)
        if work <= limit:
            coarsened = interval != wanted
            return PldPlan(sigma, q, steps, interval, coarsened, single, composed, pld, moments)
        if composed > previous / 2:
            # A coarser grid no longer shrinks the composition: its support grows with the
            # step count itself (a PMF of a few points composed 10^6 times), not with 1/interval.
            break
        previous = composed
        interval = _coarser(interval, work, limit)
    raise PldUnavailable(f"the {steps}-fold composition needs more than a bounded grid")


#: The bounded grid for ``steps`` Poisson-subsampled Gaussian steps (:func:`_planned`).
plan_poisson_gaussian: Final = _Planner()


def fits_default_grid(sigma: float, q: float, steps: int) -> bool:
    """Whether ``steps`` Poisson-subsampled Gaussian steps fit the work limits at the default
    interval (so their PLD is computed exactly as dp_accounting's accountant would). The
    single-step grid is checked first from the loss range alone (no PMF is built when it is
    already too wide)."""
    try:
        single = _single_points(sigma, q, DEFAULT_VALUE_DISCRETIZATION_INTERVAL)
        if _work(single, single) > WORK_LIMIT_US:
            return False
        return not plan_poisson_gaussian(sigma, q, steps).coarsened
    except PldUnavailable:
        return False


def plan_epsilon(plan: PldPlan, delta: float) -> float:
    """ε at δ of the planned composition, rounded up (the same steps as dp_accounting's
    ``PLDAccountant``: identity ∘ (single step)^T, then the hockey stick at δ·(1 − 1e-6))."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    composed = plan.pld if plan.steps == 0 else _self_compose(plan.pld, plan.steps, plan.moments)
    total = pld_lib.identity(plan.interval).compose(composed)
    return _epsilon_at(float(total.get_epsilon_for_delta(delta * (1.0 - _DELTA_SAFETY))))


def pld_epsilon_dp_sgd(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    share: int = 1,
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
    at interval 1e-4 and 5.632011 by RDP. Takes ≈ 0.1 s at the default interval; the grid is
    bounded by :func:`plan_poisson_gaussian` (coarser only where the default grid would exceed
    the limits), and :class:`PldUnavailable` is raised where no finite grid exists.

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
    plan = plan_poisson_gaussian(sigma, q, steps, interval=interval, share=share)
    return plan_epsilon(plan, delta)


def pld_epsilon_gaussian(
    noise_multiplier: float,
    count: int,
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    share: int = 1,
) -> float:
    """ε at δ of ``count`` Gaussian mechanisms with noise multiplier σ (std / ℓ₂-sensitivity).

    The composition of k Gaussians with multiplier σ is one Gaussian with multiplier σ/√k, i.e.
    (√k/σ)-GDP (Dong–Roth–Su 2019, Cor. 3.3); dp_accounting's ``PLDAccountant`` builds its PLD
    directly (pessimistic discretisation). Within discretisation error this equals
    :func:`odometer_core.accounting.conversions.analytic_gaussian_epsilon` (Balle–Wang 2018, Thm 8)
    at
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
    # k Gaussians with multiplier σ are one with σ/√k: one PMF, no self-composition (as
    # dp_accounting's PLDAccountant composes a GaussianDpEvent ``count`` times).
    plan = plan_poisson_gaussian(sigma / math.sqrt(count), 1.0, 0, interval=interval, share=share)
    return plan_epsilon(plan, delta)


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


# ---------------------------------------------------------------------------- truncated sampling
def _replace_points(sigma: float, q: float, interval: float) -> int:
    """Points of the one PMF of the replace-one Poisson-subsampled Gaussian (dp_accounting's
    ``REPLACE`` adjacency, symmetric), from its connect-the-dots loss range."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    if sigma * sigma == 0.0 or not math.isfinite(1.0 / (sigma * sigma)):
        raise PldUnavailable("σ² is below the float range")
    try:
        bounds = plm.GaussianPrivacyLoss(
            sigma,
            sensitivity=1.0,
            pessimistic_estimate=True,
            log_mass_truncation_bound=-50,
            sampling_prob=q,
            adjacency_type=plm.AdjacencyType.REPLACE,
        ).connect_dots_bounds()
    except (ArithmeticError, ValueError):
        raise PldUnavailable("the privacy-loss range is not representable") from None
    upper, lower = bounds.epsilon_upper, bounds.epsilon_lower
    if upper is None or lower is None or not math.isfinite(upper - lower):
        raise PldUnavailable("the privacy-loss range is not finite")
    if not math.isfinite((upper - lower) / interval):
        raise PldUnavailable("the privacy-loss range is not representable")
    return int(math.ceil(upper / interval) - math.floor(lower / interval) + 1)


@dataclass(frozen=True, slots=True)
class _Pmf:
    """One pessimistic privacy-loss PMF as arrays: its losses (ascending), their probabilities
    and the mass at +∞."""

    losses: Any
    probs: Any
    infinity: float

    def delta(self, epsilon: float) -> float:
        """Its hockey-stick divergence at ε: the mass at +∞ plus Σ_{ℓ > ε} p_ℓ(1 − e^{ε − ℓ}),
        a sum of non-negative terms (as dp_accounting's ``get_delta_for_epsilon``)."""
        import numpy as np

        above = self.losses > epsilon
        return self.infinity + float(
            np.dot(-np.expm1(epsilon - self.losses[above]), self.probs[above])
        )


def _arrays(pmf: Any) -> _Pmf:
    import numpy as np
    from dp_accounting.pld import pld_pmf

    if isinstance(pmf, pld_pmf.SparsePLDPmf):
        pmf = pmf.to_dense_pmf()
    probs = np.asarray(pmf._probs, dtype=np.float64)
    losses = (np.arange(probs.size) + pmf._lower_loss) * pmf._discretization
    return _Pmf(losses, probs, float(pmf._infinity_mass))


@functools.lru_cache(maxsize=8)
def _gaussian_pmfs(sigma: float, q: float, replace: bool, share: int) -> tuple[_Pmf, ...]:
    """The pessimistic PMFs of one Poisson-subsampled Gaussian step (noise multiplier σ, rate
    q): remove and add for add/remove (one when q = 1), or the one symmetric PMF of the
    replace-one pair (``replace``), on the default grid doubled until the estimated work of
    building them (:func:`_work`) fits :data:`WORK_LIMIT_US`/``share``. Memoised."""
    from dp_accounting import privacy_accountant
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    relation = privacy_accountant.NeighboringRelation
    interval = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    for _ in range(_MAX_REBUILDS):
        points = (
            _replace_points(sigma, q, interval) if replace else _single_points(sigma, q, interval)
        )
        work = _work(points, points)
        if work <= WORK_LIMIT_US / share:
            break
        interval = _coarser(interval, work, WORK_LIMIT_US / share)
    else:  # pragma: no cover - one coarsening always fits: the work scales as 1/interval
        raise PldUnavailable("the privacy-loss range is too wide for a bounded grid")
    try:
        pld = pld_lib.from_gaussian_mechanism(
            standard_deviation=sigma,
            value_discretization_interval=interval,
            sampling_prob=q,
            neighboring_relation=relation.REPLACE_ONE if replace else relation.ADD_OR_REMOVE_ONE,
        )
    except (ArithmeticError, ValueError):
        raise PldUnavailable("dp_accounting could not discretise this PLD") from None
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    return tuple(_arrays(pmf) for pmf in pmfs)


def pld_epsilon_truncated(
    noise_multiplier: float,
    rate: float,
    untruncated: float,
    parts: tuple[tuple[float, float], ...],
    delta: float,
    *,
    share: int = 1,
) -> float:
    """ε at δ of truncated Poisson sampling with the Gaussian mechanism, from the weights of
    :func:`odometer_core.accounting.mixtures.truncation`: the least ε (up to a relative 1e-12,
    rounded up) with

        u·δ₁(ε) + Σ_j ρ_j·δ_j(ε) ≤ δ·(1 − 1e-6)

    in each direction, δ₁ the pessimistic PLD of the Poisson-subsampled Gaussian (noise
    multiplier σ, rate q = ``rate``, add/remove: its remove and add PMFs, Doroshenko et al. 2022
    connect-the-dots), δ_j that of the replace-one pair of rate R_j and noise multiplier σ/2
    (two clipping norms; dp_accounting's ``REPLACE`` adjacency, which dominates both directions
    of the add/remove pair: docs/accounting.md), u = ``untruncated`` and (R_j, ρ_j) =
    ``parts``. Each PMF is built once, on a grid bounded like :func:`plan_poisson_gaussian`'s
    (a share of the work limit each), and its hockey stick summed directly. Raises
    :class:`PldUnavailable` where no bounded grid exists."""
    sigma = _check_nonneg("noise_multiplier", noise_multiplier)
    q = _check_unit("rate", rate)
    delta = _check_unit("delta", delta)
    if q == 0.0 or math.isinf(sigma) or delta == 1.0:
        return 0.0
    if sigma == 0.0 or delta == 0.0:
        return math.inf
    builds = share * (1 + len(parts))
    first = _gaussian_pmfs(sigma, q, False, builds)
    others = [(w, _gaussian_pmfs(sigma / 2.0, r, True, builds)[0]) for r, w in parts]
    target = delta * (1.0 - _DELTA_SAFETY)

    def total(epsilon: float) -> float:
        truncated = sum(w * pmf.delta(epsilon) for w, pmf in others)
        return max(untruncated * pmf.delta(epsilon) + truncated for pmf in first)

    if total(0.0) <= target:
        return 0.0
    hi = 1.0
    while total(hi) > target:
        hi *= 2.0
        if math.isinf(hi):  # δ below the PMFs' mass at +∞ (about e^{−50} each)
            return math.inf
    lo = hi / 2.0 if hi > 1.0 else 0.0
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = lo + (hi - lo) / 2.0
        if total(mid) <= target:
            hi = mid
        else:
            lo = mid
    return _epsilon_at(hi)


# ---------------------------------------------------------------------------- joint PLD of a list
# A ``composed`` list in ``basic`` mode (accounting 1.5.0 on: modes/basic_joint.py) is charged by
# the composition of its items' PLDs (a convolution, Koskela–Jälkö–Honkela 2020; valid for a
# list whose items' PLDs are fixed in advance), read at the charged δ. The components:
#
# * one Gaussian of noise multiplier σ: the list's Gaussian and μ-GDP items merged (Gaussians of
#   multipliers σ_i compose to one of multiplier (Σ σ_i⁻²)^{-1/2}, exactly: Dong–Roth–Su 2019,
#   Cor. 3.3), dp_accounting's ``from_gaussian_mechanism``;
# * Laplace mechanisms of scale b/Δ, each self-composed its count, ``from_laplace_mechanism``;
# * (ε, δ) pairs, each self-composed its count, ``from_privacy_parameters``: mass δ at +∞ and
#   ±ε with the randomized-response weights, the PLD of the (ε, δ) randomised response, of
#   which every (ε, δ)-DP mechanism is a post-processing (Kairouz–Oh–Viswanath 2015/2017, "The
#   composition theorem for differential privacy"; theorem number not checked), so that it
#   dominates the item. Pure ε-DP items are the pairs (ε, 0).
#
# Every PLD is pessimistic (connect-the-dots for the Gaussian and the Laplace mechanism,
# Doroshenko–Ghazi–Kamath–Kumar–Manurangsi 2022; losses rounded up for the pairs) on
# :data:`JOINT_INTERVAL`, dp_accounting's default, never coarsened; compositions move the
# truncated upper tails to the mass at +∞; the hockey stick is read at δ·(1 − 10⁻⁶) and rounded
# up as above. The grid lengths are known before anything is built, and where the estimated
# work exceeds :data:`JOINT_WORK_LIMIT_US` there is no joint PLD (:class:`PldUnavailable`: the
# caller keeps its other bound). A pure function of the components: a replay computes the same ε.

JOINT_INTERVAL: Final = 1e-4
"""The privacy-loss grid of a joint PLD: dp_accounting's default (``PLDAccountant`` and
``from_*`` constructors), never coarsened (where it does not fit, no joint PLD)."""

JOINT_WORK_LIMIT_US: Final = WORK_LIMIT_US
"""Most estimated work of a joint PLD (:func:`joint_work`): one PLD's. The items that have one
are closed forms in the list's other bounds, so the request's CPU budget is the PLD's."""

_JOINT_BUILD_US: Final = 1.5
"""Building a Gaussian or Laplace PMF, per point (measured 1.0–1.4 µs here at 10⁻⁴)."""

_JOINT_SELF_US: Final = 1.0
"""A self-composition by FFT, per point of its result (measured 0.4–0.8 µs)."""

_JOINT_COMPOSE_US: Final = 0.3
"""Composing two PMFs and reading the hockey stick, per point of the result (measured
0.12–0.25 µs)."""


@dataclass(frozen=True, slots=True)
class JointComponents:
    """What a list composes, each as the PLD built for it (hashable, ordered canonically).

    ``sigma``: the noise multiplier of the merged Gaussian (``None``: no Gaussian);
    ``laplace``: (b/Δ, count) of each distinct Laplace mechanism; ``pairs``: (ε, δ, count) of
    each distinct (ε, δ) guarantee. Parameters are already rounded towards more privacy loss
    (σ and b down, ε and δ up)."""

    sigma: float | None
    laplace: tuple[tuple[float, int], ...]
    pairs: tuple[tuple[float, float, int], ...]


def _joint_points(low: float, high: float) -> int:
    return math.ceil(high / JOINT_INTERVAL) - math.floor(low / JOINT_INTERVAL) + 1


def _joint_gaussian_points(sigma: float) -> int:
    """Points of the merged Gaussian's (symmetric) PMF, from its connect-the-dots loss range."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    try:
        bounds = plm.GaussianPrivacyLoss(
            sigma, pessimistic_estimate=True, log_mass_truncation_bound=-50
        ).connect_dots_bounds()
    except (ArithmeticError, ValueError):
        raise PldUnavailable("the privacy-loss range is not representable") from None
    upper, lower = bounds.epsilon_upper, bounds.epsilon_lower
    if upper is None or lower is None or not math.isfinite((upper - lower) / JOINT_INTERVAL):
        raise PldUnavailable("the privacy-loss range is not finite")
    return _joint_points(lower, upper)


def joint_work(components: JointComponents) -> float:
    """Estimated µs of CPU of :func:`joint_epsilon`: :data:`_JOINT_BUILD_US` a point of each PMF
    computed point by point (the Gaussian, one Laplace step), :data:`_JOINT_SELF_US` a point of
    each self-composition's result and :data:`_JOINT_COMPOSE_US` a point of each composition's,
    whose length is at most the sum of the lengths composed (a self-composed Laplace or pair
    spans at most count × its one-step loss range)."""
    built = 0.0
    selves = 0.0
    lengths: list[float] = []
    if components.sigma is not None:
        single = _joint_gaussian_points(components.sigma)
        built += single
        lengths.append(single)
    steps = [(2.0 / scale, count, True) for scale, count in components.laplace]
    steps += [(2.0 * epsilon, count, False) for epsilon, _, count in components.pairs]
    for loss_range, count, computed in steps:
        one = loss_range / JOINT_INTERVAL + 1.0
        built += one if computed else 0.0
        selves += count * one if count > 1 else 0.0
        lengths.append(count * one)
    composed = sum(sum(lengths[: k + 1]) for k in range(1, len(lengths)))
    return _JOINT_BUILD_US * built + _JOINT_SELF_US * selves + _JOINT_COMPOSE_US * composed


def _self_composed_part(one: Any, count: int) -> Any:
    return one if count == 1 else _self_compose(one, count)


@functools.lru_cache(maxsize=32)
def _joint_pld(components: JointComponents) -> Any:
    """The joint pessimistic PLD of ``components`` (memoised: one list is charged at one δ per
    configuration, and the same list recurs)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    parts: list[Any] = []
    try:
        if components.sigma is not None:
            parts.append(
                pld_lib.from_gaussian_mechanism(
                    standard_deviation=components.sigma,
                    pessimistic_estimate=True,
                    value_discretization_interval=JOINT_INTERVAL,
                )
            )
        for scale, count in components.laplace:
            one = pld_lib.from_laplace_mechanism(
                scale, pessimistic_estimate=True, value_discretization_interval=JOINT_INTERVAL
            )
            parts.append(_self_composed_part(one, count))
        for epsilon, delta, count in components.pairs:
            one = pld_lib.from_privacy_parameters(
                common.DifferentialPrivacyParameters(epsilon, delta),
                value_discretization_interval=JOINT_INTERVAL,
            )
            parts.append(_self_composed_part(one, count))
    except (ArithmeticError, ValueError):
        raise PldUnavailable("dp_accounting could not discretise this PLD") from None
    total = pld_lib.identity(JOINT_INTERVAL)
    for part in parts:
        total = total.compose(part)
    return total


def joint_epsilon(components: JointComponents, delta: float) -> float:
    """ε at δ of the joint PLD of ``components``, rounded up (∞ where δ is below the mass at
    +∞). Raises :class:`PldUnavailable` where the estimated work exceeds
    :data:`JOINT_WORK_LIMIT_US` or a PLD cannot be built."""
    if not 0.0 < delta < 1.0:
        raise PldUnavailable("a joint PLD is read at 0 < δ < 1 only")
    if components.sigma is None and not components.laplace and not components.pairs:
        return 0.0
    if joint_work(components) > JOINT_WORK_LIMIT_US:
        raise PldUnavailable("the joint PLD needs more than a bounded grid")
    total = _joint_pld(components)
    return _epsilon_at(float(total.get_epsilon_for_delta(delta * (1.0 - _DELTA_SAFETY))))
