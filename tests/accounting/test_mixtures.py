"""``mixture_of_gaussians``, ``sampled_with_replacement`` and ``truncated_subsampled_gaussian``:
every charge against an independent evaluation of its cited formula, and against the truth.

Correctness: the ``basic`` charge is the least ε at which the cited bound's δ is the conversion
δ — the exact hockey-stick divergence of the mixture (mpmath quadrature, both directions);
Balle–Barthe–Gaboardi 2018 Thm 10 with the Gaussian's or the ε-DP group profile (mpmath); the
truncation bound of ``docs/accounting.md`` (its weights recomputed here, its two pairs by
quadrature) — and the ``rdp`` curve is the cited formula recomputed here; each check fails on a
charge 5 % smaller (asserted for every case). Soundness: the charge is never below dp_accounting's
optimistic PLD (a lower bound on the true δ(ε)) of the mixture and of dp_accounting's own
reduction of truncated Poisson sampling, nor below the exact divergences of explicit neighbouring
datasets — the record drawn K ~ Bin(m, 1/n) times; a truncated batch of others of value −1 that
the record of value +1 displaces — computed by quadrature or summed. Then the modes' refusals,
the relations, the HTTP surface, the canonical JSON and a ledger replay.

Costs (this machine): a ``basic`` charge of a mixture takes about 3 ms (5 components), of
sampling with replacement about 1 ms, of truncated Poisson sampling 0.1–0.3 s at the σ used here
(two to four PLDs of 10⁴–10⁵ points); an ``rdp`` curve under 5 ms. dp_accounting's optimistic
mixture PLD is the slow oracle (its privacy loss is inverted by root finding at every grid
point): it is taken at a grid of 0.02 — coarser is still a lower bound — on cases of at most
three components, about 2 s in all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from itertools import pairwise
from typing import Any

import mpmath  # type: ignore[import-untyped]
import numpy as np
import pytest
from dp_accounting import privacy_accountant as pa
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from fastapi.testclient import TestClient
from scipy import stats

from odometer_client import declarations as builders
from odometer_core.accounting import (
    UnsupportedInMode,
    admit,
    initial_state,
    make_config,
    parse_declaration,
    supports,
)
from odometer_core.accounting.declarations import (
    DeclarationError,
    MixtureOfGaussians,
    SampledWithReplacement,
    TruncatedSubsampledGaussian,
)
from odometer_core.ledger import replay
from tests.accounting.charged import charge as charge_on
from tests.accounting.charged import check as _check
from tests.support import AUTH, basic_dataset, ledger

ORDERS = [1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0]
BUDGET_DELTA = "0.00001"  # basic: conversion δ = δ_B/10 = 1e-6
CONVERSION_DELTA = 1e-6
ORACLE_INTERVAL = 0.02


# ---------------------------------------------------------------------------- helpers
def _config(mode: str, relation: str) -> Any:
    acc: dict[str, Any] = {"mode": mode}
    if mode == "rdp":
        acc["orders"] = ORDERS
    return make_config(1000, BUDGET_DELTA, relation, acc)


def _charge(mode: str, mechanism: dict[str, Any], relation: str) -> dict[str, Any]:
    """What ``mode`` charges ``mechanism`` (admitted: the budget is far larger)."""
    return charge_on(_config(mode, relation), mechanism)


def _epsilon(mechanism: dict[str, Any], relation: str) -> float:
    charged = _charge("basic", mechanism, relation)
    assert Decimal(charged["delta"]) == Decimal("0.000001")
    return float(charged["epsilon"])


def _curve(mechanism: dict[str, Any], relation: str) -> list[float]:
    charged = _charge("rdp", mechanism, relation)
    assert [float(a) for a in charged["orders"]] == ORDERS
    assert Decimal(charged["delta"]) == 0
    return [float(v) for v in charged["rdp"]]


def _check_delta(delta: Callable[[float], mpmath.mpf], epsilon: float, slack: float) -> None:
    """ε is the least at which ``delta`` is the conversion δ: δ(ε) ≤ δ_c (sound) and within a
    relative ``slack`` of it (tight) — which a charge 5 % smaller fails, its δ being larger."""

    def matches(eps: float) -> bool:
        return bool(CONVERSION_DELTA * (1 - slack) <= delta(eps) <= CONVERSION_DELTA)

    assert matches(epsilon), (epsilon, delta(epsilon))
    assert not matches(0.95 * epsilon)


Density = Callable[[mpmath.mpf], mpmath.mpf]


def _normal_mixture(sigma: float, means: list[float], weights: list[float]) -> Density:
    s, mus, ws = mpmath.mpf(sigma), [mpmath.mpf(m) for m in means], [mpmath.mpf(w) for w in weights]
    return lambda x: mpmath.fsum(w * mpmath.npdf(x, mu, s) for mu, w in zip(mus, ws, strict=True))


def _hockey(p: Density, q: Density, epsilon: float, lo: float, hi: float) -> mpmath.mpf:
    """∫ (p − e^ε q)₊ by quadrature, split at every sign change of the integrand found on a grid
    of [lo, hi] (refined by root finding), the outer pieces running to ±∞ — no use of the
    shape of the optimal event."""
    e = mpmath.exp(epsilon)

    def f(x: mpmath.mpf) -> mpmath.mpf:
        return p(x) - e * q(x)

    grid = [mpmath.mpf(x) for x in np.linspace(lo, hi, 121)]
    cuts = [
        mpmath.findroot(f, (a, b), solver="illinois")
        for a, b in pairwise(grid)
        if (f(a) > 0) != (f(b) > 0)
    ]
    total = mpmath.mpf(0)
    for a, b in pairwise([-mpmath.inf, *cuts, mpmath.inf]):
        inside = (a + b) / 2 if a != -mpmath.inf and b != mpmath.inf else None
        if inside is None:
            inside = b - 1 if a == -mpmath.inf else a + 1
        if f(inside) > 0:
            total += mpmath.quad(f, [a, b])
    return total


def _renyi(p: Density, q: Density, alpha: float, points: list[float]) -> mpmath.mpf:
    """D_α(P‖Q) = log ∫ p^α q^{1−α} / (α − 1) by quadrature (breakpoints at ``points``)."""
    a = mpmath.mpf(alpha)
    value = mpmath.quad(
        lambda x: p(x) ** a * q(x) ** (1 - a), [-mpmath.inf, *sorted(points), mpmath.inf]
    )
    return mpmath.log(value) / (a - 1)


# ---------------------------------------------------------------------------- mixture of Gaussians
MIX_CASES = [
    ("2", ["1", "0.5"], ["0.3", "0.7"]),
    ("1", ["0", "1"], ["0.99", "0.01"]),
    ("1", ["0", "1", "2"], ["0.81", "0.18", "0.01"]),
    ("3", ["0", "1"], ["0.5", "0.5"]),
    ("1", ["2"], ["1"]),
    ("0.8", ["0", "1", "2", "3", "4"], ["0.6", "0.2", "0.1", "0.05", "0.05"]),
]


def _mix(sigma: str, sens: list[str], probs: list[str]) -> dict[str, Any]:
    return {
        "type": "mixture_of_gaussians",
        "standard_deviation": sigma,
        "sensitivities": sens,
        "sampling_probs": probs,
    }


def _mix_delta(sigma: str, sens: list[str], probs: list[str]) -> Callable[[float], mpmath.mpf]:
    """The exact δ(ε) of Σ p_i N(c_i, σ²) against N(0, σ²), the larger of both directions."""
    p = _normal_mixture(float(sigma), [float(c) for c in sens], [float(w) for w in probs])
    q = _normal_mixture(float(sigma), [0.0], [1.0])
    top = 12 * float(sigma) + max(float(c) for c in sens)

    def delta(epsilon: float) -> mpmath.mpf:
        return max(_hockey(p, q, epsilon, -top, top), _hockey(q, p, epsilon, -top, top))

    return delta


@pytest.mark.parametrize(("sigma", "sens", "probs"), MIX_CASES)
def test_mixture_basic_charge_is_its_exact_privacy_profile(
    sigma: str, sens: list[str], probs: list[str]
) -> None:
    """basic: the least ε whose exact δ(ε) — both directions, by quadrature — is the conversion
    δ (to 1e-6 relative: the charge is found to 1e-13 and rounded up)."""
    with mpmath.workdps(20):
        _check_delta(
            _mix_delta(sigma, sens, probs), _epsilon(_mix(sigma, sens, probs), "add_remove"), 1e-6
        )


@pytest.mark.parametrize(("sigma", "sens", "probs"), MIX_CASES[:5])
def test_mixture_is_never_charged_below_dp_accountings_optimistic_pld(
    sigma: str, sens: list[str], probs: list[str]
) -> None:
    """dp_accounting's optimistic PLD of the mixture (privacy buckets, both directions) is a
    lower bound on its δ(ε): the charged ε is at least the PLD's at the conversion δ."""
    epsilon = _epsilon(_mix(sigma, sens, probs), "add_remove")
    optimistic = pld_lib.from_mixture_gaussian_mechanism(
        float(sigma),
        [float(c) for c in sens],
        [float(p) for p in probs],
        pessimistic_estimate=False,
        use_connect_dots=False,
        value_discretization_interval=ORACLE_INTERVAL,
    )
    assert optimistic.get_epsilon_for_delta(CONVERSION_DELTA) <= epsilon
    assert optimistic.get_delta_for_epsilon(epsilon) <= CONVERSION_DELTA


