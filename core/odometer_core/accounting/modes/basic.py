"""``basic`` mode: the basic-composition privacy filter with output-dependent (ODP) refunds.

Admission (Hartmann et al. 2022, Algorithm 1, lines 9–10): an invocation is admitted iff
E + R + max_k ε_k ≤ ε_B and D + δ ≤ δ_B, where E is the realised ε, R the ε still reserved by open
ODP reservations (at their worst cell) and D the δ charged. An ODP declaration is reserved at its
worst cell; once its mechanism ran, settling charges the released cell's ε_k and refunds the rest
(Algorithm 1, line 14; Theorem 7), δ is never refunded; a cancel (the mechanism never ran)
returns both. Valid under full adaptivity by the basic filter of Rogers–Roth–Ullman–Vadhan 2016
with ODP charges (Hartmann et al. 2022, Thm 7): everything released is (ε_B, δ_B)-DP.

The charge of one invocation is the tightest sound single (ε, δ) this module knows for it; a
curve-based guarantee (zCDP, RDP, GDP, Gaussian, DP-SGD) is converted at the dataset's
``conversion_delta`` (or the request's own), which is charged as part of δ. See
``docs/accounting.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final, Literal, overload

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import bounds, pld
from odometer_core.accounting import conversions as cv
from odometer_core.accounting import effort as work
from odometer_core.accounting import mixtures as mx
from odometer_core.accounting import odometer as odo
from odometer_core.accounting import selection as sel
from odometer_core.accounting import subsampling as ss
from odometer_core.accounting.amounts import EpsilonDelta
from odometer_core.accounting.declarations import (
    DPSGD,
    GDP,
    KINDS,
    MCDP,
    ZCDP,
    ApproxDP,
    ChargedAs,
    Composed,
    Declaration,
    DeclarationError,
    Exponential,
    Gaussian,
    Laplace,
    MixtureOfGaussians,
    OdpCapable,
    OdpPartition,
    PureDP,
    RandomizedResponse,
    RDPCurve,
    Relation,
    RepeatAndSelect,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import (
    DOWN,
    INFINITY,
    UP,
    ZERO,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    mul_up,
    sub_down,
    sub_up,
    to_float_down,
    to_float_up,
)
from odometer_core.accounting.memo import memoised
from odometer_core.accounting.modes import basic_joint as joint
from odometer_core.accounting.modes.basic_effort import COARSE_ORDERS as COARSE_ORDERS
from odometer_core.accounting.modes.basic_effort import DENSE_CURVES as DENSE_CURVES
from odometer_core.accounting.modes.basic_effort import DENSE_ORDERS as DENSE_ORDERS
from odometer_core.accounting.modes.basic_effort import MAX_PLD_ITEMS as MAX_PLD_ITEMS
from odometer_core.accounting.modes.basic_effort import Effort, effort_for
from odometer_core.accounting.modes.common import (
    ConfigError,
    Decision,
    InvalidTransition,
    Mode,
    Reservation,
    UnsupportedInMode,
    amount,
    only,
    reject,
)
from odometer_core.accounting.modes.curves import rdp_curve
from odometer_core.accounting.modes.curves import unsupported as rdp_unsupported
from odometer_core.accounting.modes.zcdp import zcdp_pair
from odometer_core.accounting.odometer import Reading

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class BasicConfig:
    """``basic``: target (ε_B, δ_B); ``conversion_delta`` is the default δ at which curve-based
    declarations (zCDP, RDP, GDP, Gaussian, DP-SGD without its own δ) are converted to (ε, δ);
    ``composed``: how a ``composed`` list is charged (:mod:`~.basic_joint`: ``joint_pld`` from
    accounting 1.5.0 on, ``one_by_one`` on configurations stored before)."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    conversion_delta: Decimal
    mode: Literal["basic"] = "basic"
    composed: str = joint.ONE_BY_ONE


@dataclass(frozen=True, slots=True)
class BasicState:
    """E (realised ε), reserved ε (open reservations at worst case), D (δ, charged in full)."""

    spent_epsilon: Decimal = ZERO
    reserved_epsilon: Decimal = ZERO
    spent_delta: Decimal = ZERO
    open_reservations: int = 0


# ---------------------------------------------------------------------------- configuration
def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> BasicConfig:
    """``{"mode": "basic", "conversion_delta"?}``: the conversion δ defaults to δ_B / 10."""
    only(acc, ("mode", "conversion_delta"))
    default_conv = DOWN.divide(dlt, Decimal(10)) if dlt > 0 else ZERO
    conv = amount(acc, "conversion_delta", default=default_conv)
    if conv > dlt:
        raise ConfigError("conversion_delta must be ≤ the budget delta")
    return BasicConfig(eps, dlt, rel, conv, composed=joint.JOINT_PLD)


def initial_state(config: BasicConfig) -> BasicState:
    return BasicState()


