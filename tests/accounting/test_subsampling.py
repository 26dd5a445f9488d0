"""Tests of odometer_core.accounting.subsampling against reference vectors and dp_accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from absl import logging as absl_logging
from dp_accounting import dp_event, privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import subsampling as ss

DEFAULT_ORDERS = np.array(rdp_lib.DEFAULT_RDP_ORDERS, dtype=np.float64)

# dp_accounting logs a warning for every fractional order whose series does not converge.
absl_logging.set_verbosity(absl_logging.ERROR)


def _envelope(orders: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Monotone envelope min_{α' ≥ α} v(α') (what our functions apply after capping)."""
    idx = np.argsort(orders, kind="stable")
    out = np.empty_like(values)
    out[idx] = np.minimum.accumulate(values[idx][::-1])[::-1]
    return out


def _reference(values: np.ndarray, orders: np.ndarray, sigma: float) -> np.ndarray:
    """dp_accounting's values with the same sound post-processing: Gaussian cap + envelope."""
    return _envelope(orders, np.minimum(values, orders / (2 * sigma**2)))


# ----------------------------------------------------------------------------- (ε, δ)


def test_poisson_amplify() -> None:
    eps, delta = ss.poisson_amplify(1.0, 1e-6, 0.01)
    exact = math.log(1 + 0.01 * (math.e - 1))
    assert exact <= eps <= exact * (1 + 1e-14)
    assert 1e-8 <= delta <= 1e-8 * (1 + 1e-14)
    assert ss.poisson_amplify(2.0, 1e-5, 0.0) == (0.0, 0.0)
    assert ss.poisson_amplify(2.0, 1e-5, 1.0) == (2.0, 1e-5)
    assert ss.poisson_amplify(math.inf, 0.0, 0.5) == (math.inf, 0.0)
    big, _ = ss.poisson_amplify(1000.0, 0.0, 1e-3)  # e^ε overflows: log-space path
    assert big == pytest.approx(1000.0 + math.log(1e-3), rel=1e-12)
    assert big >= 1000.0 + math.log(1e-3)
    tiny, _ = ss.poisson_amplify(720.0, 0.0, 1e-320)  # q·e^ε ≈ e^{−16.8}
    assert tiny == pytest.approx(math.exp(math.log(1e-320) + 720.0), rel=1e-9)


def test_wor_amplify() -> None:
    eps, delta = ss.wor_amplify(0.5, 1e-6, 1000, 100000)
    exact = math.log1p(0.01 * math.expm1(0.5))
    assert exact <= eps <= exact * (1 + 1e-14)
    assert delta >= 1e-8
    assert ss.wor_amplify(0.5, 1e-6, 0, 10) == (0.0, 0.0)
    assert ss.wor_amplify(0.5, 1e-6, 10, 10) == (0.5, 1e-6)
    for m, n in ((5, 4), (-1, 4), (1, 0)):
        with pytest.raises(ValueError):
            ss.wor_amplify(0.5, 1e-6, m, n)
    with pytest.raises(ValueError):
        ss.wor_amplify(0.5, 1e-6, 1.5, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ss.poisson_amplify(0.5, 1e-6, 1.5)


# ----------------------------------------------------------------------------- Poisson Gaussian


def test_poisson_gaussian_reference_vector_1() -> None:
    orders = [1.5, 2.5, 5.0, 50.0, 100.0, math.inf]
    expected = [6.70579741e-04, 1.08548710e-03, 2.18075656e-03, 2.38460375e-02, 1.67416308e02]
    got = 50 * ss.poisson_gaussian_rdp(0.01, 2.5, orders)
    np.testing.assert_allclose(got[:5], expected, rtol=1e-4)
    assert got[5] == math.inf


def test_poisson_gaussian_reference_vector_14() -> None:
    rdp = 10_000 * ss.poisson_gaussian_rdp(0.01, 1.1, DEFAULT_ORDERS)
    eps, order = cv.rdp_to_epsilon(DEFAULT_ORDERS, rdp, 1e-5)
    assert order == pytest.approx(4.7)
    assert eps == pytest.approx(5.632011, abs=1e-6)
    acc = rdp_lib.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 10_000)
    assert eps >= acc.get_epsilon(1e-5)


