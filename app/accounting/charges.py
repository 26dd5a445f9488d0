"""What one declaration costs in each mode's currency (ACCOUNTING.md §3, §4, §5).

Each function maps a :class:`~app.accounting.declarations.Declaration` to the charge the
mode's filter compares against its budget. A kind that a mode cannot account soundly raises
:class:`UnsupportedInMode` (a :class:`DeclarationError`, hence HTTP 422) whose message
suggests the mode that can.

Every float that leaves a conversion is turned into a Decimal by
:func:`~app.accounting.exact.cost_from_float` (rounded up), and RDP vectors are rounded up
element-wise, so a charge is never below the true cost.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np
import numpy.typing as npt

from app.accounting import conversions as cv
from app.accounting import pld
from app.accounting import subsampling as ss
from app.accounting.declarations import (
    DPSGD,
    GDP,
    MCDP,
    ODP,
    PTR,
    SVT,
    ZCDP,
    ApproxDP,
    Composed,
    Declaration,
    DeclarationError,
    Exponential,
    Gaussian,
    Iterative,
    Laplace,
    OdpCapable,
    OdpPartition,
    PureDP,
    RandomizedResponse,
    RDPCurve,
    Relation,
    Subsampled,
    TestedRelease,
)
from app.accounting.exact import (
    INFINITY,
    UP,
    ZERO,
    add_up,
    cost_from_float,
    mul_up,
    to_float_down,
    to_float_up,
)

FloatArray = npt.NDArray[np.float64]

#: Orders used to compose RDP curves *inside one invocation* in ``basic`` mode before the
#: final CKS conversion (dp_accounting's default grid: 1.25 … 256 plus 512, 1024).
DENSE_ORDERS: Final[FloatArray] = np.array(
    [1 + x / 10.0 for x in range(1, 100)]
    + [12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0],
    dtype=np.float64,
)


_EPS: Final = float(np.finfo(np.float64).eps)


class UnsupportedInMode(DeclarationError):
    """The mode has no sound way to count this kind (ACCOUNTING.md §3.2–3.4)."""


@dataclass(frozen=True, slots=True)
class EpsDelta:
    """A ``basic``-mode charge: (ε, δ), with the ODP partition when output-dependent."""

    epsilon: Decimal
    delta: Decimal
    partition: OdpPartition | None = None


# ---------------------------------------------------------------------------- relation
def check_relation(decl: Declaration, relation: Relation) -> None:
    """Reject amplification claims under the wrong neighbouring relation (ACCOUNTING.md §5, §6).

    Poisson subsampling (and DP-SGD, which is Poisson-subsampled) is analysed under
    add/remove; sampling without replacement under replace-one (Balle–Barthe–Gaboardi 2018;
    Wang–Balle–Kasiviswanathan 2019). Nested declarations are checked recursively.
    """
    if isinstance(decl, Subsampled):
        if decl.required_relation != relation:
            raise DeclarationError(
                f"{decl.scheme} subsampling is analysed under the '{decl.required_relation}' "
                f"relation but the dataset uses '{relation}'",
                field="scheme",
            )
        check_relation(decl.mechanism, relation)
    elif isinstance(decl, DPSGD):
        if relation != "add_remove":
            raise DeclarationError(
                "dp_sgd uses Poisson subsampling, analysed under 'add_remove', "
                f"but the dataset uses '{relation}'"
            )
    elif isinstance(decl, Composed):
        for item, _ in decl.items:
            check_relation(item, relation)


# ---------------------------------------------------------------------------- basic (ε, δ)
def _pure_epsilon(decl: Declaration) -> Decimal | None:
    """ε of kinds that are pure ε-DP by definition, else ``None``."""
    if isinstance(decl, PureDP | RandomizedResponse | Exponential):
        return decl.epsilon
    if isinstance(decl, Laplace):
        return decl.epsilon
    if isinstance(decl, GDP) and decl.mu == 0:
        return ZERO
    return None


def eps_delta(decl: Declaration, conversion_delta: Decimal) -> EpsDelta:
    """The tightest sound single (ε, δ) for one invocation (ACCOUNTING.md §3.1, §4).

    ``conversion_delta`` is the δ spent to turn a curve-based guarantee (zCDP, RDP, GDP,
    Gaussian) into (ε, δ); it is added to the declaration's own δ. Pure kinds never use it.
    """
    pure = _pure_epsilon(decl)
    if pure is not None:
        return EpsDelta(pure, ZERO)
    if isinstance(decl, ApproxDP):
        return EpsDelta(decl.epsilon, decl.delta)
    if isinstance(decl, OdpCapable):
        part = decl.partition()
        return EpsDelta(part.worst_epsilon, part.delta, part)
    dc = to_float_down(conversion_delta)
    if isinstance(decl, ZCDP | MCDP):
        xi, rho = _zcdp_pair(decl)
        if rho == 0:
            return EpsDelta(xi, decl.delta if isinstance(decl, ZCDP) else ZERO)
        eps = _conv_or_inf(dc, lambda: cv.zcdp_epsilon(to_float_up(rho), dc))
        own_delta = decl.delta if isinstance(decl, ZCDP) else ZERO
        return EpsDelta(add_up(xi, eps), add_up(own_delta, conversion_delta))
    if isinstance(decl, RDPCurve):
        orders = np.array([float(a) for a in decl.orders])
        values = np.array([to_float_up(v) for v in decl.values])
        eps = _conv_or_inf(dc, lambda: cv.rdp_to_epsilon(orders, values, dc)[0])
        return EpsDelta(eps, conversion_delta)
    if isinstance(decl, GDP):
        eps = _conv_or_inf(dc, lambda: cv.gdp_epsilon(to_float_up(decl.mu), dc))
        return EpsDelta(eps, conversion_delta)
    if isinstance(decl, Gaussian):
        if decl.sensitivity == 0:
            return EpsDelta(ZERO, ZERO)
        if decl.sigma == 0:
            return EpsDelta(INFINITY, conversion_delta)
        eps = _conv_or_inf(
            dc,
            lambda: cv.analytic_gaussian_epsilon(
                to_float_down(decl.sigma), to_float_up(decl.sensitivity), dc
            ),
        )
        return EpsDelta(eps, conversion_delta)
    if isinstance(decl, Subsampled):
        return _subsampled_eps_delta(decl, conversion_delta)
    if isinstance(decl, DPSGD):
        delta = decl.delta if decl.delta is not None else conversion_delta
        d = to_float_down(delta)
        eps = _conv_or_inf(
            d,
            lambda: pld.pld_epsilon_dp_sgd(
                to_float_down(decl.noise_multiplier),
                to_float_up(decl.sample_rate),
                decl.steps,
                d,
            ),
        )
        return EpsDelta(eps, delta)
    if isinstance(decl, Composed):
        return _composed_eps_delta(decl, conversion_delta)
    raise UnsupportedInMode(f"no (ε, δ) conversion for kind '{decl.kind}'")


def _conv_or_inf(delta: float, compute: object) -> Decimal:
    """Run a conversion at δ > 0; at δ = 0 a non-pure guarantee gives ε = ∞ (never admitted)."""
    if delta <= 0:
        return INFINITY
    assert callable(compute)
    return cost_from_float(float(compute()))


def _zcdp_pair(decl: ZCDP | MCDP) -> tuple[Decimal, Decimal]:
    """(ξ, ρ) of a zCDP or mCDP declaration; mCDP via Bun–Steinke 2016 Lemma 4.2
    ((μ, τ)-mCDP ⇒ (μ − τ²/2, τ²/2)-zCDP), with ξ clamped at 0 (a larger ξ is conservative)."""
    if isinstance(decl, ZCDP):
        return decl.xi, decl.rho
    rho = UP.divide(mul_up(decl.tau, decl.tau), Decimal(2))
    xi = UP.subtract(decl.mu, rho)
    return (xi if xi > 0 else ZERO), rho


def _subsampled_eps_delta(decl: Subsampled, conversion_delta: Decimal) -> EpsDelta:
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
            pld.pld_epsilon_dp_sgd(
                to_float_down(UP.divide(inner.sigma, inner.sensitivity)),
                to_float_up(decl.rate),
                1,
                d,
            )
        )
        return EpsDelta(eps, conversion_delta)
    base = eps_delta(inner, conversion_delta)
    if base.epsilon.is_infinite():
        return EpsDelta(INFINITY, base.delta)
    gamma = to_float_up(decl.gamma)
    if decl.scheme == "poisson":
        e, d = ss.poisson_amplify(to_float_up(base.epsilon), to_float_up(base.delta), gamma)
    else:
        assert decl.m is not None and decl.n is not None
        e, d = ss.wor_amplify(to_float_up(base.epsilon), to_float_up(base.delta), decl.m, decl.n)
    return EpsDelta(cost_from_float(e), cost_from_float(d))


def _composed_eps_delta(decl: Composed, conversion_delta: Decimal) -> EpsDelta:
    """Non-adaptive composition inside one invocation: the smallest ε among complete, sound
    (ε, δ) bounds, each carrying every δ its items owe (their own, nested and amplified δ, plus
    the conversion δ it spends):

    (a) basic composition of the items' (ε, δ) (Dwork–Lei 2009 / Dwork et al. 2006), the
        conversion δ split evenly over the items that need one;
    (b) RDP composition of the items' curves (each (ε, δ) item as its randomized-response curve
        plus δ, theory.md §2.1), converted once by CKS20 Prop. 12 at the conversion δ;
    (c) for one repeated Gaussian, PLD accounting (tight for this fixed schedule).
    """
    if conversion_delta <= 0 or all(_pure_epsilon(d) is not None for d, _ in decl.items):
        return _basic_composition(decl, ZERO)
    candidates: list[EpsDelta] = []
    needing = sum(
        c for d, c in decl.items if _pure_epsilon(d) is None and not isinstance(d, ApproxDP)
    )
    share = UP.divide(conversion_delta, Decimal(max(needing, 1)))
    candidates.append(_basic_composition(decl, Decimal(to_float_down(share))))
    try:
        curve, curve_delta = rdp_curve(decl, "add_remove", DENSE_ORDERS)
        e, _ = cv.rdp_to_epsilon(DENSE_ORDERS, curve, to_float_down(conversion_delta))
        candidates.append(EpsDelta(cost_from_float(e), add_up(curve_delta, conversion_delta)))
    except UnsupportedInMode:
        pass
    if len(decl.items) == 1:
        d, count = decl.items[0]
        if isinstance(d, Gaussian) and d.sigma > 0 and d.sensitivity > 0:
            nm = to_float_down(UP.divide(d.sigma, d.sensitivity))
            e = pld.pld_epsilon_gaussian(nm, count, to_float_down(conversion_delta))
            candidates.append(EpsDelta(cost_from_float(e), conversion_delta))
    return min(candidates, key=lambda c: (c.epsilon, c.delta))


def _basic_composition(decl: Composed, share: Decimal) -> EpsDelta:
    """Σ count·ε_i and Σ count·δ_i of the items' own conversions at δ ``share`` each."""
    eps, delta = ZERO, ZERO
    for item, count in decl.items:
        ed = eps_delta(item, share)
        eps = add_up(eps, mul_up(Decimal(count), ed.epsilon))
        delta = add_up(delta, mul_up(Decimal(count), ed.delta))
    return EpsDelta(eps, delta)


