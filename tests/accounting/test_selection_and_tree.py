"""``repeat_and_select`` and ``tree_aggregation``: every charge against an independent evaluation
of its cited formula, against the truth, and against dp_accounting.

Correctness: in each mode that accepts a kind, the charge equals the cited formula computed here
in mpmath (Papernot–Steinke 2022 Thm 2 and Thm 6 on the grid with the selection orders, their
Cor. 3 for pure DP, the conversion of Canonne–Kamath–Steinke 2020 Prop. 12; the Gaussian's
αd/(2σ²), d/(2σ²), d/σ² and Balle–Wang ε) to a relative 1e-9 or better, and :func:`_matches`
fails on a charge 5 % smaller (checked for every case). Soundness: the charge is never below the
truth of explicit neighbouring inputs — the exact output distributions of "the best of K runs"
of a three-outcome ε-DP mechanism (sums over the probability generating function of K), of the
maximum of K Gaussians (mpmath quadrature), their exact Rényi divergences, max-divergence and
δ(ε); the exact Gaussian RDP and δ(ε) of tree aggregation with its true depth. dp_accounting's
RdpAccountant: on a table of parameters the ``rdp`` charge is never more than 1 % above its
curve, nor its (ε, δ) conversion above its ε. Then the refusals, the HTTP surface, the canonical
JSON and a ledger replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import dp_accounting
import mpmath  # type: ignore[import-untyped]
import numpy as np
import pytest
from dp_accounting import dp_event as ev
from fastapi.testclient import TestClient

from odometer_client import declarations as builders
from odometer_core.accounting import (
    UnsupportedInMode,
    admit,
    initial_state,
    make_config,
    parse_declaration,
    supports,
)
from odometer_core.accounting import selection as sel
from odometer_core.accounting.declarations import (
    Declaration,
    DeclarationError,
    Gaussian,
    RepeatAndSelect,
    TreeAggregation,
)
from odometer_core.accounting.modes.rdp import DEFAULT_RDP_ORDERS
from odometer_core.accounting.summary import instead
from odometer_core.ledger import replay
from tests.accounting.charged import charge as charge_on
from tests.accounting.charged import check as _check
from tests.support import AUTH, basic_dataset, ledger

ORDERS = [1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0]
BUDGET_DELTA = "0.00001"  # basic: conversion δ = δ_B/10 = 1e-6
CONVERSION_DELTA = 1e-6
#: The orders the rule adds to a dataset's grid for λ̂ (Thm 2) and δ̂ (Thm 6), written out here
#: as docs/accounting.md states them (checked against the module's constant below).
SELECTION_ORDERS = [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 8.0, 10.0]
SELECTION_ORDERS += [12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0]
#: basic's grid for curves inside one invocation (dp_accounting's default orders).
DENSE = [1 + x / 10.0 for x in range(1, 100)]
DENSE += [12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0]
mp = mpmath
Curve = Callable[[mpmath.mpf], mpmath.mpf]


# ---------------------------------------------------------------------------- helpers
def _config(mode: str, orders: list[float] | None = None) -> Any:
    acc: dict[str, Any] = {"mode": mode}
    if mode == "rdp":
        acc["orders"] = orders or ORDERS
    return make_config(1000, BUDGET_DELTA, "add_remove", acc)


def _charge(mode: str, mechanism: dict[str, Any] | Declaration, **kw: Any) -> dict[str, Any]:
    """What ``mode`` charges ``mechanism`` (admitted: the budget is far larger)."""
    return charge_on(_config(mode, **kw), mechanism)


def _curve(
    mechanism: dict[str, Any] | Declaration, orders: list[float] | None = None
) -> list[float]:
    charged = _charge("rdp", mechanism, orders=orders)
    assert [float(a) for a in charged["orders"]] == (orders or ORDERS)
    assert Decimal(charged["delta"]) == 0
    return [float(v) for v in charged["rdp"]]


def _mpf(x: float | str | Fraction) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mp.mpf(x.numerator) / x.denominator
    return mp.mpf(x)


def _repeat(inner: dict[str, Any], mean: str, shape: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "repeat_and_select", "mean": mean}
    if shape is None:
        out["distribution"] = "poisson"
    else:
        out["distribution"] = "truncated_negative_binomial"
        out["shape"] = shape
    out["mechanism"] = inner
    return out


def _gaussian(sigma: str) -> dict[str, Any]:
    return {"type": "gaussian", "sigma": sigma, "sensitivity": "1"}


def _pure(epsilon: str) -> dict[str, Any]:
    return {"type": "pure_dp", "epsilon": epsilon}


# ---------------------------------------------------------------------------- cited formulas
def _tnb_mean(gamma: mpmath.mpf, eta: mpmath.mpf) -> mpmath.mpf:
    """E[K] of D_{η,γ} (PS22 Def. 1)."""
    if eta == 0:
        return (1 / gamma - 1) / mp.log(1 / gamma)
    return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


def _log_inv_gamma(mean: mpmath.mpf, eta: mpmath.mpf) -> mpmath.mpf:
    """log(1/γ) with E[K] = mean, by bisection on x = log(1/γ) (E[K] grows with x)."""
    lo, hi = mp.mpf(0), mp.mpf(800)
    for _ in range(400):
        x = (lo + hi) / 2
        lo, hi = (x, hi) if _tnb_mean(mp.e**-x, eta) < mean else (lo, x)
    return hi


def _gauss_curve(sigma: str) -> Curve:
    """α/(2σ²) (Mironov 2017 Prop. 7), Δ = 1."""
    s = _mpf(sigma)
    return lambda a: a / (2 * s**2)


def _rr_curve(epsilon: mpmath.mpf) -> Curve:
    """The randomized-response curve of ε-DP (Steinke 2024 Thm 4)."""
    p = mp.e**epsilon / (1 + mp.e**epsilon)
    q = 1 - p
    return lambda a: mp.log(p**a * q ** (1 - a) + q**a * p ** (1 - a)) / (a - 1)


def _laplace_curve(epsilon: mpmath.mpf) -> Curve:
    """Mironov 2017 Prop. 6."""
    e = epsilon
    return lambda a: (
        mp.log(a / (2 * a - 1) * mp.e ** ((a - 1) * e) + (a - 1) / (2 * a - 1) * mp.e ** (-a * e))
        / (a - 1)
    )


def _envelope(values: list[mpmath.mpf]) -> list[mpmath.mpf]:
    """At each (sorted) order the least value at that order or a higher one."""
    return [min(values[i:]) for i in range(len(values))]


def _union(grid: list[float]) -> list[float]:
    return sorted(set(grid) | set(SELECTION_ORDERS))


def _thm2(
    inner: Curve, mean: str, eta: str, grid: list[float], pure: Fraction | None = None
) -> list[mpmath.mpf]:
    """PS22 Thm 2 on the grid and the selection orders, λ̂ over them, non-decreasing, read at
    the grid; for an ε-DP inner mechanism at most the randomized-response curve of (2 + η)ε
    (PS22 Cor. 3; Steinke 2024 Thm 4)."""
    m, h = _mpf(mean), _mpf(eta)
    big_l = _log_inv_gamma(m, h)
    union = [mp.mpf(a) for a in _union(grid)]
    c = (1 + h) * min((1 - 1 / u) * inner(u) + big_l / u for u in union)
    bound = _envelope([inner(a) + c + mp.log(m) / (a - 1) for a in union])
    out = [bound[_union(grid).index(a)] for a in grid]
    if pure is not None:
        cap = _rr_curve((2 + h) * _mpf(pure))
        out = [min(b, cap(mp.mpf(a))) for b, a in zip(out, grid, strict=True)]
    return out


def _delta_hat(inner: Curve, eps_hat: mpmath.mpf, union: list[float]) -> mpmath.mpf:
    """δ of the inner mechanism at ε̂: the least over the orders of CKS20 Prop. 12,
    exp((α − 1)(ε(α) − ε̂))·(1 − 1/α)^{α−1}/α, and √(1 − e^{−ε(α)}) (KL), capped at 1."""
    best = mp.mpf(1)
    for u in (mp.mpf(a) for a in union):
        r = inner(u)
        cks = mp.e ** ((u - 1) * (r - eps_hat)) * (1 - 1 / u) ** (u - 1) / u
        best = min(best, cks, mp.sqrt(1 - mp.e**-r))
    return best


def _thm6(inner: Curve, mean: str, grid: list[float]) -> list[mpmath.mpf]:
    """PS22 Thm 6 on the grid and the selection orders, ε̂ = log(1 + 1/(λ − 1)), non-decreasing,
    read at the grid."""
    m = _mpf(mean)
    union = _union(grid)
    bound = []
    for a in (mp.mpf(x) for x in union):
        d_hat = _delta_hat(inner, mp.log(1 + 1 / (a - 1)), union)
        bound.append(inner(a) + m * d_hat + mp.log(m) / (a - 1))
    bound = _envelope(bound)
    return [bound[union.index(a)] for a in grid]


def _cks_epsilon(curve: list[mpmath.mpf], orders: list[float], delta: float) -> mpmath.mpf:
    """CKS20 Prop. 12: min over α of τ + log((α − 1)/α) − (log δ + log α)/(α − 1), ≥ 0."""
    d = mp.mpf(delta)
    best = min(
        t + mp.log((mp.mpf(a) - 1) / a) - (mp.log(d) + mp.log(a)) / (mp.mpf(a) - 1)
        for t, a in zip(curve, orders, strict=True)
    )
    return max(best, mp.mpf(0))


# ---------------------------------------------------------------------------- the distribution
@pytest.mark.parametrize("mean", ["1.001", "2", "10", "1000", "1000000"])
@pytest.mark.parametrize("eta", ["0", "0.5", "1", "3", "1000"])
def test_gamma_is_solved_from_the_mean_rounded_down(mean: str, eta: str) -> None:
    """log(1/γ) of the core is at least the one solved here in mpmath, and within 1e-9."""
    with mp.workdps(40):
        truth = _log_inv_gamma(_mpf(mean), _mpf(eta))
        got = sel.log_inv_gamma(Decimal(mean), Decimal(eta))
        assert mp.mpf(got) >= truth
        assert got <= float(truth) * (1 + 1e-9)
    assert tuple(SELECTION_ORDERS) == sel.SELECTION_ORDERS


# ---------------------------------------------------------------------------- rdp: Thm 2, Thm 6
TNB_CASES = [
    # (inner, inner curve, mean, η)
    (_gaussian("1"), _gauss_curve("1"), "10", "1"),
    (_gaussian("1"), _gauss_curve("1"), "10", "0"),
    (_gaussian("4"), _gauss_curve("4"), "100", "0.5"),
    (_gaussian("4"), _gauss_curve("4"), "2", "3"),
    (_gaussian("0.7"), _gauss_curve("0.7"), "1000", "1"),
    (
        {"type": "laplace", "scale": "2", "sensitivity": "1"},
        _laplace_curve(mp.mpf("0.5")),
        "5",
        "2",
    ),
    (
        {"type": "laplace", "scale": "0.25", "sensitivity": "1"},
        _laplace_curve(mp.mpf(4)),
        "100",
        "1",
    ),
    ({"type": "zcdp", "rho": "0.01", "xi": "0.02", "delta": "0"}, None, "20", "1"),
]


def _zcdp_curve(rho: str, xi: str) -> Curve:
    return lambda a: _mpf(xi) + _mpf(rho) * a


@pytest.mark.parametrize(("inner", "curve", "mean", "eta"), TNB_CASES)
@pytest.mark.parametrize("grid", [ORDERS, list(DEFAULT_RDP_ORDERS)], ids=["orders", "default"])
def test_truncated_negative_binomial_is_papernot_steinke_thm2(
    inner: dict[str, Any], curve: Curve | None, mean: str, eta: str, grid: list[float]
) -> None:
    """Thm 2 over the grid and the selection orders; a Laplace mechanism is ε-DP, ε = Δ/b, so its
    curve is also capped by the randomized-response curve of (2 + η)ε (Cor. 3)."""
    inner_curve = curve or _zcdp_curve(inner.get("rho", "0"), inner.get("xi", "0"))
    pure = 1 / Fraction(inner["scale"]) if inner["type"] == "laplace" else None
    charged = _curve(_repeat(inner, mean, eta), grid)
    with mp.workdps(40):
        want = _thm2(inner_curve, mean, eta, grid, pure=pure)
        for value, w in zip(charged, want, strict=True):
            _check(value, float(w), rel=1e-9)


POISSON_CASES = [
    (_gaussian("1"), _gauss_curve("1"), "10"),
    (_gaussian("4"), _gauss_curve("4"), "5"),
    (_gaussian("2"), _gauss_curve("2"), "1.5"),
    (_gaussian("0.8"), _gauss_curve("0.8"), "1000"),
    (_pure("0.5"), _rr_curve(mp.mpf("0.5")), "20"),
    ({"type": "laplace", "scale": "4", "sensitivity": "1"}, _laplace_curve(mp.mpf("0.25")), "3"),
]


@pytest.mark.parametrize(("inner", "curve", "mean"), POISSON_CASES)
@pytest.mark.parametrize("grid", [ORDERS, list(DEFAULT_RDP_ORDERS)], ids=["orders", "default"])
def test_poisson_is_papernot_steinke_thm6(
    inner: dict[str, Any], curve: Curve, mean: str, grid: list[float]
) -> None:
    charged = _curve(_repeat(inner, mean, None), grid)
    with mp.workdps(40):
        for value, want in zip(charged, _thm6(curve, mean, grid), strict=True):
            _check(value, float(want), rel=1e-9)


PURE_CASES = [("0.1", "10", "1"), ("0.1", "10", "0"), ("1", "3", "0.5"), ("0.05", "100", "2")]


@pytest.mark.parametrize(("epsilon", "mean", "eta"), PURE_CASES)
def test_pure_inner_under_a_truncated_negative_binomial(epsilon: str, mean: str, eta: str) -> None:
    """basic: (2 + η)ε exactly, δ = 0 (PS22 Cor. 3; geometric: Liu–Talwar's 3ε); rdp: Thm 2,
    and at most the randomized-response curve of (2 + η)ε."""
    mech = _repeat(_pure(epsilon), mean, eta)
    basic = _charge("basic", mech)
    exact = (2 + Fraction(eta)) * Fraction(epsilon)
    assert Fraction(basic["epsilon"]) == exact and Decimal(basic["delta"]) == 0
    assert not Fraction(basic["epsilon"]) * Fraction(95, 100) >= exact
    with mp.workdps(40):
        want = _thm2(_rr_curve(_mpf(epsilon)), mean, eta, ORDERS, pure=Fraction(epsilon))
        for value, w in zip(_curve(mech), want, strict=True):
            _check(value, float(w), rel=1e-9)
    # the same for anything ε-DP by definition: a Laplace mechanism, a discrete Laplace, …
    for twin in (
        {"type": "laplace", "scale": str(1 / Fraction(epsilon)), "sensitivity": "1"},
        {"type": "discrete_laplace", "scale": str(1 / Fraction(epsilon)), "sensitivity": "1"},
        {"type": "composed", "mechanisms": [_pure(epsilon)]},
    ):
        if "/" in twin.get("scale", ""):
            continue
        assert _charge("basic", _repeat(twin, mean, eta)) == basic


@pytest.mark.parametrize(
    "mech",
    [
        _repeat(_gaussian("2"), "10", "1"),
        _repeat(_gaussian("3"), "50", "0"),
        _repeat(_gaussian("2"), "10", None),
        _repeat(_pure("0.3"), "10", None),
    ],
    ids=["gaussian-geometric", "gaussian-logarithmic", "gaussian-poisson", "pure-poisson"],
)
def test_basic_converts_the_rdp_curve_at_the_conversion_delta(mech: dict[str, Any]) -> None:
    """basic, where no pure bound is proven: the rdp rule's curve on its dense grid, converted by
    CKS20 Prop. 12 at the conversion δ, which is charged."""
    charged = _charge("basic", mech)
    assert float(charged["delta"]) == CONVERSION_DELTA
    inner = mech["mechanism"]
    curve = (
        _gauss_curve(inner["sigma"])
        if inner["type"] == "gaussian"
        else _rr_curve(_mpf(inner["epsilon"]))
    )
    with mp.workdps(30):
        if mech["distribution"] == "poisson":
            bound = _thm6(curve, mech["mean"], DENSE)
        else:
            bound = _thm2(curve, mech["mean"], mech["shape"], DENSE)
        want = _cks_epsilon(bound, DENSE, CONVERSION_DELTA)
    _check(float(charged["epsilon"]), float(want), rel=1e-9)


# ---------------------------------------------------------------------------- soundness: exact
def _pgf(mean: str, eta: str | None) -> Callable[[mpmath.mpf], mpmath.mpf]:
    """The probability generating function E[s^K]: Poisson e^{μ(s − 1)}; D_{η,γ}
    ((1 − (1 − γ)s)^{−η} − 1)/(γ^{−η} − 1), and −log(1 − (1 − γ)s)/log(1/γ) at η = 0 (the sums
    Σ_k P[K = k]s^k of PS22 Def. 1)."""
    m = _mpf(mean)
    if eta is None:
        return lambda s: mp.e ** (m * (s - 1))
    h = _mpf(eta)
    g = mp.e ** -_log_inv_gamma(m, h)
    if h == 0:
        return lambda s: -mp.log(1 - (1 - g) * s) / mp.log(1 / g)
    return lambda s: ((1 - (1 - g) * s) ** (-h) - 1) / (g ** (-h) - 1)


def _best_of(
    probabilities: list[mpmath.mpf], pgf: Callable[[mpmath.mpf], mpmath.mpf]
) -> list[mpmath.mpf]:
    """The law of the best of K runs of a mechanism with these probabilities of its ordered
    outputs (worst first), and of ⊥ (no run, K = 0) last: P[best ≤ y] = E[F(y)^K]."""
    cdf = [mp.fsum(probabilities[: i + 1]) for i in range(len(probabilities))]
    at = [pgf(c) for c in cdf]
    nothing = pgf(mp.mpf(0))
    return [at[0] - nothing] + [at[i] - at[i - 1] for i in range(1, len(at))] + [nothing]


def _renyi(p: list[mpmath.mpf], q: list[mpmath.mpf], alpha: float) -> mpmath.mpf:
    a = mp.mpf(alpha)
    total = mp.fsum(pi**a * qi ** (1 - a) for pi, qi in zip(p, q, strict=True) if pi > 0)
    return mp.log(total) / (a - 1)


def _neighbours(
    epsilon: mpmath.mpf, top: mpmath.mpf, bottom: mpmath.mpf
) -> tuple[list[mpmath.mpf], list[mpmath.mpf]] | None:
    """An ε-DP mechanism with three ordered outputs on two neighbours: the best output e^ε
    times likelier on the second, the worst e^ε times likelier on the first (``None`` when the
    middle output's probabilities are then more than e^ε apart: not ε-DP)."""
    p = [bottom, 1 - top - bottom, top]
    q = [bottom * mp.e**-epsilon, 1 - top * mp.e**epsilon - bottom * mp.e**-epsilon]
    q.append(top * mp.e**epsilon)
    if min(q) <= 0:
        return None
    loss = max(abs(mp.log(x / y)) for x, y in zip(p, q, strict=True))
    return (p, q) if loss <= epsilon * (1 + mp.mpf(10) ** -30) else None


SOUND_CASES = [
    ("0.5", "10", "1"),
    ("0.5", "10", "2"),
    ("1", "10", "0"),
    ("0.2", "100", "1"),
    ("2", "3", "0.5"),
    ("0.5", "10", None),
    ("1", "4", None),
]


@pytest.mark.parametrize(("epsilon", "mean", "eta"), SOUND_CASES)
def test_charges_cover_the_exact_selection_of_a_pure_mechanism(
    epsilon: str, mean: str, eta: str | None
) -> None:
    """Best of K runs of a three-outcome ε-DP mechanism, evaluated exactly: its Rényi divergence
    in both directions is at most the ``rdp`` curve at every order, its max-divergence at most
    basic's (2 + η)ε; under a Poisson K its exact δ at basic's ε at most basic's δ."""
    mech = _repeat(_pure(epsilon), mean, eta)
    curve = _curve(mech)
    basic = _charge("basic", mech)
    with mp.workdps(40):
        eps, pgf = _mpf(epsilon), _pgf(mean, eta)
        worst = mp.mpf(0)
        pairs = [
            _neighbours(eps, top, bottom)
            for top in (1 / (10 * _mpf(mean)), 1 / _mpf(mean), 3 / _mpf(mean))
            for bottom in (mp.mpf("0.001"), mp.mpf("0.05"))
        ]
        assert any(pairs)
        for pair in pairs:
            if pair is not None:
                p, q = pair
                big_p, big_q = _best_of(p, pgf), _best_of(q, pgf)
                for alpha, value in zip(ORDERS, curve, strict=True):
                    truth = max(_renyi(big_p, big_q, alpha), _renyi(big_q, big_p, alpha))
                    assert truth <= mp.mpf(value), (alpha, truth, value)
                loss = max(abs(mp.log(x / y)) for x, y in zip(big_p, big_q, strict=True) if x > 0)
                worst = max(worst, loss)
                if eta is None:
                    e_b = mp.e ** mp.mpf(basic["epsilon"])
                    delta = max(
                        mp.fsum(max(mp.mpf(0), x - e_b * y) for x, y in zip(a, b, strict=True))
                        for a, b in ((big_p, big_q), (big_q, big_p))
                    )
                    assert delta <= mp.mpf(basic["delta"])
        if eta is not None:
            assert worst <= mp.mpf(basic["epsilon"])
        assert worst > eps  # the selection leaks more than one run: a real test


def _max_of_gaussians_renyi(
    shift: mpmath.mpf,
    pgf_derivative: Callable[[mpmath.mpf], mpmath.mpf],
    atom: mpmath.mpf,
    alpha: float,
) -> mpmath.mpf:
    """D_α of the best of K draws of N(0, 1) against the best of K draws of N(shift, 1): the
    densities G'(Φ(t))φ(t) and G'(Φ(t − shift))φ(t − shift), and the atom P[K = 0] on both
    sides, by mpmath quadrature."""
    a = mp.mpf(alpha)

    def integrand(t: mpmath.mpf) -> mpmath.mpf:
        f = pgf_derivative(mp.ncdf(t)) * mp.npdf(t)
        g = pgf_derivative(mp.ncdf(t - shift)) * mp.npdf(t - shift)
        return f**a * g ** (1 - a)

    centre = a * shift
    points = [centre - 40, centre - 10, centre - 3, centre, centre + 3, centre + 10, centre + 40]
    return mp.log(atom + mp.quad(integrand, points)) / (a - 1)


def _pgf_derivative(
    mean: str, eta: str | None
) -> tuple[Callable[[mpmath.mpf], mpmath.mpf], mpmath.mpf]:
    """G'(s) and G(0) = P[K = 0] of the distributions of :func:`_pgf`."""
    m = _mpf(mean)
    if eta is None:
        return (lambda s: m * mp.e ** (m * (s - 1))), mp.e**-m
    h = _mpf(eta)
    g = mp.e ** -_log_inv_gamma(m, h)
    if h == 0:
        return (lambda s: (1 - g) / ((1 - (1 - g) * s) * mp.log(1 / g))), mp.mpf(0)
    return (lambda s: h * (1 - g) * (1 - (1 - g) * s) ** (-h - 1) / (g ** (-h) - 1)), mp.mpf(0)


@pytest.mark.parametrize(
    ("sigma", "mean", "eta"), [("1", "10", "1"), ("2", "10", "0"), ("1", "5", None)]
)
def test_charges_cover_the_exact_selection_of_gaussians(
    sigma: str, mean: str, eta: str | None
) -> None:
    """The best of K Gaussian answers (noise σ, sensitivity 1) on the pair (0, 1): its Rényi
    divergence, both directions, by quadrature, is at most the ``rdp`` curve at orders ≤ 16."""
    orders = [o for o in ORDERS if o <= 16]
    curve = _curve(_repeat(_gaussian(sigma), mean, eta), orders)
    with mp.workdps(25):
        derivative, atom = _pgf_derivative(mean, eta)
        shift = 1 / _mpf(sigma)
        for alpha, value in zip(orders, curve, strict=True):
            up = _max_of_gaussians_renyi(shift, derivative, atom, alpha)
            down = _max_of_gaussians_renyi(-shift, derivative, atom, alpha)
            assert max(up, down) <= mp.mpf(value), (alpha, up, down, value)
            assert max(up, down) > alpha / (2 * _mpf(sigma) ** 2) / 2  # not a trivial pair


# ---------------------------------------------------------------------------- dp_accounting
def _events() -> list[tuple[Any, dict[str, Any]]]:
    out: list[tuple[Any, dict[str, Any]]] = []
    for mean in (2.0, 10.0, 100.0):
        for shape in (0.0, 0.5, 1.0, 2.0, math.inf):
            for sigma in (1.0, 2.0, 5.0):
                event = ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(sigma), mean, shape)
                dist = None if math.isinf(shape) else repr(shape)
                out.append((event, _repeat(_gaussian(repr(sigma)), repr(mean), dist)))
    sgd = ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.1)), 1000)
    sgd_decl = {"type": "dp_sgd", "noise_multiplier": "1.1", "sample_rate": "0.01", "steps": 1000}
    for shape in (1.0, math.inf):
        dist = None if math.isinf(shape) else "1"
        out.append((ev.RepeatAndSelectDpEvent(sgd, 20.0, shape), _repeat(sgd_decl, "20", dist)))
    laplace = {"type": "laplace", "scale": "2", "sensitivity": "1"}
    out.append(
        (ev.RepeatAndSelectDpEvent(ev.LaplaceDpEvent(2.0), 10.0, 1.0), _repeat(laplace, "10", "1"))
    )
    return out


