"""Privacy amplification by subsampling.

* (ε, δ) amplification: Poisson sampling under add/remove, sampling without replacement under
  replace-one (Balle–Barthe–Gaboardi 2018).
* Exact RDP of the Poisson-subsampled Gaussian (Mironov–Talwar–Zhang 2019), vectorised over the
  whole order grid, and the RDP bound of the Gaussian subsampled without replacement
  (Wang–Balle–Kasiviswanathan 2019, Thm 27), both following dp_accounting's
  ``rdp_privacy_accountant`` and agreeing with it on its default orders.

All costs are rounded up: each log-space sum carries an explicit bound on its floating-point
error (8 ulps per term component, weighted by the term's share of the sum, plus the summation
error), which is added before the final ``nextafter`` step. Pure numpy/scipy.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import effort, fswor
from odometer_core.accounting.conversions import (
    _MACH_EPS,
    FloatArray,
    _check_nonneg,
    _check_orders,
    _check_unit,
    _round_up,
    _round_up_array,
)

_MAX_TERMS_FRAC = 1000

_CURVE_OVERHEAD_TERMS = 3000
"""What evaluating one curve costs besides its terms, counted as terms (≈ 0.5 ms here)."""
"""Term budget of the fractional-order MTZ series (dp_accounting ``_MAX_STEPS_LOG_A_FRAC``)."""

_FRACTION_PASSES = (48, 192)
"""Term counts tried for the fractional series before the full budget (most stop early)."""

_INT_EXACT_MAX = 1 << 20
"""Largest integer order summed exactly; above, the un-subsampled Gaussian bound is used."""

_WOR_EXACT_MAX = 256
"""dp_accounting's ``max_alpha`` of the WBK19 Thm 27 evaluation (forward differences)."""


# --------------------------------------------------------------------------------------------
# (ε, δ) amplification
# --------------------------------------------------------------------------------------------


def _amplify(epsilon: float, delta: float, gamma: float) -> tuple[float, float]:
    """(log(1 + γ(e^ε − 1)), γδ), both rounded up and never above (ε, δ)."""
    if gamma == 0.0:
        return 0.0, 0.0
    if gamma == 1.0:
        return epsilon, delta
    if epsilon == 0.0:
        eps = 0.0
    elif math.isinf(epsilon):
        eps = math.inf
    elif epsilon < 700.0:
        val = math.log1p(gamma * math.expm1(epsilon))
        eps = min(epsilon, _round_up(val, 4 * _MACH_EPS * val))
    else:
        # log(1 + γ(e^ε − 1)) ≤ log(1 + γe^ε) = logaddexp(0, log γ + ε): no overflow.
        val = float(np.logaddexp(0.0, math.log(gamma) + epsilon))
        eps = min(epsilon, _round_up(val, 4 * _MACH_EPS * val))
    dlt = min(delta, _round_up(gamma * delta)) if delta > 0.0 else 0.0
    return eps, dlt


def poisson_amplify(epsilon: float, delta: float, rate: float) -> tuple[float, float]:
    """(ε, δ)-DP amplified by Poisson subsampling with rate q (add/remove relation).

    Balle–Barthe–Gaboardi 2018, "Privacy Amplification by Subsampling: Tight Analyses via
    Couplings and Divergences" (NeurIPS), Poisson sampling under add/remove-one; also Steinke
    2022, "Composition of Differential Privacy & Privacy Amplification by Subsampling",
    Thm 29:

        ε' = log(1 + q(e^ε − 1)),   δ' = qδ,

    computed as log1p(q·expm1(ε)) (for ε ≥ 700 the upper bound logaddexp(0, log q + ε)), rounded
    up. The base mechanism must be (ε, δ)-DP under add/remove. Tight.

    Returns:
      (ε', δ').
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    delta = _check_unit("delta", delta)
    q = _check_unit("rate", rate)
    return _amplify(epsilon, delta, q)


def wor_amplify(epsilon: float, delta: float, m: int, n: int) -> tuple[float, float]:
    """(ε, δ)-DP amplified by sampling m of n records without replacement (replace-one).

    Balle–Barthe–Gaboardi 2018 (NeurIPS), sampling without replacement under the replace-one
    ("substitution") relation; Steinke 2022, Thm 29, with γ = m/n:

        ε' = log(1 + γ(e^ε − 1)),   δ' = γδ.

    γ is rounded up; results rounded up. The base mechanism must be (ε, δ)-DP under replace-one.

    Returns:
      (ε', δ').
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    delta = _check_unit("delta", delta)
    gamma = _wor_gamma(m, n)
    return _amplify(epsilon, delta, gamma)