# ---------------------------------------------------------------------------- zCDP
def zcdp_charge(decl: Declaration) -> tuple[Decimal, Decimal]:
    """(ρ, δ) charged in ``zcdp`` mode (ACCOUNTING.md §3.2).

    - ρ-zCDP / (ξ, ρ)-zCDP → ξ + ρ (RDP ξ + ρα ≤ (ξ + ρ)α for α ≥ 1; Bun–Steinke 2016 Def. 1.1);
    - pure ε (and randomized response, Laplace at ε = Δ/b) → ε·tanh(ε/2), tight
      (Steinke 2024, "Sharp RDP & zCDP from pure DP", Thm 5; ≤ ε²/2 of BS16 Prop. 1.4);
    - exponential mechanism → min(ε²/8, ε·tanh(ε/2)) (Cesar–Rogers 2021 Lemma 3.2);
    - (ε, δ) → (ε²/2, δ) (Bun–Steinke 2016 Prop. 1.13 / §8; the tighter tanh form for δ > 0
      is unreviewed, theory.md §2.1);
    - μ-GDP → μ²/2 and Gaussian → Δ²/(2σ²) (BS16 Prop. 1.6);
    - mCDP → ξ + ρ via BS16 Lemma 4.2; ODP → its worst cell as pure / approximate DP;
    - composed → Σ count·ρ, Σ count·δ (BS16 Lemma 2.3).
    RDP grid curves, subsampled mechanisms and DP-SGD are rejected: a finite grid does not
    certify zCDP and subsampling does not improve ρ (seed 000 lower bound).
    """
    if isinstance(decl, ZCDP):
        return add_up(decl.xi, decl.rho), decl.delta
    if isinstance(decl, MCDP):
        xi, rho = _zcdp_pair(decl)
        return add_up(xi, rho), ZERO
    if isinstance(decl, PureDP | RandomizedResponse | Laplace):
        return _pure_rho(decl.epsilon), ZERO
    if isinstance(decl, Exponential):
        eps8 = UP.divide(mul_up(decl.epsilon, decl.epsilon), Decimal(8))
        return min(eps8, _pure_rho(decl.epsilon)), ZERO
    if isinstance(decl, ApproxDP):
        if decl.delta == 0:
            return _pure_rho(decl.epsilon), ZERO
        return UP.divide(mul_up(decl.epsilon, decl.epsilon), Decimal(2)), decl.delta
    if isinstance(decl, GDP):
        return UP.divide(mul_up(decl.mu, decl.mu), Decimal(2)), ZERO
    if isinstance(decl, Gaussian):
        r = decl.ratio
        if r.is_infinite():
            return INFINITY, ZERO
        return UP.divide(mul_up(r, r), Decimal(2)), ZERO
    if isinstance(decl, OdpCapable):
        part = decl.partition()
        return zcdp_charge(ApproxDP(part.worst_epsilon, part.delta))
    if isinstance(decl, Composed):
        rho, delta = ZERO, ZERO
        for item, count in decl.items:
            r, d = zcdp_charge(item)
            rho = add_up(rho, mul_up(Decimal(count), r))
            delta = add_up(delta, mul_up(Decimal(count), d))
        return rho, delta
    if isinstance(decl, RDPCurve | Subsampled | DPSGD):
        raise UnsupportedInMode(
            f"'{decl.kind}' has no certified zCDP bound (a finite RDP grid does not certify "
            "zCDP and subsampling does not improve ρ); use a dataset or sub-ledger in mode 'rdp'"
        )
    raise UnsupportedInMode(f"kind '{decl.kind}' is not supported in mode 'zcdp'")