EVENTS = _events()


@pytest.mark.parametrize(("event", "mechanism"), EVENTS, ids=[str(i) for i in range(len(EVENTS))])
@pytest.mark.parametrize("grid", [ORDERS, list(DEFAULT_RDP_ORDERS)], ids=["orders", "default"])
def test_rdp_charge_is_not_above_dp_accountings_rdp_accountant(
    event: Any, mechanism: dict[str, Any], grid: list[float]
) -> None:
    """At every order within 1 % of RdpAccountant's curve (it optimises λ̂ and δ̂ over the grid
    alone; the rule here also over the selection orders, so it is mostly below), and so is the
    (ε, δ) conversion at δ = 1e-6."""
    charged = np.array(_curve(mechanism, grid))
    accountant = dp_accounting.rdp.RdpAccountant(grid).compose(event)
    oracle = np.asarray(accountant.rdp)
    assert np.all(charged <= oracle * 1.01), (charged, oracle)
    ours, _ = dp_accounting.rdp.compute_epsilon(grid, charged, 1e-6)
    theirs = accountant.get_epsilon(1e-6)
    assert ours <= theirs * 1.01


def test_the_largest_gap_to_dp_accounting_is_rounding() -> None:
    """Over the table above the charge is at most a relative 1e-12 above RdpAccountant (float
    rounding, and γ rounded down where dp_accounting stops its bisection at 1e-9)."""
    worst = 0.0
    for event, mechanism in EVENTS:
        charged = np.array(_curve(mechanism))
        oracle = np.asarray(dp_accounting.rdp.RdpAccountant(ORDERS).compose(event).rdp)
        worst = max(worst, float((charged / oracle).max()))
    assert worst <= 1 + 1e-12, worst