def _multinomial_add(sigma: str, sens: list[str], probs: list[str], alpha: int) -> mpmath.mpf:
    """The exact D_α(P‖Q) of the mixture P against Q = N(0, σ²) at an integer order, by the
    multinomial expansion E_Q[(P/Q)^α] = Σ_k (α; k) Π p_i^{k_i} e^{(S₁² − S₂)/(2σ²)},
    S₁ = Σ k_i c_i, S₂ = Σ k_i c_i²."""
    c = [mpmath.mpf(x) / mpmath.mpf(sigma) for x in sens]
    p = [mpmath.mpf(x) for x in probs]
    total = mpmath.mpf(0)

    def compositions(left: int, parts: int) -> Any:
        if parts == 1:
            yield (left,)
            return
        for k in range(left + 1):
            for rest in compositions(left - k, parts - 1):
                yield (k, *rest)

    for ks in compositions(alpha, len(c)):
        coeff = mpmath.factorial(alpha) / mpmath.fprod(mpmath.factorial(k) for k in ks)
        shift = mpmath.fsum(k * ci for k, ci in zip(ks, c, strict=True))
        spread = mpmath.fsum(k * ci**2 for k, ci in zip(ks, c, strict=True))
        weight = mpmath.fprod(pi**k for pi, k in zip(p, ks, strict=True))
        total += coeff * weight * mpmath.exp((shift**2 - spread) / 2)
    return mpmath.log(total) / (alpha - 1)


