"""The RDP curve of a declaration: what ``rdp`` mode charges, and the curve ``basic`` mode
converts where it has no tighter (ε, δ) (composed declarations, private selection, the fallback
of the PLD-charged kinds).

:func:`rdp_curve` is (ε(α) on the given orders, δ), rounded up; :func:`unsupported` says why a
declaration has none here (the 422 message of ``rdp`` mode). The configuration, admission and
readings of the ``rdp`` filter are :mod:`odometer_core.accounting.modes.rdp`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, overload

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import effort
from odometer_core.accounting import mixtures as mx
from odometer_core.accounting import selection as sel
from odometer_core.accounting import subsampling as ss
from odometer_core.accounting.declarations import (
    DPSGD,
    GDP,
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
    PureDP,
    RandomizedResponse,
    RDPCurve,
    Relation,
    RepeatAndSelect,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import UP, ZERO, add_up, mul_up, to_float_down, to_float_up
from odometer_core.accounting.modes.common import UnsupportedInMode
from odometer_core.accounting.modes.zcdp import zcdp_pair

FloatArray = npt.NDArray[np.float64]

_EPS: Final = float(np.finfo(np.float64).eps)


_SUBSAMPLED_ONLY_GAUSSIAN: Final = (
    "RDP amplification by subsampling is implemented for the Gaussian mechanism only "
    "(Mironov–Talwar–Zhang 2019; Wang–Balle–Kasiviswanathan 2019 Thm 27); declare the "
    "subsampled mechanism's own RDP curve with type 'rdp' instead"
)


@dataclass(frozen=True, slots=True, eq=False)
class _At:
    """Where a curve is computed: the orders, the dataset's relation, and ``tight``: a Gaussian
    subsampled without replacement at the smaller of WBK19 and BEBP24
    (:mod:`odometer_core.accounting.subsampling`)."""

    orders: FloatArray
    relation: Relation
    tight: bool


def unsupported(decl: Declaration) -> str | None:
    """Why ``decl`` has no RDP curve here (the 422 message), or ``None``: the walk of
    :func:`rdp_curve`, asked only whether it can account ``decl``."""
    try:
        _walk(decl, None)
    except UnsupportedInMode as refused:
        return refused.detail
    return None


def rdp_curve(
    decl: Declaration, relation: Relation, orders: FloatArray, *, tight: bool = False
) -> tuple[FloatArray, Decimal]:
    """(ε_i(α) for α in ``orders``, δ_i) charged in ``rdp`` mode.

    Curves: pure ε → randomized-response curve (Steinke 2024 Thm 4);
    (ε, δ) → (that curve, δ); ρ → ξ + ρα; Gaussian → αΔ²/(2σ²) (Mironov 2017 Prop. 7);
    Laplace → Mironov 2017 Prop. 6; exponential → Cesar–Rogers bounded-range curve;
    Poisson-subsampled Gaussian and DP-SGD → Mironov–Talwar–Zhang 2019 (exact, fractional
    orders); without-replacement Gaussian → Wang–Balle–Kasiviswanathan 2019 Thm 27, and with
    ``tight`` the smaller of that and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 per order;
    user curves → at each α the smallest supplied value at a supplied order ≥ α (RDP is
    non-decreasing in α), ∞ where none exists; discrete Laplace, discrete Gaussian and report
    noisy max → the curve of the kind that states their guarantee
    (:class:`~odometer_core.accounting.declarations.ChargedAs`): the pure-DP curve at ε = Δ/t
    (exact for Δ = 1), αΔ²/(2σ²) (Canonne–Kamath–Steinke 2020 Thm 14), the bounded-range curve
    for Gumbel noise and the pure-DP curve for exponential noise; tree aggregation → the
    Gaussian's αd/(2σ²) (Kairouz et al. 2021, App. D); repeat-and-select → Papernot–Steinke 2022
    Thm 2 or 6 on the inner curve (:mod:`odometer_core.accounting.selection`); mixture of
    Gaussians, sampling with replacement and truncated Poisson sampling → the bounds of
    :mod:`odometer_core.accounting.mixtures` (joint convexity of e^{(α−1)D_α}, both
    directions). The result is rounded up element-wise.
    """
    curve, delta = _walk(decl, _At(orders, relation, tight))
    with np.errstate(over="ignore", invalid="raise"):
        # A closed-form curve here is at most a few float operations (ξ + ρ·α, α·μ²/2):
        # a relative margin of 4 machine epsilons plus one ulp covers their rounding.
        curve = np.nextafter(np.maximum(curve, 0.0) * (1.0 + 4.0 * _EPS), np.inf)
    if np.isnan(curve).any():  # pragma: no cover - conversions never return NaN
        raise DeclarationError("RDP curve evaluation produced NaN")
    return curve, delta


@overload
def _walk(decl: Declaration, at: _At) -> tuple[FloatArray, Decimal]: ...
@overload
def _walk(decl: Declaration, at: None) -> None: ...
@overload
def _walk(decl: Declaration, at: _At | None) -> tuple[FloatArray, Decimal] | None: ...
def _walk(decl: Declaration, at: _At | None) -> tuple[FloatArray, Decimal] | None:
    """The one walk of ``rdp`` mode over a declaration, in the manner of dp_accounting's
    ``_maybe_compose(event, count, do_compose)``: where the mode has no curve for ``decl`` or
    for a mechanism nested in it, it raises :class:`UnsupportedInMode` with the reason; else it
    returns the curve (before :func:`rdp_curve` rounds it up) and δ at ``at``, or, when ``at``
    is ``None``, nothing: asked only whether, it computes no curve. A kind the mode accounts is
    one with a case here."""
    match decl:
        case ChargedAs():
            return _walk(decl.charged_as(), at)
        case PureDP(epsilon=eps) | RandomizedResponse(epsilon=eps):
            return None if at is None else (cv.pure_dp_rdp(to_float_up(eps), at.orders), ZERO)
        case ApproxDP(epsilon=eps, delta=delta):
            return None if at is None else (cv.pure_dp_rdp(to_float_up(eps), at.orders), delta)
        case Laplace():
            return None if at is None else (_laplace_curve(decl, at.orders), ZERO)
        case Exponential(epsilon=eps):
            return None if at is None else (cv.exponential_rdp(to_float_up(eps), at.orders), ZERO)
        case ZCDP() | MCDP():
            if at is None:
                return None
            xi, rho = zcdp_pair(decl)
            own = decl.delta if isinstance(decl, ZCDP) else ZERO
            return to_float_up(xi) + to_float_up(rho) * at.orders, own
        case GDP(mu=mu):
            if at is None:
                return None
            m = to_float_up(mu)
            return at.orders * (m * m / 2.0), ZERO
        case Gaussian():
            return None if at is None else (_gaussian_curve(decl, at.orders), ZERO)
        case RDPCurve():
            return None if at is None else (_supplied_curve(decl, at.orders), ZERO)
        case OdpCapable():
            if at is None:
                return None
            part = decl.partition()
            return cv.pure_dp_rdp(to_float_up(part.worst_epsilon), at.orders), part.delta
        case Subsampled(mechanism=Gaussian() as inner):
            return None if at is None else (_subsampled_gaussian_curve(decl, inner, at), ZERO)
        case Subsampled():
            raise UnsupportedInMode(_SUBSAMPLED_ONLY_GAUSSIAN)
        case MixtureOfGaussians():
            if at is None:
                return None
            mix = mx.of_declaration(decl)
            curve = np.zeros_like(at.orders) if mix is None else mx.mixture_rdp(mix, at.orders)
            return curve, ZERO
        case SampledWithReplacement():
            return None if at is None else (_with_replacement_curve(decl, at.orders), ZERO)
        case TruncatedSubsampledGaussian():
            return None if at is None else (_truncated_curve(decl, at.orders), ZERO)
        case DPSGD(noise_multiplier=sigma, sample_rate=rate, steps=steps):
            if at is None:
                return None
            step = _poisson_gaussian(to_float_up(rate), to_float_down(sigma), at.orders)
            return step * float(steps), ZERO
        case RepeatAndSelect(mechanism=inner):
            if at is not None:
                return _selection_curve(decl, at), ZERO
            _walk(inner, None)
            if _declares_delta(inner):
                raise UnsupportedInMode(sel.APPROXIMATE_INNER)
            return None
        case Composed(items=items):
            if at is None:
                for item, _ in items:
                    _walk(item, None)
                return None
            total = np.zeros_like(at.orders)
            delta = ZERO
            for item, count in items:
                c, d = _walk(item, at)
                total = total + float(count) * c
                delta = add_up(delta, mul_up(Decimal(count), d))
            return total, delta
    raise UnsupportedInMode(f"kind '{decl.kind}' is not supported in mode 'rdp'")


def _declares_delta(decl: Declaration) -> bool:
    """Whether ``decl``'s charge here carries a δ > 0 (approximate RDP, not RDP)."""
    match decl:
        case ChargedAs():
            return _declares_delta(decl.charged_as())
        case ApproxDP(delta=delta) | ZCDP(delta=delta):
            return delta > 0
        case OdpCapable():
            return decl.partition().delta > 0
        case Composed(items=items):
            return any(_declares_delta(item) for item, _ in items)
        case Subsampled(mechanism=inner) | RepeatAndSelect(mechanism=inner):
            return _declares_delta(inner)
    return False