# ---------------------------------------------------------------------------- charge
def unsupported(decl: Declaration) -> str | None:
    """Why ``basic`` cannot charge ``decl`` (the 422 message), or ``None``: the walk of
    :func:`eps_delta`, asked only whether. ``basic`` converts every declaration kind of the
    registry to (ε, δ), but a ``repeat_and_select`` only from its pure ε or its RDP curve,
    wherever it is nested; a class built in code that is no kind of the registry (not even a
    subclass of one) has no conversion."""
    try:
        _walk(decl, None)
    except UnsupportedInMode as refused:
        return refused.detail
    if type(decl) not in _REGISTERED:
        return _no_conversion(decl)
    return None


_REGISTERED: Final = frozenset(KINDS.values())


def _no_conversion(decl: Declaration) -> str:
    return f"no (ε, δ) conversion for kind '{decl.kind}'"


@dataclass(frozen=True, slots=True)
class EpsDelta:
    """A ``basic``-mode charge: (ε, δ), with the ODP partition when output-dependent."""

    epsilon: Decimal
    delta: Decimal
    partition: OdpPartition | None = None


def _pure_epsilon(decl: Declaration) -> Decimal | None:
    """ε of kinds that are pure ε-DP by definition, else ``None``."""
    match decl:
        case ChargedAs():
            return _pure_epsilon(decl.charged_as())
        case PureDP(epsilon=eps) | RandomizedResponse(epsilon=eps) | Exponential(epsilon=eps):
            return eps
        case Laplace():
            return decl.epsilon
        case GDP(mu=mu) if mu == 0:
            return ZERO
        case RepeatAndSelect():
            return sel.pure_epsilon(decl)
    return None


@dataclass(frozen=True, slots=True)
class _At:
    """What a charge is computed at: the conversion δ, and the :class:`Effort` fixed once for
    the whole declaration."""

    conversion_delta: Decimal
    effort: Effort


def eps_delta(
    decl: Declaration, conversion_delta: Decimal, effort: Effort | None = None
) -> EpsDelta:
    """The tightest sound single (ε, δ) for one invocation, within bounded work.

    ``conversion_delta`` is the δ spent to turn a curve-based guarantee (zCDP, RDP, GDP,
    Gaussian) into (ε, δ); it is added to the declaration's own δ. Pure kinds never use it.
    ``effort`` is fixed once for the whole declaration (:func:`effort_for`) and passed down to
    nested items. Raises :class:`DeclarationError` when even the cheapest sound method would
    need more work than one request may do. A :class:`ChargedAs` mechanism is charged as the kind
    that states its guarantee (``discrete_laplace`` as ``pure_dp``, ``discrete_gaussian`` as
    ``zcdp``, converted at the conversion δ as a Gaussian's ρ would be, ``report_noisy_max`` as
    ``exponential`` or ``pure_dp``, ``tree_aggregation`` as ``gaussian``). A
    ``repeat_and_select`` is (2 + η)ε-DP for an ε-DP inner mechanism and a truncated negative
    binomial (Papernot–Steinke 2022 Cor. 3), else its ``rdp`` curve converted at the
    conversion δ. Where ``basic`` cannot charge ``decl`` (:func:`unsupported`), raises
    :class:`UnsupportedInMode` with the reason.
    """
    if isinstance(decl, ChargedAs):
        return eps_delta(decl.charged_as(), conversion_delta, effort)
    if effort is None:
        effort = effort_for(decl)
    return _walk(decl, _At(conversion_delta, effort))


