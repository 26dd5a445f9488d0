"""Tests of odometer_core.accounting.pld (PLD accounting inside one fixed-schedule invocation)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import pld


def test_dp_sgd_reference_vector_14_is_an_upper_bound_within_half_a_percent() -> None:
    eps = pld.pld_epsilon_dp_sgd(1.1, 0.01, 10_000, 1e-5)
    ref = 5.192620  # dp_accounting PLD at discretisation 1e-4 (PRV: [5.18230, 5.20287])
    assert ref <= eps <= ref * 1.005
    assert eps < 5.632011  # tighter than RDP


@pytest.mark.parametrize(
    "sigma,q,steps,ref",
    [
        (1.5, 0.04, 2250, 6.768787),  # reference vector #12 (PLD)
        (1.1, 256 / 60000, 14_100, 2.385211),
    ],  # reference vector #15 (PLD)
)
def test_dp_sgd_other_reference_vectors(sigma: float, q: float, steps: int, ref: float) -> None:
    eps = pld.pld_epsilon_dp_sgd(sigma, q, steps, 1e-5)
    assert ref <= eps <= ref * 1.005


def test_laplace_reference_vector_10() -> None:
    eps = pld.pld_epsilon_laplace(1.0, 10, 1e-5)
    assert 9.989962 <= eps <= 9.989962 * 1.005
    assert eps <= 10.0 + 1e-12  # never worse than basic composition
    assert pld.pld_epsilon_laplace(1.0, 10, 0.0) == pytest.approx(10.0)
    assert pld.pld_epsilon_laplace(2.0, 10, 0.0) >= 5.0


def test_gaussian_matches_analytic_gaussian() -> None:
    # σ = √3 composed 3× is one Gaussian with σ = 1 (μ = 1): ε(1e-5) = 4.377178096 (GDP exact)
    eps = pld.pld_epsilon_gaussian(math.sqrt(3), 3, 1e-5)
    exact = cv.gdp_epsilon(1.0, 1e-5)
    assert exact <= eps <= exact * 1.005
    one = pld.pld_epsilon_gaussian(4.530877117, 1, 1e-6)
    assert 0.927392 <= one <= 0.927392 * 1.005


def test_edge_cases_and_validation() -> None:
    assert pld.pld_epsilon_dp_sgd(1.0, 0.0, 100, 1e-5) == 0.0
    assert pld.pld_epsilon_dp_sgd(1.0, 0.1, 0, 1e-5) == 0.0
    assert pld.pld_epsilon_dp_sgd(0.0, 0.1, 10, 1e-5) == math.inf
    assert pld.pld_epsilon_dp_sgd(1.0, 0.1, 10, 0.0) == math.inf
    assert pld.pld_epsilon_gaussian(1.0, 0, 1e-5) == 0.0
    assert pld.pld_epsilon_laplace(0.0, 3, 1e-5) == math.inf
    # δ below the pessimistic truncation mass: ∞, never NaN
    assert pld.pld_epsilon_dp_sgd(1.1, 0.01, 100, 1e-300) == math.inf
    calls: list[Callable[[], float]] = [
        lambda: pld.pld_epsilon_dp_sgd(-1.0, 0.1, 10, 1e-5),
        lambda: pld.pld_epsilon_dp_sgd(1.0, 1.5, 10, 1e-5),
        lambda: pld.pld_epsilon_dp_sgd(1.0, 0.1, -1, 1e-5),
        lambda: pld.pld_epsilon_dp_sgd(1.0, 0.1, 10, math.nan),
        lambda: pld.pld_epsilon_gaussian(1.0, 2.5, 1e-5),  # type: ignore[arg-type]
        lambda: pld.pld_epsilon_laplace(1.0, 3, 2.0),
        lambda: pld.pld_epsilon_gaussian(1.0, 3, 1e-5, value_discretization_interval=0.0),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()
