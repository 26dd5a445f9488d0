"""``discrete_laplace``, ``discrete_gaussian`` and ``report_noisy_max``: every charge against an
independent evaluation of its cited formula, and against the truth.

Correctness: in each mode that accepts a kind, the charge equals the cited formula computed here
(Fractions, mpmath, scipy) to a relative 1e-9 or better, and :func:`_matches` fails on a charge 5 %
smaller (checked for every case). Soundness: the charge is never below a lower bound on the
truth — dp_accounting's optimistic PLD of the discrete Laplace mechanism; the exact δ(ε) of the
discrete Gaussian summed over the integers (mpmath); the exact Rényi divergences of explicit
neighbouring score vectors of report noisy max, which also show that exponential noise is not
bounded-range (its divergence at order α is above α·ε²/8). Then the HTTP surface (201, 422 for
invalid parameters, 422 ``UnsupportedInMode`` in ``gdp``), the canonical JSON and a ledger replay.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import mpmath  # type: ignore[import-untyped]
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from fastapi.testclient import TestClient
from scipy import optimize

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
    Declaration,
    DeclarationError,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    PureDP,
    ReportNoisyMax,
)
from odometer_core.ledger import replay
from tests.accounting.charged import charge as charge_on
from tests.accounting.charged import check as _check
from tests.support import AUTH, basic_dataset, ledger

ORDERS = [1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0]
BUDGET_DELTA = "0.00001"  # basic: conversion δ = δ_B/10 = 1e-6
CONVERSION_DELTA = Fraction(1, 10**6)


# ---------------------------------------------------------------------------- helpers
def _config(mode: str) -> Any:
    acc: dict[str, Any] = {"mode": mode}
    if mode == "rdp":
        acc["orders"] = ORDERS
    return make_config(1000, BUDGET_DELTA, "add_remove", acc)


def _charge(mode: str, mechanism: dict[str, Any] | Declaration) -> dict[str, Any]:
    """What ``mode`` charges ``mechanism`` (admitted: the budget is far larger)."""
    return charge_on(_config(mode), mechanism)


def _curve(mechanism: dict[str, Any] | Declaration) -> list[float]:
    charged = _charge("rdp", mechanism)
    assert [float(a) for a in charged["orders"]] == ORDERS
    assert Decimal(charged["delta"]) == 0
    return [float(v) for v in charged["rdp"]]


def _rr_renyi(epsilon: mpmath.mpf, alpha: mpmath.mpf) -> mpmath.mpf:
    """Rényi divergence of order α of randomized response with parameter ε (the tight pure-DP
    curve, Steinke 2024 Thm 4): p = e^ε/(1 + e^ε) against 1 − p."""
    p = mpmath.e**epsilon / (1 + mpmath.e**epsilon)
    q = 1 - p
    return mpmath.log(p**alpha * q ** (1 - alpha) + q**alpha * p ** (1 - alpha)) / (alpha - 1)


def _renyi(p: list[mpmath.mpf], q: list[mpmath.mpf], alpha: float) -> mpmath.mpf:
    """D_α(P‖Q) of two distributions on the same finite support."""
    a = mpmath.mpf(alpha)
    total = mpmath.fsum(pi**a * qi ** (1 - a) for pi, qi in zip(p, q, strict=True) if pi > 0)
    return mpmath.log(total) / (a - 1)


def _pure_rho(epsilon: mpmath.mpf) -> mpmath.mpf:
    """ε·tanh(ε/2): the zCDP of pure ε-DP (Steinke 2024 Thm 5)."""
    return epsilon * mpmath.tanh(epsilon / 2)


# ---------------------------------------------------------------------------- discrete Laplace
DL_CASES = [("2", "1"), ("0.5", "3"), ("10", "1"), ("0.3", "1"), ("7", "2")]


def _dl(t: str, sens: str) -> dict[str, Any]:
    return {"type": "discrete_laplace", "scale": t, "sensitivity": sens}


def _dl_pmf(shift: int, t: float, support: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Discrete Laplace pmf P[y] = (1 − e^{−1/t})/(1 + e^{−1/t})·e^{−|y − shift|/t}."""
    r = math.exp(-1.0 / t)
    out: np.ndarray[Any, Any] = (1 - r) / (1 + r) * np.exp(-np.abs(support - shift) / t)
    return out