@overload
def _walk(decl: Declaration, at: _At) -> EpsDelta: ...
@overload
def _walk(decl: Declaration, at: None) -> None: ...
@overload
def _walk(decl: Declaration, at: _At | None) -> EpsDelta | None: ...
def _walk(decl: Declaration, at: _At | None) -> EpsDelta | None:
    """The one walk of ``basic`` mode over a declaration, in the manner of dp_accounting's
    ``_maybe_compose(event, count, do_compose)``: where ``basic`` cannot charge ``decl`` or a
    mechanism nested in it, it raises :class:`UnsupportedInMode` with the reason; else it
    returns the (ε, δ) at ``at``, or, when ``at`` is ``None``, nothing: asked only whether, it
    converts nothing. A kind the mode accounts is one with a case here."""
    if isinstance(decl, ChargedAs):
        # the guarantee of a plain kind (ε-DP, ρ-zCDP, the exponential or Gaussian mechanism),
        # each converted here: only a charge needs it built (√d of a tree costs a few µs)
        return None if at is None else _walk(decl.charged_as(), at)
    pure = _pure_epsilon(decl)
    if pure is not None:
        return None if at is None else EpsDelta(pure, ZERO)
    match decl:
        case ApproxDP(epsilon=eps, delta=delta):
            return None if at is None else EpsDelta(eps, delta)
        case OdpCapable():
            if at is None:
                return None
            part = decl.partition()
            return EpsDelta(part.worst_epsilon, part.delta, part)
        case ZCDP() | MCDP():
            return None if at is None else _zcdp_eps_delta(decl, at.conversion_delta)
        case RDPCurve():
            if at is None:
                return None
            orders = np.array([float(a) for a in decl.orders])
            values = np.array([to_float_up(v) for v in decl.values])
            dc = to_float_down(at.conversion_delta)
            eps = _conv_or_inf(dc, lambda: cv.rdp_to_epsilon(orders, values, dc)[0])
            return EpsDelta(eps, at.conversion_delta)
        case GDP(mu=mu):
            if at is None:
                return None
            dc = to_float_down(at.conversion_delta)
            eps = _conv_or_inf(dc, lambda: cv.gdp_epsilon(to_float_up(mu), dc))
            return EpsDelta(eps, at.conversion_delta)
        case Gaussian():
            return None if at is None else _gaussian_eps_delta(decl, at.conversion_delta)
        case Subsampled(mechanism=inner):
            if at is None:
                return _walk(inner, None)
            return _subsampled_eps_delta(decl, at.conversion_delta, at.effort)
        case RepeatAndSelect():
            # not ε-DP by PS22 Cor. 3 (handled above): its rdp-mode curve (Papernot–Steinke 2022
            # Thm 2 or 6) on effort.orders, converted by CKS20 Prop. 12 at the conversion δ,
            # which needs an inner mechanism that mode can account, without a δ
            why = rdp_unsupported(decl)
            if why is not None:
                raise UnsupportedInMode(why)
            if at is None:
                return None
            dc, effort = to_float_down(at.conversion_delta), at.effort
            eps = _conv_or_inf(dc, lambda: _rdp_epsilon(decl, dc, effort))
            return EpsDelta(eps, at.conversion_delta)
        case DPSGD():
            return None if at is None else _dp_sgd_eps_delta(decl, at.conversion_delta, at.effort)
        case MixtureOfGaussians() | SampledWithReplacement() | TruncatedSubsampledGaussian():
            if at is None:
                return None
            return _mixture_eps_delta(decl, at.conversion_delta, at.effort)
        case Composed(items=items):
            if at is None:
                for item, _ in items:
                    _walk(item, None)
                return None
            return _composed_eps_delta(decl, at.conversion_delta, at.effort)
    raise UnsupportedInMode(_no_conversion(decl))


def _zcdp_eps_delta(decl: ZCDP | MCDP, conversion_delta: Decimal) -> EpsDelta:
    """ξ + ε(ρ) at the conversion δ (Canonne–Kamath–Steinke 2020 Cor. 13), which is charged
    besides the declaration's own δ; ρ = 0 needs no conversion."""
    xi, rho = zcdp_pair(decl)
    own_delta = decl.delta if isinstance(decl, ZCDP) else ZERO
    if rho == 0:
        return EpsDelta(xi, own_delta)
    dc = to_float_down(conversion_delta)
    eps = _conv_or_inf(dc, lambda: cv.zcdp_epsilon(to_float_up(rho), dc))
    return EpsDelta(add_up(xi, eps), add_up(own_delta, conversion_delta))


def _gaussian_eps_delta(decl: Gaussian, conversion_delta: Decimal) -> EpsDelta:
    """The exact (ε, δ) of the Gaussian mechanism at the conversion δ (Balle–Wang 2018 Thm 8)."""
    if decl.sensitivity == 0:
        return EpsDelta(ZERO, ZERO)
    if decl.sigma == 0:
        return EpsDelta(INFINITY, conversion_delta)
    dc = to_float_down(conversion_delta)
    eps = _conv_or_inf(
        dc,
        lambda: cv.analytic_gaussian_epsilon(
            to_float_down(decl.sigma), to_float_up(decl.sensitivity), dc
        ),
    )
    return EpsDelta(eps, conversion_delta)


def _dp_sgd_eps_delta(decl: DPSGD, conversion_delta: Decimal, effort: Effort) -> EpsDelta:
    """ε of the run at its own δ, or at the conversion δ when it states none (charged)."""
    delta = decl.delta if decl.delta is not None else conversion_delta
    d = to_float_down(delta)
    eps = _conv_or_inf(
        d,
        lambda: _poisson_gaussian_epsilon(
            decl,
            to_float_down(decl.noise_multiplier),
            to_float_up(decl.sample_rate),
            decl.steps,
            d,
            effort,
        ),
    )
    return EpsDelta(eps, delta)


def _poisson_gaussian_epsilon(
    decl: Declaration, sigma: float, q: float, steps: int, delta: float, effort: Effort
) -> float:
    """ε at δ of ``steps`` Poisson-subsampled Gaussian steps: PLD accounting on a bounded grid
    (:func:`odometer_core.accounting.pld.plan_poisson_gaussian`, with ``1/effort.pld_share`` of the
    work
    limit); where no bounded grid exists (σ so small that the loss range overflows, or a step
    count whose composition alone outgrows the grid) or the declaration has too many PLD items
    to afford one each, the Mironov–Talwar–Zhang 2019 RDP curve of ``decl`` on
    ``effort.orders``, converted by Canonne–Kamath–Steinke 2020 Prop. 12 — sound for the same
    fixed schedule, looser. Where the grid had to be coarsened, the smaller of the two.

    Where ``steps · q ≤ δ`` the answer is ε = 0 without any grid (:func:`_within_delta`)."""
    if _within_delta(q, steps, delta):
        return 0.0
    if effort.pld_share is not None:
        try:
            plan = pld.plan_poisson_gaussian(sigma, q, steps, share=effort.pld_share)
        except pld.PldUnavailable:
            pass
        else:
            eps = pld.plan_epsilon(plan, delta)
            # A coarsened grid can be looser than the RDP bound: both are sound, take the less.
            return min(eps, _rdp_epsilon(decl, delta, effort)) if plan.coarsened else eps
    return _rdp_epsilon(decl, delta, effort)


