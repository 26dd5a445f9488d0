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
from decimal import Decimal
from typing import Final

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


def unsupported(decl: Declaration) -> str | None:
    """Why ``decl`` has no RDP curve here (the 422 message), or ``None``."""
    if isinstance(decl, ChargedAs):
        return unsupported(decl.charged_as())
    if isinstance(decl, Composed):
        for item, _ in decl.items:
            why = unsupported(item)
            if why is not None:
                return why
        return None
    if isinstance(decl, Subsampled):
        if isinstance(decl.mechanism, Gaussian):
            return None
        return _SUBSAMPLED_ONLY_GAUSSIAN
    if isinstance(decl, RepeatAndSelect):
        why = unsupported(decl.mechanism)
        if why is None and _declares_delta(decl.mechanism):
            return sel.APPROXIMATE_INNER
        return why
    if isinstance(decl, MixtureOfGaussians | SampledWithReplacement | TruncatedSubsampledGaussian):
        return None  # bounds for both directions: odometer_core.accounting.mixtures
    if isinstance(
        decl,
        PureDP
        | RandomizedResponse
        | ApproxDP
        | Laplace
        | Exponential
        | ZCDP
        | MCDP
        | GDP
        | Gaussian
        | RDPCurve
        | OdpCapable
        | DPSGD,
    ):
        return None
    return f"kind '{decl.kind}' is not supported in mode 'rdp'"


_SUBSAMPLED_ONLY_GAUSSIAN: Final = (
    "RDP amplification by subsampling is implemented for the Gaussian mechanism only "
    "(Mironov–Talwar–Zhang 2019; Wang–Balle–Kasiviswanathan 2019 Thm 27); declare the "
    "subsampled mechanism's own RDP curve with type 'rdp' instead"
)


def _declares_delta(decl: Declaration) -> bool:
    """Whether ``decl``'s charge here carries a δ > 0 (approximate RDP, not RDP)."""
    if isinstance(decl, ChargedAs):
        return _declares_delta(decl.charged_as())
    if isinstance(decl, ApproxDP | ZCDP):
        return decl.delta > 0
    if isinstance(decl, OdpCapable):
        return decl.partition().delta > 0
    if isinstance(decl, Composed):
        return any(_declares_delta(item) for item, _ in decl.items)
    if isinstance(decl, Subsampled | RepeatAndSelect):
        return _declares_delta(decl.mechanism)
    return False


def _selection_curve(
    decl: RepeatAndSelect, relation: Relation, orders: FloatArray, tight: bool
) -> FloatArray:
    """Papernot–Steinke 2022 Thm 2 or 6 (:mod:`odometer_core.accounting.selection`): the inner
    curve (as charged, rounded up) on ``orders`` together with
    :data:`~odometer_core.accounting.selection.SELECTION_ORDERS`, the bound on that union,
    read back at ``orders``. An inner mechanism whose charge carries a δ is refused."""
    union = np.union1d(orders, np.asarray(sel.SELECTION_ORDERS, dtype=np.float64))
    inner, delta = rdp_curve(decl.mechanism, relation, union, tight=tight)
    if delta > 0:
        raise UnsupportedInMode(sel.APPROXIMATE_INNER)
    curve = sel.selection_rdp(decl, union, inner)
    return np.asarray(curve[np.searchsorted(union, orders)], dtype=np.float64)


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
    curve, delta = _rdp_curve(decl, relation, orders, tight)
    with np.errstate(over="ignore", invalid="raise"):
        # A closed-form curve here is at most a few float operations (ξ + ρ·α, α·μ²/2):
        # a relative margin of 4 machine epsilons plus one ulp covers their rounding.
        curve = np.nextafter(np.maximum(curve, 0.0) * (1.0 + 4.0 * _EPS), np.inf)
    if np.isnan(curve).any():  # pragma: no cover - conversions never return NaN
        raise DeclarationError("RDP curve evaluation produced NaN")
    return curve, delta


