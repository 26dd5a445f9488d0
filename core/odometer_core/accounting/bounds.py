"""Cheap sound *lower* bounds on the ε a declaration is charged, to refuse without the tight
computation.

An admission needs the tight charge only when the decision depends on it. When a lower bound on
the charge already exceeds what is left, the invocation is refused whatever the tight value is;
and a candidate bound of a ``composed`` declaration whose lower bound exceeds another candidate's
value can never be the smallest. Both tests need a bound that is never *above* the exact ε.

The bound here is for T Poisson-subsampled Gaussian steps (DP-SGD; one step is a subsampled
Gaussian query), noise multiplier σ, rate q, add/remove relation. Take the *remove* direction
of one step: P = (1 − q)·N(0, σ²) + q·N(1, σ²) against Q = N(0, σ²) (sensitivity 1). For T
steps, post-process the T outputs into their sum S: under P, S = K + Z with K ~ Binomial(T, q)
and Z ~ N(0, Tσ²); under Q, S = Z. For any threshold t, the event A = {S > t} gives
P(A) − e^ε·Q(A) ≤ H_{e^ε}(P^T ‖ Q^T) (the hockey-stick divergence does not increase under
post-processing, Dwork–Roth 2014 Prop. 2.1 in its (ε, δ) form), and that is at most the δ(ε) of
the mechanism. So at every ε < ε_t := log(P(A) − δ) − log Q(A) the mechanism is *not* (ε, δ)-DP:
the smallest ε valid at δ — and therefore any sound charge, PLD or RDP — is at least ε_t. The
bound is the largest ε_t over a grid of thresholds. For T = 1 the likelihood ratio is monotone in
the output, so threshold events are optimal and the bound is the exact ε of the remove direction
(up to the grid); for large T the sum is not a sufficient statistic and the bound is looser
(≈ 0.7 of the PLD value at q = 0.5, σ = 0.5, T = 10^6), which is all a refusal needs.

Dropping binomial terms from P(A) only lowers it, so the sum is taken over a window of K around
its mean (the bound stays valid, slightly weaker). The result is lowered by a relative 1e-9 and
an absolute 1e-12 to absorb floating-point error in the logarithms, so it errs on the low side.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

_WINDOW: Final = 1200
"""Binomial terms kept on each side of the mean (dropping terms keeps the bound valid)."""

_FLOAT_MAX: Final = float(np.finfo(np.float64).max)
_SAFETY_RELATIVE: Final = 1e-9
_SAFETY_ABSOLUTE: Final = 1e-12


def _log_sub(log_a: np.ndarray, log_b: float) -> np.ndarray:
    """log(e^a − e^b) where a > b (−∞ elsewhere)."""
    out = np.full_like(log_a, -math.inf)
    ok = log_a > log_b
    out[ok] = log_a[ok] + np.log1p(-np.exp(log_b - log_a[ok]))
    return out


def poisson_gaussian_epsilon_floor(sigma: float, q: float, steps: int, delta: float) -> float:
    """A lower bound on the ε at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps with
    noise multiplier ``sigma`` and rate ``q`` (add/remove), never above the exact value; 0 when
    no threshold test shows anything (e.g. δ ≥ q)."""
    if not (sigma > 0 and 0 < q <= 1 and steps >= 1 and 0 < delta < 1):
        return 0.0
    if not math.isfinite(sigma):
        return 0.0
    mean = steps * q
    spread = math.sqrt(steps * q * (1.0 - q))
    low = max(0, math.floor(mean - 12.0 * spread) - 1)
    high = min(steps, math.ceil(mean + 12.0 * spread) + 1)
    centre = min(max(round(mean), low), high)
    low = max(low, centre - _WINDOW)
    high = min(high, centre + _WINDOW)
    # imported here: scipy.stats is about 0.5 s of CPU (scipy.special 0.1 s) that a process
    # only pays for when it bounds such a charge, not when it starts
    # (tests/architecture/test_lazy_imports.py)
    from scipy import special, stats

    ks = np.arange(low, high + 1, dtype=np.float64)
    log_pmf = stats.binom.logpmf(ks, steps, q)
    keep = np.isfinite(log_pmf)
    ks, log_pmf = ks[keep], log_pmf[keep]
    if ks.size == 0:
        return 0.0
    noise = sigma * math.sqrt(steps)
    # Thresholds: around the bulk of S under P and up into both components' tails (for one
    # step with a tiny σ the best test sits just below the q-component at 1).
    spread_p = math.hypot(noise, spread)
    grid = np.concatenate(
        [
            mean + spread_p * np.linspace(-8.0, 40.0, 49),
            float(ks[-1]) + noise * np.linspace(-40.0, 40.0, 49),
            float(ks[0]) + noise * np.linspace(-40.0, 40.0, 49),
        ]
    )
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        # log P(S > t) = logsumexp_k [log b(k) + log Φ̄((t − k)/noise)]
        z = (ks[None, :] - grid[:, None]) / noise
        log_p = special.logsumexp(log_pmf[None, :] + special.log_ndtr(z), axis=1)
        log_q = special.log_ndtr(-grid / noise)
        log_num = _log_sub(np.asarray(log_p, dtype=np.float64), math.log(delta))
        eps = log_num - log_q
    # +∞: Q(A) underflowed (log Φ̄ of a z beyond ~1e154), so ε_t is beyond the float range and
    # the largest float is still below it.
    eps = np.where(eps == math.inf, _FLOAT_MAX, eps)
    eps = eps[np.isfinite(eps)]
    if eps.size == 0:
        return 0.0
    best = float(eps.max())
    if best <= 0:
        return 0.0
    return max(0.0, best * (1.0 - _SAFETY_RELATIVE) - _SAFETY_ABSOLUTE)