def test_poisson_gaussian_matches_dp_accounting_random() -> None:
    """Randomised (q, σ), q ∈ [1e-4, 0.5] log-uniform, σ ∈ [0.5, 10], all 156 default orders.

    Compared on the CGF (α − 1)ε(α): 1e-9 relative or 1e-10 absolute (tiny RDP values, where
    both implementations are dominated by float cancellation in log(1 + tiny)); never below.
    """
    rng = np.random.default_rng(1908_10530)
    for _ in range(20):
        q = float(10 ** rng.uniform(-4, math.log10(0.5)))
        sigma = float(rng.uniform(0.5, 10.0))
        ours = ss.poisson_gaussian_rdp(q, sigma, DEFAULT_ORDERS)
        raw = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, sigma, DEFAULT_ORDERS)
        # where dp_accounting's series did not converge (∞) ours are checked separately below
        ref = _reference(np.where(np.isinf(raw), ours, raw), DEFAULT_ORDERS, sigma)
        assert np.array_equal(np.isinf(ours), np.isinf(ref))
        fin = np.isfinite(ref)
        cgf, cgf_ref = (ours * (DEFAULT_ORDERS - 1))[fin], (ref * (DEFAULT_ORDERS - 1))[fin]
        assert np.all(np.abs(cgf - cgf_ref) <= 1e-9 * np.abs(cgf_ref) + 1e-10), (q, sigma)
        assert np.all(ours[fin] >= ref[fin] * (1 - 1e-14)), (q, sigma)
        # where dp_accounting's series converged and is not loose, the values agree directly;
        # at fractional α near 1 ours exceed them by the rigorous tail bound (≲ 2e-9 relative)
        direct = np.isfinite(raw) & (raw == ref) & (raw > 1e-3)
        np.testing.assert_allclose(ours[direct], raw[direct], rtol=5e-9)


def test_poisson_gaussian_non_convergent_orders_are_rigorous_and_tight() -> None:
    """q = 0.5, σ = 0.5: dp_accounting's stopping rule never fires at α ∈ [1.1, 1.6] (it returns
    ∞). Ours sum the 1000-term budget plus the rigorous tail bound s_K·K/α: never below the
    series summed to 200 000 terms, and within 1e-6 of it."""
    raw = rdp_lib._compute_rdp_poisson_subsampled_gaussian(0.5, 0.5, DEFAULT_ORDERS)
    slow = DEFAULT_ORDERS[np.isinf(raw)]
    assert slow.size > 0
    ours = ss.poisson_gaussian_rdp(0.5, 0.5, slow)
    for alpha, got in zip(slow, ours, strict=True):
        ls0, ls1, _, _ = ss._mtz_frac_terms(0.5, 0.5, np.array([alpha]), 200_000)
        long_sum = float(np.logaddexp.reduce(np.logaddexp(ls0, ls1)[0])) / (alpha - 1)
        assert long_sum <= got <= long_sum * (1 + 1e-6)
    assert np.all(ours < slow / (2 * 0.5**2))  # far below the Gaussian fallback


def test_poisson_gaussian_edge_cases() -> None:
    orders = [1.5, 2.0, 7.0, math.inf]
    assert np.all(ss.poisson_gaussian_rdp(0.0, 1.0, orders) == 0.0)
    assert np.all(ss.poisson_gaussian_rdp(0.1, 0.0, orders) == math.inf)
    full = ss.poisson_gaussian_rdp(1.0, 2.0, orders)
    np.testing.assert_allclose(full[:3], np.array(orders[:3]) / 8, rtol=1e-14)
    assert full[3] == math.inf
    assert ss.poisson_gaussian_rdp(0.1, 2.0, [math.inf])[0] == math.inf
    for bad in ([1.0], [0.5], [math.nan]):
        with pytest.raises(ValueError):
            ss.poisson_gaussian_rdp(0.1, 1.0, bad)
    for q, s in ((1.5, 1.0), (-0.1, 1.0), (0.1, -1.0), (math.nan, 1.0)):
        with pytest.raises(ValueError):
            ss.poisson_gaussian_rdp(q, s, [2.0])


def test_poisson_gaussian_no_nan_on_extreme_inputs() -> None:
    orders = np.concatenate((DEFAULT_ORDERS, [2048.0, 4096.5, 1e7, math.inf]))
    for q, sigma in (
        (1e-9, 1e-6),
        (0.5, 1e-6),
        (1e-300, 0.3),
        (0.999999, 50.0),
        (1e-4, 1e4),
        (0.3, 1e-160),
    ):
        v = ss.poisson_gaussian_rdp(q, sigma, orders)
        assert not np.any(np.isnan(v))
        assert np.all(v >= 0)
        assert np.all(v[1:] >= v[:-1])