def _dl_renyi(t: float, sens: int, alpha: float) -> float:
    """Exact D_α of the discrete Laplace pair (0, Δ), summed over the integers (the tail beyond
    |y| = 400t is below e^{−400}, far below float resolution)."""
    n = int(400 * t) + sens + 10
    y = np.arange(-n, n + 1, dtype=np.float64)
    log_p = np.log(_dl_pmf(0, t, y))
    log_q = np.log(_dl_pmf(sens, t, y))
    terms = alpha * log_p + (1 - alpha) * log_q
    top = terms.max()
    return float((top + math.log(np.exp(terms - top).sum())) / (alpha - 1))


@pytest.mark.parametrize(("t", "sens"), DL_CASES)
def test_discrete_laplace_charges_pure_epsilon_delta_over_t(t: str, sens: str) -> None:
    exact = Fraction(sens) / Fraction(t)  # ε = Δ/t (GRS12)
    basic = _charge("basic", _dl(t, sens))
    assert Decimal(basic["delta"]) == 0
    eps = Fraction(basic["epsilon"])
    assert exact <= eps <= exact * (1 + Fraction(1, 10**50))
    assert not eps * Fraction(95, 100) >= exact
    # zcdp: ε·tanh(ε/2), the rule of pure_dp and laplace
    with mpmath.workdps(50):
        rho = _pure_rho(mpmath.mpf(exact.numerator) / exact.denominator)
        _check(float(_charge("zcdp", _dl(t, sens))["rho"]), float(rho), rel=1e-14)
        assert _charge("zcdp", _dl(t, sens)) == _charge(
            "zcdp", {"type": "laplace", "scale": t, "sensitivity": sens}
        )
        # rdp: the randomized-response curve at each order
        curve = _curve(_dl(t, sens))
        for alpha, value in zip(ORDERS, curve, strict=True):
            rr = _rr_renyi(mpmath.mpf(exact.numerator) / exact.denominator, mpmath.mpf(alpha))
            _check(value, float(rr), rel=1e-12)
    assert curve == _curve(PureDP(Decimal(basic["epsilon"])))


@pytest.mark.parametrize(("t", "sens"), DL_CASES)
def test_discrete_laplace_is_never_charged_below_its_pld(t: str, sens: str) -> None:
    """dp_accounting's optimistic PLD (a lower bound on the true δ(ε)): at the charged ε it needs
    no δ (pure DP), at 0.95·ε it needs a positive δ — no smaller ε would be sound."""
    eps = float(_charge("basic", _dl(t, sens))["epsilon"])
    pld = pld_lib.from_discrete_laplace_mechanism(
        1 / float(t), sensitivity=int(sens), pessimistic_estimate=False
    )
    assert pld.get_delta_for_epsilon(eps) <= 0 + 1e-12
    assert pld.get_delta_for_epsilon(0.95 * eps) > 1e-4


@pytest.mark.parametrize(("t", "sens"), DL_CASES)
def test_discrete_laplace_rdp_is_exact_for_unit_sensitivity(t: str, sens: str) -> None:
    """The exact Rényi divergence of the pair (0, Δ), summed over the integers, is at most the
    charged curve (and zCDP α·ρ) at every order, and equals the curve for Δ = 1: the loss then
    takes the values ±1/t with randomized response's probabilities."""
    curve = _curve(_dl(t, sens))
    rho = float(_charge("zcdp", _dl(t, sens))["rho"])
    for alpha, value in zip(ORDERS, curve, strict=True):
        truth = _dl_renyi(float(t), int(sens), alpha)
        assert truth <= value * (1 + 1e-12)
        assert truth <= alpha * rho * (1 + 1e-12)
        if sens == "1":
            assert value == pytest.approx(truth, rel=1e-9)