def _rdp_curve(
    decl: Declaration, relation: Relation, orders: FloatArray, tight: bool = False
) -> tuple[FloatArray, Decimal]:
    if isinstance(decl, ChargedAs):
        return _rdp_curve(decl.charged_as(), relation, orders, tight)
    if isinstance(decl, PureDP | RandomizedResponse):
        return cv.pure_dp_rdp(to_float_up(decl.epsilon), orders), ZERO
    if isinstance(decl, ApproxDP):
        return cv.pure_dp_rdp(to_float_up(decl.epsilon), orders), decl.delta
    if isinstance(decl, Laplace):
        if decl.sensitivity == 0:
            return np.zeros_like(orders), ZERO
        if decl.scale == 0:
            return np.full_like(orders, math.inf), ZERO
        return cv.laplace_rdp(
            to_float_down(decl.scale), to_float_up(decl.sensitivity), orders
        ), ZERO
    if isinstance(decl, Exponential):
        return cv.exponential_rdp(to_float_up(decl.epsilon), orders), ZERO
    if isinstance(decl, ZCDP | MCDP):
        xi, rho = zcdp_pair(decl)
        own = decl.delta if isinstance(decl, ZCDP) else ZERO
        return to_float_up(xi) + to_float_up(rho) * orders, own
    if isinstance(decl, GDP):
        mu = to_float_up(decl.mu)
        return orders * (mu * mu / 2.0), ZERO
    if isinstance(decl, Gaussian):
        if decl.sensitivity == 0:
            return np.zeros_like(orders), ZERO
        if decl.sigma == 0:
            return np.full_like(orders, math.inf), ZERO
        # αΔ²/(2σ²) (Mironov 2017 Prop. 7): the exact ρ = Δ²/(2σ²) rounded up, times α;
        # the single float product is covered by rdp_curve's final round-up.
        return orders * to_float_up(decl.rho), ZERO
    if isinstance(decl, RDPCurve):
        supplied = np.array([float(a) for a in decl.orders])
        values = np.array([to_float_up(v) for v in decl.values])
        idx = np.searchsorted(supplied, orders, side="left")
        out = np.full_like(orders, math.inf)
        ok = idx < len(supplied)
        out[ok] = values[idx[ok]]
        return out, ZERO
    if isinstance(decl, OdpCapable):
        part = decl.partition()
        return cv.pure_dp_rdp(to_float_up(part.worst_epsilon), orders), part.delta
    if isinstance(decl, Subsampled):
        inner = decl.mechanism
        if isinstance(inner, Gaussian):
            if inner.sensitivity == 0:
                return np.zeros_like(orders), ZERO
            if inner.sigma == 0:
                return np.full_like(orders, math.inf), ZERO
            nm = to_float_down(UP.divide(inner.sigma, inner.sensitivity))
            if decl.scheme == "poisson":
                assert decl.rate is not None
                return _poisson_gaussian(to_float_up(decl.rate), nm, orders), ZERO
            assert decl.m is not None and decl.n is not None
            return ss.wor_gaussian_rdp(decl.m, decl.n, nm, orders, tight=tight), ZERO
        raise UnsupportedInMode(
            "RDP amplification by subsampling is implemented for the Gaussian mechanism only "
            "(Mironov–Talwar–Zhang 2019; Wang–Balle–Kasiviswanathan 2019 Thm 27); declare the "
            "subsampled mechanism's own RDP curve with type 'rdp' instead"
        )
    if isinstance(decl, MixtureOfGaussians):
        mix = mx.of_declaration(decl)
        return (np.zeros_like(orders) if mix is None else mx.mixture_rdp(mix, orders)), ZERO
    if isinstance(decl, SampledWithReplacement):
        return _with_replacement_curve(decl, orders), ZERO
    if isinstance(decl, TruncatedSubsampledGaussian):
        return _truncated_curve(decl, orders), ZERO
    if isinstance(decl, DPSGD):
        step = _poisson_gaussian(
            to_float_up(decl.sample_rate), to_float_down(decl.noise_multiplier), orders
        )
        return step * float(decl.steps), ZERO
    if isinstance(decl, RepeatAndSelect):
        return _selection_curve(decl, relation, orders, tight), ZERO
    if isinstance(decl, Composed):
        total = np.zeros_like(orders)
        delta = ZERO
        for item, count in decl.items:
            c, d = _rdp_curve(item, relation, orders, tight)
            total = total + float(count) * c
            delta = add_up(delta, mul_up(Decimal(count), d))
        return total, delta
    raise UnsupportedInMode(f"kind '{decl.kind}' is not supported in mode 'rdp'")


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