# ---------------------------------------------------------------------------- reference vectors
def test_reference_vectors() -> None:
    """Exact numbers, derived by hand.

    - ε = 0.1 pure, geometric K, mean 10: basic (0.3, 0) (PS22 Cor. 3 at η = 1: 3ε, Liu–Talwar);
      logarithmic (η = 0): 0.2; η = 0.5: 0.25.
    - Gaussian σ = 1/√2 (curve α: ρ = 1), geometric K with mean e (γ = 1/e, log(1/γ) = 1), grid
      {2}: λ̂ over {2} ∪ selection orders of (1 − 1/λ̂)·λ̂ + 1/λ̂ = λ̂ − 1 + 1/λ̂, least at
      λ̂ = 1.25 (0.25 + 0.8 = 1.05; at 1.5: 0.5 + 0.667), so c = 2·1.05 = 2.1 and at α = 2:
      2 + 2.1 + log(e)/(2 − 1) = 5.1 — the least over orders ≥ 2 (at 2.25: 2.25 + 2.1 + 0.8).
    - tree aggregation σ = 2, steps [100, 60]: d = 7 (100 = 0b1100100, seven levels); rdp
      α·7/8 (1.75 at α = 2), zcdp ρ = 7/8, gdp μ² = 7/4.
    """
    for eta, want in (("1", "0.3"), ("0", "0.2"), ("0.5", "0.25")):
        charged = _charge("basic", _repeat(_pure("0.1"), "10", eta))
        assert (charged["epsilon"], charged["delta"]) == (want, "0")
    with mp.workdps(40):  # mean e and σ = 1/√2 to 30 digits: log(1/γ) = ρ = 1 up to 1e-29
        e, sigma = str(mp.e)[:31], str(1 / mp.sqrt(2))[:32]
    value = _curve(_repeat(_gaussian(sigma), e, "1"), [2.0])[0]
    assert value == pytest.approx(5.1, rel=1e-12) and value >= 5.1 - 1e-12
    tree = {"type": "tree_aggregation", "noise_multiplier": "2", "step_counts": [100, 60]}
    assert _curve(tree, [2.0])[0] == pytest.approx(1.75, rel=1e-14)
    assert Fraction(_charge("zcdp", tree)["rho"]) - Fraction(7, 8) < Fraction(1, 10**28)
    assert Fraction(_charge("gdp", tree)["mu_squared"]) - Fraction(7, 4) < Fraction(1, 10**28)