# ---------------------------------------------------------------------------- discrete Gaussian
DG_CASES = [("1", "1"), ("3", "1"), ("0.7", "2"), ("10", "3"), ("20", "1"), ("0.4", "1")]


def _dg(sigma: str, sens: str) -> dict[str, Any]:
    return {"type": "discrete_gaussian", "sigma": sigma, "sensitivity": sens}


def _cks_epsilon(rho: float, delta: float) -> float:
    """CKS20 Cor. 13 evaluated here: inf over α > 1 of αρ + log(1 − 1/α) + (log(1/δ) − log α)/
    (α − 1), by scipy's bounded scalar minimisation over log(α − 1)."""

    def objective(x: float) -> float:
        a = 1 + math.exp(x)
        return a * rho + math.log1p(-1 / a) + (math.log(1 / delta) - math.log(a)) / (a - 1)

    grid = np.linspace(-12, 12, 2401)
    start = float(grid[int(np.argmin([objective(x) for x in grid]))])
    found = optimize.minimize_scalar(
        objective, bounds=(start - 0.02, start + 0.02), method="bounded", options={"xatol": 1e-12}
    )
    return max(0.0, float(found.fun))


def _dg_delta(sigma: mpmath.mpf, sens: int, epsilon: mpmath.mpf) -> mpmath.mpf:
    """Exact δ(ε) of the discrete Gaussian for the pair (0, Δ) (CKS20 Thm 7 form):
    Σ_y max(0, P[y] − e^ε·Q[y]) over |y| ≤ 60σ + Δ + 10, P = N_ℤ(0, σ²), Q = N_ℤ(Δ, σ²)
    (same normaliser: a shift by an integer). By the reflection y → Δ − y both directions are
    equal. The tail beyond the range is below e^{−1800}."""
    n = int(60 * sigma) + sens + 10
    two_s2 = 2 * sigma**2
    weights = {
        y: mpmath.exp(-(mpmath.mpf(y) ** 2) / two_s2) for y in range(-n - sens, n + sens + 1)
    }
    norm = mpmath.fsum(weights[y] for y in range(-n, n + 1))
    e_eps = mpmath.exp(epsilon)
    return (
        mpmath.fsum(
            max(mpmath.mpf(0), weights[y] - e_eps * weights[y - sens]) for y in range(-n, n + 1)
        )
        / norm
    )


@pytest.mark.parametrize(("sigma", "sens"), DG_CASES)
def test_discrete_gaussian_is_rho_zcdp(sigma: str, sens: str) -> None:
    rho = Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)  # CKS20 Thm 14
    charged = Fraction(_charge("zcdp", _dg(sigma, sens))["rho"])
    assert Decimal(_charge("zcdp", _dg(sigma, sens))["delta"]) == 0
    assert rho <= charged <= rho * (1 + Fraction(1, 10**50))
    assert not charged * Fraction(95, 100) >= rho
    # the same ρ as the continuous Gaussian in zcdp, and αρ in rdp
    assert _charge("zcdp", _dg(sigma, sens)) == _charge(
        "zcdp", {"type": "gaussian", "sigma": sigma, "sensitivity": sens}
    )
    for alpha, value in zip(ORDERS, _curve(_dg(sigma, sens)), strict=True):
        _check(value, float(Fraction(alpha) * rho), rel=1e-12)


@pytest.mark.parametrize(("sigma", "sens"), DG_CASES)
def test_discrete_gaussian_basic_converts_rho_at_the_conversion_delta(
    sigma: str, sens: str
) -> None:
    """basic: ε of CKS20 Cor. 13 at ρ = Δ²/(2σ²) and the conversion δ, which is charged."""
    charged = _charge("basic", _dg(sigma, sens))
    assert Fraction(charged["delta"]) == CONVERSION_DELTA
    rho = float(Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2))
    _check(float(charged["epsilon"]), _cks_epsilon(rho, float(CONVERSION_DELTA)), rel=1e-9)
    # not the continuous Gaussian's exact (Balle–Wang) ε, which is smaller
    gaussian = _charge("basic", {"type": "gaussian", "sigma": sigma, "sensitivity": sens})
    assert Decimal(gaussian["epsilon"]) < Decimal(charged["epsilon"])