@functools.lru_cache(maxsize=512)
def _poisson_gaussian_cached(rate: float, sigma: float, orders: tuple[float, ...]) -> FloatArray:
    curve = ss.poisson_gaussian_rdp(rate, sigma, np.asarray(orders, dtype=np.float64))
    curve.setflags(write=False)  # shared between calls: never mutated
    return curve


def _poisson_gaussian(rate: float, sigma: float, orders: FloatArray) -> FloatArray:
    """Mironov–Talwar–Zhang 2019 curve of one Poisson-subsampled Gaussian step, memoised per
    (q, σ, grid): DP-SGD jobs repeat the same parameters, and the series costs ~1 ms."""
    return _poisson_gaussian_cached(rate, sigma, tuple(orders.tolist()))


def _gaussian_rho(decl: Gaussian) -> Decimal:
    """ρ = Δ²/(2σ²) of a Gaussian with σ > 0 (Bun–Steinke 2016 Prop. 1.6), rounded up."""
    r = UP.divide(decl.sensitivity, decl.sigma)
    return UP.divide(mul_up(r, r), Decimal(2))


def _pure_rho(epsilon: Decimal) -> Decimal:
    """ε·tanh(ε/2), rounded up (Steinke 2024 Thm 5); ε for ε ≥ 1e3 where tanh = 1."""
    if epsilon == 0:
        return ZERO
    e = to_float_up(epsilon)
    return cost_from_float(cv.pure_dp_zcdp(e))