@pytest.mark.parametrize(("sigma", "sens", "probs"), MIX_CASES)
def test_mixture_rdp_is_the_joint_convexity_bound(
    sigma: str, sens: list[str], probs: list[str]
) -> None:
    """rdp: log(Σ p_i e^{α(α−1)c_i²/(2σ²)})/(α − 1) at every order (recomputed here); never
    below the exact add direction (multinomial expansion, integer orders) nor the exact remove
    direction (quadrature)."""
    mech = _mix(sigma, sens, probs)
    curve = _curve(mech, "add_remove")
    p = _normal_mixture(float(sigma), [float(c) for c in sens], [float(w) for w in probs])
    q = _normal_mixture(float(sigma), [0.0], [1.0])
    s = mpmath.mpf(sigma)
    with mpmath.workdps(20):
        for alpha, value in zip(ORDERS, curve, strict=True):
            a = mpmath.mpf(alpha)
            bound = mpmath.log(
                mpmath.fsum(
                    mpmath.mpf(w) * mpmath.exp(a * (a - 1) * (mpmath.mpf(c) / s) ** 2 / 2)
                    for c, w in zip(sens, probs, strict=True)
                )
            ) / (a - 1)
            _check(value, float(bound), rel=1e-10)
            if alpha in (2.0, 3.0, 4.0, 8.0):
                assert _multinomial_add(sigma, sens, probs, int(alpha)) <= value
            if alpha == 2:
                top = float(max(mpmath.mpf(c) for c in sens) / s * alpha * float(s))
                points = [-top - 10, 0.0, top + 10]
                assert _renyi(p, q, alpha, points) <= value * (1 + 1e-12)
                assert _renyi(q, p, alpha, points) <= value * (1 + 1e-12)


def test_mixture_of_one_component_is_the_gaussian() -> None:
    """One component: the Gaussian mechanism — the same ε as ``gaussian`` in basic (both exact,
    Balle–Wang 2018 Thm 8, to 1e-12) and the same curve αΔ²/(2σ²) in rdp."""
    mixture = _epsilon(_mix("1.5", ["2"], ["1"]), "add_remove")
    gaussian = _epsilon({"type": "gaussian", "sigma": "1.5", "sensitivity": "2"}, "add_remove")
    assert mixture == pytest.approx(gaussian, rel=1e-12)
    curve = _curve(_mix("1.5", ["2"], ["1"]), "add_remove")
    plain = _curve({"type": "gaussian", "sigma": "1.5", "sensitivity": "2"}, "add_remove")
    assert np.allclose(curve, plain, rtol=1e-14)
    assert _charge("basic", _mix("1", ["0", "0"], ["0.5", "0.5"]), "add_remove") == {
        "epsilon": "0",
        "delta": "0",
    }


# ---------------------------------------------------------------------------- with replacement
def _binomial(n: int, m: int) -> list[mpmath.mpf]:
    """P[K = k], K ~ Bin(m, 1/n), k = 0 … m."""
    r = mpmath.mpf(1) / n
    return [mpmath.binomial(m, k) * r**k * (1 - r) ** (m - k) for k in range(m + 1)]


WR_GAUSSIAN = [(1000, 10, "1"), (100, 100, "3"), (10, 5, "2"), (1, 3, "4"), (10**6, 1000, "0.8")]


def _wr(n: int, m: int, inner: dict[str, Any]) -> dict[str, Any]:
    return {"type": "sampled_with_replacement", "n": n, "m": m, "mechanism": inner}


def _gauss_delta(mu: mpmath.mpf, epsilon: mpmath.mpf) -> mpmath.mpf:
    """δ(ε) of the Gaussian mechanism with Δ/σ = μ (Balle–Wang 2018 Thm 8)."""
    if mu == 0:
        return mpmath.mpf(0)
    return mpmath.ncdf(mu / 2 - epsilon / mu) - mpmath.exp(epsilon) * mpmath.ncdf(
        -mu / 2 - epsilon / mu
    )


def _bbg(n: int, m: int, group: Callable[[int, mpmath.mpf], mpmath.mpf]) -> float:
    """BBG18 Thm 10 at the conversion δ: ε solving Σ_{k≥1} P[K = k]·δ_k(ε) = δ_c (bisection in
    mpmath), then log(1 + η(e^ε − 1)), η = 1 − (1 − 1/n)^m."""
    b = _binomial(n, m)
    target = mpmath.mpf(CONVERSION_DELTA)

    def total(eps: mpmath.mpf) -> mpmath.mpf:
        return mpmath.fsum(b[k] * group(k, eps) for k in range(1, m + 1) if b[k] > 1e-60)

    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    if total(lo) <= target:
        hi = lo
    while total(hi) > target:
        lo, hi = hi, hi * 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if total(mid) <= target else (mid, hi)
    eta = 1 - (1 - mpmath.mpf(1) / n) ** m
    return float(mpmath.log(1 + eta * mpmath.expm1(hi)))