@pytest.mark.parametrize(("sigma", "sens"), DG_CASES)
def test_discrete_gaussian_basic_charge_covers_its_exact_delta(sigma: str, sens: str) -> None:
    """The exact δ(ε) of the discrete Gaussian at the charged ε is at most the charged δ."""
    charged = _charge("basic", _dg(sigma, sens))
    with mpmath.workdps(40):
        truth = _dg_delta(mpmath.mpf(sigma), int(sens), mpmath.mpf(charged["epsilon"]))
        assert truth <= mpmath.mpf(charged["delta"])
        assert truth > 0  # the pair is a real test: the exact δ is not trivially 0


# ---------------------------------------------------------------------------- report noisy max
RNM_CASES = [
    ("gumbel", "10", "1", False),
    ("gumbel", "4", "1", True),
    ("gumbel", "1", "2", False),
    ("exponential", "10", "1", False),
    ("exponential", "4", "1", False),
    ("exponential", "2", "1", True),
    ("exponential", "1", "1", False),
]


def _rnm(noise: str, b: str, sens: str, monotonic: bool) -> dict[str, Any]:
    return {
        "type": "report_noisy_max",
        "noise": noise,
        "scale": b,
        "sensitivity": sens,
        "monotonic": monotonic,
    }


def _rnm_epsilon(b: str, sens: str, monotonic: bool) -> Fraction:
    """ε = Δ/b for monotonic scores, else 2Δ/b (Dwork–Roth 2014, Claim 3.9 and §3.4)."""
    return (1 if monotonic else 2) * Fraction(sens) / Fraction(b)


def _br_curve(epsilon: mpmath.mpf, alpha: float) -> mpmath.mpf:
    """Cesar–Rogers 2021 §3: an ε-bounded-range mechanism is (ξ, ε²/8)-zCDP with ξ = r − 1 −
    log r, r = ε/(e^ε − 1), minus ε²/8 at α = 1; and ε-DP caps every order at ε."""
    r = epsilon / mpmath.expm1(epsilon)
    kl = r - 1 - mpmath.log(r)
    return min(kl + (mpmath.mpf(alpha) - 1) * epsilon**2 / 8, epsilon)


@pytest.mark.parametrize(("noise", "b", "sens", "monotonic"), RNM_CASES)
def test_report_noisy_max_charges(noise: str, b: str, sens: str, monotonic: bool) -> None:
    mech = _rnm(noise, b, sens, monotonic)
    exact = _rnm_epsilon(b, sens, monotonic)
    basic = _charge("basic", mech)
    assert Fraction(basic["epsilon"]) == exact and Decimal(basic["delta"]) == 0
    assert not Fraction(basic["epsilon"]) * Fraction(95, 100) >= exact
    eps_charged = Decimal(basic["epsilon"])
    twin = Exponential(eps_charged) if noise == "gumbel" else PureDP(eps_charged)
    with mpmath.workdps(50):
        eps = mpmath.mpf(exact.numerator) / exact.denominator
        rho = float(_charge("zcdp", mech)["rho"])
        if noise == "gumbel":  # the exponential mechanism: min(ε²/8, ε·tanh(ε/2))
            _check(rho, float(min(eps**2 / 8, _pure_rho(eps))), rel=1e-14)
        else:  # ε-DP, not bounded-range: ε·tanh(ε/2), above ε²/8
            _check(rho, float(_pure_rho(eps)), rel=1e-14)
            assert rho > float(eps**2 / 8) * 3
        for alpha, value in zip(ORDERS, _curve(mech), strict=True):
            want = _br_curve(eps, alpha) if noise == "gumbel" else _rr_renyi(eps, alpha)
            _check(value, float(want), rel=1e-12)
    # exactly the charge of the kind that states its guarantee, in every mode that accepts it
    for mode in ("basic", "zcdp", "rdp"):
        assert _charge(mode, mech) == _charge(mode, twin), mode


