"""Exact Rényi divergences of the neighbouring pairs of the without-replacement Gaussian.

A Gaussian of noise σΔ on m of n records sampled without replacement (γ = m/n), replace-one
relation: Δ bounds the change of the sum when any record is replaced by any other, so all records
lie in a set of diameter Δ. With every other record at u and the differing record v in one
dataset, v' in the other, the output laws (shifted by the sum of the other records, which does not
change a divergence) are

    P = (1 − γ)N(0, σ²Δ²I) + γN(v − u, σ²Δ²I),  Q = (1 − γ)N(0, σ²Δ²I) + γN(v' − u, σ²Δ²I),

and the mechanism's RDP of order α is at least D_α(P‖Q) for each such pair. With Δ = 1 three
pairs are evaluated here (:data:`PAIRS`):

* ``equilateral``: |v − u| = |v' − u| = |v − v'| = 1, in the plane of the three points rotated so
  that v − u = (√3/2, 1/2) and v' − u = (√3/2, −1/2). To second order in γ,
  E_Q[(P/Q)^α] = 1 + γ²α(α−1)(e^{2s} − e^{s}), s = 1/(2σ²), Birrell–Ebrahimi–Behnia–Pacheco 2024
  Thm 3.4's second-order term exactly, so at small γ this pair is the tightest test of that term.
  It is symmetric (the reflection y → −y swaps P and Q), so one direction is enough;
* ``collinear``: u = v', |v − u| = 1: (1 − γ)N(0) + γN(1) against N(0), the worst at large γα;
* ``collinear reversed``: N(0) against (1 − γ)N(0) + γN(1).

D_α(P‖Q) = log E_Z[(p/φ)^α (q/φ)^{1−α}]/(α − 1), Z ~ N(0, σ²I) of density φ, and with
Z = σξ, ξ ~ N(0, I), p/φ = 1 − γ + γ·exp(a·ξ/σ − |a|²/(2σ²)) for a shift a (q likewise). That
expectation is a Gauss–Hermite product rule in mpmath at a working precision of ≥ 40 digits: the
integrand is analytic, Gaussian-weighted and, for these σ and α, of moderate exponential growth,
so the rule converges geometrically; :func:`checked_renyi` evaluates it at two degrees and two
precisions and reports their difference. :func:`renyi_by_tilting` is an independent evaluation
for integer α (a binomial expansion and the Gaussian's exponential tilting leave one-dimensional
integrals, done by mpmath's tanh-sinh rule) to check the first against.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Literal

import mpmath  # type: ignore[import-untyped]

Pair = Literal["equilateral", "collinear", "collinear reversed"]
PAIRS: tuple[Pair, ...] = ("equilateral", "collinear", "collinear reversed")

Vector = tuple[mpmath.mpf, mpmath.mpf]

GEOMETRY: dict[Pair, tuple[int, int, Fraction]] = {
    "equilateral": (1, 1, Fraction(1, 2)),
    "collinear": (1, 0, Fraction(0)),
    "collinear reversed": (0, 1, Fraction(0)),
}
"""(|a|², |b|², a·b) of each pair's shifts a = v − u, b = v' − u (Δ = 1)."""


def _shifts(pair: Pair) -> tuple[Vector, Vector]:
    """(v − u, v' − u) in units of Δ, at the current working precision."""
    zero, one, half = mpmath.mpf(0), mpmath.mpf(1), mpmath.mpf(1) / 2
    if pair == "equilateral":
        c = mpmath.sqrt(3) / 2
        return (c, half), (c, -half)
    if pair == "collinear":
        return (one, zero), (zero, zero)
    return (zero, zero), (one, zero)


@functools.lru_cache(maxsize=8)
def _hermite(nodes: int, dps: int) -> tuple[tuple[mpmath.mpf, mpmath.mpf], ...]:
    """(x_k, w_k) with E[f(ξ)] ≈ Σ w_k f(x_k) for ξ ~ N(0, 1): mpmath's rule for the weight
    e^{−x²}, nodes scaled by √2 and weights divided by √π."""
    with mpmath.workdps(dps):
        xs, ws = mpmath.gauss_quadrature(nodes, "hermite")
        root2, rootpi = mpmath.sqrt(2), mpmath.sqrt(mpmath.pi)
        return tuple((x * root2, w / rootpi) for x, w in zip(xs, ws, strict=True))


def renyi(
    alpha: int, gamma: Fraction, sigma: float, pair: Pair, *, nodes: int, dps: int
) -> mpmath.mpf:
    """D_α(P‖Q) of ``pair`` (noise σ, Δ = 1) by an n-node Gauss–Hermite rule per dimension at
    ``dps`` significant digits (a one-dimensional rule when both shifts lie on the first axis)."""
    rule = _hermite(nodes, dps)
    with mpmath.workdps(dps):
        t = 1 / mpmath.mpf(sigma)
        g = mpmath.mpf(gamma.numerator) / gamma.denominator
        keep = 1 - g
        (a1, a2), (b1, b2) = _shifts(pair)
        ka = t * t * (a1 * a1 + a2 * a2) / 2
        kb = t * t * (b1 * b1 + b2 * b2) / 2

        def integrand(x1: mpmath.mpf, x2: mpmath.mpf) -> mpmath.mpf:
            p = keep + g * mpmath.exp(t * (a1 * x1 + a2 * x2) - ka)
            q = keep + g * mpmath.exp(t * (b1 * x1 + b2 * x2) - kb)
            return p**alpha * q ** (1 - alpha)

        zero = mpmath.mpf(0)
        if a2 == 0 and b2 == 0:
            total = mpmath.fsum(w * integrand(x, zero) for x, w in rule)
        else:
            total = mpmath.fsum(w1 * w2 * integrand(x1, x2) for x1, w1 in rule for x2, w2 in rule)
        return mpmath.log(total) / (alpha - 1)


def checked_renyi(
    alpha: int, gamma: Fraction, sigma: float, pair: Pair
) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(D_α(P‖Q) by the finer rule, the relative difference of the 40- and 60-node rules at 40
    and 60 digits): the second bounds the quadrature error of the first, the rule converging
    geometrically in the number of nodes."""
    coarse = renyi(alpha, gamma, sigma, pair, nodes=40, dps=40)
    fine = renyi(alpha, gamma, sigma, pair, nodes=60, dps=60)
    with mpmath.workdps(60):
        return fine, abs(coarse / fine - 1)


def renyi_by_tilting(
    alpha: int, gamma: Fraction, sigma: float, pair: Pair, *, dps: int
) -> mpmath.mpf:
    """D_α(P‖Q) for integer α from the shifts' lengths and inner product alone (:data:`GEOMETRY`).

    With A = p/φ − (1 − γ) over γ, i.e. A = exp(a·ξ/σ − |a|²s), s = 1/(2σ²), expand
    (1 − γ + γA)^α by the binomial theorem; E[A^j h(ξ)] = e^{j(j−1)|a|²s} E[h(ξ + j a/σ)]
    (exponential tilting of N(0, I)), and h = (q/φ)^{1−α} depends on ξ only through b·ξ/σ, which
    the shift moves by 2j(a·b)s. So

        E_Q[(P/Q)^α] = Σ_j C(α,j)(1 − γ)^{α−j}γ^j e^{j(j−1)|a|²s}
                           · E_ζ[(1 − γ + γ·exp(|b|ζ/σ + 2j(a·b)s − |b|²s))^{1−α}],  ζ ~ N(0, 1),

    every term positive; each expectation is a one-dimensional tanh-sinh quadrature.
    """
    a2, b2, ab = GEOMETRY[pair]
    with mpmath.workdps(dps):
        g = mpmath.mpf(gamma.numerator) / gamma.denominator
        keep = 1 - g
        s = 1 / (2 * mpmath.mpf(sigma) ** 2)
        t_b = mpmath.sqrt(b2) / mpmath.mpf(sigma)

        @functools.cache
        def tilted(shift: Fraction) -> mpmath.mpf:  # the expectation at 2j(a·b) = shift
            if b2 == 0:
                return mpmath.mpf(1)
            offset = (mpmath.mpf(shift.numerator) / shift.denominator - b2) * s

            def integrand(z: mpmath.mpf) -> mpmath.mpf:
                q = keep + g * mpmath.exp(t_b * z + offset)
                return mpmath.npdf(z) * q ** (1 - alpha)

            return mpmath.quad(integrand, [-mpmath.inf, 0, mpmath.inf])

        total = mpmath.fsum(
            mpmath.binomial(alpha, j)
            * keep ** (alpha - j)
            * g**j
            * mpmath.exp(j * (j - 1) * a2 * s)
            * tilted(2 * j * ab)
            for j in range(alpha + 1)
        )
        return mpmath.log(total) / (alpha - 1)