@pytest.mark.parametrize(("n", "m", "sigma"), WR_GAUSSIAN)
def test_with_replacement_gaussian_basic_is_bbg18_theorem_10(n: int, m: int, sigma: str) -> None:
    """basic: BBG18 Thm 10 with the Gaussian's group profile δ_G(ε; kΔ/σ), recomputed here."""
    charged = _epsilon(_wr(n, m, {"type": "gaussian", "sigma": sigma}), "replace_one")
    with mpmath.workdps(40):
        mu = 1 / mpmath.mpf(sigma)
        formula = _bbg(n, m, lambda k, eps: _gauss_delta(k * mu, eps))
    _check(charged, formula, rel=1e-9)


@pytest.mark.parametrize(("n", "m", "sigma"), [WR_GAUSSIAN[0], WR_GAUSSIAN[2]])
def test_with_replacement_gaussian_covers_an_explicit_pair(n: int, m: int, sigma: str) -> None:
    """Replace-one neighbours: the record of value 1 against 0, all others 0, a sum query of
    the sample (sensitivity 1 per substitution): P = Σ_k P[K = k] N(k, σ²) against N(0, σ²).
    Its exact δ at the charged ε (quadrature, both directions; the components of probability
    below 10⁻³⁰ left out and their mass added) is at most the charged δ, and its Rényi
    divergences at the lowest orders at most the charged curve."""
    mech = _wr(n, m, {"type": "gaussian", "sigma": sigma})
    epsilon = _epsilon(mech, "replace_one")
    curve = _curve(mech, "replace_one")
    with mpmath.workdps(20):
        b = _binomial(n, m)
        kept = [(k, w) for k, w in enumerate(b) if w > 1e-30]
        dropped = 1 - mpmath.fsum(w for _, w in kept)
        p = _normal_mixture(float(sigma), [float(k) for k, _ in kept], [float(w) for _, w in kept])
        q = _normal_mixture(float(sigma), [0.0], [1.0])
        top = 12 * float(sigma) + m
        truth = max(_hockey(p, q, epsilon, -top, top), _hockey(q, p, epsilon, -top, top))
        assert 0 < truth + dropped <= CONVERSION_DELTA
        for alpha, value in zip(ORDERS[:2], curve[:2], strict=True):
            points = [-10.0 * float(sigma), 0.0, alpha * kept[-1][0] + 10.0]
            renyi = max(_renyi(p, q, alpha, points), _renyi(q, p, alpha, points))
            assert renyi <= value


@pytest.mark.parametrize(("n", "m", "sigma"), WR_GAUSSIAN[:4])
def test_with_replacement_rdp_is_the_joint_convexity_sum(n: int, m: int, sigma: str) -> None:
    """rdp: log(Σ_k P[K = k]·e^{α(α−1)k²/(2σ²)})/(α − 1) over every k, recomputed here. (At
    m = 1000 draws the term of the record drawn every time dominates at every order — the
    exact divergence of the pair above is as large — so such a run has no useful Rényi bound.)"""
    curve = _curve(_wr(n, m, {"type": "gaussian", "sigma": sigma}), "replace_one")
    with mpmath.workdps(40):
        b = _binomial(n, m)
        s2 = mpmath.mpf(sigma) ** 2
        for alpha, value in zip(ORDERS, curve, strict=True):
            a = mpmath.mpf(alpha)
            power = mpmath.fsum(
                w * mpmath.exp(a * (a - 1) * k * k / (2 * s2)) for k, w in enumerate(b)
            )
            _check(value, float(mpmath.log(power) / (a - 1)), rel=1e-10)


#: ε-DP inner mechanisms: (n, m, inner, ε).
WR_PURE = [
    (1000, 10, {"type": "laplace", "scale": "1"}, "1"),
    (50, 20, {"type": "discrete_laplace", "scale": "1"}, "1"),
    (100, 40, {"type": "randomized_response", "epsilon": "0.5"}, "0.5"),
    (10, 2, {"type": "pure_dp", "epsilon": "3"}, "3"),
]


def _group_delta(epsilon0: mpmath.mpf) -> Callable[[int, mpmath.mpf], mpmath.mpf]:
    """The largest δ(ε) of a kε₀-DP mechanism: (e^{kε₀} − e^ε)₊/(1 + e^{kε₀})."""

    def group(k: int, eps: mpmath.mpf) -> mpmath.mpf:
        top = k * epsilon0
        return max(mpmath.mpf(0), (mpmath.exp(top) - mpmath.exp(eps)) / (1 + mpmath.exp(top)))

    return group


@pytest.mark.parametrize(("n", "m", "inner", "eps0"), WR_PURE)
def test_with_replacement_pure_basic_is_bbg18_theorem_10(
    n: int, m: int, inner: dict[str, Any], eps0: str
) -> None:
    """basic, an ε₀-DP inner mechanism: BBG18 Thm 10 with the kε₀-DP group profile at the
    conversion δ — or (ε', 0) with ε' = log(1 + η(e^{mε₀} − 1)) when that is no larger."""
    charged = _charge("basic", _wr(n, m, inner), "replace_one")
    with mpmath.workdps(40):
        e0 = mpmath.mpf(eps0)
        eta = 1 - (1 - mpmath.mpf(1) / n) ** m
        pure = float(mpmath.log(1 + eta * mpmath.expm1(m * e0)))
        formula = _bbg(n, m, _group_delta(e0))
    if Decimal(charged["delta"]) == 0:
        _check(float(charged["epsilon"]), pure, rel=1e-9)
        assert formula >= pure * (1 - 1e-9)
    else:
        assert Decimal(charged["delta"]) == Decimal("0.000001")
        _check(float(charged["epsilon"]), formula, rel=1e-9)
        assert formula < pure


