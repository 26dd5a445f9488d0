"""RDP of the Gaussian mechanism on a fixed-size sample drawn without replacement (replace-one),
by the Taylor-expansion bound of Birrell, Ebrahimi, Behnia and Pacheco 2024.

Birrell–Ebrahimi–Behnia–Pacheco, "Differentially Private Stochastic Gradient Descent with
Fixed-Size Minibatches: Tighter RDP Guarantees with or without Replacement" (arXiv 2408.10456),
Thm 3.4: for a sample of m of n records without replacement (γ = m/n < 1), the replace-one
relation, Gaussian noise of standard deviation σ·Δ (Δ the replace-one sensitivity), an integer
order α ≥ 2 and any Taylor order K ≥ 3,

    (α − 1)·ε(α) ≤ log( 1 + γ²α(α−1)(e^{2s} − e^{s})
                        + Σ_{k=3}^{K−1} γ^k/k! · F_k + E_K ),        s = 1/(2σ²),

with the moments M_k = E[(R − 1)^k] = Σ_{l=0}^{k} (−1)^{k−l} C(k,l) e^{l(l−1)s} of the Gaussian
likelihood ratio R, B_k = M_k (k even) or √(M_{k−1} M_{k+1}) (k odd, Cauchy–Schwarz),

    F_k = (α−1) α^{k−1} B_k [c_k + Σ_{j=0}^{k} C(k,j) |α/(α−1) Π_{l=1}^{j−1}(1 − l/α)
                                                    Π_{l=0}^{k−j−1}(1 + (l−1)/α) − 1|],
          c_k = 4 (k even), 3 (k odd);

    E_K = Σ_{j=0}^{min(K, α)} γ^K/K! (1−γ)^{−(α+K−j−1)} C(K,j) α!/(α−j)! Π_{l=0}^{K−j−1}(α+l−1) I_j,
    I_j = B_K                                                            (j = α),
          B_K + Σ_{l=0}^{α−j} γ^l Π_{i=0}^{l−1} (α−j−i)/(K+l−i) · B_{K+l}  (j < α).

The paper's σ is the noise relative to the clipping norm C, whose replace-one sensitivity is 2C;
in this module σ is relative to the sensitivity Δ itself, so every e^{2l(l−1)/σ_paper²} above is
e^{l(l−1)s} with s = 1/(2σ²). To leading order in γ the bound is γ²α/(2σ²), the Poisson-
subsampled Gaussian's, where Wang–Balle–Kasiviswanathan 2019 Thm 27 gives 2γ²α/σ²: about four
times less at large σ. At small σ the remainder E_K dominates and WBK19 is the smaller bound, so
the accountant takes, order by order, the smaller of the two.

Exact arithmetic where it matters: the moments M_k cancel heavily (their terms reach 2^k
e^{k(k−1)s} while M_{2i} is of order (2i)!/i!·s^i), so they are summed in decimal arithmetic at a
precision chosen from that ratio, with an explicit bound on the rounding error added; every other
factor is a rational number for integer α and γ = m/n and is computed exactly; each decimal step
is rounded up, so the result is an upper bound of the theorem's right-hand side, not an estimate
of it. Fractional orders interpolate the CGF (α − 1)ε(α) linearly between ⌊α⌋ and ⌈α⌉ (the CGF is
convex in α; WBK19 Cor. 10).
"""

from __future__ import annotations

import functools
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from typing import Final

TAYLOR_ORDERS: Final = (4, 6, 8)
"""Taylor orders K tried at each α (the theorem holds for each; the smallest bound is kept).
K = 4 is the best of these at σ ≈ 1, K = 8 from σ ≈ 2 up; K = 3 was never the smallest."""

MAX_ORDER: Final = 64
"""Largest integer order evaluated; above it (where the remainder grows like α^K) WBK19 alone."""

MAX_EXPONENT: Final = 300.0
"""Largest l(l−1)s the moments are evaluated at: beyond it (small σ, large α) the digits needed
grow quadratically and WBK19 is the smaller bound anyway (measured: σ = 1, α ≥ 8)."""

_PREC: Final = 40
"""Digits of the decimal steps after the moments (each rounded up, or down where it divides)."""

_UP: Final = Context(prec=_PREC, rounding=ROUND_CEILING, Emax=10**8, Emin=-(10**8))
_DOWN: Final = Context(prec=_PREC, rounding=ROUND_FLOOR, Emax=10**8, Emin=-(10**8))