def _wor_gamma(m: int, n: int) -> float:
    for name, v in (("m", m), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be an int, got {type(v).__name__}")
    if n < 1 or m < 0 or m > n:
        raise ValueError(f"need 0 <= m <= n and n >= 1, got m={m}, n={n}")
    if m == 0:
        return 0.0
    if m == n:
        return 1.0
    return min(1.0, _round_up(m / n))


def _monotone_envelope(orders: FloatArray, values: FloatArray) -> FloatArray:
    """Replace each value by the smallest value at an order ≥ it (ties included).

    Rényi divergence is non-decreasing in the order (van Erven–Harremoës 2014, "Rényi Divergence
    and Kullback–Leibler Divergence", Thm 3; Steinke 2022, Lemma 33 part 3 "Monotonicity"), so an
    upper bound at α' ≥ α bounds the RDP at α.
    This repairs the non-monotone looseness of the fractional-order series (it sums coefficient
    magnitudes) and gives finite values to orders whose series did not converge whenever a
    larger order is finite.
    """
    if values.size == 0:
        return values
    idx = np.argsort(orders, kind="stable")
    env = np.minimum.accumulate(values[idx][::-1])[::-1]
    out = np.empty_like(values)
    out[idx] = env
    return out


# --------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian: exact RDP (Mironov–Talwar–Zhang 2019)
# --------------------------------------------------------------------------------------------


def _segment_logsumexp(
    terms: FloatArray, mags: FloatArray, starts: npt.NDArray[np.intp]
) -> tuple[FloatArray, FloatArray]:
    """log Σ exp(terms) over consecutive segments, with an absolute error bound per segment.

    ``mags[i]`` is the sum of magnitudes of the components of ``terms[i]``; each component is
    assumed accurate to a few ulps, so ``terms[i]`` is off by at most 8·ulp·mags[i]. The bound is
    the share-weighted mean of those errors plus the summation error.
    """
    peak = np.maximum.reduceat(terms, starts)
    lengths = np.diff(np.append(starts, terms.size))
    w = np.exp(terms - np.repeat(peak, lengths))
    total = np.add.reduceat(w, starts)
    weighted = np.add.reduceat(w * mags, starts) / total
    log_sum = peak + np.log(total)
    err = 8 * _MACH_EPS * weighted + (lengths + 2) * _MACH_EPS + 2 * _MACH_EPS * np.abs(log_sum)
    return log_sum, err


def _mtz_log_a_int(q: float, inv2s2: float, alphas: FloatArray) -> tuple[FloatArray, FloatArray]:
    """log A_α for integer orders α ≥ 2 and an error bound (MTZ19 §3.3, integer case).

    A_α = Σ_k C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2σ²)} = 1 + Σ_{k≥2} C(α,k)(1−q)^{α−k} q^k
    (e^{(k²−k)/(2σ²)} − 1): the second form has only non-negative terms, so log A_α is computed
    without cancellation as log1p(S) with S = Σ_{k≥2} … evaluated in log space.
    """
    from scipy import special

    ints = alphas.astype(np.int64)
    lengths = ints - 1  # k = 2..α
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.intp)
    total = int(lengths.sum())
    a_rep = np.repeat(ints, lengths)
    k = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths) + 2
    lgam = special.gammaln(np.arange(int(ints.max()) + 2, dtype=np.float64))
    g_a, g_k, g_ak = lgam[a_rep + 1], lgam[k + 1], lgam[a_rep - k + 1]
    kf = k.astype(np.float64)
    log_q, log1mq = math.log(q), math.log1p(-q)
    x = kf * (kf - 1.0) * inv2s2  # > 0
    with np.errstate(divide="ignore", under="ignore"):
        log_em1_tail = np.log(-np.expm1(-x))  # log(1 − e^{−x}); −inf only if x underflowed to 0
    terms = (g_a - g_k - g_ak) + kf * log_q + (a_rep - k) * log1mq + x + log_em1_tail
    mags = (
        np.abs(g_a)
        + np.abs(g_k)
        + np.abs(g_ak)
        + kf * abs(log_q)
        + (a_rep - k) * abs(log1mq)
        + x
        + np.abs(log_em1_tail)
        + 1.0
    )
    seg_len_rep = np.repeat(np.arange(starts.size), lengths)
    pos_inf = np.bincount(seg_len_rep, weights=(terms == np.inf), minlength=starts.size) > 0
    with np.errstate(invalid="ignore", divide="ignore", under="ignore", over="ignore"):
        finite = np.isfinite(terms)
        terms = np.where(finite, terms, -np.inf)
        mags = np.where(finite, mags, 0.0)
        # a segment that is entirely −inf has peak −inf: its sum is 0 (A = 1 exactly)
        peak = np.maximum.reduceat(terms, starts)
        empty = ~np.isfinite(peak)
        safe_terms = np.where(np.repeat(empty, lengths), 0.0, terms)
        log_s, err_s = _segment_logsumexp(safe_terms, mags, starts)
    log_s = np.where(empty, -np.inf, log_s)
    err_s = np.where(empty, 0.0, err_s)
    log_s = np.where(pos_inf, np.inf, log_s)  # an overflowing term: A = ∞
    log_a = np.logaddexp(0.0, log_s)  # log1p(S), accurate for small S
    err = err_s + 2 * _MACH_EPS * log_a
    return np.asarray(log_a, dtype=np.float64), np.asarray(err, dtype=np.float64)