def test_with_replacement_pure_covers_an_explicit_pair() -> None:
    """A count of the sample's ones plus discrete Laplace noise of scale 1 (1-DP per
    substitution), the record 1 against 0, all others 0: the exact δ at the charged ε (a sum
    over ℤ, the tails beyond ±80 bounded by their total mass) is at most the charged δ, and the
    exact Rényi divergences at most the charged curve."""
    n, m = 50, 20
    mech = _wr(n, m, {"type": "discrete_laplace", "scale": "1"})
    charged = _charge("basic", mech, "replace_one")
    curve = _curve(mech, "replace_one")
    with mpmath.workdps(40):
        r = mpmath.exp(-1)
        b = _binomial(n, m)

        def noise(y: int) -> mpmath.mpf:
            return (1 - r) / (1 + r) * r ** abs(y)

        ys = range(-80, m + 81)
        p = {y: mpmath.fsum(b[k] * noise(y - k) for k in range(m + 1)) for y in ys}
        q = {y: noise(y) for y in ys}
        tail = 2 * r**80  # the mass of P or Q beyond the range, for either
        e = mpmath.exp(mpmath.mpf(charged["epsilon"]))
        for one, two in ((p, q), (q, p)):
            truth = mpmath.fsum(max(mpmath.mpf(0), one[y] - e * two[y]) for y in ys) + tail
            assert truth <= mpmath.mpf(charged["delta"])
        for alpha, value in zip(ORDERS, curve, strict=True):
            a = mpmath.mpf(alpha)
            for one, two in ((p, q), (q, p)):
                power = mpmath.fsum(one[y] ** a * two[y] ** (1 - a) for y in ys)
                assert mpmath.log(power) / (a - 1) <= value


# ---------------------------------------------------------------------------- truncated sampling
#: (n, q, B, σ): rare truncation, frequent, always (q = 1), never (B ≥ n).
TR_CASES = [
    (10000, "0.01", 150, "2"),
    (10000, "0.01", 110, "2"),
    (1000, "0.05", 60, "1.5"),
    (200, "0.1", 20, "2"),
    (100, "1", 10, "3"),
    (50, "0.1", 100, "2"),
]


def _tr(n: int, q: str, batch: int, sigma: str) -> dict[str, Any]:
    return {
        "type": "truncated_subsampled_gaussian",
        "dataset_size": n,
        "sampling_probability": q,
        "truncated_batch_size": batch,
        "noise_multiplier": sigma,
    }


def _weights(n: int, q: float, batch: int) -> tuple[float, list[tuple[float, float]]]:
    """The bound's weights for a record among n (docs/accounting.md), from their definitions:
    1 − P[K ≥ B] (K ~ Bin(n − 1, q)) and, over k ≥ B split at k* = max(B, ⌊E[K] − 10 sd⌋),
    R = qB/(k₀ + 1) and ρ = Σ_k P[K = k]·(qB/(k + 1))/R, summed term by term here."""
    pmf = stats.binom.pmf(np.arange(n), n - 1, q)
    untruncated = float(pmf[: min(batch, n)].sum())
    mean = (n - 1) * q
    split = max(batch, math.floor(mean - 10 * math.sqrt(mean * (1 - q))))
    parts = []
    for first, last in ((batch, split), (split, n)):
        ks = np.arange(first, last)
        if ks.size == 0 or first >= n:
            continue
        rate = q * batch / (first + 1)
        rho = float((pmf[ks] * q * batch / (ks + 1)).sum()) / rate
        if rho > 0:
            parts.append((rate, rho))
    return untruncated, parts


def _subsampled_pair(rate: float, shift: float, replace: bool) -> tuple[Density, Density]:
    """In units of the noise: add/remove (1 − r)N(0) + rN(c) against N(0), or replace-one
    (1 − r)N(0) + rN(−c) against (1 − r)N(0) + rN(c)."""
    upper = _normal_mixture(1.0, [0.0, -shift if replace else shift], [1 - rate, rate])
    lower = _normal_mixture(1.0, [0.0, shift], [1 - rate, rate]) if replace else None
    return upper, lower or _normal_mixture(1.0, [0.0], [1.0])


def _truncation_delta(n: int, q: str, batch: int, sigma: str) -> Callable[[float], mpmath.mpf]:
    """The bound's δ(ε): for each direction, (1 − P[K ≥ B])·δ₁ + Σ_j ρ_j·δ_j, δ₁ the
    Poisson-subsampled Gaussian (rate q, one clipping norm), δ_j the replace-one pair (rate
    R_j, two clipping norms), each by quadrature; the larger of n and n + 1 records."""
    qf, s = float(q), float(sigma)
    pairs = []
    for size in (n, n + 1):
        untruncated, parts = _weights(size, qf, batch)
        first = _subsampled_pair(qf, 1 / s, False)
        pairs.append(
            (untruncated, first, [(w, _subsampled_pair(r, 2 / s, True)) for r, w in parts])
        )

    def delta(epsilon: float) -> mpmath.mpf:
        out = mpmath.mpf(0)
        for untruncated, (p1, q1), parts in pairs:
            truncated = mpmath.fsum(w * _hockey(p2, q2, epsilon, -15, 15) for w, (p2, q2) in parts)
            for one, two in ((p1, q1), (q1, p1)):
                out = max(out, untruncated * _hockey(one, two, epsilon, -15, 15) + truncated)
        return out

    return delta


