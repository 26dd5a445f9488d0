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
from fractions import Fraction
from itertools import pairwise
from typing import Any, Final

from dp_accounting import dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation, UnsupportedEventError
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from odometer_client import contract
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
    mixture_of_gaussians,
    pure_dp,
    repeat_and_select,
    sampled_with_replacement,
    subsampled,
    tree_aggregation,
    truncated_subsampled_gaussian,
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
        dp_event.SampledWithReplacementDpEvent,
        dp_event.MixtureOfGaussiansDpEvent,
        dp_event.TruncatedSubsampledGaussianDpEvent,
        dp_event.SelfComposedDpEvent,
        dp_event.ComposedDpEvent,
        dp_event.RepeatAndSelectDpEvent,
        dp_event.SingleEpochTreeAggregationDpEvent,
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
    ``SampledWithReplacementDpEvent``       ``sampled_with_replacement``, m draws out of n
                                            (a Gaussian or ε-DP inner event only)
    ``MixtureOfGaussiansDpEvent(σ, c, p)``  ``mixture_of_gaussians``: σ rounded down, c_i
                                            up, p_i normalised, rounded down to 1e-28, the
                                            rest to the largest shift (sum exactly 1)
    ``TruncatedSubsampledGaussianDpEvent``  ``truncated_subsampled_gaussian`` (n, q, B, σ):
                                            σ rounded down, q as its shortest decimal
    ``SelfComposedDpEvent(e, k)``           ``composed`` e × k (``dp_sgd`` when e is a
                                            Poisson-subsampled Gaussian: the tight curve)
    ``ComposedDpEvent([...])``              ``composed`` list (no-ops dropped)
    ``ZCDpEvent(ρ, ξ)``                     ``zcdp`` ρ, ξ
    ``RandomizedResponseDpEvent(p, k)``     ε = ln(1 + k(1−p)/p): ``randomized_response``
                                            for k = 2, ``pure_dp`` otherwise (ε rounded up;
                                            the guarantee of changing one record's bucket,
                                            the replace-one relation dp_accounting requires)
    ``NoOpDpEvent``                         ``pure_dp`` ε = 0 (dropped inside compositions)
    ``RepeatAndSelectDpEvent(e, m, η)``     ``repeat_and_select`` of e, mean m (rounded up),
                                            ``poisson`` for η = ∞, else the truncated
                                            negative binomial of shape η (rounded up); with
                                            m = 1 and η finite, K = 1: e itself
    ``SingleEpochTreeAggregationDpEvent``   ``tree_aggregation`` σ (rounded down), the step
                                            counts (trees of no step dropped); σ is over
                                            the sensitivity under the dataset's relation —
                                            dp_accounting analyses it under REPLACE_SPECIAL
                                            (a record's contribution replaced by zero), as
                                            add/remove of a contribution; under
                                            replace_one a clipped record moves its leaf by
                                            up to two clipping norms
    ======================================  =============================================

    The other event classes of dp_accounting 0.6 raise ``ValueError`` with what to declare
    instead (:data:`REFUSED`): ``NonPrivateDpEvent`` and ``UnsupportedDpEvent``. So do events of
    other libraries and subclasses.
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
    if kind is ev.SampledWithReplacementDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        return None if inner is None else _with_replacement(event, inner)
    if kind is ev.MixtureOfGaussiansDpEvent:
        return _mixture_of_gaussians(event)
    if kind is ev.TruncatedSubsampledGaussianDpEvent:
        return _truncated_subsampled_gaussian(event)
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
    if kind is ev.RepeatAndSelectDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        return None if inner is None else _repeat_and_select(event, inner)
    if kind is ev.SingleEpochTreeAggregationDpEvent:
        return _tree_aggregation(event)
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


def _repeat_and_select(event: Any, inner: Mechanism) -> Mechanism:
    """``RepeatAndSelectDpEvent(e, mean, shape)``: the charge grows with the mean (Papernot–
    Steinke 2022 Thms 2 and 6: log E[K], μ·δ̂ and log(1/γ) all grow with it), so it is rounded
    up — a Poisson mean of 1 to just above 1, the least the server takes — and a truncated
    negative binomial of mean 1 is K = 1, the inner mechanism itself. The shape is rounded up
    to 17 digits: the float the bound computes γ with is the event's own, (1 + η) and
    (2 + η)ε only grow."""
    mean = _up(event.mean, "mean")
    poisson = isinstance(event.shape, float) and event.shape == math.inf
    shape = math.inf if poisson else _float(event.shape, "shape")
    if mean < 1 or shape < 0:
        raise ValueError("RepeatAndSelectDpEvent needs mean ≥ 1 and shape ≥ 0")
    if poisson:
        return repeat_and_select(inner, max(mean, _JUST_ABOVE_ONE), "poisson")
    if mean == 1:
        return inner
    return repeat_and_select(inner, mean, _up(shape, "shape"))


#: The least mean the server takes above 1, at 17 digits.
_JUST_ABOVE_ONE: Final = Decimal("1.0000000000000001")


def _tree_aggregation(event: Any) -> Mechanism | None:
    """``SingleEpochTreeAggregationDpEvent(σ, step_counts)``: σ rounded down, trees of no step
    dropped (nothing in them); no step at all is nothing released (``None``)."""
    raw = event.step_counts
    counts = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else list(raw)
    steps = [_int(t, "step_counts") for t in counts]
    if not steps or any(t < 0 for t in steps):
        raise ValueError("SingleEpochTreeAggregationDpEvent needs step counts ≥ 0, at least one")
    sigma = _down(event.noise_multiplier, "noise_multiplier")
    if sigma <= 0:
        raise ValueError("SingleEpochTreeAggregationDpEvent with noise_multiplier 0 is not private")
    kept = [t for t in steps if t > 0]
    return tree_aggregation(sigma, kept) if kept else None


#: The inner kinds ``sampled_with_replacement`` takes: the server's list, as its document says.
_WITH_REPLACEMENT_INNER: Final = frozenset(
    contract.schema("SampledWithReplacement")["properties"]["mechanism"]["discriminator"]["mapping"]
)


def _with_replacement(event: Any, inner: Mechanism) -> Mechanism | None:
    """``SampledWithReplacementDpEvent(n, m, e)``: e's declaration on m draws out of n; no draw
    is nothing released. The inner event must convert to a Gaussian or an ε-DP kind, whose
    privacy when the record is drawn k times the amplification needs (Balle–Barthe–Gaboardi
    2018 Thm 10)."""
    n = _int(event.source_dataset_size, "source_dataset_size")
    m = _int(event.sample_size, "sample_size")
    if n < 1 or m < 0:
        raise ValueError("SampledWithReplacementDpEvent needs source_dataset_size ≥ 1, m ≥ 0")
    if m == 0:
        return None
    if inner.type not in _WITH_REPLACEMENT_INNER:
        raise ValueError(
            f"cannot convert SampledWithReplacementDpEvent around {inner.type!r}: the odometer "
            "amplifies sampling with replacement for a Gaussian or an ε-DP mechanism only (their "
            "privacy when the record is drawn k times is known); declare the sampled event's "
            "guarantee without amplification — its sensitivity multiplied by sample_size, since "
            "a record can be drawn up to sample_size times"
        )
    return sampled_with_replacement(inner, m=m, n=n)


#: Probabilities of a mixture are declared on a grid of 10^−28, so that 1 minus their sum is
#: exact within the server's 30 significant digits.
_GRID_DIGITS: Final = 28
_GRID_STEPS: Final = 10**_GRID_DIGITS


def _mixture_of_gaussians(event: Any) -> Mechanism:
    """``MixtureOfGaussiansDpEvent(σ, c, p)``: σ rounded down, each c_i (a norm) rounded up.
    The probabilities are their shortest decimals when those sum to exactly 1; otherwise
    (dp_accounting accepts a sum within 1e-9 of 1) they are normalised and rounded down onto a
    grid of 10^−28, and the component of largest shift takes what they leave, so that they sum
    to exactly 1. Mass then only moves to the largest shift, and both privacy losses of the
    mixture grow with every shift (its loss is monotone, the optimal events half-lines), so the
    declaration is never less private than the event. Components of probability 0 (and, in the
    second case, below the grid) are dropped."""
    sigma = _down(event.standard_deviation, "standard_deviation")
    if sigma <= 0:
        raise ValueError("a MixtureOfGaussiansDpEvent with standard_deviation 0 is not private")
    shifts = [_float(c, "sensitivities") for c in event.sensitivities]
    probs = [_float(p, "sampling_probs") for p in event.sampling_probs]
    if not shifts or len(shifts) != len(probs):
        raise ValueError("MixtureOfGaussiansDpEvent needs as many sensitivities as probabilities")
    if any(c < 0 for c in shifts) or any(p < 0 for p in probs) or sum(probs) <= 0:
        raise ValueError("MixtureOfGaussiansDpEvent needs sensitivities ≥ 0, probabilities ≥ 0")
    shortest = [Decimal(repr(p)) for p in probs]
    if sum(Fraction(p) for p in shortest) == 1:
        declared = shortest
    else:
        total = sum(Fraction(p) for p in probs)
        top = max(range(len(shifts)), key=lambda i: shifts[i])
        declared = []
        for p in probs:
            share = Fraction(p) / total  # exact; floored onto the grid exactly
            declared.append(
                Decimal(share.numerator * _GRID_STEPS // share.denominator).scaleb(-_GRID_DIGITS)
            )
        declared[top] = Decimal(1) - sum(
            (d for i, d in enumerate(declared) if i != top), Decimal(0)
        )
    kept = [(c, p) for c, p in zip(shifts, declared, strict=True) if p > 0]
    return mixture_of_gaussians(
        sigma, [_up(c, "sensitivities") for c, _ in kept], [p for _, p in kept]
    )


def _truncated_subsampled_gaussian(event: Any) -> Mechanism | None:
    """``TruncatedSubsampledGaussianDpEvent(n, q, B, σ)``: σ rounded down; q as its shortest
    decimal, which reads back as the same float — the server bounds the charge over the two
    floats around the declared rate, so the event's own rate is covered (its bound is not
    monotone in q: truncation grows with it). A rate, batch or dataset of 0 samples nothing."""
    n = _int(event.dataset_size, "dataset_size")
    batch = _int(event.truncated_batch_size, "truncated_batch_size")
    q = _float(event.sampling_probability, "sampling_probability")
    if n < 0 or batch < 0 or not 0 <= q <= 1:
        raise ValueError("TruncatedSubsampledGaussianDpEvent needs n, B ≥ 0 and 0 ≤ q ≤ 1")
    if n == 0 or batch == 0 or q == 0:
        return None
    sigma = _down(event.noise_multiplier, "noise_multiplier")
    if sigma <= 0:
        raise ValueError("TruncatedSubsampledGaussianDpEvent: noise_multiplier 0 is not private")
    return truncated_subsampled_gaussian(n, Decimal(repr(q)), batch, sigma)


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