def _log_erfc_split(u: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(log erfc(u) for u < 0 else 0, log erfcx(u) for u ≥ 0 else 0), without under/overflow."""
    from scipy import special

    neg = np.minimum(u, 0.0)
    pos = np.maximum(u, 0.0)
    return np.log(special.erfc(neg)), np.log(special.erfcx(pos))


def _mtz_frac_terms(
    q: float, sigma: float, alphas: FloatArray, n_terms: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """log s0_k, log s1_k (k = 0..n_terms−1) of the MTZ19 fractional series and their mags.

    With z₀ = σ² log(1/q − 1) + ½, the two series of MTZ19 §3.3 are

        s0_k = |C(α,k)| q^k (1−q)^{α−k} e^{(k²−k)/(2σ²)} · ½ erfc((k − z₀)/(√2σ)),
        s1_k = |C(α,k)| q^{α−k} (1−q)^k e^{((α−k)²−(α−k))/(2σ²)} · ½ erfc((z₀ − (α−k))/(√2σ)).

    Using 2z₀ − 1 = 2σ² log((1−q)/q) they are evaluated as

        s0_k = |C(α,k)| (1−q)^α · ½ e^{k(k−2z₀)/(2σ²)} erfc(u)   (u < 0)
             = |C(α,k)| (1−q)^α · ½ e^{−z₀²/(2σ²)} erfcx(u)      (u ≥ 0),  u = (k−z₀)/(√2σ),

    and likewise s1_k with j = α − k and v = (z₀ − j)/(√2σ), which avoids the cancellation
    between e^{k²/(2σ²)} and the Gaussian tail. |C(α,k)| = Π_{i<k} |α − i|/(i + 1).
    """
    inv2s2 = 1.0 / (2.0 * sigma * sigma)
    log_q, log1mq = math.log(q), math.log1p(-q)
    z0 = sigma * sigma * (log1mq - log_q) + 0.5
    s2 = math.sqrt(2.0) * sigma
    k = np.arange(n_terms, dtype=np.float64)[None, :]
    a = alphas[:, None]
    # log|C(α,k)| by cumulative sums (accurate near the poles of Γ for α close to an integer).
    steps = np.log(np.abs(a - k[:, :-1])) - np.log(k[:, :-1] + 1.0)
    log_c = np.concatenate((np.zeros((alphas.size, 1)), np.cumsum(steps, axis=1)), axis=1)
    mag_c = np.concatenate(
        (np.zeros((alphas.size, 1)), np.cumsum(np.abs(steps) + 1.0, axis=1)), axis=1
    )
    base = log_c + a * log1mq + math.log(0.5)
    mag_base = mag_c + np.abs(a * log1mq) + 1.0

    def piece(center: FloatArray, u: FloatArray) -> tuple[FloatArray, FloatArray]:
        # e^{center(center−2z₀)/(2σ²)} erfc(u) for u < 0, e^{−z₀²/(2σ²)} erfcx(u) for u ≥ 0
        log_erfc, log_erfcx = _log_erfc_split(u)
        quad = center * (center - 2.0 * z0) * inv2s2
        const = -z0 * z0 * inv2s2
        val = np.where(u < 0.0, quad + log_erfc, const + log_erfcx)
        mag = np.where(
            u < 0.0,
            np.abs(quad) + np.abs(center) * abs(2.0 * z0) * inv2s2 + np.abs(log_erfc),
            abs(const) + np.abs(log_erfcx) * (1.0 + np.abs(u)),
        )
        return val, mag + 1.0

    p0, m0 = piece(np.broadcast_to(k, base.shape), (k - z0) / s2)
    j = a - k
    p1, m1 = piece(j, (z0 - j) / s2)
    return base + p0, base + p1, mag_base + m0, mag_base + m1


def _mtz_log_a_frac(
    q: float, sigma: float, alphas: FloatArray, n_terms: int, *, final: bool
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """log A_α for fractional orders: (log A, error bound, resolved mask) using n_terms terms.

    Truncation point as in dp_accounting ``_compute_log_a_frac``: the first index i ≥ 1
    (i < 1000) where both term sequences decrease and max(s0_i, s1_i) < e^{−30}·(sum so far).
    Unlike dp_accounting, the tail is then bounded rigorously: s0_k and s1_k equal
    |C(α,k)|·(1−q)^α e^{−z₀²/(2σ²)}·½erfcx(·) with arguments increasing in k (see
    :func:`_mtz_frac_terms`), and |C(α,k+1)|/|C(α,k)| = (k − α)/(k + 1) for k > α, so by
    Gauss's hypergeometric sum Σ_{k≥K} s_k ≤ s_K·K/α for any K > α. The sum is carried to at
    least index ⌈α⌉ and this bound is added. Because the bound is valid at any K > α, a series
    that does not meet dp_accounting's rule within the budget (dp_accounting returns ∞) is, in
    the ``final`` pass, summed over the whole budget (1000 terms) plus the tail bound; its terms
    decay polynomially there, so the result is still tight. In a non-final pass such rows are
    unresolved (NaN).
    """
    ls0, ls1, mag0, mag1 = _mtz_frac_terms(q, sigma, alphas, n_terms)
    pair = np.logaddexp(ls0, ls1)
    running = np.logaddexp.accumulate(pair, axis=1)
    decreasing = np.zeros(ls0.shape, dtype=bool)
    decreasing[:, 1:] = (ls0[:, 1:] < ls0[:, :-1]) & (ls1[:, 1:] < ls1[:, :-1])
    small = np.maximum(ls0, ls1) < running - 30.0
    stop_ok = decreasing & small
    last = min(n_terms - 2, _MAX_TERMS_FRAC - 1)
    stop_ok[:, last + 1 :] = False
    found = stop_ok.any(axis=1)
    stop = np.argmax(stop_ok, axis=1)
    end = np.maximum(stop, np.ceil(alphas).astype(np.intp))  # last summed index
    if final:  # not converged by the rule: use the whole budget plus the rigorous tail bound
        end = np.where(found, end, np.maximum(last, np.ceil(alphas).astype(np.intp)))
        found = np.ones_like(found)
    resolved = found & (end + 1 < n_terms)
    rows = np.arange(alphas.size)
    end_c = np.where(resolved, end, 0)
    log_sum = running[rows, end_c]
    # share-weighted error of the summed terms, plus summation error
    idx = np.arange(n_terms)[None, :]
    summed = idx <= end_c[:, None]
    with np.errstate(under="ignore"):
        w0 = np.where(summed, np.exp(ls0 - log_sum[:, None]), 0.0)
        w1 = np.where(summed, np.exp(ls1 - log_sum[:, None]), 0.0)
    err = (
        8 * _MACH_EPS * np.sum(w0 * mag0 + w1 * mag1, axis=1)
        + (2 * end_c + 6) * _MACH_EPS
        + 2 * _MACH_EPS * np.abs(log_sum)
    )
    nxt = end_c + 1
    tail_mag = np.maximum(mag0[rows, nxt], mag1[rows, nxt])
    log_tail = pair[rows, nxt] + 8 * _MACH_EPS * tail_mag + np.log(nxt / alphas)
    log_a = np.logaddexp(log_sum, log_tail)
    log_a = np.where(resolved, log_a, np.nan)
    return np.asarray(log_a, dtype=np.float64), np.asarray(err, dtype=np.float64), resolved


def poisson_gaussian_rdp(rate: float, noise_multiplier: float, orders: npt.ArrayLike) -> FloatArray:
    """Exact RDP of the Poisson-subsampled Gaussian mechanism at every order, vectorised.

    Mironov–Talwar–Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism"
    (arXiv 1908.10530), §3.3 (integer orders also Steinke 2022, "Composition of Differential
    Privacy & Privacy Amplification by Subsampling", Thm 34 with ε(k) = k/(2σ²), tight): with
    sampling rate q, noise multiplier σ (noise std / ℓ₂-sensitivity) and the add/remove
    relation, ε(α) = log(A_α)/(α − 1) where

    * integer α: A_α = Σ_{k=0}^{α} C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2σ²)} (exact; summed as
      log1p of the non-negative excess over 1);
    * fractional α: the two erfc series of MTZ19 §3.3 (docs/accounting.md), summing magnitudes of
      the coefficients as dp_accounting does, with dp_accounting's truncation rule and term
      budget (1000 terms), plus a rigorous bound on the truncated tail (see
      :func:`_mtz_log_a_frac`; dp_accounting drops the tail and can be ≈1e-6 relative low for
      small RDP values). A series that does not meet dp_accounting's stopping rule within the
      budget (dp_accounting returns ∞ there) is never replaced by its bare partial sum: it is
      summed over the whole budget and the rigorous tail bound is added, which keeps it finite,
      conservative and tight (its terms decay polynomially).

    Two sound post-processing steps follow: each value is capped by the un-subsampled Gaussian
    RDP α/(2σ²) (valid for both directions by joint convexity of e^{(α−1)D_α}), and the curve is
    replaced by its monotone envelope ε(α) ← min_{α' ≥ α} ε(α') over the requested orders
    (:func:`_monotone_envelope`). Both only lower dp_accounting's values where its
    magnitude-sum series is loose (q ≳ 0.1 with large σ at α near 1).

    Agreement with dp_accounting ``_compute_rdp_poisson_subsampled_gaussian`` post-processed the
    same way (on orders where its series converged): the CGF (α − 1)ε(α) agrees to 1e-9
    relative or 1e-10 absolute, and is never below it. The absolute part matters only for tiny
    RDP values: dp_accounting's dropped tail (e.g. 3.4e-12 in log A at q = 0.01, σ = 1.1,
    α = 1.1, i.e. 4.6e-7 relative low) and float cancellation in log(1 + tiny). All orders are
    evaluated in a few numpy passes (no per-order Python loop): ≈ 15–35× faster than
    dp_accounting on its 156 default orders (``benchmarks/rdp_speed.py``).

    Edge cases: q = 0 → 0; σ = 0 → ∞; q = 1 → α/(2σ²); α = ∞ → ∞. Integer orders above 2²⁰ use
    the Gaussian bound α/(2σ²); fractional orders above 997 use the next integer order (by
    monotonicity in α). Results are rounded up.

    Args:
      rate: sampling rate q in [0, 1].
      noise_multiplier: σ ≥ 0.
      orders: RDP orders α > 1 (∞ allowed).

    Returns:
      RDP values, one per order.
    """
    q = _check_unit("rate", rate)
    sigma = _check_nonneg("noise_multiplier", noise_multiplier)
    a = _check_orders(orders)
    if q == 0.0 or math.isinf(sigma):
        return np.zeros_like(a)
    if sigma == 0.0:
        return np.full_like(a, np.inf)
    with np.errstate(over="ignore"):
        inv2s2 = _inv_two_sigma_squared(sigma)
        gauss = a * inv2s2
    gauss_up = _round_up_array(np.asarray(gauss, dtype=np.float64), 4 * _MACH_EPS * gauss)
    if q == 1.0 or math.isinf(inv2s2):
        return gauss_up
    effort.count(_CURVE_OVERHEAD_TERMS)
    out = np.full_like(a, np.inf)
    finite = np.isfinite(a)
    is_int = finite & (a == np.floor(a))
    frac = finite & ~is_int
    # Fractional orders beyond the term budget: bound by the next integer order (monotone).
    frac_big = frac & (np.ceil(a) > _MAX_TERMS_FRAC - 3)
    frac_series = frac & ~frac_big
    int_targets = np.where(frac_big, np.ceil(a), a)
    need_int = is_int | frac_big
    int_exact = need_int & (int_targets <= _INT_EXACT_MAX)

    if np.any(int_exact):
        uniq, inverse = np.unique(int_targets[int_exact], return_inverse=True)
        effort.count(int(uniq.sum()) + int(uniq.size))  # α + 1 terms per integer order
        log_a, err = _mtz_log_a_int(q, inv2s2, uniq)
        cgf_up = (log_a + err)[inverse]  # upper bound of log A at the integer order
        out[int_exact] = cgf_up / (int_targets[int_exact] - 1.0)
    big = need_int & ~int_exact
    out[big] = gauss[big]

    if np.any(frac_series):
        alphas = a[frac_series]
        log_a = np.full(alphas.shape, np.nan)
        err = np.zeros(alphas.shape)
        ok = np.zeros(alphas.shape, dtype=bool)
        min_terms = int(np.ceil(alphas.max())) + 3
        # growing passes: most series stop within a few dozen terms
        for n_terms in (*_FRACTION_PASSES, _MAX_TERMS_FRAC + 1):
            if n_terms < min_terms and n_terms <= _MAX_TERMS_FRAC:
                continue
            final = n_terms == _MAX_TERMS_FRAC + 1
            todo = ~ok
            effort.count(int(todo.sum()) * n_terms)
            la, er, done = _mtz_log_a_frac(q, sigma, alphas[todo], n_terms, final=final)
            log_a[todo], err[todo], ok[todo] = la, er, done
            if np.all(ok):
                break
        vals = np.where(ok, (log_a + err) / (alphas - 1.0), np.inf)
        out[frac_series] = vals

    fin = np.isfinite(out)
    result = np.where(fin, _round_up_array(np.where(fin, out, 0.0)), np.inf)
    # The un-subsampled Gaussian bound holds at every α, and a bound at a larger order holds at
    # a smaller one.
    result = np.minimum(result, gauss_up)
    return _monotone_envelope(a, np.asarray(result, dtype=np.float64))


# --------------------------------------------------------------------------------------------
# Gaussian subsampled without replacement (Wang–Balle–Kasiviswanathan 2019, Thm 27)
# --------------------------------------------------------------------------------------------


def _inv_two_sigma_squared(sigma: float) -> float:
    """1/(2σ²), +∞ where 2σ² underflows to zero (σ below ~1e-162: the Gaussian is then
    non-private at every order worth a charge)."""
    two_s2 = 2.0 * sigma * sigma
    return math.inf if two_s2 == 0.0 else 1.0 / two_s2


def _log_add(x: FloatArray, y: FloatArray) -> FloatArray:
    """Elementwise log(e^x + e^y) as dp_accounting ``_log_add`` (−∞ handled)."""
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    with np.errstate(invalid="ignore", under="ignore", over="ignore"):
        res = np.log1p(np.exp(lo - hi)) + hi
    return np.asarray(np.where(lo == -np.inf, hi, res), dtype=np.float64)


def _log_sub_sign(x: FloatArray, y: FloatArray) -> tuple[npt.NDArray[np.bool_], FloatArray]:
    """Elementwise (sign, log|e^x − e^y|) as dp_accounting ``_log_sub_sign``."""
    with np.errstate(invalid="ignore", under="ignore", divide="ignore", over="ignore"):
        mag_pos = x + np.log1p(-np.exp(y - x))
        mag_neg = y + np.log1p(-np.exp(x - y))
    sign = x >= y
    mag = np.where(x > y, mag_pos, np.where(x < y, mag_neg, -np.inf))
    return sign, np.asarray(mag, dtype=np.float64)


def _wor_forward_diffs(sigma: float, n: int) -> FloatArray:
    """Upper bounds of log|Δ^{m+1} f(−1)|, m = 0..n+1, for f(x) = exp(x(x+1)/(2σ²)).

    Same successive differences in log space as dp_accounting ``_get_forward_diffs`` (WBK19
    Thm 27), vectorised per round. Each value is increased by a bound on the rounding error of
    the differencing, (8(m+3) + 4·max|log f|)·ulp·Σ_l C(m+1,l) f(l−1), because the differences
    of a slowly growing f cancel heavily: for σ ≳ 4 and m ≳ 20 the float differences (also
    dp_accounting's) have no correct digits left, and can be below the exact value.
    """
    from scipy import special

    size = n + 3
    x = np.arange(size, dtype=np.float64) - 1.0
    vec = x * (x + 1.0) / (2.0 * sigma * sigma)  # log f(x), x = −1, 0, 1, ...
    signs = np.ones(size, dtype=bool)
    deltas = np.zeros(n + 2)
    for r in range(n + 2):
        cnt = n + 2 - r
        a, b = vec[:cnt], vec[1 : cnt + 1]
        sa, sb = signs[:cnt], signs[1 : cnt + 1]
        same = sa == sb
        s_sub, m_sub = _log_sub_sign(b, a)
        s_sub = np.where(sb, s_sub, ~s_sub)
        m_add = _log_add(a, b)
        new_vec = np.where(same, m_sub, m_add)
        new_sign = np.where(same, s_sub, sb)
        vec = vec.copy()
        signs = signs.copy()
        vec[:cnt], signs[:cnt] = new_vec, new_sign
        deltas[r] = vec[0]
    # rounding allowance: log(8(m+3)·ulp) + log Σ_l C(m+1,l) f(l−1)
    m = np.arange(n + 2)
    lgam = special.gammaln(np.arange(n + 4, dtype=np.float64))
    logf = x * (x + 1.0) / (2.0 * sigma * sigma)
    scale = np.empty(n + 2)
    for mm in range(n + 2):
        l_idx = np.arange(mm + 2)
        lc = lgam[mm + 2] - lgam[l_idx + 1] - lgam[mm + 2 - l_idx]
        scale[mm] = special.logsumexp(lc + logf[l_idx])
    # per level ≈ 8 ulps of the magnitudes; the inputs log f(l) carry |log f(l)| ulps each
    max_logf = np.maximum.accumulate(np.abs(logf))[1 : n + 3]
    allowance = np.log((8.0 * (m + 3) + 4.0 * max_logf) * _MACH_EPS) + scale
    return np.asarray(np.logaddexp(deltas, allowance), dtype=np.float64)


def _wor_log_a_int(
    q: float, sigma: float, alpha: int, deltas: FloatArray | None
) -> tuple[float, float]:
    """log A_α (the CGF (α−1)ε(α)) of WBK19 Thm 27 for the Gaussian at integer α ≥ 2.

    As dp_accounting ``_compute_rdp_sample_wor_gaussian_int``: for α ≤ 256 the bound with
    forward differences, above it the simpler bound 2e^{cgf(i−1)} for the i-th term.
    Returns (value, absolute error bound).
    """
    from scipy import special

    inv = 1.0 / (2.0 * sigma * sigma)
    log_q = math.log(q)
    func2 = 2.0 * inv  # Gaussian RDP at order 2
    log_f2m1 = func2 + math.log(-math.expm1(-func2))  # log(e^{func2} − 1)
    i = np.arange(2, alpha + 1, dtype=np.float64)
    log_comb = (
        special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(alpha - i + 1.0)
    )
    cgf_im1 = (i - 1.0) * i * inv  # cgf(i−1) = (i−1)·i/(2σ²)
    s = np.log(2.0) + cgf_im1
    if deltas is not None:
        ii = i.astype(np.intp)
        lo = deltas[2 * (ii // 2) - 1]
        hi = deltas[2 * ((ii + 1) // 2) - 1]
        s = np.minimum(np.log(4.0) + 0.5 * (lo + hi), s)
        mag_d = np.abs(lo) + np.abs(hi)
    else:
        mag_d = np.zeros_like(i)
    s[0] = min(math.log(4.0) + log_f2m1, func2 + math.log(2.0))
    terms = s + i * log_q + log_comb
    mags = np.abs(s) + mag_d + i * abs(log_q) + np.abs(log_comb) + special.gammaln(alpha + 1.0)
    terms = np.concatenate(([0.0], terms))  # the leading 1
    mags = np.concatenate(([0.0], mags + 2.0))
    log_sum, err = _segment_logsumexp(terms, mags, np.array([0], dtype=np.intp))
    return float(log_sum[0]), float(err[0])


def wor_gaussian_rdp(
    m: int, n: int, noise_multiplier: float, orders: npt.ArrayLike, *, tight: bool = False
) -> FloatArray:
    """RDP bound of the Gaussian mechanism on a sample of m of n records without replacement.

    Wang–Balle–Kasiviswanathan 2019, "Subsampled Rényi Differential Privacy and Analytical
    Moments Accountant" (AISTATS, arXiv 1808.00087), Thm 27 (the strengthened bound for the
    Gaussian), replace-one relation, γ = m/n, noise multiplier σ = noise std / sensitivity:

        A_α ≤ 1 + γ² C(α,2) min{4(e^{ε(2)} − 1), 2e^{ε(2)}}
              + Σ_{i=3}^{α} γ^i C(α,i) min{4·√(Δ^{2⌊i/2⌋}·Δ^{2⌈i/2⌉}) , 2e^{(i−1)ε(i)}}

    (Δ^j the forward differences of e^{(x−1)ε(x)} for the Gaussian, ε(x) = x/(2σ²)), and
    ε(α) = log(A_α)/(α − 1) for integer α; fractional orders interpolate the CGF (α−1)ε(α)
    linearly between ⌊α⌋ and ⌈α⌉ (WBK19 Cor. 10). Integer orders above 256 use the second term
    of each min only. Follows dp_accounting ``_compute_rdp_sample_wor_gaussian`` and agrees with
    it; in addition the forward differences carry a rounding-error allowance (they cancel heavily
    for large σ) and the result is rounded up.

    With ``tight``, each integer order up to :data:`fswor.MAX_ORDER` takes the smaller of this
    bound and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 (:mod:`odometer_core.accounting.fswor`),
    about four times smaller at large σ; both are upper bounds of the same divergence, so their
    minimum is one, and the interpolation of fractional orders is unchanged.

    Edge cases: m = 0 → 0; m = n → α/(2σ²); σ = 0 → ∞; α = ∞ → ∞.

    Args:
      m: sample size, 0 ≤ m ≤ n.
      n: dataset size ≥ 1.
      noise_multiplier: σ ≥ 0.
      orders: RDP orders α > 1 (∞ allowed).
    """
    gamma = _wor_gamma(m, n)
    sigma = _check_nonneg("noise_multiplier", noise_multiplier)
    a = _check_orders(orders)
    if gamma == 0.0 or math.isinf(sigma):
        return np.zeros_like(a)
    if sigma == 0.0:
        return np.full_like(a, np.inf)
    with np.errstate(over="ignore"):
        inv2s2 = _inv_two_sigma_squared(sigma)
        gauss = a * inv2s2
    gauss_up = _round_up_array(np.asarray(gauss, dtype=np.float64), 4 * _MACH_EPS * gauss)
    if gamma == 1.0 or math.isinf(inv2s2):
        return gauss_up
    finite = np.isfinite(a)
    lows = np.floor(np.where(finite, a, 2.0)).astype(np.int64)
    highs = np.ceil(np.where(finite, a, 2.0)).astype(np.int64)
    needed = sorted({int(v) for v in np.concatenate((lows, highs)) if 2 <= v <= _INT_EXACT_MAX})
    small = [v for v in needed if v <= _WOR_EXACT_MAX]
    deltas = _wor_forward_diffs(sigma, max(small)) if small else None
    cgf: dict[int, tuple[float, float]] = {1: (0.0, 0.0)}
    effort.count(sum(needed))  # α terms per integer order of the bound
    for v in needed:
        cgf[v] = _wor_log_a_int(gamma, sigma, v, deltas if v <= _WOR_EXACT_MAX else None)
    if tight:
        tighter = [v for v in needed if fswor.evaluable(v, sigma, min(fswor.TAYLOR_ORDERS))]
        effort.count(sum(fswor.work(v) for v in tighter))
        for v in tighter:
            other = fswor.cgf_up(v, m, n, sigma)
            x, ex = cgf[v]
            if other is not None and other < x + ex:
                cgf[v] = (other, 0.0)
    out = np.full_like(a, np.inf)
    for idx in np.flatnonzero(finite):
        alpha = float(a[idx])
        lo_i, hi_i = int(lows[idx]), int(highs[idx])
        if lo_i not in cgf or hi_i not in cgf:
            out[idx] = gauss[idx]  # beyond the exact range: un-subsampled Gaussian bound
            continue
        x, ex = cgf[lo_i]
        y, ey = cgf[hi_i]
        t = alpha - lo_i
        val = (1.0 - t) * x + t * y
        err = (1.0 - t) * ex + t * ey + 4 * _MACH_EPS * (abs(x) + abs(y))
        out[idx] = _round_up(val / (alpha - 1.0), err / (alpha - 1.0))
    return _monotone_envelope(a, np.asarray(np.minimum(out, gauss_up), dtype=np.float64))