# ---------------------------------------------------------------------------- RDP
def rdp_curve(
    decl: Declaration, relation: Relation, orders: FloatArray
) -> tuple[FloatArray, Decimal]:
    """(ε_i(α) for α in ``orders``, δ_i) charged in ``rdp`` mode (ACCOUNTING.md §3.3).

    Curves (theory.md §2.1): pure ε → randomized-response curve (Steinke 2024 Thm 4);
    (ε, δ) → (that curve, δ); ρ → ξ + ρα; Gaussian → αΔ²/(2σ²) (Mironov 2017 Prop. 7);
    Laplace → Mironov 2017 Prop. 6; exponential → Cesar–Rogers bounded-range curve;
    Poisson-subsampled Gaussian and DP-SGD → Mironov–Talwar–Zhang 2019 (exact, fractional
    orders); without-replacement Gaussian → Wang–Balle–Kasiviswanathan 2019 Thm 27;
    user curves → at each α the smallest supplied value at a supplied order ≥ α (RDP is
    non-decreasing in α), ∞ where none exists. The result is rounded up element-wise.
    """
    curve, delta = _rdp_curve(decl, relation, orders)
    with np.errstate(over="ignore", invalid="raise"):
        # A closed-form curve here is at most a few float operations (ξ + ρ·α, α·μ²/2):
        # a relative margin of 4 machine epsilons plus one ulp covers their rounding.
        curve = np.nextafter(np.maximum(curve, 0.0) * (1.0 + 4.0 * _EPS), np.inf)
    if np.isnan(curve).any():  # pragma: no cover - conversions never return NaN
        raise DeclarationError("RDP curve evaluation produced NaN")
    return curve, delta