def _s_bounds(sigma: float) -> tuple[Decimal, Decimal]:
    """(s rounded down, s rounded up) for s = 1/(2σ²): 2σ² is rounded the other way first (a
    float is an exact decimal, but its square may have more digits than the context keeps)."""
    sig = Decimal(sigma)
    two_s2_up = _UP.multiply(2, _UP.multiply(sig, sig))
    two_s2_down = _DOWN.multiply(2, _DOWN.multiply(sig, sig))
    return _DOWN.divide(Decimal(1), two_s2_up), _UP.divide(Decimal(1), two_s2_down)


def _power_up(x: Decimal, n: int) -> Decimal:
    """x^n rounded up (x ≥ 0, integer n ≥ 0): decimal's ``power`` is not guaranteed to be
    correctly rounded, so the product is taken one rounded-up factor at a time."""
    out = Decimal(1)
    for _ in range(n):
        out = _UP.multiply(out, x)
    return out


def _power_down(x: Decimal, n: int) -> Decimal:
    """x^n rounded down (x ≥ 0, integer n ≥ 0)."""
    out = Decimal(1)
    for _ in range(n):
        out = _DOWN.multiply(out, x)
    return out


def evaluable(alpha: int, sigma: float, order: int) -> bool:
    """Whether the bound is evaluated at (α, σ, K) (:data:`MAX_ORDER`, :data:`MAX_EXPONENT`)."""
    kmax = order + alpha + 2
    return 2 <= alpha <= MAX_ORDER and kmax * (kmax - 1) / (2.0 * sigma * sigma) <= MAX_EXPONENT


def work(alpha: int) -> int:
    """Work of one integer order, in the series terms of :mod:`odometer_core.accounting.effort`
    (measured: ≈ 2.5 ms + 0.3 ms·α for the three Taylor orders, a term being ≈ 0.17 µs)."""
    return 15_000 + 2_000 * alpha


@functools.lru_cache(maxsize=64)
def _even_moments_up(sigma: float, top: int) -> tuple[Decimal, ...]:
    """Upper bounds of M_0, M_2, M_4, …, M_{2·top} for s = 1/(2σ²).

    M_k = Σ_l (−1)^{k−l} C(k,l) e^{l(l−1)s} is increasing in s (its series in s below has
    nonnegative coefficients), so s is rounded up. A lower bound of M_{2i} is (2i)!/i!·s^i, the
    first term of that series: (l(l−1))^i has nonnegative coefficients on the falling
    factorials, and the k-th difference at 0 of a falling factorial is 0 or k!. The precision is
    chosen to keep 40 digits of M_{2i} after cancellation. Each e^x is correctly rounded and each
    product and sum rounds once, so the computed sum is within (k + 4)·10^{1−P}·Σ|terms| of
    M_k; that allowance is added.
    """
    _, s = _s_bounds(sigma)
    kmax = 2 * top
    ln10 = math.log(10.0)
    big = kmax * math.log10(2.0) + kmax * (kmax - 1) * float(s) / ln10
    small = (math.lgamma(kmax + 1) - math.lgamma(top + 1)) / ln10 + top * math.log10(float(s))
    prec = int(max(0.0, big - min(small, 0.0))) + 50
    ctx = Context(prec=prec, Emax=10**8, Emin=-(10**8))
    exps = [ctx.exp(ctx.multiply(Decimal(lv * (lv - 1)), s)) for lv in range(kmax + 1)]
    ulp = Decimal(10) ** (1 - prec)
    out = [Decimal(1)]
    for i in range(1, top + 1):
        k = 2 * i
        total = magnitude = Decimal(0)
        for lv in range(k + 1):
            term = ctx.multiply(Decimal(math.comb(k, lv)), exps[lv])
            magnitude = ctx.add(magnitude, term)
            total = ctx.add(total, term) if (k - lv) % 2 == 0 else ctx.subtract(total, term)
        out.append(max(_UP.add(total, _UP.multiply((k + 4) * ulp, magnitude)), Decimal(0)))
    return tuple(out)