def _within_delta(q: float, steps: int, delta: float) -> bool:
    """Whether ``steps`` Poisson-subsampled steps of rate ``q`` are (0, δ)-DP whatever each
    step's mechanism: ``steps · q ≤ δ``, compared exactly.

    One step of any mechanism on a Poisson subsample of rate q is (0, q)-DP, for add/remove and
    for substitution neighbours alike: the record in which the neighbours differ is left out of
    the subsample with probability 1 − q, and then the output's distribution is the same, so no
    event's probability moves by more than q (Balle–Barthe–Gaboardi 2018, Thm 8, for an inner
    mechanism that is (0, 1)-DP, as every mechanism is). T such steps are (0, Tq)-DP by basic
    composition (Dwork–Roth 2014, Thm 3.16). Where a rate is so small that this already fits the
    conversion δ, ε = 0 is exact, and the grid of a tiny σ, which such a rate can come with,
    is never built: a PLD of a Gaussian with σ = 10⁻³ at q = 10⁻³⁰⁰ costs about 0.7 s of CPU for
    an ε of 10⁻³²³."""
    return delta > 0 and Fraction(q) * steps <= Fraction(delta)


def _rdp_epsilon(decl: Declaration, delta: float, effort: Effort) -> float:
    """ε at δ of ``decl``'s RDP curve on ``effort.orders`` (CKS20 Prop. 12)."""
    curve, _ = rdp_curve(decl, "add_remove", effort.orders)
    return float(cv.rdp_to_epsilon(effort.orders, curve, delta)[0])


def _poisson_gaussian_params(
    decl: Declaration, conversion_delta: Decimal
) -> tuple[float, float, int, Decimal] | None:
    """(σ, q, T, δ) of a DP-SGD run or a Poisson-subsampled Gaussian (T = 1) charged by PLD,
    else ``None``."""
    if isinstance(decl, DPSGD):
        delta = decl.delta if decl.delta is not None else conversion_delta
        return (
            to_float_down(decl.noise_multiplier),
            to_float_up(decl.sample_rate),
            decl.steps,
            delta,
        )
    if (
        isinstance(decl, Subsampled)
        and decl.scheme == "poisson"
        and isinstance(decl.mechanism, Gaussian)
        and decl.mechanism.sensitivity > 0
        and decl.mechanism.sigma > 0
    ):
        assert decl.rate is not None
        nm = to_float_down(UP.divide(decl.mechanism.sigma, decl.mechanism.sensitivity))
        return nm, to_float_up(decl.rate), 1, conversion_delta
    return None


@memoised
def charge(decl: Declaration, conversion_delta: Decimal) -> EpsDelta:
    """:func:`eps_delta` of a whole declaration: the ``basic`` charge, within the work limit of
    one charge (:mod:`odometer_core.accounting.effort`; a 422 past it). Memoised, so that the
    service can
    compute it before taking the budget's lock (:mod:`odometer_core.accounting.memo`)."""
    with work.limited():
        return eps_delta(decl, conversion_delta)


@memoised
def joint_charge(decl: Declaration, conversion_delta: Decimal) -> EpsDelta:
    """:func:`charge` of a ``composed`` list from accounting 1.5.0 on: its ε lowered to the
    joint PLD's at the same δ (:mod:`~.basic_joint`). Memoised: once per declaration and δ."""
    cost = charge(decl, conversion_delta)
    epsilon = joint.joint_epsilon(decl, cost.delta) if cost.epsilon > 0 else None
    return cost if epsilon is None or epsilon >= cost.epsilon else replace(cost, epsilon=epsilon)


@memoised
def charge_floor(decl: Declaration, conversion_delta: Decimal) -> EpsDelta | None:
    """A lower bound on :func:`eps_delta` where the tight charge is expensive, else ``None``.

    Only for PLD-charged declarations whose default grid does not fit the work limits
    (:func:`odometer_core.accounting.pld.fits_default_grid`): there a refusal needs no PLD at all
    when
    this bound already exceeds what is left (:mod:`odometer_core.accounting.bounds`). Everywhere
    else the
    tight charge is cheap and the admission rule is unchanged.
    """
    params = _poisson_gaussian_params(decl, conversion_delta)
    if params is None:
        return None
    sigma, q, steps, delta = params
    if delta <= 0 or q <= 0 or pld.fits_default_grid(sigma, q, steps):
        return None
    if _within_delta(q, steps, to_float_down(delta)):
        return None  # the tight charge, ε = 0, costs nothing
    floor = bounds.poisson_gaussian_epsilon_floor(sigma, q, steps, to_float_up(delta))
    return EpsDelta(budget_from_float(floor), delta)