def _rdp_curve(
    decl: Declaration, relation: Relation, orders: FloatArray
) -> tuple[FloatArray, Decimal]:
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
        xi, rho = _zcdp_pair(decl)
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
        return orders * to_float_up(_gaussian_rho(decl)), ZERO
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
            return ss.wor_gaussian_rdp(decl.m, decl.n, nm, orders), ZERO
        raise UnsupportedInMode(
            "RDP amplification by subsampling is implemented for the Gaussian mechanism only "
            "(Mironov–Talwar–Zhang 2019; Wang–Balle–Kasiviswanathan 2019 Thm 27); declare the "
            "subsampled mechanism's own RDP curve with type 'rdp' instead"
        )
    if isinstance(decl, DPSGD):
        step = _poisson_gaussian(
            to_float_up(decl.sample_rate), to_float_down(decl.noise_multiplier), orders
        )
        return step * float(decl.steps), ZERO
    if isinstance(decl, Composed):
        total = np.zeros_like(orders)
        delta = ZERO
        for item, count in decl.items:
            c, d = _rdp_curve(item, relation, orders)
            total = total + float(count) * c
            delta = add_up(delta, mul_up(Decimal(count), d))
        return total, delta
    raise UnsupportedInMode(f"kind '{decl.kind}' is not supported in mode 'rdp'")


# ---------------------------------------------------------------------------- GDP
def gdp_charge(decl: Declaration) -> Decimal:
    """μ² charged in ``gdp`` mode (Smith–Thakurta 2022 filter: Σμ_i² ≤ μ_B²).

    Only certified μ-GDP kinds: ``gdp`` (μ) and ``gaussian`` (μ = Δ/σ, Dong–Roth–Su 2019
    Thm 2.7), and compositions of them (DRS19 Cor. 3.3: μ² adds). Subsampled Gaussians are
    rejected — the CLT approximations are not certified bounds (Tran et al. 2026).
    """
    if isinstance(decl, GDP):
        return mul_up(decl.mu, decl.mu)
    if isinstance(decl, Gaussian):
        r = decl.ratio
        return INFINITY if r.is_infinite() else mul_up(r, r)
    if isinstance(decl, Composed):
        return add_up(*(mul_up(Decimal(c), gdp_charge(d)) for d, c in decl.items))
    raise UnsupportedInMode(
        f"mode 'gdp' accepts only certified μ-GDP declarations ('gdp', 'gaussian'), not "
        f"'{decl.kind}'; use mode 'zcdp' or 'rdp'"
    )


__all__ = [
    "DENSE_ORDERS",
    "EpsDelta",
    "UnsupportedInMode",
    "check_relation",
    "eps_delta",
    "gdp_charge",
    "rdp_curve",
    "zcdp_charge",
]

# Silence "imported but unused" for kinds referenced only in isinstance chains above.
_ = (ODP, PTR, SVT, Iterative, TestedRelease)