def _laplace_curve(decl: Laplace, orders: FloatArray) -> FloatArray:
    """Mironov 2017 Prop. 6 (0 when Δ = 0, ∞ when b = 0 < Δ)."""
    if decl.sensitivity == 0:
        return np.zeros_like(orders)
    if decl.scale == 0:
        return np.full_like(orders, math.inf)
    return cv.laplace_rdp(to_float_down(decl.scale), to_float_up(decl.sensitivity), orders)


def _gaussian_curve(decl: Gaussian, orders: FloatArray) -> FloatArray:
    """αΔ²/(2σ²) (Mironov 2017 Prop. 7): the exact ρ = Δ²/(2σ²) rounded up, times α; the single
    float product is covered by :func:`rdp_curve`'s final round-up (0 when Δ = 0, ∞ when
    σ = 0 < Δ)."""
    if decl.sensitivity == 0:
        return np.zeros_like(orders)
    if decl.sigma == 0:
        return np.full_like(orders, math.inf)
    return orders * to_float_up(decl.rho)


def _supplied_curve(decl: RDPCurve, orders: FloatArray) -> FloatArray:
    """At each α the smallest supplied value at a supplied order ≥ α, ∞ where none exists."""
    supplied = np.array([float(a) for a in decl.orders])
    values = np.array([to_float_up(v) for v in decl.values])
    idx = np.searchsorted(supplied, orders, side="left")
    out = np.full_like(orders, math.inf)
    ok = idx < len(supplied)
    out[ok] = values[idx[ok]]
    return out