def _b_up(sigma: float, top: int) -> list[Decimal]:
    """B_0 … B_{2·top−1}: M_k for even k, √(M_{k−1}M_{k+1}) for odd k (rounded up)."""
    moments = _even_moments_up(sigma, top)
    out: list[Decimal] = []
    for k in range(2 * top):
        if k % 2 == 0:
            out.append(moments[k // 2])
        else:
            prod = _UP.multiply(moments[(k - 1) // 2], moments[(k + 1) // 2])
            out.append(_UP.sqrt(prod).next_plus(_UP))  # sqrt rounds half-even: one ulp up
    return out


def _f_coefficient(alpha: int, k: int) -> Fraction:
    """F_k / B_k for integer α: (α−1)α^{k−1}[c_k + Σ_j C(k,j)|α/(α−1)·Π(1−l/α)·Π(1+(l−1)/α) − 1|],
    exact."""
    a = Fraction(alpha)
    total = Fraction(4 if k % 2 == 0 else 3)
    for j in range(k + 1):
        p1 = Fraction(1)
        for lv in range(1, j):
            p1 *= 1 - lv / a
        p2 = Fraction(1)
        for lv in range(k - j):
            p2 *= 1 + (lv - 1) / a
        total += math.comb(k, j) * abs(a / (a - 1) * p1 * p2 - 1)
    return (a - 1) * a ** (k - 1) * total


def _fraction_up(value: Fraction) -> Decimal:
    return _UP.divide(Decimal(value.numerator), Decimal(value.denominator))


def _remainder_up(alpha: int, m: int, n: int, order: int, b: list[Decimal]) -> Decimal:
    """E_K of the theorem for integer α, every factor positive and rounded up (1 − γ, which
    divides, rounded down)."""
    gamma = _UP.divide(Decimal(m), Decimal(n))
    keep = _DOWN.divide(Decimal(n - m), Decimal(n))  # 1 − γ
    lead = _UP.divide(_power_up(gamma, order), Decimal(math.factorial(order)))
    total = Decimal(0)
    for j in range(min(order, alpha) + 1):
        coef = _UP.multiply(lead, Decimal(math.comb(order, j) * math.perm(alpha, j)))
        rising = math.prod(alpha + lv - 1 for lv in range(order - j))
        coef = _UP.multiply(coef, Decimal(rising))
        coef = _UP.divide(coef, _power_down(keep, alpha + order - j - 1))
        inner = b[order]
        if j < alpha:
            weight = Decimal(1)  # γ^l Π_{i<l} (α−j−i)/(K+l−i), built one factor at a time
            for lv in range(alpha - j + 1):
                if lv:
                    step = _UP.divide(Decimal(alpha - j - lv + 1), Decimal(order + lv))
                    weight = _UP.multiply(weight, _UP.multiply(gamma, step))
                inner = _UP.add(inner, _UP.multiply(weight, b[order + lv]))
        total = _UP.add(total, _UP.multiply(coef, inner))
    return total


def cgf_bound_up(alpha: int, m: int, n: int, sigma: float, order: int) -> Decimal:
    """An upper bound of (α − 1)·ε(α) by the theorem, at integer α ≥ 2 and Taylor order K ≥ 3."""
    if alpha < 2 or order < 3 or not 0 < m < n or not sigma > 0:
        raise ValueError("need integer α ≥ 2, Taylor order ≥ 3, 0 < m < n and σ > 0")
    b = _b_up(sigma, (order + alpha + 2) // 2 + 1)
    s_down, s_up = _s_bounds(sigma)
    # exp and ln round half-even whatever the context: one ulp towards the safe side
    two_s_up = _UP.multiply(2, s_up)
    gap = _UP.subtract(_UP.exp(two_s_up).next_plus(_UP), _DOWN.exp(s_down).next_minus(_DOWN))
    gamma_sq = _fraction_up(Fraction(m * m * alpha * (alpha - 1), n * n))
    total = _UP.add(Decimal(1), _UP.multiply(gamma_sq, max(gap, Decimal(0))))
    for k in range(3, order):
        coef = Fraction(m, n) ** k / math.factorial(k) * _f_coefficient(alpha, k)
        total = _UP.add(total, _UP.multiply(_fraction_up(coef), b[k]))
    total = _UP.add(total, _remainder_up(alpha, m, n, order, b))
    return _UP.ln(total).next_plus(_UP)  # ln rounds half-even: one ulp up


def cgf_up(alpha: int, m: int, n: int, sigma: float) -> float | None:
    """The smallest bound over :data:`TAYLOR_ORDERS` as a float rounded up, or ``None`` where
    none is evaluated (:func:`evaluable`)."""
    best: Decimal | None = None
    for order in TAYLOR_ORDERS:
        if evaluable(alpha, sigma, order):
            value = cgf_bound_up(alpha, m, n, sigma, order)
            best = value if best is None else min(best, value)
    if best is None:
        return None
    return math.nextafter(float(best), math.inf)
