"""Tests of odometer_core.accounting.conversions against reference vectors and dp_accounting.

Reference vectors: public reference values (numbered #k below) and values computed
independently of this code (scipy, cross-checked with mpmath at 40–60 digits): the exact μ-GDP
curve ε(δ) and δ(ε), ρ-zCDP → ε by conversion method, and pure-DP zCDP constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from odometer_core.accounting import conversions as cv

DEFAULT_ORDERS = np.array(rdp_lib.DEFAULT_RDP_ORDERS, dtype=np.float64)


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# ----------------------------------------------------------------------------- RDP → (ε, δ)


def test_rdp_to_epsilon_reference_vector_2() -> None:
    orders = np.arange(2, 33, dtype=np.float64)
    eps, order = cv.rdp_to_epsilon(orders, np.full(31, 1.1), 1e-5)
    assert order == 32.0
    assert rel(eps, 1.32783806176) < 1e-10
    ref, _ = rdp_lib.compute_epsilon(orders, np.full(31, 1.1), 1e-5)
    assert eps >= ref and rel(eps, ref) < 1e-12
    # the inverse gives δ = 1e-5 back (never below the dp_accounting value)
    delta, order_d = cv.rdp_to_delta(orders, np.full(31, 1.1), 1.32783806176)
    assert order_d == 32.0
    assert rel(delta, 1e-5) < 1e-9
    ref_d, _ = rdp_lib.compute_delta(orders, np.full(31, 1.1), 1.32783806176)
    assert delta >= ref_d


def test_rdp_conversions_match_dp_accounting_random() -> None:
    rng = np.random.default_rng(20240611)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        orders = np.sort(rng.choice(DEFAULT_ORDERS, size=n, replace=False))
        rdp = 10 ** rng.uniform(-3, 2, size=n)
        rdp[rng.random(n) < 0.1] = np.inf
        delta = float(10 ** rng.uniform(-12, -1))
        eps, order = cv.rdp_to_epsilon(orders, rdp, delta)
        ref, ref_order = rdp_lib.compute_epsilon(orders, rdp, delta)
        assert order == ref_order
        assert eps >= ref
        assert eps - ref <= 1e-12 * max(abs(ref), 1.0)
        epsilon = float(rng.uniform(0, 20))
        d, order_d = cv.rdp_to_delta(orders, rdp, epsilon)
        ref_d, ref_order_d = rdp_lib.compute_delta(orders, rdp, epsilon)
        assert d >= ref_d
        assert d - ref_d <= 1e-10 * ref_d + 1e-300
        if ref_d < 1.0:
            assert order_d == ref_order_d


def test_rdp_to_epsilon_edge_handling() -> None:
    orders = [1.005, 2.0, 3.0]
    # orders ≤ 1.01 are not used by the CKS formula (∞), as in dp_accounting
    assert cv.rdp_to_epsilon([1.005], [0.5], 1e-5) == (math.inf, 1.005)
    # infinite RDP orders are ignored
    eps, order = cv.rdp_to_epsilon(orders, [0.1, math.inf, 0.2], 1e-5)
    assert order == 3.0 and math.isfinite(eps)
    # ε is clipped at 0 (large δ: KL route)
    assert cv.rdp_to_epsilon(orders, [1e-4, 1e-4, 1e-4], 0.5)[0] == 0.0
    # α = ∞ gives the pure-DP value τ, also at δ = 0
    eps_pure, order_pure = cv.rdp_to_epsilon([2.0, math.inf], [5.0, 0.7], 0.0)
    assert 0.7 <= eps_pure <= 0.7 * (1 + 1e-14) and order_pure == math.inf
    assert cv.rdp_to_epsilon([2.0], [5.0], 0.0)[0] == math.inf
    assert cv.rdp_to_epsilon([2.0], [0.0], 0.0)[0] == 0.0
    assert cv.rdp_to_delta([math.inf], [0.7], 0.7)[0] == 0.0
    assert cv.rdp_to_delta([2.0], [0.0], 0.0)[0] == 0.0


@pytest.mark.parametrize(
    "orders,rdp",
    [
        ([1.0, 2.0], [0.1, 0.2]),
        ([0.5], [0.1]),
        ([2.0], [-0.1]),
        ([2.0], [math.nan]),
        ([math.nan], [0.1]),
        ([2.0, 3.0], [0.1]),
        ([], []),
    ],
)
def test_rdp_conversions_reject_invalid(orders: list[float], rdp: list[float]) -> None:
    with pytest.raises(ValueError):
        cv.rdp_to_epsilon(orders, rdp, 1e-5)
    with pytest.raises(ValueError):
        cv.rdp_to_delta(orders, rdp, 1.0)


def test_rdp_conversions_reject_invalid_targets() -> None:
    for bad in (-1e-9, 1.5, math.nan):
        with pytest.raises(ValueError):
            cv.rdp_to_epsilon([2.0], [0.1], bad)
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError):
            cv.rdp_to_delta([2.0], [0.1], bad)


# ----------------------------------------------------------------------------- zCDP


@pytest.mark.parametrize(
    "rho,eps,expected",
    [
        (0.05, 0.25, 8.17727531036956e-2),
        (5e-30, 1e-13, 2.619676329730346e-234),
        (0.5, 0.0, 0.5588356393474351),
    ],
)
def test_zcdp_delta_reference_vectors_18(rho: float, eps: float, expected: float) -> None:
    d = cv.zcdp_delta(rho, eps)
    assert d >= expected
    assert rel(d, expected) < 1e-9


def test_zcdp_delta_special_values() -> None:
    assert cv.zcdp_delta(0.0, 1.0) == 0.0
    assert cv.zcdp_delta(1.0, math.inf) == 0.0
    assert cv.zcdp_delta(math.inf, 1.0) == 1.0
    assert cv.zcdp_delta(1e6, 0.0) == 1.0  # capped
    # δ(ε = 0) of #17
    assert rel(cv.zcdp_delta(0.03125, 0.0), 0.1508457845622862) < 1e-9


@pytest.mark.parametrize(
    "rho,delta,expected",
    [
        (0.03125, 1e-3, 0.6880024554878085),
        (0.5, 1e-5, 4.728386984943315),
        (0.1, 1e-6, 2.141938928385474),
        (1.0, 1e-6, 7.7662166253117215),
    ],
)
def test_zcdp_epsilon_reference_vectors(rho: float, delta: float, expected: float) -> None:
    e = cv.zcdp_epsilon(rho, delta)
    assert e >= expected
    assert rel(e, expected) < 1e-9
    # consistent with the δ direction, and at least as tight as the simple bound
    assert cv.zcdp_delta(rho, e) <= delta * (1 + 1e-9)
    assert e <= cv.simple_zcdp_epsilon(rho, delta)


@pytest.mark.parametrize(
    "rho,delta,cks,simple",
    [
        (0.001, 1e-5, 0.15734, 0.21560),
        (0.01, 1e-9, 0.81017, 0.92046),
        (2.0, 1e-9, 14.15015, 14.87580),
        (5.0, 1e-5, 19.04726, 20.17427),
    ],
)
def test_zcdp_epsilon_table_c(rho: float, delta: float, cks: float, simple: float) -> None:
    assert cv.zcdp_epsilon(rho, delta) == pytest.approx(cks, abs=6e-6)
    assert cv.simple_zcdp_epsilon(rho, delta) == pytest.approx(simple, abs=6e-6)


def test_zcdp_epsilon_special_values() -> None:
    assert cv.zcdp_epsilon(0.0, 1e-5) == 0.0
    assert cv.zcdp_epsilon(0.1, 0.0) == math.inf
    assert cv.zcdp_epsilon(math.inf, 1e-5) == math.inf
    assert cv.zcdp_epsilon(1e-4, 0.9) == 0.0  # clipped at 0
    assert cv.simple_zcdp_epsilon(0.0, 1e-5) == 0.0


@pytest.mark.parametrize(
    "eps,delta,approx", [(1.0, 1e-6, 0.0244), (3.0, 1e-6, 0.185), (8.0, 1e-5, 1.23)]
)
def test_zcdp_rho_budget(eps: float, delta: float, approx: float) -> None:
    rho = cv.zcdp_rho_budget(eps, delta)
    assert rho == pytest.approx(approx, rel=5e-3)
    assert cv.zcdp_delta(rho, eps) <= delta  # exactly as computed
    assert cv.zcdp_delta(rho * (1 + 1e-9), eps) > delta  # and nearly the largest
    assert cv.zcdp_epsilon(rho, delta) <= eps * (1 + 1e-12)


def test_zcdp_rho_budget_edges() -> None:
    assert cv.zcdp_rho_budget(1.0, 0.0) == 0.0
    for eps, delta in ((1.0, 1.0), (math.inf, 1e-6), (-1.0, 1e-6), (1.0, math.nan)):
        with pytest.raises(ValueError):
            cv.zcdp_rho_budget(eps, delta)


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-8, 1e3),
    factor=st.floats(1.0, 10.0),
    delta=st.floats(1e-15, 0.5),
    shrink=st.floats(1e-3, 1.0),
)
def test_zcdp_epsilon_monotone(rho: float, factor: float, delta: float, shrink: float) -> None:
    e = cv.zcdp_epsilon(rho, delta)
    # increasing in ρ
    assert e <= cv.zcdp_epsilon(rho * factor, delta) * (1 + 1e-12) + 1e-300
    # decreasing in δ
    assert cv.zcdp_epsilon(rho, delta * shrink) * (1 + 1e-12) + 1e-300 >= e


# ----------------------------------------------------------------------------- GDP / analytic


@pytest.mark.parametrize(
    "mu,eps,expected",
    [
        (0.5, 0.0, 1.974127e-1),
        (0.5, 1.0, 6.829595e-3),
        (0.5, 5.0, 4.415443e-24),
        (1.0, 0.5, 2.384217e-1),
        (1.0, 1.0, 1.269367e-1),
        (1.0, 5.0, 5.793722e-7),
        (2.0, 2.0, 3.318980e-1),
        (2.0, 5.0, 3.228198e-2),
        (1.0, 10.0, 9.81270583e-23),
    ],
)
def test_gdp_delta_table_b(mu: float, eps: float, expected: float) -> None:
    d = cv.gdp_delta(mu, eps)
    assert rel(d, expected) < 1e-6


def test_gdp_delta_extremes() -> None:
    tiny = cv.gdp_delta(0.1, 5.0)  # exact 2.6e-547 underflows
    assert 0.0 < tiny <= 1e-300
    assert cv.gdp_delta(0.0, 1.0) == 0.0
    assert cv.gdp_delta(math.inf, 1.0) == 1.0
    assert cv.gdp_delta(1e-300, 1.0) > 0.0
    assert cv.gdp_delta(1e6, 1.0) == pytest.approx(1.0)
    assert 0.0 < cv.gdp_delta(1e-8, 0.0) < 1e-8


def test_gdp_delta_matches_dp_accounting_pld_gaussian() -> None:
    pld = pld_lib.from_gaussian_mechanism(1.0, value_discretization_interval=1e-4)
    for eps in (0.0, 0.3, 1.0, 2.5, 5.0):
        ref = float(pld.get_delta_for_epsilon(eps))
        assert rel(cv.gdp_delta(1.0, eps), ref) < 2e-3


def test_reference_vector_8_three_gaussians_are_one_gdp() -> None:
    # σ = √3 composed 3× is μ = 1-GDP: δ(ε = 1) = 0.126936 ± 1e-3
    mu = math.sqrt(3 * (1 / math.sqrt(3)) ** 2)
    assert abs(cv.gdp_delta(mu, 1.0) - 0.126936) < 1e-3
    # the composition is one Gaussian with σ = √3/√3 = 1 (Dong–Roth–Su Cor. 3.3)
    assert abs(cv.analytic_gaussian_delta(1.0, 1.0, 1.0) - 0.126936) < 1e-6


@pytest.mark.parametrize(
    "mu,delta,expected,tol",
    [
        (1.0, 1e-5, 4.377178096, 1e-9),
        (2.0, 1e-9, 13.53477222, 1e-9),
        (5.0, 1e-12, 47.04923217, 1e-9),
        (0.25, 1e-6, 1.0607, 1e-4),
        (3.0, 1e-3, 13.0882, 1e-5),
    ],
)
def test_gdp_epsilon_table_a(mu: float, delta: float, expected: float, tol: float) -> None:
    e = cv.gdp_epsilon(mu, delta)
    assert rel(e, expected) < tol
    assert cv.gdp_delta(mu, e) <= delta


def test_gdp_epsilon_and_budget_edges() -> None:
    assert cv.gdp_epsilon(0.1, 0.5) == 0.0  # δ(0) = TV ≤ δ
    assert cv.gdp_epsilon(0.0, 1e-5) == 0.0
    assert cv.gdp_epsilon(1.0, 0.0) == math.inf
    assert cv.gdp_mu_budget(1.0, 0.0) == 0.0
    with pytest.raises(ValueError):
        cv.gdp_mu_budget(1.0, 1.0)


@pytest.mark.parametrize("eps,delta", [(4.377178096, 1e-5), (1.0, 1e-6), (0.1, 1e-3)])
def test_gdp_mu_budget(eps: float, delta: float) -> None:
    mu = cv.gdp_mu_budget(eps, delta)
    assert cv.gdp_delta(mu, eps) <= delta
    assert cv.gdp_delta(mu * (1 + 1e-9), eps) > delta
    if eps == 4.377178096:
        assert mu == pytest.approx(1.0, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(1e-6, 50.0), factor=st.floats(1.0, 5.0), eps=st.floats(0.0, 50.0))
def test_gdp_delta_increasing_in_mu(mu: float, factor: float, eps: float) -> None:
    assert cv.gdp_delta(mu, eps) <= cv.gdp_delta(mu * factor, eps) * (1 + 1e-12) + 1e-300


def test_analytic_gaussian_epsilon_reference_3() -> None:
    # RDP gives ε ≈ 1 at δ = 1e-6 for σ = 4.530877117; the exact curve gives 0.927392 (PLD)
    e = cv.analytic_gaussian_epsilon(4.530877117, 1.0, 1e-6)
    assert abs(e - 0.927392) < 2e-6
    acc = rdp_lib.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(4.530877117))
    assert e < acc.get_epsilon(1e-6)
    assert cv.analytic_gaussian_delta(4.530877117, 1.0, e) <= 1e-6
    assert cv.analytic_gaussian_delta(0.0, 1.0, 1.0) == 1.0
    assert cv.analytic_gaussian_delta(1.0, 0.0, 1.0) == 0.0
    same = cv.gdp_epsilon(1.0, 1e-5)
    assert same <= cv.analytic_gaussian_epsilon(2.0, 2.0, 1e-5) <= same * (1 + 1e-14)


# ----------------------------------------------------------------------------- RDP curves


def _rr_curve_reference(eps: float, alpha: float) -> float:
    """Naive randomized-response Rényi divergence (moderate values only)."""
    p = math.exp(eps) / (1 + math.exp(eps))
    return math.log(p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (
        alpha - 1
    )


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0])
def test_pure_dp_rdp_is_randomized_response_curve(eps: float) -> None:
    orders = np.array([1.01, 1.5, 2.0, 3.7, 10.0, 64.0])
    got = cv.pure_dp_rdp(eps, orders)
    for a, g in zip(orders, got, strict=True):
        ref = _rr_curve_reference(eps, float(a))
        assert g >= ref and rel(g, ref) < 1e-9
    assert np.all(got <= np.minimum(eps, orders * eps * math.tanh(eps / 2)) * (1 + 1e-12))
    assert np.all(np.diff(got) >= 0)
    ends = cv.pure_dp_rdp(eps, [1.0, math.inf])
    assert ends[0] == pytest.approx(eps * math.tanh(eps / 2), rel=1e-12)
    assert ends[1] == eps


def test_pure_dp_zcdp_table_f() -> None:
    for eps, rho in ((0.1, 0.004996), (0.5, 0.122459), (1.0, 0.462117), (2.0, 1.523188)):
        assert cv.pure_dp_zcdp(eps) == pytest.approx(rho, abs=1e-6)
        assert cv.pure_dp_zcdp(eps) <= eps * eps / 2
    assert cv.pure_dp_zcdp(0.0) == 0.0
    assert cv.pure_dp_zcdp(math.inf) == math.inf


def test_laplace_rdp_matches_dp_accounting() -> None:
    rng = np.random.default_rng(7)
    orders = np.concatenate(([1.0], DEFAULT_ORDERS))
    for _ in range(10):
        eps = float(rng.uniform(0.05, 5.0))
        sens = float(rng.uniform(0.5, 2.0))
        got = cv.laplace_rdp(sens / eps, sens, orders)
        ref = np.array([rdp_lib._laplace_rdp(eps, float(a)) for a in orders])
        assert np.all(got >= ref * (1 - 1e-15))
        np.testing.assert_allclose(got, ref, rtol=1e-11)
    assert 1.0 <= cv.laplace_rdp(1.0, 1.0, [math.inf])[0] <= 1.0 + 1e-14
    assert cv.laplace_rdp(0.0, 1.0, [2.0])[0] == math.inf
    assert cv.laplace_rdp(1.0, 0.0, [2.0])[0] == 0.0


def test_laplace_reference_vector_10_through_rdp_accountant() -> None:
    acc = rdp_lib.RdpAccountant()
    acc.compose(dp_event.LaplaceDpEvent(1.0), 10)
    ours = 10 * cv.laplace_rdp(1.0, 1.0, DEFAULT_ORDERS)
    np.testing.assert_allclose(ours, acc._rdp, rtol=1e-11)
    eps, _ = cv.rdp_to_epsilon(DEFAULT_ORDERS, ours, 1e-5)
    assert eps == pytest.approx(9.990334, abs=1e-6)


def test_gaussian_rdp() -> None:
    got = cv.gaussian_rdp(2.0, 1.0, [1.0, 2.0, 10.0, math.inf])
    np.testing.assert_allclose(got[:3], [1 / 8, 2 / 8, 10 / 8], rtol=1e-14)
    assert np.all(got[:3] >= [1 / 8, 2 / 8, 10 / 8])
    assert got[3] == math.inf
    assert np.all(cv.gaussian_rdp(0.0, 1.0, [2.0]) == math.inf)
    assert np.all(cv.gaussian_rdp(1.0, 0.0, [2.0, math.inf]) == 0.0)
    acc = rdp_lib.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(1.7))
    np.testing.assert_allclose(cv.gaussian_rdp(1.7, 1.0, DEFAULT_ORDERS), acc._rdp, rtol=1e-14)


def test_exponential_rdp_reference_vector_4() -> None:
    got = cv.exponential_rdp(1.0, [1.0, 1000.0])
    assert rel(float(got[0]), 0.123301561) < 1e-8
    assert got[1] == 1.0
    # the formula of dp_accounting's ExponentialMechanismDpEvent, evaluated naively
    for eps in (0.1, 0.7, 2.0, 6.0):
        xi = eps / math.expm1(eps) - 1 - math.log(eps / math.expm1(eps)) - eps**2 / 8
        ref = np.minimum(xi + eps**2 / 8 * DEFAULT_ORDERS, eps)
        got = cv.exponential_rdp(eps, DEFAULT_ORDERS)
        assert np.all(got >= ref * (1 - 1e-15))
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert cv.exponential_rdp(2.0, [math.inf])[0] == 2.0
    assert np.all(np.isfinite(cv.exponential_rdp(1e4, [1.0, 2.0, 1e6])))


def test_mcdp_to_zcdp() -> None:
    xi, rho = cv.mcdp_to_zcdp(1.0, 1.0)
    assert xi >= 0.5 and rho >= 0.5
    assert xi == pytest.approx(0.5, rel=1e-15) and rho == pytest.approx(0.5, rel=1e-15)
    xi, rho = cv.mcdp_to_zcdp(0.1, 1.0)
    assert xi == 0.0 and rho == pytest.approx(0.5)  # ξ clipped at 0
    with pytest.raises(ValueError):
        cv.mcdp_to_zcdp(-1.0, 1.0)


# ----------------------------------------------------------------------------- robustness


def test_no_nan_on_extreme_inputs() -> None:
    big_orders = np.array([1.0001, 1.5, 2.0, 1024.0, 1e6, math.inf])
    curves = [
        cv.pure_dp_rdp(1e3, big_orders),
        cv.pure_dp_rdp(1e-12, big_orders),
        cv.laplace_rdp(1e-6, 1.0, big_orders),
        cv.laplace_rdp(1e6, 1.0, big_orders),
        cv.gaussian_rdp(1e-6, 1.0, big_orders),
        cv.gaussian_rdp(1e-200, 1.0, big_orders),
        cv.exponential_rdp(1e-9, big_orders),
        cv.exponential_rdp(800.0, big_orders),
    ]
    for c in curves:
        assert not np.any(np.isnan(c))
        assert np.all(c >= 0)
    scalars = [
        cv.zcdp_epsilon(1e-30, 1e-300),
        cv.zcdp_epsilon(1e30, 1e-300),
        cv.zcdp_epsilon(5e-324, 0.5),
        cv.zcdp_delta(1e-30, 1e3),
        cv.zcdp_delta(1e30, 1e-3),
        cv.zcdp_delta(5e-324, 0.0),
        cv.zcdp_rho_budget(1e-3, 1e-300),
        cv.zcdp_rho_budget(1e3, 1e-300),
        cv.gdp_delta(1e-8, 1e3),
        cv.gdp_delta(1e4, 0.0),
        cv.gdp_epsilon(1e-8, 1e-300),
        cv.gdp_epsilon(50.0, 1e-300),
        cv.gdp_mu_budget(1e-3, 1e-300),
        cv.gdp_mu_budget(1e3, 0.1),
        cv.analytic_gaussian_epsilon(1e-6, 1.0, 1e-300),
        cv.simple_zcdp_epsilon(1e-30, 1e-300),
        cv.rdp_to_epsilon([1024.0, 1e6], [1e-9, 1e5], 1e-300)[0],
        cv.rdp_to_delta([1.02, 1024.0], [1e-12, 700.0], 1e3)[0],
    ]
    for s in scalars:
        assert not math.isnan(s)
        assert s >= 0
    assert cv.zcdp_delta(5e-30, 1e3) > 0.0  # never rounded to 0


@pytest.mark.parametrize("bad", [math.nan, -1.0])
def test_invalid_parameters_raise(bad: float) -> None:
    calls: list[Callable[[], object]] = [
        lambda: cv.zcdp_delta(bad, 1.0),
        lambda: cv.zcdp_delta(1.0, bad),
        lambda: cv.zcdp_epsilon(bad, 1e-5),
        lambda: cv.zcdp_epsilon(1.0, bad),
        lambda: cv.gdp_delta(bad, 1.0),
        lambda: cv.gdp_epsilon(1.0, bad),
        lambda: cv.analytic_gaussian_delta(bad, 1.0, 1.0),
        lambda: cv.pure_dp_rdp(bad, [2.0]),
        lambda: cv.laplace_rdp(bad, 1.0, [2.0]),
        lambda: cv.gaussian_rdp(1.0, bad, [2.0]),
        lambda: cv.exponential_rdp(bad, [2.0]),
        lambda: cv.pure_dp_zcdp(bad),
        lambda: cv.simple_zcdp_epsilon(bad, 1e-5),
        lambda: cv.gaussian_rdp(1.0, 1.0, [bad]),
        lambda: cv.pure_dp_rdp(1.0, [0.5]),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        cv.zcdp_epsilon(1.0, 1.5)
    with pytest.raises(ValueError):
        cv.gaussian_rdp(1.0, 1.0, [1.5, 0.9])