def _choice_probabilities(noise: str, scores: tuple[int, int], b: int) -> list[mpmath.mpf]:
    """P[argmax_i (q_i + Z_i) = i] for two candidates with i.i.d. noise of scale b, by numerical
    integration over Z₁ of its density times P[Z₂ < Z₁ + q₁ − q₂] (no closed form used)."""
    d = mpmath.mpf(scores[0] - scores[1])
    bb = mpmath.mpf(b)
    if noise == "exponential":  # Z ~ Exp(b): density e^{−z/b}/b on z > 0, cdf 1 − e^{−z/b}

        def integrand(z: mpmath.mpf) -> mpmath.mpf:
            shifted = z + d
            cdf = -mpmath.expm1(-shifted / bb) if shifted > 0 else mpmath.mpf(0)
            return mpmath.exp(-z / bb) / bb * cdf

        first = mpmath.quad(
            integrand, [*sorted({mpmath.mpf(0), max(-d, mpmath.mpf(0))}), mpmath.inf]
        )
    else:  # Z ~ Gumbel(b), cdf exp(−e^{−z/b}); over w = e^{−z/b} ~ Exp(1): the cdf at z + d
        # is exp(−w·e^{−d/b})

        def gumbel(w: mpmath.mpf) -> mpmath.mpf:
            return mpmath.exp(-w) * mpmath.exp(-w * mpmath.exp(-d / bb))

        first = mpmath.quad(gumbel, [0, mpmath.inf])
    return [first, 1 - first]


#: Neighbouring score vectors (each score moves by at most Δ = 1; monotonic: all the same way)
#: on which candidate 1's privacy loss is exactly ε.
PAIRS = {False: ((0, 2), (1, 1)), True: ((0, 1), (1, 1))}


@pytest.mark.parametrize("b", [10, 4, 2, 1])
@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_noise_reaches_epsilon_and_is_not_bounded_range(
    b: int, monotonic: bool
) -> None:
    """Two candidates, scores (0, 2) against (1, 1) (monotonic: (0, 1) against (1, 1)), noise
    Exp(b): candidate 1's probability moves by exactly e^ε, and the Rényi divergence at every
    order is at most the charged RDP curve and α·ρ — but at order 2 above 2·ε²/8 and the
    bounded-range curve, so charging exponential noise as bounded-range (ε²/8-zCDP, as the
    ``exponential`` kind) would be unsound."""
    mech = _rnm("exponential", str(b), "1", monotonic)
    eps_f = _rnm_epsilon(str(b), "1", monotonic)
    curve = _curve(mech)
    rho = mpmath.mpf(_charge("zcdp", mech)["rho"])
    with mpmath.workdps(40):
        eps = mpmath.mpf(eps_f.numerator) / eps_f.denominator
        before, after = PAIRS[monotonic]
        p = _choice_probabilities("exponential", before, b)
        q = _choice_probabilities("exponential", after, b)
        assert abs(mpmath.log(q[0] / p[0]) - eps) < mpmath.mpf(10) ** -25  # the loss reaches ε
        assert mpmath.log(q[1] / p[1]) < 0  # … and the other output's is negative: range > ε
        for alpha, value in zip(ORDERS, curve, strict=True):
            truth = max(_renyi(q, p, alpha), _renyi(p, q, alpha))
            assert truth <= mpmath.mpf(value) and truth <= alpha * rho
            if alpha == 2:  # the bounded-range charges (zCDP ε²/8, its RDP curve) are below it
                assert truth > alpha * eps**2 / 8 and truth > _br_curve(eps, alpha)