@pytest.mark.parametrize(("n", "q", "batch", "sigma"), [TR_CASES[i] for i in (0, 3, 4, 5)])
def test_truncated_basic_charge_is_the_truncation_bound(
    n: int, q: str, batch: int, sigma: str
) -> None:
    """basic: the least ε at which the bound's δ — its weights recomputed from their
    definitions, its pairs by quadrature — is the conversion δ, within the PLD's
    discretisation (the charge is at most 0.1 % above the exact root)."""
    epsilon = _epsilon(_tr(n, q, batch, sigma), "add_remove")
    with mpmath.workdps(20):
        _check_delta(_truncation_delta(n, q, batch, sigma), epsilon, 2e-2)


def _dp_accounting_reduction(n: int, q: float, batch: int, sigma: float) -> Any:
    """dp_accounting's reduction of truncated Poisson sampling (its
    ``from_truncated_subsampled_gaussian_mechanism``), with optimistic PLDs: the untruncated
    Poisson-subsampled Gaussian, mixed with weight P[K ≥ B] with the replace-one pair at σ/2 and
    the average rate of the record when a batch is truncated."""
    optimistic = {
        "pessimistic_estimate": False,
        "use_connect_dots": False,
        "value_discretization_interval": ORACLE_INTERVAL,
    }
    plain = pld_lib.from_gaussian_mechanism(sigma, sampling_prob=q, **optimistic)
    truncated = float(stats.binom.sf(batch - 1, n - 1, q))
    if truncated == 0.0:
        return plain
    rate = float(stats.binom.sf(batch, n, q)) * batch / truncated / n
    replaced = pld_lib.from_gaussian_mechanism(
        sigma / 2,
        sampling_prob=rate,
        neighboring_relation=pa.NeighboringRelation.REPLACE_ONE,
        **optimistic,
    )
    return replaced.compute_mixture(plain, truncated)


@pytest.mark.parametrize(("n", "q", "batch", "sigma"), TR_CASES)
def test_truncated_is_never_charged_below_dp_accountings_optimistic_pld(
    n: int, q: str, batch: int, sigma: str
) -> None:
    """The charged ε is at least the optimistic PLD's of dp_accounting's own reduction (whose
    averaged rate needs the cited paper's argument; the chord here needs only convexity)."""
    epsilon = _epsilon(_tr(n, q, batch, sigma), "add_remove")
    oracle = _dp_accounting_reduction(n, float(q), batch, float(sigma))
    assert oracle.get_epsilon_for_delta(CONVERSION_DELTA) <= epsilon


#: A small dataset whose neighbours are written out: n records with the record, rate, batch, σ.
EXPLICIT = (12, "0.3", 3, "1.5")


def _explicit_pair(
    n: int, q: float, batch: int, sigma: float
) -> tuple[Density, Density, list[float]]:
    """The record of value +1 among n − 1 others of value −1, a sum of the truncated batch plus
    N(0, σ²): with K ~ Bin(n − 1, q) others sampled, without the record the batch sums to
    −min(K, B); with it, sampled with probability q, to −K + 1 when K < B, else (kept with
    probability B/(K + 1), displacing another) to −B + 2, or to −B."""
    pmf = stats.binom.pmf(np.arange(n), n - 1, q)
    without: dict[int, float] = {}
    with_it: dict[int, float] = {}
    for k, w in enumerate(pmf):
        base = -min(k, batch)
        without[base] = without.get(base, 0.0) + w
        with_it[base] = with_it.get(base, 0.0) + (1 - q) * w
        if k < batch:
            with_it[-k + 1] = with_it.get(-k + 1, 0.0) + q * w
        else:
            kept = batch / (k + 1)
            with_it[-batch + 2] = with_it.get(-batch + 2, 0.0) + q * w * kept
            with_it[-batch] = with_it.get(-batch, 0.0) + q * w * (1 - kept)
    p = _normal_mixture(sigma, list(map(float, with_it)), list(with_it.values()))
    r = _normal_mixture(sigma, list(map(float, without)), list(without.values()))
    return p, r, [float(m) for m in {*with_it, *without}]