# ---------------------------------------------------------------------------- tree aggregation
def _dyadic_depth(steps: int) -> int:
    """The most nodes of one tree over ``steps`` leaves that hold one leaf, counted: the dyadic
    intervals ((j − 1)·2^ℓ, j·2^ℓ] within [1, steps] that contain it."""
    best = 0
    for leaf in range(1, steps + 1):
        held = 0
        level = 0
        while 2**level <= steps:
            j = -(-leaf // 2**level)  # the interval of this level holding the leaf
            held += j * 2**level <= steps
            level += 1
        best = max(best, held)
    return best


def test_the_tree_depth_is_the_dyadic_count() -> None:
    for steps in range(1, 300):
        decl = TreeAggregation(Decimal(1), (steps,))
        assert decl.depth == _dyadic_depth(steps) == math.ceil(math.log2(steps + 1))
    assert TreeAggregation(Decimal(1), (100, 60, 3)).depth == 7  # the tallest tree
    assert TreeAggregation(Decimal(1), (10**7,)).depth == 24


TREE_CASES = [("2", [100, 60]), ("1", [1]), ("0.7", [3]), ("10", [10**7]), ("1.5", [8, 8, 8])]


@pytest.mark.parametrize(("sigma", "steps"), TREE_CASES)
def test_tree_aggregation_is_the_gaussian_of_sensitivity_root_d(
    sigma: str, steps: list[int]
) -> None:
    mech = {"type": "tree_aggregation", "noise_multiplier": sigma, "step_counts": steps}
    d = max(steps).bit_length()
    s2 = Fraction(sigma) ** 2
    # sensitivity √d, rounded up (exact where d is a square)
    decl = parse_declaration(mech)
    assert isinstance(decl, TreeAggregation)
    root = decl.sensitivity
    assert Fraction(root) ** 2 >= d and (Fraction(root) - Fraction(1, 10**29)) ** 2 < d
    assert decl.charged_as() == Gaussian(Decimal(sigma), root)
    # zcdp ρ = d/(2σ²), gdp μ² = d/σ², rdp αd/(2σ²): exact up to the rounding of √d
    rho = Fraction(_charge("zcdp", mech)["rho"])
    assert Fraction(d) / (2 * s2) <= rho <= Fraction(d) / (2 * s2) * (1 + Fraction(1, 10**25))
    mu2 = Fraction(_charge("gdp", mech)["mu_squared"])
    assert Fraction(d) / s2 <= mu2 <= Fraction(d) / s2 * (1 + Fraction(1, 10**25))
    for alpha, value in zip(ORDERS, _curve(mech), strict=True):
        _check(value, float(Fraction(alpha) * d / (2 * s2)), rel=1e-12)
    # dp_accounting's RdpAccountant for the event (REPLACE_SPECIAL): the same curve
    special = dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    event = ev.SingleEpochTreeAggregationDpEvent(float(sigma), steps)
    oracle = dp_accounting.rdp.RdpAccountant(ORDERS, special).compose(event).rdp
    assert np.allclose(_curve(mech), oracle, rtol=1e-12)
    assert np.all(np.array(_curve(mech)) >= oracle)


@pytest.mark.parametrize(("sigma", "steps"), TREE_CASES)
def test_tree_aggregation_basic_is_the_exact_gaussian_epsilon(sigma: str, steps: list[int]) -> None:
    """basic: the Gaussian's exact (Balle–Wang 2018 Thm 8) δ(ε) with the true Δ = √d, at the
    charged ε, is the conversion δ (at most it, and within 1e-6 of it)."""
    mech = {"type": "tree_aggregation", "noise_multiplier": sigma, "step_counts": steps}
    charged = _charge("basic", mech)
    assert float(charged["delta"]) == CONVERSION_DELTA
    with mp.workdps(40):
        mu = mp.sqrt(max(steps).bit_length()) / _mpf(sigma)
        eps = mp.mpf(charged["epsilon"])
        delta = mp.ncdf(mu / 2 - eps / mu) - mp.e**eps * mp.ncdf(-mu / 2 - eps / mu)
        assert delta <= CONVERSION_DELTA
        assert delta >= CONVERSION_DELTA * (1 - 1e-6)


# ---------------------------------------------------------------------------- modes and parsing
def test_what_each_mode_accepts() -> None:
    tree = parse_declaration(
        {"type": "tree_aggregation", "noise_multiplier": 3, "step_counts": [9]}
    )
    for mode in ("basic", "zcdp", "rdp", "gdp"):
        assert supports(_config(mode), tree), mode
    selections = [
        _repeat(_gaussian("3"), "10", "1"),
        _repeat(_pure("0.1"), "10", None),
        _repeat({"type": "tree_aggregation", "noise_multiplier": 9, "step_counts": [9]}, "4", "0"),
        _repeat(
            {"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": "0.1", "steps": 9}, "4", "1"
        ),
        _repeat(_repeat(_gaussian("5"), "3", "1"), "3", None),
        {"type": "composed", "mechanisms": [_repeat(_gaussian("3"), "10", "1"), _gaussian("3")]},
    ]
    for mechanism in selections:
        decl = parse_declaration(mechanism)
        for mode in ("basic", "rdp"):
            assert supports(_config(mode), decl), mode
            _charge(mode, decl)
        for mode, pattern in (("zcdp", "ξ \\+ ρα"), ("gdp", "μ-GDP")):
            config = _config(mode)
            assert not supports(config, decl)
            with pytest.raises(UnsupportedInMode, match=pattern) as refused:
                admit(config, initial_state(config), decl)
            assert "use a dataset or sub-budget in mode 'rdp'" in refused.value.detail


@pytest.mark.parametrize(
    "inner",
    [
        {"type": "approx_dp", "epsilon": "0.1", "delta": "1e-9"},
        {"type": "zcdp", "rho": "0.1", "delta": "1e-9"},
        {
            "type": "composed",
            "mechanisms": [_gaussian("2"), {"type": "approx_dp", "epsilon": 1, "delta": "1e-9"}],
        },
    ],
)
def test_an_inner_mechanism_with_a_delta_is_refused(inner: dict[str, Any]) -> None:
    """PS22 needs the inner mechanism's Rényi DP; δ-approximate guarantees give none."""
    for eta in ("1", None):
        decl = parse_declaration(_repeat(inner, "10", eta))
        for mode in ("basic", "rdp"):
            config = _config(mode)
            assert not supports(config, decl)
            with pytest.raises(UnsupportedInMode, match="an \\(ε, δ\\) guarantee with δ > 0"):
                admit(config, initial_state(config), decl)
    # but (ε, 0) is ε-DP
    assert _charge(
        "basic", _repeat({"type": "approx_dp", "epsilon": "0.1", "delta": "0"}, "10", "1")
    )


def test_inner_mechanisms_rdp_cannot_account_are_refused() -> None:
    """A subsampled Laplace has no RDP curve here: refused inside a selection, in basic too
    (unless it is ε-DP by definition, which a subsample is not declared as)."""
    inner = {"type": "subsampled", "scheme": "poisson", "rate": "0.1", "mechanism": _pure("1")}
    decl = parse_declaration(_repeat(inner, "10", "1"))
    for mode in ("basic", "rdp"):
        config = _config(mode)
        assert not supports(config, decl)
        with pytest.raises(UnsupportedInMode, match="implemented for the Gaussian mechanism"):
            admit(config, initial_state(config), decl)


def test_the_relation_is_checked_inside_a_selection() -> None:
    sgd = {"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": "0.1", "steps": 9}
    config = make_config(1000, BUDGET_DELTA, "replace_one", {"mode": "rdp"})
    decl = parse_declaration(_repeat(sgd, "10", "1"))
    with pytest.raises(DeclarationError, match="analysed under 'add_remove'"):
        admit(config, initial_state(config), decl)


def test_a_split_dataset_answers_for_its_sub_budgets() -> None:
    half = {"epsilon": 5, "delta": "0.000005"}
    sub_budgets = [
        {"name": "r", "budget": half, "accounting": {"mode": "rdp"}},
        {"name": "g", "budget": half, "accounting": {"mode": "gdp"}},
    ]
    config = make_config(10, "0.00001", "add_remove", {"mode": "split", "sub_budgets": sub_budgets})
    selection = parse_declaration(_repeat(_gaussian("20"), "10", "1"))
    tree = parse_declaration(
        {"type": "tree_aggregation", "noise_multiplier": 30, "step_counts": [9]}
    )
    assert supports(config, selection, sub_budget="r") and supports(config, tree, sub_budget="r")
    assert not supports(config, selection, sub_budget="g") and supports(
        config, tree, sub_budget="g"
    )
    state = initial_state(config)
    for decl, sub in ((selection, "r"), (tree, "r"), (tree, "g")):
        decision = admit(config, state, decl, sub_budget=sub)
        assert decision.admitted
        state = decision.state
    with pytest.raises(UnsupportedInMode, match="μ-GDP"):
        admit(config, state, selection, sub_budget="g")


def test_a_refused_tree_aggregation_is_told_the_noise_that_fits() -> None:
    """``instead`` moves the noise multiplier (larger fits), checked by ``admit``."""
    for mode in ("basic", "zcdp", "rdp", "gdp"):
        config = make_config(1, BUDGET_DELTA, "add_remove", {"mode": mode})
        state = initial_state(config)
        big = parse_declaration(
            {"type": "tree_aggregation", "noise_multiplier": "0.5", "step_counts": [100]}
        )
        assert not admit(config, state, big).admitted
        found = instead(config, state, big)
        assert found is not None and found["step_counts"] == [100], mode
        assert Decimal(found["noise_multiplier"]) > Decimal("0.5")
        assert admit(config, state, parse_declaration(found)).admitted


MECHANISMS = [
    {"type": "tree_aggregation", "noise_multiplier": "20", "step_counts": [100, 60]},
    _repeat(_pure("0.01"), "10", "1"),
    _repeat(_gaussian("50"), "5", None),
    _repeat(_gaussian("50"), "3", "0"),
]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: f"{m['type']}")
def test_canonical_json_round_trips(mechanism: dict[str, Any]) -> None:
    decl = parse_declaration(mechanism)
    assert parse_declaration(decl.to_json()) == decl
    assert decl.to_json() == mechanism


