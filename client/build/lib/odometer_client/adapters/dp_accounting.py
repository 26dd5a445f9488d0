"""``dp_accounting`` events as declarations, through an explicit allow-list of event classes.

Binary floats are converted with *directed* rounding so the declaration is never less private
than the event: noise scales round down, rates and privacy parameters round up (17 digits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from dp_accounting import dp_event

from odometer_client.declarations import (
    DOWN,
    UP,
    Mechanism,
    composed,
    dp_sgd,
    gaussian,
    laplace,
    pure_dp,
    subsampled,
    zcdp,
)


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
    ``PoissonSampledDpEvent(q, e)``         ``subsampled`` poisson, rate q
    ``SampledWithoutReplacementDpEvent``    ``subsampled`` without_replacement, m of n
    ``SelfComposedDpEvent(e, k)``           ``composed`` e × k (``dp_sgd`` when e is a
                                            Poisson-subsampled Gaussian: the tight curve)
    ``ComposedDpEvent([...])``              ``composed`` list (no-ops dropped)
    ``ZCDpEvent(ρ, ξ)``                     ``zcdp`` ρ, ξ
    ``RandomizedResponseDpEvent(p, k)``     ε = ln(1 + k(1−p)/p): ``randomized_response``
                                            for k = 2, ``pure_dp`` otherwise (ε rounded up)
    ``NoOpDpEvent``                         ``pure_dp`` ε = 0 (dropped inside compositions)
    ======================================  =============================================

    Anything else — ``NonPrivateDpEvent``, ``UnsupportedDpEvent``, events of other libraries,
    subclasses — raises ``ValueError``.
    """
    out = _convert(event, dp_event, depth=0)
    return out if out is not None else pure_dp(0)


def _convert(event: Any, ev: Any, depth: int) -> Mechanism | None:
    if depth > 8:
        raise ValueError("dp_event nests too deeply")
    kind = type(event)
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
        "(Gaussian, Laplace, PoissonSampled, SampledWithoutReplacement, SelfComposed, "
        "Composed, ZCDp, RandomizedResponse, NoOp)"
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