def test_truncated_covers_an_explicit_pair() -> None:
    """The exact δ(ε) and Rényi divergences of the written-out neighbours (quadrature, both
    directions) are at most the basic charge and the rdp curve; and the rdp curve is the cited
    formula: its Rényi powers of the two pairs by quadrature, weighted as the bound says (at
    integer orders; at 1.5 the Mironov–Talwar–Zhang series is an upper bound)."""
    n, q, batch, sigma = EXPLICIT
    mech = _tr(n, q, batch, sigma)
    charged = _charge("basic", mech, "add_remove")
    curve = _curve(mech, "add_remove")
    s, qf = float(sigma), float(q)
    with mpmath.workdps(20):
        p, r, means = _explicit_pair(n, qf, batch, s)
        eps = float(charged["epsilon"])
        truth = max(_hockey(p, r, eps, -15, 15), _hockey(r, p, eps, -15, 15))
        assert 0 < truth <= float(charged["delta"])
        for alpha, value in zip(ORDERS[:2], curve[:2], strict=True):
            points = [min(means) - 10 * s, 0.0, max(means) + alpha * 4 + 10 * s]
            renyi = max(_renyi(p, r, alpha, points), _renyi(r, p, alpha, points))
            assert renyi <= value

            def power(rate: float, shift: float, a: float = alpha) -> mpmath.mpf:
                pair = _subsampled_pair(rate, shift, False)
                return mpmath.exp((a - 1) * _renyi(*pair, a, [0.0, a * shift + 5]))

            formula = mpmath.mpf(0)
            for size in (n, n + 1):
                untruncated, parts = _weights(size, qf, batch)
                total = untruncated * power(qf, 1 / s)
                total += mpmath.fsum(w * power(rate, 2 / s) for rate, w in parts)
                idle = 1 - untruncated - sum(w for _, w in parts)
                formula = max(formula, mpmath.log(total + idle) / (alpha - 1))
            if alpha == int(alpha):  # MTZ19's closed form: exact
                _check(value, float(formula), rel=1e-6)
            else:  # its series, summed conservatively where it converges slowly (q = 0.3)
                assert value >= float(formula)


# ---------------------------------------------------------------------------- modes and parsing
MECHANISMS: list[tuple[dict[str, Any], str]] = [
    (_mix("2", ["1", "0.5"], ["0.3", "0.7"]), "add_remove"),
    (_wr(1000, 10, {"type": "gaussian", "sigma": "1", "sensitivity": "1"}), "replace_one"),
    (_wr(1000, 10, {"type": "laplace", "scale": "1", "sensitivity": "1"}), "replace_one"),
    (_tr(10000, "0.01", 150, "2"), "add_remove"),
]


@pytest.mark.parametrize(("mechanism", "relation"), MECHANISMS, ids=lambda m: str(m)[:40])
def test_basic_and_rdp_accept_them_zcdp_and_gdp_refuse(
    mechanism: dict[str, Any], relation: str
) -> None:
    decl = parse_declaration(mechanism)
    for mode in ("basic", "rdp"):
        assert supports(_config(mode, relation), decl), mode
    for mode in ("zcdp", "gdp"):
        config = _config(mode, relation)
        assert not supports(config, decl)
        with pytest.raises(UnsupportedInMode, match=f"cannot account '{decl.kind}'.*'basic'"):
            admit(config, initial_state(config), decl)
    # inside a composition
    composed = {"type": "composed", "mechanism": mechanism, "count": 3}
    for mode in ("basic", "rdp"):
        assert _charge(mode, composed, relation)


@pytest.mark.parametrize(("mechanism", "relation"), MECHANISMS, ids=lambda m: str(m)[:40])
def test_the_other_relation_is_refused(mechanism: dict[str, Any], relation: str) -> None:
    other = "add_remove" if relation == "replace_one" else "replace_one"
    config = _config("basic", other)
    with pytest.raises(DeclarationError, match=f"analysed under '{relation}'"):
        admit(config, initial_state(config), parse_declaration(mechanism))


@pytest.mark.parametrize(("mechanism", "relation"), MECHANISMS, ids=lambda m: str(m)[:40])
def test_canonical_json_round_trips(mechanism: dict[str, Any], relation: str) -> None:
    decl = parse_declaration(mechanism)
    assert parse_declaration(decl.to_json()) == decl
    assert decl.to_json() == mechanism


def test_types_and_defaults() -> None:
    mix = parse_declaration({**_mix("2", ["1", "0.5"], ["0.3", "0.7"]), "standard_deviation": 2})
    assert isinstance(mix, MixtureOfGaussians)
    assert mix.sampling_probs == (Decimal("0.3"), Decimal("0.7"))
    wr = parse_declaration(_wr(10, 3, {"type": "gaussian", "sigma": 2}))
    assert isinstance(wr, SampledWithReplacement) and wr.mechanism.to_json()["sensitivity"] == "1"
    tr = parse_declaration({**_tr(100, "0.1", 10, "1"), "sampling_probability": 0.1})
    assert isinstance(tr, TruncatedSubsampledGaussian)
    assert tr.sampling_probability == Decimal("0.1")