@pytest.mark.parametrize("b", [10, 4, 2, 1])
@pytest.mark.parametrize("monotonic", [False, True])
def test_gumbel_noise_is_within_its_bounded_range_charge(b: int, monotonic: bool) -> None:
    """The same pairs with Gumbel noise (the exponential mechanism): the exact Rényi divergence
    is at most the charged bounded-range curve and α·ρ at every order."""
    mech = _rnm("gumbel", str(b), "1", monotonic)
    curve = _curve(mech)
    rho = mpmath.mpf(_charge("zcdp", mech)["rho"])
    with mpmath.workdps(40):
        before, after = PAIRS[monotonic]
        p = _choice_probabilities("gumbel", before, b)
        q = _choice_probabilities("gumbel", after, b)
        # the Gumbel-max trick: candidate i with probability ∝ e^{q_i/b}
        assert abs(p[0] - 1 / (1 + mpmath.exp(mpmath.mpf(before[1] - before[0]) / b))) < 1e-25
        for alpha, value in zip(ORDERS, curve, strict=True):
            truth = max(_renyi(q, p, alpha), _renyi(p, q, alpha))
            assert truth <= mpmath.mpf(value) and truth <= alpha * rho


# ---------------------------------------------------------------------------- modes and parsing
MECHANISMS = [
    _dl("2", "1"),
    _dg("4", "1"),
    _rnm("gumbel", "10", "1", False),
    _rnm("exponential", "10", "1", True),
]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: f"{m['type']}")
def test_every_mode_but_gdp_accepts_them(mechanism: dict[str, Any]) -> None:
    decl = parse_declaration(mechanism)
    for mode in ("basic", "zcdp", "rdp"):
        assert supports(_config(mode), decl), mode
    config = _config("gdp")
    assert not supports(config, decl)
    with pytest.raises(UnsupportedInMode, match=f"not '{decl.kind}' \\("):
        admit(config, initial_state(config), decl)
    # inside a composition or a subsample, as the kind they are charged as
    composed = {"type": "composed", "mechanism": mechanism, "count": 3}
    for mode in ("basic", "zcdp", "rdp"):
        assert _charge(mode, composed)
    subsampled = {"type": "subsampled", "scheme": "poisson", "rate": "0.1", "mechanism": mechanism}
    assert _charge("basic", subsampled)


def test_gdp_says_why_the_discrete_gaussian_is_refused() -> None:
    config = _config("gdp")
    with pytest.raises(UnsupportedInMode, match="no theorem makes it μ-GDP"):
        admit(config, initial_state(config), parse_declaration(_dg("4", "1")))


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: f"{m['type']}")
def test_canonical_json_round_trips(mechanism: dict[str, Any]) -> None:
    decl = parse_declaration(mechanism)
    assert parse_declaration(decl.to_json()) == decl
    assert decl.to_json() == mechanism


def test_defaults_and_types() -> None:
    assert parse_declaration({"type": "discrete_laplace", "scale": 3}) == DiscreteLaplace(
        Decimal(3)
    )
    assert parse_declaration({"type": "discrete_gaussian", "sigma": "2"}) == DiscreteGaussian(
        Decimal(2)
    )
    rnm = parse_declaration({"type": "report_noisy_max", "noise": "gumbel", "scale": "5"})
    assert rnm == ReportNoisyMax("gumbel", Decimal(5))
    assert isinstance(rnm, ReportNoisyMax) and not rnm.monotonic
    assert rnm.to_json()["monotonic"] is False and rnm.epsilon == Decimal("0.4")


_GUMBEL = {"type": "report_noisy_max", "noise": "gumbel", "scale": "1"}


@pytest.mark.parametrize(
    ("mechanism", "field"),
    [
        ({"type": "discrete_laplace", "scale": "0"}, "scale"),
        ({"type": "discrete_laplace", "scale": "-1"}, "scale"),
        ({"type": "discrete_laplace", "scale": "1", "sensitivity": "-1"}, "sensitivity"),
        ({"type": "discrete_gaussian", "sigma": "0"}, "sigma"),
        ({"type": "discrete_gaussian"}, "sigma"),
        ({**_GUMBEL, "noise": "cauchy"}, "noise"),
        ({"type": "report_noisy_max", "scale": "1"}, "noise"),
        ({**_GUMBEL, "scale": "0"}, "scale"),
        ({**_GUMBEL, "monotonic": 1}, "monotonic"),
        ({**_GUMBEL, "monotonic": "true"}, "monotonic"),
    ],
)
def test_invalid_parameters_are_refused(mechanism: dict[str, Any], field: str) -> None:
    with pytest.raises(DeclarationError) as caught:
        parse_declaration(mechanism)
    assert caught.value.field == field