def _conv_or_inf(delta: float, compute: object) -> Decimal:
    """Run a conversion at δ > 0; at δ = 0 a non-pure guarantee gives ε = ∞ (never admitted)."""
    if delta <= 0:
        return INFINITY
    assert callable(compute)
    return cost_from_float(float(compute()))


def _subsampled_eps_delta(decl: Subsampled, conversion_delta: Decimal, effort: Effort) -> EpsDelta:
    """Amplification by subsampling for (ε, δ) (Balle–Barthe–Gaboardi 2018, Thm 8 / 9):
    ε' = log(1 + γ(e^ε − 1)), δ' = γδ. A Poisson-subsampled Gaussian is converted by PLD
    accounting instead (tight for this fixed single-step schedule)."""
    inner = decl.mechanism
    if (
        decl.scheme == "poisson"
        and isinstance(inner, Gaussian)
        and inner.sensitivity > 0
        and inner.sigma > 0
        and conversion_delta > 0
    ):
        assert decl.rate is not None
        d = to_float_down(conversion_delta)
        eps = cost_from_float(
            _poisson_gaussian_epsilon(
                decl,
                to_float_down(UP.divide(inner.sigma, inner.sensitivity)),
                to_float_up(decl.rate),
                1,
                d,
                effort,
            )
        )
        return EpsDelta(eps, conversion_delta)
    base = eps_delta(inner, conversion_delta, effort)
    if base.epsilon.is_infinite():
        return EpsDelta(INFINITY, base.delta)
    gamma = to_float_up(decl.gamma)
    if decl.scheme == "poisson":
        e, d = ss.poisson_amplify(to_float_up(base.epsilon), to_float_up(base.delta), gamma)
    else:
        assert decl.m is not None and decl.n is not None
        e, d = ss.wor_amplify(to_float_up(base.epsilon), to_float_up(base.delta), decl.m, decl.n)
    return EpsDelta(cost_from_float(e), cost_from_float(d))


def _mixture_eps_delta(
    decl: MixtureOfGaussians | SampledWithReplacement | TruncatedSubsampledGaussian,
    conversion_delta: Decimal,
    effort: Effort,
) -> EpsDelta:
    """The kinds that reduce to mixtures of Gaussians, at the conversion δ, which is charged
    (:mod:`odometer_core.accounting.mixtures`; docs/accounting.md):

    - ``mixture_of_gaussians``: the exact privacy profile of Σ p_i N(c_i, σ²) against N(0, σ²)
      in both directions (Neyman–Pearson thresholds, no discretisation);
    - ``sampled_with_replacement``: Balle–Barthe–Gaboardi 2018 Thm 10 with the inner
      mechanism's group privacy profile (the Gaussian's of sensitivity kΔ, Balle–Wang 2018
      Thm 8; kε-DP for an ε-DP mechanism, charged (ε', 0) when the δ would need all m copies
      covered anyway);
    - ``truncated_subsampled_gaussian``: pessimistic PLDs of the Poisson-subsampled Gaussian
      and of the replace-one pair that bounds a truncated batch
      (:func:`odometer_core.accounting.pld.pld_epsilon_truncated`), the larger ε of the
      dataset's two neighbours (n and n + 1 records with the record); where no bounded grid
      exists or the declaration has more PLD items than :data:`MAX_PLD_ITEMS`, its ``rdp``
      curve converted by CKS20 Prop. 12 (sound, looser). ε = 0 without a grid where the rate
      alone is within δ (:func:`_within_delta`).
    """
    dc = to_float_down(conversion_delta)
    if isinstance(decl, MixtureOfGaussians):
        mix = mx.of_declaration(decl)
        if mix is None:
            return EpsDelta(ZERO, ZERO)
        return EpsDelta(_conv_or_inf(dc, lambda: mx.mixture_epsilon(mix, dc)), conversion_delta)
    if isinstance(decl, SampledWithReplacement):
        mu, epsilon0 = mx.inner_of(decl)
        if mu == 0.0 or epsilon0 == 0.0:
            return EpsDelta(ZERO, ZERO)
        draws = mx.copies(decl.n, decl.m, dc * mx.DROPPED_MASS if dc > 0 else 1.0)
        if mu is not None:
            eps = _conv_or_inf(dc, lambda: mx.wr_gaussian_epsilon(draws, mu, dc))
            return EpsDelta(eps, conversion_delta)
        assert epsilon0 is not None
        value, pure = mx.wr_pure_epsilon(draws, epsilon0, dc, decl.m)
        return EpsDelta(cost_from_float(value), ZERO if pure else conversion_delta)
    if dc <= 0:
        return EpsDelta(INFINITY, conversion_delta)
    q = to_float_up(decl.sampling_probability)
    if _within_delta(q, 1, dc):
        return EpsDelta(ZERO, conversion_delta)
    if effort.pld_share is not None:
        sigma = to_float_down(decl.noise_multiplier)
        try:
            epsilon = max(
                pld.pld_epsilon_truncated(
                    sigma, q, weights.untruncated, weights.parts, dc, share=effort.pld_share
                )
                for weights in mx.truncations_of(decl)
            )
        except pld.PldUnavailable:
            pass
        else:
            return EpsDelta(cost_from_float(epsilon), conversion_delta)
    return EpsDelta(cost_from_float(_rdp_epsilon(decl, dc, effort)), conversion_delta)