def _subsampled_gaussian_curve(decl: Subsampled, inner: Gaussian, at: _At) -> FloatArray:
    """Mironov–Talwar–Zhang 2019 (Poisson) or Wang–Balle–Kasiviswanathan 2019 Thm 27, with
    ``tight`` the smaller of that and BEBP24 (without replacement), at noise multiplier σ/Δ."""
    if inner.sensitivity == 0:
        return np.zeros_like(at.orders)
    if inner.sigma == 0:
        return np.full_like(at.orders, math.inf)
    nm = to_float_down(UP.divide(inner.sigma, inner.sensitivity))
    if decl.scheme == "poisson":
        assert decl.rate is not None
        return _poisson_gaussian(to_float_up(decl.rate), nm, at.orders)
    assert decl.m is not None and decl.n is not None
    return ss.wor_gaussian_rdp(decl.m, decl.n, nm, at.orders, tight=at.tight)


def _selection_curve(decl: RepeatAndSelect, at: _At) -> FloatArray:
    """Papernot–Steinke 2022 Thm 2 or 6 (:mod:`odometer_core.accounting.selection`): the inner
    curve (as charged, rounded up) on ``orders`` together with
    :data:`~odometer_core.accounting.selection.SELECTION_ORDERS`, the bound on that union,
    read back at ``orders``. An inner mechanism whose charge carries a δ is refused."""
    union = np.union1d(at.orders, np.asarray(sel.SELECTION_ORDERS, dtype=np.float64))
    inner, delta = rdp_curve(decl.mechanism, at.relation, union, tight=at.tight)
    if delta > 0:
        raise UnsupportedInMode(sel.APPROXIMATE_INNER)
    curve = sel.selection_rdp(decl, union, inner)
    return np.asarray(curve[np.searchsorted(union, at.orders)], dtype=np.float64)