def test_the_client_builders_make_what_the_core_reads() -> None:
    dl = builders.discrete_laplace("2.5", sensitivity=2)
    assert dl.to_json() == {"type": "discrete_laplace", "scale": "2.5", "sensitivity": "2"}
    assert parse_declaration(builders.discrete_gaussian(3).to_json()) == DiscreteGaussian(
        Decimal(3)
    )
    rnm = builders.report_noisy_max("exponential", "0.5", monotonic=True)
    assert parse_declaration(rnm.to_json()) == ReportNoisyMax(
        "exponential", Decimal("0.5"), monotonic=True
    )
    with pytest.raises(ValueError, match="report_noisy_max"):
        builders.report_noisy_max("cauchy", 1)


# ---------------------------------------------------------------------------- over HTTP
def _dataset(client: TestClient, mode: str) -> str:
    ds = basic_dataset(client, epsilon=10, delta=BUDGET_DELTA, accounting={"mode": mode})
    return str(ds["id"])


@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
def test_registration_over_http(client: TestClient, mode: str) -> None:
    dsid = _dataset(client, mode)
    url = f"/v1/datasets/{dsid}/invocations"
    for mechanism in MECHANISMS:
        r = client.post(url, json={"mechanism": mechanism}, headers=AUTH)
        if mode == "gdp":
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "UnsupportedInMode"
            assert mechanism["type"] in r.json()["detail"]
        else:
            assert r.status_code == 201, r.text
            assert r.json()["status"] == "accepted"
            if mode != "rdp":  # scalar charges: exactly the core's
                expected = _charge(mode, mechanism)
                assert r.json()["charge"] == {k: expected[k] for k in r.json()["charge"]}
    before = len(ledger(client, dsid))
    invalid: list[tuple[dict[str, Any], str]] = [
        ({"type": "discrete_laplace", "scale": 0}, "InvalidDeclaration"),
        ({"type": "discrete_gaussian", "sigma": "0", "sensitivity": 1}, "InvalidDeclaration"),
        ({**_GUMBEL, "scale": 0}, "InvalidDeclaration"),
        ({**_GUMBEL, "noise": "cauchy"}, "ValidationError"),
        ({**_GUMBEL, "monotonic": "yes"}, "ValidationError"),
        ({**_GUMBEL, "monotonic": 1}, "ValidationError"),
        ({"type": "discrete_laplace", "scale": 1, "epsilon": 1}, "ValidationError"),
    ]
    for mechanism, error in invalid:
        r = client.post(url, json={"mechanism": mechanism}, headers=AUTH)
        assert r.status_code == 422, (mechanism, r.text)
        assert r.json()["error"] == error, (mechanism, r.json())
    assert len(ledger(client, dsid)) == before


def test_a_ledger_with_the_new_kinds_replays(client: TestClient) -> None:
    for mode in ("basic", "zcdp", "rdp"):
        dsid = _dataset(client, mode)
        url = f"/v1/datasets/{dsid}/invocations"
        for mechanism in [*MECHANISMS, {"type": "composed", "mechanisms": MECHANISMS}]:
            r = client.post(url, json={"mechanism": mechanism}, headers=AUTH)
            assert r.status_code == 201, r.text
        entries = ledger(client, dsid)
        assert [e["kind"] for e in entries][1:] == ["invocation_accepted"] * 5
        verdict = replay(entries)
        assert verdict.ok, verdict.problems
        assert verdict.state == entries[-1]["state"]