def _composed_eps_delta(decl: Composed, conversion_delta: Decimal, effort: Effort) -> EpsDelta:
    """Non-adaptive composition inside one invocation: the smallest ε among complete, sound
    (ε, δ) bounds, each carrying every δ its items owe (their own, nested and amplified δ, plus
    the conversion δ it spends):

    (a) basic composition of the items' (ε, δ) (Dwork–Lei 2009 / Dwork et al. 2006), the
        conversion δ split evenly over the items that need one;
    (b) RDP composition of the items' curves (each (ε, δ) item as its randomized-response curve
        plus δ, Steinke 2024 Thm 4), converted once by CKS20 Prop. 12 at the conversion δ;
    (c) for one repeated Gaussian, PLD accounting (tight for this fixed schedule).

    (b) is computed first; (a) is skipped when a cheap lower bound on it
    (:func:`_composition_floor`) already exceeds (b), since it cannot be the smallest then —
    the result is the same, without (a)'s per-item PLD work.
    """
    if conversion_delta <= 0 or all(_pure_epsilon(d) is not None for d, _ in decl.items):
        return _basic_composition(decl, ZERO, effort)
    candidates: list[EpsDelta] = []
    needing = sum(
        c for d, c in decl.items if _pure_epsilon(d) is None and not isinstance(d, ApproxDP)
    )
    share = Decimal(to_float_down(UP.divide(conversion_delta, Decimal(max(needing, 1)))))
    rdp_candidate: EpsDelta | None = None
    try:
        curve, curve_delta = rdp_curve(decl, "add_remove", effort.orders)
        e, _ = cv.rdp_to_epsilon(effort.orders, curve, to_float_down(conversion_delta))
        rdp_candidate = EpsDelta(cost_from_float(e), add_up(curve_delta, conversion_delta))
        candidates.append(rdp_candidate)
    except UnsupportedInMode:
        pass
    if (
        rdp_candidate is None
        or effort.pld_share is None  # (a) needs no PLD then: cheap, no pruning needed
        or _composition_floor(decl, share) <= rdp_candidate.epsilon
    ):
        candidates.append(_basic_composition(decl, share, effort))
    if len(decl.items) == 1 and effort.pld_share is not None:
        d, count = decl.items[0]
        if isinstance(d, Gaussian) and d.sigma > 0 and d.sensitivity > 0:
            nm = to_float_down(UP.divide(d.sigma, d.sensitivity))
            try:
                e = pld.pld_epsilon_gaussian(
                    nm, count, to_float_down(conversion_delta), share=effort.pld_share
                )
                candidates.append(EpsDelta(cost_from_float(e), conversion_delta))
            except pld.PldUnavailable:
                pass  # σ/√count below the float range: (a) and (b) already say ε = ∞
    return min(candidates, key=lambda c: (c.epsilon, c.delta))


def _composition_floor(decl: Composed, share: Decimal) -> Decimal:
    """A lower bound on candidate (a), Σ count·ε_i at δ ``share``: exact for pure and (ε, δ)
    items, :func:`odometer_core.accounting.bounds.poisson_gaussian_epsilon_floor` for PLD-charged
    items,
    zero for the rest (zero is always a lower bound)."""
    total = ZERO
    for item, count in decl.items:
        exact = _pure_epsilon(item)
        if exact is None and isinstance(item, ApproxDP):
            exact = item.epsilon
        if exact is None:
            params = _poisson_gaussian_params(item, share)
            if params is not None and params[3] > 0:
                sigma, q, steps, delta = params
                exact = budget_from_float(
                    bounds.poisson_gaussian_epsilon_floor(sigma, q, steps, to_float_up(delta))
                )
        if exact is not None:
            total = DOWN.add(total, DOWN.multiply(Decimal(count), exact))
    return total


def _basic_composition(decl: Composed, share: Decimal, effort: Effort) -> EpsDelta:
    """Σ count·ε_i and Σ count·δ_i of the items' own conversions at δ ``share`` each."""
    eps, delta = ZERO, ZERO
    for item, count in decl.items:
        ed = eps_delta(item, share, effort)
        eps = add_up(eps, mul_up(Decimal(count), ed.epsilon))
        delta = add_up(delta, mul_up(Decimal(count), ed.delta))
    return EpsDelta(eps, delta)