@functools.lru_cache(maxsize=512)
def _poisson_gaussian_cached(
    rate: float, sigma: float, orders: tuple[float, ...]
) -> tuple[FloatArray, int]:
    with effort.measure() as meter:
        curve = ss.poisson_gaussian_rdp(rate, sigma, np.asarray(orders, dtype=np.float64))
    curve.setflags(write=False)  # shared between calls: never mutated
    return curve, meter.terms


def _poisson_gaussian(rate: float, sigma: float, orders: FloatArray) -> FloatArray:
    """Mironov–Talwar–Zhang 2019 curve of one Poisson-subsampled Gaussian step, memoised per
    (q, σ, grid): DP-SGD jobs repeat the same parameters, and the series costs ~1 ms. A cached
    curve is charged to the current work meter as if computed
    (:mod:`odometer_core.accounting.effort`)."""
    curve, terms = _poisson_gaussian_cached(rate, sigma, tuple(orders.tolist()))
    effort.count(terms)
    return curve


def _with_replacement_curve(decl: SampledWithReplacement, orders: FloatArray) -> FloatArray:
    """Σ over the K ~ Bin(m, 1/n) copies of the record of its inner curve at distance K, by
    joint convexity of e^{(α−1)D_α} (:func:`odometer_core.accounting.mixtures.wr_rdp`): m + 1
    terms per order, counted as series terms of the charge's work limit before they are
    summed."""
    mu, epsilon0 = mx.inner_of(decl)
    if mu == 0.0 or epsilon0 == 0.0:
        return np.zeros_like(orders)
    if mu is not None and math.isinf(mu):
        return np.full_like(orders, math.inf)
    effort.count((decl.m + 1) * orders.size)
    return mx.wr_rdp(mx.copies(decl.n, decl.m), orders, mu=mu, epsilon0=epsilon0)


def _truncated_curve(decl: TruncatedSubsampledGaussian, orders: FloatArray) -> FloatArray:
    """Truncated Poisson sampling: the Mironov–Talwar–Zhang curves of the Poisson-subsampled
    Gaussian at rate q (noise multiplier σ) and at each truncated part's rate R_j (σ/2: two
    clipping norms), weighted as :func:`odometer_core.accounting.mixtures.truncated_rdp`
    says; the larger at each order of the dataset's two neighbours (n and n + 1 records)."""
    sigma = to_float_down(decl.noise_multiplier)
    first = _poisson_gaussian(to_float_up(decl.sampling_probability), sigma, orders)
    curves = []
    for weights in mx.truncations_of(decl):  # both neighbours: n and n + 1 records
        parts = tuple(_poisson_gaussian(rate, sigma / 2.0, orders) for rate, _ in weights.parts)
        curves.append(mx.truncated_rdp(weights, first, parts, orders))
    return np.maximum(*curves)
