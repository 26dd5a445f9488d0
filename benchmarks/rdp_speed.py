"""Speed of the vectorised Poisson-subsampled-Gaussian RDP versus dp_accounting.

Times :func:`odometer_core.accounting.subsampling.poisson_gaussian_rdp` on dp_accounting's 156
default
orders against dp_accounting's ``RdpAccountant`` composing one
``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` and reading its RDP on the same orders, for a
few (q, σ). Reports median wall times (``time.perf_counter``) and the largest relative
difference between the two curves.

Part of the accounting benchmark (``python -m benchmarks accounting``), which calls ``run()``
and reports it in its section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from absl import logging as absl_logging
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from odometer_core.accounting.subsampling import poisson_gaussian_rdp

#: (q, σ) pairs: the brief's DP-SGD run, MNIST-like, Opacus test, a non-convergent case
#: (dp_accounting returns ∞ at α ∈ [1.1, 1.7]), and a tiny-RDP case.
CASES: tuple[tuple[float, float], ...] = (
    (0.01, 1.1),
    (256 / 60000, 1.1),
    (0.04, 1.5),
    (0.2, 0.7),
    (1e-4, 10.0),
)


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (imports, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _dp_accounting_rdp(q: float, sigma: float, orders: np.ndarray) -> np.ndarray:
    accountant = rdp_privacy_accountant.RdpAccountant(orders=orders)
    accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
    return np.asarray(accountant._rdp, dtype=np.float64)


def _envelope(orders: np.ndarray, values: np.ndarray) -> np.ndarray:
    idx = np.argsort(orders, kind="stable")
    out = np.empty_like(values)
    out[idx] = np.minimum.accumulate(values[idx][::-1])[::-1]
    return out


def run(repeats: int = 200, reference_repeats: int | None = None) -> dict[str, Any]:
    """Time both implementations; returns a JSON-serialisable dict of the measurements.

    Args:
      repeats: timed calls of ``poisson_gaussian_rdp`` per case (median reported).
      reference_repeats: timed dp_accounting calls per case; default ``max(5, repeats // 10)``
        (dp_accounting takes ≈ 0.03–0.25 s per call, so 200 of them per case would take
        minutes).

    Returns:
      ``{"orders": 156, "repeats": ..., "cases": [{q, sigma, ours_median_s, dp_accounting_median_s,
      speedup, max_rel_diff_raw, max_rel_diff_postprocessed, dp_infinite_orders, ...}], ...}``.
      ``max_rel_diff_raw`` compares with dp_accounting's raw curve on the orders where both are
      finite; ``max_rel_diff_postprocessed`` compares with dp_accounting's curve after the same
      sound post-processing ours applies (cap at α/(2σ²), monotone envelope in α), with its ∞
      (non-converged) orders filled by ours. Differences of ≈1e-6 at α near 1 are
      dp_accounting's dropped series tail, which ours bound rigorously instead.
    """
    absl_logging.set_verbosity(absl_logging.ERROR)  # dp_accounting warns on non-convergence
    ref_repeats = reference_repeats if reference_repeats is not None else max(5, repeats // 10)
    orders = np.array(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=np.float64)
    cases = []
    for q, sigma in CASES:
        ours = poisson_gaussian_rdp(q, sigma, orders)
        theirs = _dp_accounting_rdp(q, sigma, orders)
        both = np.isfinite(ours) & np.isfinite(theirs)
        raw_rel = np.abs(ours[both] - theirs[both]) / theirs[both]
        # dp_accounting's ∞ (non-converged) orders are replaced by ours before post-processing
        filled = np.where(np.isinf(theirs), ours, theirs)
        post = _envelope(orders, np.minimum(filled, orders / (2 * sigma**2)))
        fin = np.isfinite(post)
        post_rel = np.abs(ours[fin] - post[fin]) / post[fin]
        t_ours = _median_seconds(partial(poisson_gaussian_rdp, q, sigma, orders), repeats)
        t_dp = _median_seconds(partial(_dp_accounting_rdp, q, sigma, orders), ref_repeats)
        cases.append(
            {
                "q": q,
                "sigma": sigma,
                "ours_median_s": t_ours,
                "dp_accounting_median_s": t_dp,
                "speedup": t_dp / t_ours,
                "max_rel_diff_raw": float(raw_rel.max()),
                "max_rel_diff_postprocessed": float(post_rel.max()),
                "max_rel_diff_postprocessed_where_rdp_gt_1e-6": float(
                    post_rel[post[fin] > 1e-6].max(initial=0.0)
                ),
                "dp_infinite_orders": int(np.isinf(theirs).sum()),
                "ours_infinite_orders": int(np.isinf(ours).sum()),
                "ours_never_below_postprocessed": bool(np.all(ours[fin] >= post[fin])),
            }
        )
    return {
        "orders": int(orders.size),
        "repeats": repeats,
        "reference_repeats": ref_repeats,
        "cases": cases,
        "min_speedup": min(c["speedup"] for c in cases),
    }