@settings(max_examples=25, deadline=None)
@given(
    q=st.floats(1e-5, 0.5),
    factor=st.floats(1.0, 3.0),
    sigma=st.floats(0.3, 20.0),
)
def test_poisson_gaussian_monotone_in_order_and_rate(q: float, factor: float, sigma: float) -> None:
    v = ss.poisson_gaussian_rdp(q, sigma, DEFAULT_ORDERS)
    assert np.all(v[1:] >= v[:-1])  # exact (monotone envelope)
    # in q up to float noise of the truncation point / error allowances (q ≤ 0.5: for larger q
    # the magnitude-sum series of fractional orders, also dp_accounting's, is not monotone in q)
    w = ss.poisson_gaussian_rdp(min(0.5, q * factor), sigma, DEFAULT_ORDERS)
    assert np.all(v <= w * (1 + 1e-9) + 1e-300)


# ----------------------------------------------------------------------------- WOR Gaussian


def test_wor_gaussian_reference_vector_16() -> None:
    rdp = 10_000 * ss.wor_gaussian_rdp(1000, 100_000, 1.1, DEFAULT_ORDERS)
    eps, order = cv.rdp_to_epsilon(DEFAULT_ORDERS, rdp, 1e-5)
    assert order == 3.0
    assert eps == pytest.approx(11.771715, abs=1e-6)


def _dp_wor(m: int, n: int, sigma: float) -> np.ndarray:
    acc = rdp_lib.RdpAccountant(
        neighboring_relation=privacy_accountant.NeighboringRelation.REPLACE_ONE
    )
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(n, m, dp_event.GaussianDpEvent(sigma)))
    return np.asarray(acc._rdp, dtype=np.float64)


def test_wor_gaussian_matches_dp_accounting_random() -> None:
    """σ ≤ 3.5: the forward differences of WBK19 Thm 27 are accurate in float; 1e-9 relative."""
    rng = np.random.default_rng(1808_00087)
    for _ in range(6):
        n = int(rng.integers(10, 10**6))
        m = int(rng.integers(1, n))
        sigma = float(rng.uniform(0.5, 3.5))
        ours = ss.wor_gaussian_rdp(m, n, sigma, DEFAULT_ORDERS)
        ref = _reference(_dp_wor(m, n, sigma), DEFAULT_ORDERS, sigma)
        np.testing.assert_allclose(ours, ref, rtol=1e-9)
        assert np.all(ours >= ref * (1 - 1e-14))


def test_wor_gaussian_large_sigma_is_conservative() -> None:
    """For σ ≳ 4 the float forward differences lose all digits (also in dp_accounting);
    ours carry a rounding-error allowance, so they are never below dp_accounting."""
    for m, n, sigma in ((242_190, 473_193, 9.529), (5_026, 34_862, 9.512), (37_574, 123_926, 4.8)):
        ours = ss.wor_gaussian_rdp(m, n, sigma, DEFAULT_ORDERS)
        ref = _reference(_dp_wor(m, n, sigma), DEFAULT_ORDERS, sigma)
        assert np.all(ours >= ref * (1 - 1e-14))
        assert np.all(ours <= DEFAULT_ORDERS / (2 * sigma**2) * (1 + 1e-14))
        assert np.all(np.diff(ours) >= 0)


def test_wor_gaussian_edge_cases() -> None:
    orders = [1.5, 2.0, 300.0, 300.5, math.inf]
    assert np.all(ss.wor_gaussian_rdp(0, 10, 1.0, orders) == 0.0)
    assert np.all(ss.wor_gaussian_rdp(3, 10, 0.0, orders) == math.inf)
    full = ss.wor_gaussian_rdp(10, 10, 2.0, orders)
    np.testing.assert_allclose(full[:4], np.array(orders[:4]) / 8, rtol=1e-14)
    v = ss.wor_gaussian_rdp(3, 1000, 1.0, orders)
    assert v[-1] == math.inf
    assert np.all(np.isfinite(v[:-1])) and np.all(np.diff(v) >= 0)
    with pytest.raises(ValueError):
        ss.wor_gaussian_rdp(3, 10, 1.0, [1.0])
    with pytest.raises(ValueError):
        ss.wor_gaussian_rdp(11, 10, 1.0, [2.0])