@pytest.mark.parametrize(
    ("mechanism", "field"),
    [
        (_mix("0", ["1"], ["1"]), "standard_deviation"),
        (_mix("1", ["1", "2"], ["0.5", "0.6"]), "sampling_probs"),
        (_mix("1", ["1", "2"], ["0.5"]), "sampling_probs"),
        (_mix("1", ["-1"], ["1"]), "sensitivities"),
        (_mix("1", ["1", "2"], ["1", "0"]), "sampling_probs"),
        (_mix("1", [], []), "sensitivities"),
        (_mix("1", ["1"] * 257, ["1"] * 257), "sensitivities"),
        (_wr(0, 1, {"type": "gaussian", "sigma": "1"}), "n"),
        (_wr(10, 0, {"type": "gaussian", "sigma": "1"}), "m"),
        (_wr(10, 10**6 + 1, {"type": "gaussian", "sigma": "1"}), "m"),
        (_wr(10, 2, {"type": "zcdp", "rho": "1"}), "mechanism"),
        (
            _wr(
                10,
                2,
                {
                    "type": "subsampled",
                    "scheme": "poisson",
                    "rate": "0.1",
                    "mechanism": {"type": "gaussian", "sigma": "1"},
                },
            ),
            "mechanism",
        ),
        (_tr(0, "0.1", 10, "1"), "dataset_size"),
        (_tr(10, "0", 10, "1"), "sampling_probability"),
        (_tr(10, "1.5", 10, "1"), "sampling_probability"),
        (_tr(10, "0.1", 0, "1"), "truncated_batch_size"),
        (_tr(10, "0.1", 5, "0"), "noise_multiplier"),
    ],
)
def test_invalid_parameters_are_refused(mechanism: dict[str, Any], field: str) -> None:
    with pytest.raises(DeclarationError) as caught:
        parse_declaration(mechanism)
    assert caught.value.field == field


def test_the_client_builders_make_what_the_core_reads() -> None:
    mix = builders.mixture_of_gaussians(2, [1, "0.5"], ["0.3", 0.7])
    assert parse_declaration(mix.to_json()) == parse_declaration(
        _mix("2", ["1", "0.5"], ["0.3", "0.7"])
    )
    with pytest.raises(ValueError, match="sum to exactly 1"):
        builders.mixture_of_gaussians(1, [1, 2], [0.5, 0.6])
    wr = builders.sampled_with_replacement(builders.gaussian(1), m=10, n=1000)
    assert parse_declaration(wr.to_json()) == parse_declaration(
        _wr(1000, 10, {"type": "gaussian", "sigma": "1"})
    )
    tr = builders.truncated_subsampled_gaussian(10000, "0.01", 150, 2)
    assert tr.to_json() == _tr(10000, "0.01", 150, "2")


# ---------------------------------------------------------------------------- over HTTP
def _dataset(client: TestClient, mode: str, relation: str) -> str:
    ds = basic_dataset(
        client, epsilon=100, delta=BUDGET_DELTA, accounting={"mode": mode}, relation=relation
    )
    return str(ds["id"])


@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
def test_registration_over_http(client: TestClient, mode: str) -> None:
    ids = {rel: _dataset(client, mode, rel) for rel in ("add_remove", "replace_one")}
    for mechanism, relation in MECHANISMS:
        url = f"/v1/datasets/{ids[relation]}/invocations"
        r = client.post(url, json={"mechanism": mechanism}, headers=AUTH)
        if mode in ("zcdp", "gdp"):
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "UnsupportedInMode"
            assert mechanism["type"] in r.json()["detail"] and "'basic'" in r.json()["detail"]
        else:
            assert r.status_code == 201, r.text
            assert r.json()["status"] == "accepted"
            if mode == "basic":  # scalar charges: exactly the core's
                expected = _charge(mode, mechanism, relation)
                assert r.json()["charge"] == {k: expected[k] for k in r.json()["charge"]}
    add = f"/v1/datasets/{ids['add_remove']}/invocations"
    before = len(ledger(client, ids["add_remove"]))
    invalid: list[tuple[dict[str, Any], str | None]] = [
        (_mix("1", ["1", "2"], ["0.5", "0.6"]), "InvalidDeclaration"),
        (_mix("0", ["1"], ["1"]), "InvalidDeclaration"),  # amounts: checked by the core
        (_mix("1", ["1"], ["1.5"]), "InvalidDeclaration"),
        ({**_mix("1", ["1"], ["1"]), "sigma": "1"}, "ValidationError"),
        (_tr(10, "0.1", 0, "1"), "ValidationError"),
        (_tr(10, "0.1", 5, "1"), None),  # a valid one, for the count below
        (_wr(10, 2, {"type": "gaussian", "sigma": "1"}), "InvalidDeclaration"),  # relation
        (_wr(10, 2, {"type": "zcdp", "rho": "1"}), "InvalidDeclaration"),  # as subsampled's
    ]
    admitted = 0
    for mechanism, error in invalid:
        r = client.post(add, json={"mechanism": mechanism}, headers=AUTH)
        if error is None:
            if mode in ("basic", "rdp"):
                assert r.status_code == 201, r.text
                admitted += 1
            continue
        assert r.status_code == 422, (mechanism, r.text)
        assert r.json()["error"] == error, (mechanism, r.json())
    assert len(ledger(client, ids["add_remove"])) == before + admitted


def test_a_ledger_with_the_new_kinds_replays(client: TestClient) -> None:
    for mode in ("basic", "rdp"):
        for relation in ("add_remove", "replace_one"):
            dsid = _dataset(client, mode, relation)
            url = f"/v1/datasets/{dsid}/invocations"
            mine = [m for m, rel in MECHANISMS if rel == relation]
            for mechanism in [*mine, {"type": "composed", "mechanisms": mine}]:
                r = client.post(url, json={"mechanism": mechanism}, headers=AUTH)
                assert r.status_code == 201, r.text
            entries = ledger(client, dsid)
            assert [e["kind"] for e in entries][1:] == ["invocation_accepted"] * (len(mine) + 1)
            assert entries[1]["declaration"] == mine[0]
            verdict = replay(entries)
            assert verdict.ok, verdict.problems
            assert verdict.state == entries[-1]["state"]