def test_types_and_defaults() -> None:
    decl = parse_declaration(_repeat(_gaussian("2"), "10", "1"))
    assert decl == RepeatAndSelect(
        Gaussian(Decimal(2)), Decimal(10), "truncated_negative_binomial", Decimal(1)
    )
    poisson = parse_declaration(
        {"type": "repeat_and_select", "distribution": "poisson", "mean": 3, "mechanism": _pure("1")}
    )
    assert isinstance(poisson, RepeatAndSelect) and poisson.shape is None


@pytest.mark.parametrize(
    ("mechanism", "field"),
    [
        (_repeat(_pure("1"), "1", "1"), "mean"),
        (_repeat(_pure("1"), "0.5", None), "mean"),
        (_repeat(_pure("1"), "1000001", None), "mean"),
        (_repeat(_pure("1"), "10", "-1"), "shape"),
        ({**_repeat(_pure("1"), "10", "1"), "distribution": "binomial"}, "distribution"),
        ({k: v for k, v in _repeat(_pure("1"), "10", "1").items() if k != "shape"}, "shape"),
        ({**_repeat(_pure("1"), "10", None), "shape": "1"}, None),
        (_repeat({"type": "odp", "cells": [{"name": "a", "epsilon": 1}]}, "10", "1"), "mechanism"),
        (
            {"type": "tree_aggregation", "noise_multiplier": 0, "step_counts": [1]},
            "noise_multiplier",
        ),
        ({"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": []}, "step_counts"),
        ({"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [0]}, "step_counts"),
        (
            {"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [10**7 + 1]},
            "step_counts",
        ),
        ({"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": 5}, "step_counts"),
        ({"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [True]}, "step_counts"),
        (
            {"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [1] * 1025},
            "step_counts",
        ),
    ],
)
def test_invalid_parameters_are_refused(mechanism: dict[str, Any], field: str | None) -> None:
    with pytest.raises(DeclarationError) as caught:
        parse_declaration(mechanism)
    assert caught.value.field == field


def test_the_client_builders_make_what_the_core_reads() -> None:
    tree = builders.tree_aggregation("1.5", [100, 60])
    assert parse_declaration(tree.to_json()) == TreeAggregation(Decimal("1.5"), (100, 60))
    assert builders.tree_aggregation(2, 7).to_json()["step_counts"] == [7]
    geometric = builders.repeat_and_select(builders.gaussian(2, 1), 10, 1)
    assert parse_declaration(geometric.to_json()) == RepeatAndSelect(
        Gaussian(Decimal(2)), Decimal(10), "truncated_negative_binomial", Decimal(1)
    )
    for poisson in ("poisson", math.inf):
        made = builders.repeat_and_select(builders.pure_dp(1), "2.5", poisson)
        assert made.to_json()["distribution"] == "poisson" and "shape" not in made.to_json()
    with pytest.raises(ValueError, match="shape"):
        builders.repeat_and_select(builders.pure_dp(1), 2, "geometric")
    with pytest.raises(ValueError, match="repeat_and_select"):
        builders.repeat_and_select(builders.pure_dp(1), 1, 1)  # the contract: mean > 1


# ---------------------------------------------------------------------------- over HTTP
def _has_tree(mechanism: object) -> bool:
    if isinstance(mechanism, dict):
        return mechanism.get("type") == "tree_aggregation" or any(
            _has_tree(v) for v in mechanism.values()
        )
    return isinstance(mechanism, list) and any(_has_tree(m) for m in mechanism)


def _body(mechanism: dict[str, Any]) -> dict[str, Any]:
    """A registration of ``mechanism``; one that holds a tree asserts its zero-out neighbours,
    which an ``add_remove`` dataset requires (docs/accounting.md, *Tree aggregation's
    neighbours*)."""
    body: dict[str, Any] = {"mechanism": mechanism}
    if _has_tree(mechanism):
        body["neighbours"] = "zero_out"
    return body


def _dataset(client: TestClient, mode: str) -> str:
    ds = basic_dataset(client, epsilon=10, delta=BUDGET_DELTA, accounting={"mode": mode})
    return str(ds["id"])


@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
def test_registration_over_http(client: TestClient, mode: str) -> None:
    dsid = _dataset(client, mode)
    url = f"/v1/datasets/{dsid}/invocations"
    for mechanism in MECHANISMS:
        r = client.post(url, json=_body(mechanism), headers=AUTH)
        if mode in ("zcdp", "gdp") and mechanism["type"] == "repeat_and_select":
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "UnsupportedInMode"
            assert "repeat_and_select" in r.json()["detail"] and "'rdp'" in r.json()["detail"]
            continue
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "accepted"
        if mode != "rdp":  # scalar charges: exactly the core's
            expected = _charge(mode, mechanism)
            assert r.json()["charge"] == {k: expected[k] for k in r.json()["charge"]}
    if mode in ("basic", "rdp"):
        approximate = _repeat({"type": "approx_dp", "epsilon": "0.1", "delta": "1e-9"}, "3", "1")
        r = client.post(url, json=_body(approximate), headers=AUTH)
        assert r.status_code == 422 and r.json()["error"] == "UnsupportedInMode", r.text
    before = len(ledger(client, dsid))
    invalid: list[tuple[dict[str, Any], str]] = [
        (_repeat(_pure("1"), "1", "1"), "InvalidDeclaration"),
        (_repeat(_pure("1"), "10", "-1"), "InvalidDeclaration"),
        ({**_repeat(_pure("1"), "10", None), "shape": "1"}, "InvalidDeclaration"),
        ({**_repeat(_pure("1"), "10", "1"), "distribution": "binomial"}, "ValidationError"),
        ({**_repeat(_pure("1"), "10", "1"), "count": 3}, "ValidationError"),
        (
            {"type": "tree_aggregation", "noise_multiplier": 0, "step_counts": [1]},
            "InvalidDeclaration",
        ),
        ({"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": []}, "ValidationError"),
        (
            {"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [0]},
            "ValidationError",
        ),
        (
            {"type": "tree_aggregation", "noise_multiplier": 1, "step_counts": [True]},
            "ValidationError",
        ),
    ]
    for mechanism, error in invalid:
        r = client.post(url, json=_body(mechanism), headers=AUTH)
        assert r.status_code == 422, (mechanism, r.text)
        assert r.json()["error"] == error, (mechanism, r.json())
    assert len(ledger(client, dsid)) == before


def test_a_ledger_with_the_new_kinds_replays(client: TestClient) -> None:
    for mode in ("basic", "rdp"):
        dsid = _dataset(client, mode)
        url = f"/v1/datasets/{dsid}/invocations"
        for mechanism in [*MECHANISMS, {"type": "composed", "mechanisms": MECHANISMS}]:
            r = client.post(url, json=_body(mechanism), headers=AUTH)
            assert r.status_code == 201, r.text
        entries = ledger(client, dsid)
        assert [e["kind"] for e in entries][1:] == ["invocation_accepted"] * 5
        verdict = replay(entries)
        assert verdict.ok, verdict.problems
        assert verdict.state == entries[-1]["state"]
