"""``dp_accounting`` events as declarations, through an explicit allow-list of event classes.

Every ``DpEvent`` class of ``dp_accounting`` 0.6 is either converted by :func:`from_dp_event`
(:data:`CONVERTED`) or refused with a reason that names what to send instead (:data:`REFUSED`);
the tests check that these two cover every ``DpEvent`` subclass of the installed library, so a new
event type fails them until it is handled here.

Events that have no declaration kind of their own can still be declared with ``dp_accounting``
as the authority: :func:`rdp_declaration` is the ``rdp`` curve its ``RdpAccountant`` computes for
the event at a dataset's orders, :func:`approx_dp_declaration` the ``approx_dp`` (ε, δ) its
``PLDAccountant`` computes at a δ you name. The odometer then charges ``dp_accounting``'s
computation, not one of its own.

Binary floats are converted with *directed* rounding so the declaration is never less private
than the event: noise scales round down, rates and privacy parameters round up (17 digits).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Any, Final

from dp_accounting import dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation, UnsupportedEventError
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from odometer_client.declarations import (
    DOWN,
    UP,
    Mechanism,
    Number,
    approx_dp,
    composed,
    discrete_laplace,
    dp_sgd,
    gaussian,
    laplace,
    pure_dp,
    subsampled,
    zcdp,
)

#: The event classes :func:`from_dp_event` converts (exact class match).
CONVERTED: Final[frozenset[type]] = frozenset(
    {
        dp_event.NoOpDpEvent,
        dp_event.GaussianDpEvent,
        dp_event.LaplaceDpEvent,
        dp_event.DiscreteLaplaceDpEvent,
        dp_event.ZCDpEvent,
        dp_event.RandomizedResponseDpEvent,
        dp_event.PoissonSampledDpEvent,
        dp_event.SampledWithoutReplacementDpEvent,
        dp_event.SelfComposedDpEvent,
        dp_event.ComposedDpEvent,
    }
)

#: The event classes :func:`from_dp_event` refuses, each with what to send instead. What each
#: says of ``dp_accounting``'s accountants is what their ``supports()`` answers in 0.6 (tested).
REFUSED: Final[Mapping[type, str]] = {
    dp_event.NonPrivateDpEvent: (
        "NonPrivateDpEvent is an operation that is not differentially private (dp_accounting's "
        "accountants charge it ε = ∞): no budget can admit it. Add noise and declare that "
        "mechanism (e.g. a GaussianDpEvent or LaplaceDpEvent), or use NoOpDpEvent if the "
        "operation does not read the dataset"
    ),
    dp_event.UnsupportedDpEvent: (
        "UnsupportedDpEvent carries no privacy guarantee (dp_accounting's accountants refuse it "
        "too): declare what the operation is, with odometer_client.declarations — e.g. its "
        "(ε, δ) as approx_dp, its ρ as zcdp, or its Rényi curve as rdp"
    ),
    dp_event.RepeatAndSelectDpEvent: (
        "RepeatAndSelectDpEvent (a random number of runs, best one released; Papernot–Steinke "
        "2022) has no declaration kind: dp_accounting's RdpAccountant supports it (when it "
        "supports the repeated event), so declare rdp_declaration(event, orders) on an rdp "
        "dataset — an `rdp` curve of RdpAccountant's values at the dataset's orders — or "
        "register each tuning run's event as it is made (their composition: the selection is "
        "post-processing). PLDAccountant does not support it"
    ),
    dp_event.SingleEpochTreeAggregationDpEvent: (
        "SingleEpochTreeAggregationDpEvent has no declaration kind, and dp_accounting's "
        "RdpAccountant accounts it only under REPLACE_SPECIAL (a record replaced by a zero "
        "record), neither of the odometer's relations (PLDAccountant does not support it). "
        "Declare gaussian(sigma=noise_multiplier, sensitivity=√d) with d = ⌈log₂(max(step_counts) "
        "+ 1)⌉ tree levels — the Gaussian whose RDP αd/(2σ²) dp_accounting computes for it — when "
        "one record changes each of the d tree nodes holding it by at most one clipping norm "
        "(add/remove of its contribution); under replace_one use sensitivity 2√d"
    ),
    dp_event.MixtureOfGaussiansDpEvent: (
        "MixtureOfGaussiansDpEvent has no declaration kind, and dp_accounting's RdpAccountant "
        "does not support it; its PLDAccountant does (add_remove): declare "
        "approx_dp_declaration(event, delta), the (ε, δ) PLDAccountant computes, or "
        "gaussian(sigma=standard_deviation, sensitivity=max |sensitivities|), an upper bound "
        "(a mixture of Gaussians is no less private than its farthest component: hockey-stick "
        "and Rényi divergences are jointly (quasi-)convex)"
    ),
    dp_event.SampledWithReplacementDpEvent: (
        "SampledWithReplacementDpEvent has no declaration kind, and neither of dp_accounting's "
        "accountants (RdpAccountant, PLDAccountant) supports it: declare it without "
        "amplification — the inner event's mechanism with its sensitivity multiplied by "
        "sample_size, since a record can be drawn up to sample_size times (e.g. "
        "gaussian(noise_multiplier, sensitivity=sample_size)) — or an approx_dp (ε, δ) you "
        "proved for sampling with replacement"
    ),
    dp_event.TruncatedSubsampledGaussianDpEvent: (
        "TruncatedSubsampledGaussianDpEvent has no declaration kind, and dp_accounting's "
        "RdpAccountant does not support it; its PLDAccountant does: declare "
        "approx_dp_declaration(event, delta), the (ε, δ) PLDAccountant computes, or, without "
        "amplification, gaussian(noise_multiplier, sensitivity=2) (one record's presence changes "
        "the truncated batch's sum by at most two clipping norms: it can displace another "
        "record)"
    ),
}

#: The odometer's neighbouring relations as ``dp_accounting``'s.
RELATIONS: Final[Mapping[str, NeighboringRelation]] = {
    "add_remove": NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": NeighboringRelation.REPLACE_ONE,
}

#: The server's bound on any privacy amount (ε, ρ, an RDP value): larger is declared as absent.
_MAX_AMOUNT: Final = Decimal(10) ** 6


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"{what} must be finite, got {f!r}")
    return f


def _up(value: Any, what: str) -> Decimal:
    """At least ``value`` (exact binary value rounded up to 17 digits)."""
    return UP.create_decimal_from_float(_float(value, what)).normalize(UP)


def _down(value: Any, what: str) -> Decimal:
    """At most ``value`` (exact binary value rounded down to 17 digits)."""
    return DOWN.create_decimal_from_float(_float(value, what)).normalize(DOWN)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def from_dp_event(event: object) -> Mechanism:
    """Convert a ``dp_accounting`` ``DpEvent`` into a declaration, through an explicit
    allow-list of event classes (exact class match; nothing is looked up by name):

    ======================================  =============================================
    ``GaussianDpEvent(σ)``                  ``gaussian`` σ, sensitivity 1
    ``LaplaceDpEvent(b)``                   ``laplace`` scale b, sensitivity 1
    ``DiscreteLaplaceDpEvent(a, Δ)``        ``discrete_laplace`` scale t = 1/a, sensitivity Δ
                                            (dp_accounting's noise is P[x] ∝ e^{−a|x|}:
                                            ε = aΔ; t rounded down)
    ``PoissonSampledDpEvent(q, e)``         ``subsampled`` poisson, rate q
    ``SampledWithoutReplacementDpEvent``    ``subsampled`` without_replacement, m of n
    ``SelfComposedDpEvent(e, k)``           ``composed`` e × k (``dp_sgd`` when e is a
                                            Poisson-subsampled Gaussian: the tight curve)
    ``ComposedDpEvent([...])``              ``composed`` list (no-ops dropped)
    ``ZCDpEvent(ρ, ξ)``                     ``zcdp`` ρ, ξ
    ``RandomizedResponseDpEvent(p, k)``     ε = ln(1 + k(1−p)/p): ``randomized_response``
                                            for k = 2, ``pure_dp`` otherwise (ε rounded up;
                                            the guarantee of changing one record's bucket,
                                            the replace-one relation dp_accounting requires)
    ``NoOpDpEvent``                         ``pure_dp`` ε = 0 (dropped inside compositions)
    ======================================  =============================================

    The other event classes of dp_accounting 0.6 raise ``ValueError`` with what to declare
    instead (:data:`REFUSED`): ``NonPrivateDpEvent``, ``UnsupportedDpEvent``,
    ``RepeatAndSelectDpEvent`` (see :func:`rdp_declaration`), ``SingleEpochTreeAggregationDpEvent``,
    ``MixtureOfGaussiansDpEvent`` and ``TruncatedSubsampledGaussianDpEvent`` (see
    :func:`approx_dp_declaration`), ``SampledWithReplacementDpEvent``. So do events of other
    libraries and subclasses.
    """
    out = _convert(event, dp_event, depth=0)
    return out if out is not None else pure_dp(0)


def _convert(event: Any, ev: Any, depth: int) -> Mechanism | None:
    if depth > 8:
        raise ValueError("dp_event nests too deeply")
    kind = type(event)
    if kind in REFUSED:
        raise ValueError(f"cannot convert {kind.__qualname__}: {REFUSED[kind]}")
    if kind is ev.NoOpDpEvent:
        return None
    if kind is ev.GaussianDpEvent:
        sigma = _down(event.noise_multiplier, "noise_multiplier")
        if sigma <= 0:
            raise ValueError("a GaussianDpEvent with noise_multiplier 0 is not private")
        return gaussian(sigma, 1)
    if kind is ev.LaplaceDpEvent:
        scale = _down(event.noise_multiplier, "noise_multiplier")
        if scale <= 0:
            raise ValueError("a LaplaceDpEvent with noise_multiplier 0 is not private")
        return laplace(scale, 1)
    if kind is ev.DiscreteLaplaceDpEvent:
        return _discrete_laplace(event)
    if kind is ev.ZCDpEvent:
        rho = _up(event.rho, "rho")
        xi = _up(event.xi, "xi")
        return zcdp(rho, xi=xi if xi != 0 else None)
    if kind is ev.RandomizedResponseDpEvent:
        return _randomized_response(event)
    if kind is ev.PoissonSampledDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        if inner is None:
            return None
        return subsampled(inner, rate=_up(event.sampling_probability, "rate"))
    if kind is ev.SampledWithoutReplacementDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        if inner is None:
            return None
        n = _int(event.source_dataset_size, "source_dataset_size")
        size = _int(event.sample_size, "sample_size")
        return subsampled(inner, m_of=(size, n))
    if kind is ev.SelfComposedDpEvent:
        count = _int(event.count, "count")
        inner_event = event.event
        if count == 0:
            return None
        sgd = _dp_sgd_pattern(inner_event, ev, count)
        if sgd is not None:
            return sgd
        inner = _convert(inner_event, ev, depth + 1)
        if inner is None:
            return None
        return inner if count == 1 else composed(inner, count=count)
    if kind is ev.ComposedDpEvent:
        raw: Sequence[object] = event.events
        items = [c for c in (_convert(e, ev, depth + 1) for e in raw) if c is not None]
        if not items:
            return None
        return items[0] if len(items) == 1 else composed(*items)
    raise ValueError(
        f"cannot convert {kind.__module__}.{kind.__qualname__}: not in the allow-list "
        "(Gaussian, Laplace, DiscreteLaplace, PoissonSampled, SampledWithoutReplacement, "
        "SelfComposed, Composed, ZCDp, RandomizedResponse, NoOp); declare its guarantee with "
        "odometer_client.declarations (approx_dp, zcdp, rdp, ...), or, for a dp_accounting "
        "event, rdp_declaration / approx_dp_declaration"
    )


def _dp_sgd_pattern(inner: Any, ev: Any, count: int) -> Mechanism | None:
    """``SelfComposed(PoissonSampled(Gaussian(σ), q), T)`` is DP-SGD: declare it as such."""
    if type(inner) is not ev.PoissonSampledDpEvent:
        return None
    gauss = inner.event
    if type(gauss) is not ev.GaussianDpEvent:
        return None
    sigma = _down(gauss.noise_multiplier, "noise_multiplier")
    q = _up(inner.sampling_probability, "sampling_probability")
    if sigma <= 0 or q <= 0:
        return None
    return dp_sgd(sigma, q, steps=count)


def _discrete_laplace(event: Any) -> Mechanism:
    """dp_accounting's ``DiscreteLaplaceDpEvent(a, Δ)`` adds noise with P[x] ∝ e^{−a|x|}
    (``dp_event.DiscreteLaplaceDpEvent``; ``privacy_loss_mechanism.DiscreteLaplacePrivacyLoss``,
    whose privacy loss is a·(|x − Δ| − |x|)): the odometer's scale t with P[x] ∝ e^{−|x|/t} is
    1/a, rounded down so that ε = Δ/t is never below aΔ."""
    a = _float(event.noise_parameter, "noise_parameter")
    sensitivity = _int(event.sensitivity, "sensitivity")
    if a < 0 or sensitivity < 0:
        raise ValueError("DiscreteLaplaceDpEvent needs noise_parameter ≥ 0 and sensitivity ≥ 0")
    if a == 0:
        raise ValueError("a DiscreteLaplaceDpEvent with noise_parameter 0 is not private")
    scale = DOWN.divide(Decimal(1), Decimal(a)).normalize(DOWN)  # Decimal(a): a's exact value
    return discrete_laplace(scale, sensitivity)


def _randomized_response(event: Any) -> Mechanism:
    p = _float(event.noise_parameter, "noise_parameter")
    k = _int(event.num_buckets, "num_buckets")
    if k < 2 or not 0 <= p <= 1:
        raise ValueError("RandomizedResponseDpEvent needs num_buckets ≥ 2 and 0 ≤ p ≤ 1")
    if p == 0:
        raise ValueError("RandomizedResponseDpEvent with noise_parameter 0 is not private")
    # P(true bucket) / P(other bucket) = (1 - p + p/k) / (p/k) = 1 + k(1-p)/p
    epsilon = UP.create_decimal_from_float(math.log1p(k * (1 - p) / p) * (1 + 1e-12))
    epsilon = epsilon.normalize(UP)
    if k == 2:
        return Mechanism(type="randomized_response", epsilon=epsilon)
    return pure_dp(epsilon)


# ---------------------------------------------------------------------------- dp_accounting's own
def _event_and_relation(event: object, relation: str) -> tuple[Any, NeighboringRelation]:
    if not isinstance(event, dp_event.DpEvent):
        raise ValueError(f"not a dp_accounting DpEvent: {type(event).__name__}")
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}")
    return event, RELATIONS[relation]


def _accountant(name: str, relation: NeighboringRelation) -> Any:
    return RdpAccountant(None, relation) if name == "RdpAccountant" else PLDAccountant(relation)


def _unsupported(name: str, event: Any, relation: str, exc: Exception) -> ValueError:
    """Why accountant ``name`` cannot account ``event``, and what can (asked of the libraries)."""
    rel = RELATIONS[relation]
    found = re.search(r"Error: \[(.*)\] caused by subevent (.*)$", str(exc), re.DOTALL)
    why = f"{found[1]} (subevent {found[2].rstrip('.')})" if found else str(exc)
    head = f"dp_accounting's {name} does not support {type(event).__qualname__} under {relation}"
    hint = REFUSED.get(type(event))
    elsewhere = [r.name for r in NeighboringRelation if _accountant(name, r).supports(event)]
    if elsewhere:
        # a guarantee under another neighbouring relation than the dataset's: nothing converts it
        return ValueError(
            f"{head}: it accounts it under {', '.join(elsewhere)} only ({why}); declare its "
            f"guarantee under {relation}" + (f". {hint}" if hint is not None else "")
        )
    if hint is not None:
        return ValueError(f"{head} ({why}). {hint}")
    options = []
    other = "PLDAccountant" if name == "RdpAccountant" else "RdpAccountant"
    if _accountant(other, rel).supports(event):
        helper = (
            "approx_dp_declaration(event, delta)"
            if other == "PLDAccountant"
            else "rdp_declaration(event, orders)"
        )
        options.append(f"{helper} ({other} supports it)")
    try:
        from_dp_event(event)
        options.append("from_dp_event(event)")
    except ValueError:
        options.append(
            "its guarantee with odometer_client.declarations (approx_dp, zcdp, rdp, ...)"
        )
    return ValueError(f"{head} ({why}); declare {' or '.join(options)}")


def rdp_declaration(
    event: object, orders: Sequence[Number], *, relation: str = "add_remove"
) -> Mechanism:
    """The ``rdp`` declaration of ``event``: the curve ``dp_accounting``'s ``RdpAccountant``
    computes for it at ``orders`` (an ``rdp`` dataset's: ``dataset.status["orders"]``) under the
    dataset's neighbouring ``relation`` (``"add_remove"`` or ``"replace_one"``).

    The charge is then ``dp_accounting``'s computation (every event ``RdpAccountant`` supports,
    e.g. ``RepeatAndSelectDpEvent``). ``RdpAccountant`` is run at float orders at least the
    declared ones, and each value is the smallest of its values at that order and the higher
    ones — RDP is non-decreasing in the order (van Erven–Harremoës 2014, Thm 3), so each bounds
    every lower order too, and the server reads a curve the same way — rounded up to 17 digits:
    ``RdpAccountant``'s own value wherever its curve is non-decreasing (its bound for
    ``RepeatAndSelectDpEvent`` need not be). Orders from which the value is ∞ or beyond the
    server's bound (10⁶) are left out; the server charges them ∞. Raises ``ValueError`` when
    ``RdpAccountant`` does not support the event under the relation, or gives no finite value.
    """
    ev, rel = _event_and_relation(event, relation)
    alphas = [Decimal(str(a)) for a in orders]
    if not alphas:
        raise ValueError("give the orders to declare at (the dataset's: status['orders'])")
    if any(a <= 1 or not a.is_finite() for a in alphas):
        raise ValueError("RDP orders must be finite and > 1")
    if any(b <= a for a, b in pairwise(alphas)):
        raise ValueError("RDP orders must be strictly increasing")
    floats = []
    for alpha in alphas:
        a = float(alpha)
        floats.append(a if Decimal(a) >= alpha else math.nextafter(a, math.inf))
    accountant = RdpAccountant(floats, rel)
    try:
        accountant.compose(ev)
    except UnsupportedEventError as exc:
        raise _unsupported("RdpAccountant", ev, relation, exc) from None
    raw = accountant.rdp.tolist()
    if any(math.isnan(v) for v in raw):
        raise ValueError(f"RdpAccountant gave NaN at orders {orders}")
    # at each order the smallest value at that order or a higher one: RDP is non-decreasing in
    # the order (van Erven–Harremoës 2014, Thm 3), so each bounds every lower order too
    bounds: list[float] = []
    for value in reversed(raw):
        bounds.append(min(max(value, 0.0), bounds[-1] if bounds else math.inf))
    bounds.reverse()
    kept_orders: list[Decimal] = []
    values: list[Decimal] = []
    for alpha, value in zip(alphas, bounds, strict=True):
        if math.isinf(value):
            break  # non-decreasing: ∞ from here on
        v = _up(value, f"ε(α = {alpha})")
        if v > _MAX_AMOUNT:
            break
        kept_orders.append(alpha)
        values.append(v)
    if not values:
        raise ValueError(
            "RdpAccountant gives no finite RDP value at these orders: the event is not private "
            "there"
        )
    return Mechanism(type="rdp", orders=kept_orders, values=values)


def approx_dp_declaration(
    event: object,
    delta: Number,
    *,
    relation: str = "add_remove",
    value_discretization_interval: float = 1e-4,
) -> Mechanism:
    """The ``approx_dp`` declaration of ``event``: (ε, δ) with ε what ``dp_accounting``'s
    ``PLDAccountant`` (pessimistic privacy loss distributions, ``value_discretization_interval``)
    computes for it at ``delta`` under the dataset's neighbouring ``relation``.

    The charge is then ``dp_accounting``'s computation (every event ``PLDAccountant`` supports,
    e.g. ``MixtureOfGaussiansDpEvent`` or ``TruncatedSubsampledGaussianDpEvent``): ε is read at
    a float δ at most the declared one (ε(δ) only grows as δ shrinks) and rounded up to 17
    digits. Raises ``ValueError`` when ``PLDAccountant`` does not support the event under the
    relation, or gives no finite ε.
    """
    ev, rel = _event_and_relation(event, relation)
    d = Decimal(str(delta))
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    f = float(d)
    if Decimal(f) > d:
        f = math.nextafter(f, 0)
    accountant = PLDAccountant(rel, value_discretization_interval)
    try:
        accountant.compose(ev)
    except UnsupportedEventError as exc:
        raise _unsupported("PLDAccountant", ev, relation, exc) from None
    epsilon = float(accountant.get_epsilon(f))
    if not math.isfinite(epsilon):
        raise ValueError(f"PLDAccountant gives ε = {epsilon} at δ = {d}: the event is not private")
    return approx_dp(_up(max(epsilon, 0.0), "ε"), d)