# ---------------------------------------------------------------------------- admission
def _basic_remaining(config: BasicConfig, state: BasicState) -> EpsilonDelta:
    return EpsilonDelta(
        sub_down(sub_down(config.epsilon, state.spent_epsilon), state.reserved_epsilon),
        sub_down(config.delta, state.spent_delta),
    )


def _exceeds(config: BasicConfig, state: BasicState, cost: EpsDelta) -> str | None:
    """Which budget ``cost`` would exceed ("epsilon" / "delta"), or ``None`` if it fits."""
    if add_up(state.spent_epsilon, state.reserved_epsilon, cost.epsilon) > config.epsilon:
        return "epsilon"
    if add_up(state.spent_delta, cost.delta) > config.delta:
        return "delta"
    return None


def _admit_basic(
    config: BasicConfig, state: BasicState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    """Hartmann et al. 2022, Algorithm 1 (lines 9–10): admit iff E + reserved + max_k ε_k ≤ ε_B and
    D + δ_i ≤ δ_B; an ODP declaration is reserved at its worst cell, δ charged in full."""
    conv = config.conversion_delta if conversion_delta is None else conversion_delta
    if conv > config.delta:
        raise DeclarationError("conversion_delta exceeds the dataset's delta budget")
    zero = EpsilonDelta()
    floor = charge_floor(decl, conv)
    exceeded = None if floor is None else _exceeds(config, state, floor)
    if floor is not None and exceeded is not None:
        # Refused on a lower bound: the tight charge is at least this, so it cannot fit either.
        return reject(
            state,
            EpsilonDelta(floor.epsilon, floor.delta),
            _basic_remaining(config, state),
            f"{exceeded} budget exceeded (the charge is at least ε {fmt(floor.epsilon)})",
            zero,
        )
    by_pld = config.composed == joint.JOINT_PLD and isinstance(decl, Composed)
    cost = joint_charge(decl, conv) if by_pld else charge(decl, conv)
    requested = EpsilonDelta(cost.epsilon, cost.delta)
    new_e = add_up(state.spent_epsilon, state.reserved_epsilon, cost.epsilon)
    new_d = add_up(state.spent_delta, cost.delta)
    if new_e > config.epsilon or new_d > config.delta:
        which = "epsilon" if new_e > config.epsilon else "delta"
        return reject(
            state, requested, _basic_remaining(config, state), f"{which} budget exceeded", zero
        )
    if cost.partition is not None and len(cost.partition.cells) > 1:
        new_state = replace(
            state,
            reserved_epsilon=add_up(state.reserved_epsilon, cost.epsilon),
            spent_delta=new_d,
            open_reservations=state.open_reservations + 1,
        )
        return Decision(
            "reserved",
            new_state,
            requested,
            requested,
            _basic_remaining(config, new_state),
            reservation=Reservation(cost.partition),
        )
    new_state = replace(
        state, spent_epsilon=add_up(state.spent_epsilon, cost.epsilon), spent_delta=new_d
    )
    return Decision(
        "accepted", new_state, requested, requested, _basic_remaining(config, new_state)
    )


def admit(
    config: BasicConfig, state: BasicState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    return _admit_basic(config, state, decl, conversion_delta)


# ---------------------------------------------------------------------------- settle / cancel
def _open(state: BasicState) -> None:
    if state.open_reservations < 1:  # pragma: no cover - guarded by the service
        raise InvalidTransition("NoOpenReservation", "no open reservation on this budget")


def settle(config: BasicConfig, state: BasicState, reservation: Reservation, cell: str) -> Decision:
    """Charge the released cell's ε_k and refund max_j ε_j − ε_k (Hartmann et al. 2022,
    Algorithm 1 line 14, Theorem 7). δ was charged in full at reservation and is **never**
    refunded. A cell that was not declared raises :class:`InvalidTransition`."""
    _open(state)
    eps_cell = reservation.partition.epsilon_of(cell)
    if eps_cell is None:
        names = ", ".join(n for n, _ in reservation.partition.cells[:20])
        raise InvalidTransition("UnknownCell", f"cell '{cell}' was not declared (cells: {names})")
    worst = reservation.partition.worst_epsilon
    new_state = replace(
        state,
        spent_epsilon=add_up(state.spent_epsilon, eps_cell),
        reserved_epsilon=sub_up(state.reserved_epsilon, worst),
        open_reservations=state.open_reservations - 1,
    )
    refund = sub_down(worst, eps_cell)
    return Decision(
        "accepted",
        new_state,
        EpsilonDelta(eps_cell),
        EpsilonDelta(worst, reservation.partition.delta),
        _basic_remaining(config, new_state),
        refund=EpsilonDelta(refund),
        sub_budget=reservation.sub_budget,
    )


def cancel(config: BasicConfig, state: BasicState, reservation: Reservation) -> Decision:
    """Release a reservation whose mechanism never ran: nothing was released, so the worst-case
    ε and the δ are both returned (no output left the trusted boundary)."""
    _open(state)
    worst = reservation.partition.worst_epsilon
    new_state = replace(
        state,
        reserved_epsilon=sub_up(state.reserved_epsilon, worst),
        spent_delta=sub_up(state.spent_delta, reservation.partition.delta),
        open_reservations=state.open_reservations - 1,
    )
    return Decision(
        "accepted",
        new_state,
        EpsilonDelta(),
        EpsilonDelta(worst, reservation.partition.delta),
        _basic_remaining(config, new_state),
        refund=EpsilonDelta(worst, reservation.partition.delta),
        sub_budget=reservation.sub_budget,
    )


# ---------------------------------------------------------------------------- budget change
def change_budget(
    config: BasicConfig,
    state: BasicState,
    eps: Decimal,
    dlt: Decimal,
    final_conversion_delta: object,
    anchored: bool = True,
) -> BasicConfig:
    """New (ε_B, δ_B); the conversion δ is capped at the new δ_B. Basic composition is
    pathwise (see :func:`odometer`), so any budget chosen at any time keeps every reading
    true: the same rule under every accounting version (``anchored`` plays no part)."""
    conv = min(config.conversion_delta, dlt)
    return BasicConfig(eps, dlt, config.relation, conv, composed=config.composed)


def over_budget(config: BasicConfig, state: BasicState) -> str | None:
    used = add_up(state.spent_epsilon, state.reserved_epsilon)
    if used > config.epsilon or state.spent_delta > config.delta:
        return f"spent + reserved is ({fmt(used)}, {fmt(state.spent_delta)})"
    return None


# ---------------------------------------------------------------------------- status
def odometer(config: BasicConfig, state: BasicState) -> Reading:
    """The certified odometer reading: the running sums (E + R, D) themselves.

    Basic composition holds along every transcript: with each invocation's (ε_i, δ_i) chosen
    from the history, the privacy loss of a transcript stopped at any stopping time is at most
    the Σε_i charged along it, up to a δ of at most the Σδ_i charged along it (Rogers–Roth–
    Ullman–Vadhan 2016, basic composition; Hartmann et al. 2022, Thm 7 for settled ODP cells;
    open reservations count at their worst cell). The filter keeps both sums within
    (ε_B, δ_B), so the reading never exceeds the target. Derivation: docs/accounting.md,
    *Certified odometer readings*."""
    return Reading(
        add_up(state.spent_epsilon, state.reserved_epsilon),
        state.spent_delta,
        "basic",
        odo.THEOREM_BASIC,
    )


def status(config: BasicConfig, state: BasicState) -> dict[str, Any]:
    """Spent, reserved and remaining (ε, δ); spent + reserved is a certified (ε, δ), also given
    as the ``odometer`` reading."""
    return {
        "spent": {"epsilon": fmt(state.spent_epsilon), "delta": fmt(state.spent_delta)},
        "reserved": {"epsilon": fmt(state.reserved_epsilon), "open": state.open_reservations},
        "remaining": _basic_remaining(config, state).to_json(),
        "conversion_delta": fmt(config.conversion_delta),
        "spent_eps_delta": {
            "epsilon": fmt(add_up(state.spent_epsilon, state.reserved_epsilon)),
            "delta": fmt(state.spent_delta),
            "certified": True,
            "estimate": False,
        },
        "odometer": odometer(config, state).to_json(),
    }


# ---------------------------------------------------------------------------- codec
def config_to_json(config: BasicConfig) -> dict[str, Any]:
    out = {"conversion_delta": fmt(config.conversion_delta)}
    if config.composed != joint.ONE_BY_ONE:  # absent on configurations stored before 1.5.0
        out["composed"] = config.composed
    return out


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> BasicConfig:
    composed = str(obj.get("composed", joint.ONE_BY_ONE))
    if composed not in joint.COMPOSED_RULES:
        raise ConfigError(f"unknown composed rule {composed!r}")
    return BasicConfig(eps, dlt, rel, Decimal(obj["conversion_delta"]), composed=composed)


def state_to_json(state: BasicState) -> dict[str, Any]:
    return {
        "spent_epsilon": fmt(state.spent_epsilon),
        "reserved_epsilon": fmt(state.reserved_epsilon),
        "spent_delta": fmt(state.spent_delta),
        "open_reservations": state.open_reservations,
    }


def state_from_json(obj: Mapping[str, Any]) -> BasicState:
    return BasicState(
        Decimal(obj["spent_epsilon"]),
        Decimal(obj["reserved_epsilon"]),
        Decimal(obj["spent_delta"]),
        int(obj["open_reservations"]),
    )


MODE = Mode(
    name="basic",
    config_type=BasicConfig,
    state_type=BasicState,
    parse=parse,
    initial_state=initial_state,
    unsupported=unsupported,
    admit=admit,
    change_budget=change_budget,
    over_budget=over_budget,
    status=status,
    config_to_json=config_to_json,
    config_from_json=config_from_json,
    state_to_json=state_to_json,
    state_from_json=state_from_json,
    settle=settle,
    cancel=cancel,
    odometer=odometer,
)
