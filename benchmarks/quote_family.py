"""The best value over the construction family, for ``python -m benchmarks quote``.

Where the default configuration misses a target of the issue "The number to quote", the
benchmark prints beside it the best value the family of constructions considered reaches,
computed here offline (from the conversions alone, no filter is run) under the default
configuration's δ split:

- ladders of shape :class:`~odometer_core.accounting.odometer.LadderShape` with the spacing
  r = 2^(1/steps) for steps in :data:`STEPS`, level 1's share in :data:`FIRSTS`, the levels
  covering ρ (μ², S(α)) down to 1 % of the top evenly shared with 0.95 of the rest, 0.01 above,
  the tail the remainder; and the 1.4.0–1.6.0 ladder (``None``);
- in ``rdp``, the order weights from the first declaration (the order where repeats of it fit
  the most times holds 0.9 of the ladder's pool), each order's ladder read at its own share;
- the PLD branch at the default split, which the benchmark's own reading already includes for
  a job declared once (it is the same statement whatever the ladder).

Each ladder level k is the filter of the mode's theorem at the threshold c_k converted at its
share δ_k: Canonne–Kamath–Steinke 2020, Cor. 13 (``zcdp``), Dong–Roth–Su 2019, Cor. 2.13
(``gdp``), Canonne–Kamath–Steinke 2020, Prop. 12 at the order (``rdp``); a reading is the
smallest ε_k over the levels that hold the running total, as the service reads it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from decimal import Decimal

import numpy as np

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.odometer import LadderShape

STEPS = (4, 6, 8)
FIRSTS = ("0.5", "0.6", "0.7", "0.8", "0.85", "0.9")
#: the span of the even shares: a factor 100 in the ladder's unit below the top
SPAN_FACTOR = 100.0
#: the share of the order the first declaration chooses in ``rdp`` (``WORKLOAD_SHARE``)
ORDER_SHARE = 0.9


def shape(steps: int, first: str) -> LadderShape:
    """A member of the family: spacing 2^(1/steps), level 1 ``first``."""
    span = math.ceil(math.log(SPAN_FACTOR) / math.log(2.0 ** (1.0 / steps)))
    f = Decimal(first)
    rest = 1 - f - Decimal("0.01")
    return LadderShape(
        steps, f, span, (rest * Decimal("0.95")).quantize(Decimal("1e-6")), Decimal("0.01")
    )


def family() -> list[LadderShape | None]:
    return [None, *(shape(s, f) for s in STEPS for f in FIRSTS)]


Convert = Callable[[float, float], float]


def _readings(
    ladder: LadderShape | None,
    top: float,
    pool: float,
    eps_b: float,
    convert: Convert,
    spent: Sequence[float],
) -> list[float]:
    """The ladder's reading at each running total of ``spent`` (the prefix minimum of ε_k over
    the levels that hold it, as :meth:`AnchoredLadder.reading`)."""
    lad = odo.AnchoredLadder(top, pool, Decimal(repr(eps_b)), convert, shape=ladder)
    out = []
    for s in spent:
        found = lad.reading(s)
        out.append(math.inf if found is None else float(found[0]))
    return out


def _top(
    ladder: LadderShape | None, budget: Callable[[float, float], float], eps_b: float, pool: float
) -> float:
    return budget(eps_b, odo.anchored_share(pool, 1, ladder))


@functools.lru_cache(maxsize=64)
def _exact(sigma: float, delta: float, n: int) -> tuple[float, ...]:
    """The exact ε of j Gaussians of noise σ (Δ = 1) at δ, j = 1 … n (Dong–Roth–Su 2022,
    Cor. 3.3 and Cor. 2.13)."""
    return tuple(cv.gdp_epsilon(math.sqrt(j) / sigma, delta) for j in range(1, n + 1))


def _gdp_budget(eps: float, delta: float) -> float:
    mu = cv.gdp_mu_budget(eps, delta)
    return mu * mu


def _gdp_convert(c: float, delta: float) -> float:
    return cv.gdp_epsilon(math.sqrt(c), delta)


def _history(
    unit: float,
    top: float,
    eps_b: float,
    sigma: float,
    delta: float,
    read: Callable[[list[float]], list[float]],
) -> tuple[int, float, float]:
    n = int(top / unit * (1 - 1e-12))
    if top == unit == 1.0:  # rdp: as many as some order admits
        lo, hi = 0, 1
        while not math.isinf(read([float(hi)])[0]):
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # the last count some order holds (monotone)
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if not math.isinf(read([float(mid)])[0]) else (lo, mid)
        n = lo
    if n < 1:
        return 0, math.inf, math.inf
    spent = [j * unit for j in range(1, n + 1)]
    readings = read(spent)
    exact = _exact(sigma, delta, n)
    worst = max(
        (r / e for r, e in zip(readings, exact, strict=True) if e >= 0.1 * eps_b), default=0.0
    )
    return n, worst, readings[-1] / exact[-1]


def gaussian_best(
    mode: str,
    eps_b: float,
    delta: float,
    sigma: float,
    last_target: float = math.inf,
    at_least: int = 0,
) -> tuple[float, float]:
    """For repeats of a Gaussian of noise σ (Δ = 1) on (ε_B, δ) in ``mode`` (δ_c = δ): (the
    smallest worst ratio past 10 % of the budget over the members whose ratio at the last
    admitted is within ``last_target``, or over all when none is; the smallest ratio at the
    last admitted) over the family's members that admit at least ``at_least`` of them."""
    worst, last, free = math.inf, math.inf, math.inf
    for ladder in family():
        read: Callable[[list[float]], list[float]]
        if mode in ("gdp", "zcdp"):
            gdp = mode == "gdp"
            top = _top(ladder, _gdp_budget if gdp else cv.zcdp_rho_budget, eps_b, delta)
            unit = 1.0 / sigma**2 if gdp else 1.0 / (2 * sigma**2)
            read = functools.partial(
                _readings, ladder, top, delta, eps_b, _gdp_convert if gdp else cv.zcdp_epsilon
            )
        else:  # rdp: every order's ladder, the first declaration's order at 0.9 of δ_c
            top, unit = 1.0, 1.0
            read = functools.partial(_rdp_readings, ladder, eps_b, delta, 1.0 / (2 * sigma**2))
        n, w, la = _history(unit, top, eps_b, sigma, delta, read)
        if n < max(at_least, 1):
            continue
        free, last = min(free, w), min(last, la)
        if la <= last_target:
            worst = min(worst, w)
    return (free if math.isinf(worst) else worst), last


def _rdp_readings(
    ladder: LadderShape | None, eps_b: float, delta: float, rho: float, counts: list[float]
) -> list[float]:
    """Readings after ``counts`` repeats of a Gaussian of RDP curve αρ: the smallest over the
    orders' ladders (the first declaration's order at 0.9 of δ_c, the others at equal parts of
    the rest), ∞ past every order's top."""
    rest = (1 - ORDER_SHARE) / (len(ORDERS) - 1)
    tops = [_rdp_top(ladder, eps_b, delta * ORDER_SHARE, a) for a in ORDERS]
    first = max(range(len(ORDERS)), key=lambda i: tops[i] / ORDERS[i])
    out = [math.inf] * len(counts)
    for i, alpha in enumerate(ORDERS):
        pool = delta * (ORDER_SHARE if i == first else rest)
        top = tops[i] if i == first else _rdp_top(ladder, eps_b, pool, alpha)
        if not top > 0:
            continue
        spent = [n * alpha * rho for n in counts if n * alpha * rho <= top]
        convert = functools.partial(_rdp_convert, alpha)
        for j, r in enumerate(_readings(ladder, top, pool, eps_b, convert, spent)):
            out[j] = min(out[j], r)
    return out


def _rdp_top(ladder: LadderShape | None, eps_b: float, pool: float, alpha: float) -> float:
    """B(α) at level 1's share (CKS20 Prop. 12 inverted)."""
    d1 = odo.anchored_share(pool, 1, ladder)
    return eps_b + (math.log(d1) + math.log(alpha - 1) - alpha * math.log1p(-1 / alpha)) / (
        alpha - 1
    )


@functools.lru_cache(maxsize=4096)
def _rdp_convert(alpha: float, c: float, delta: float) -> float:
    """CKS20 Prop. 12 at the one order α, memoised: the ladders of :func:`gaussian_best` and
    :func:`curve_best` ask for the same (order, value, δ) again."""
    eps, _ = cv.rdp_to_epsilon(np.array([alpha]), np.array([c]), delta)
    return float(eps)


#: the service's 16 orders
ORDERS = (1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 32.0, 48.0, 64.0)


def _first_order(ladder: LadderShape | None, eps_b: float, pool: float, rho: float) -> float:
    """The order where repeats of a curve αρ fit the most times at level 1."""
    return max(ORDERS, key=lambda a: _rdp_top(ladder, eps_b, pool, a) / (a * rho))


def curve_best(
    curve: Sequence[float], eps_b: float, delta: float, times: int, at_least: int = 0
) -> tuple[float, int]:
    """For a declaration of RDP ``curve`` on :data:`ORDERS` (the charged curve) repeated:
    (the smallest reading after ``times`` repeats over the members that admit at least
    ``at_least`` repeats, the most repeats admitted) over the family, the first declaration's
    order holding 0.9 of δ_c and every other order an equal part of the rest (its ladder read
    at that share)."""
    best_read, best_count = math.inf, 0
    rest = (1 - ORDER_SHARE) / (len(ORDERS) - 1)
    for ladder in family():
        tops = [_rdp_top(ladder, eps_b, delta * ORDER_SHARE, a) for a in ORDERS]
        first = max(range(len(ORDERS)), key=lambda i: tops[i] / curve[i])
        count = 0
        reading = math.inf
        for i, alpha in enumerate(ORDERS):
            pool = delta * (ORDER_SHARE if i == first else rest)
            top = tops[i] if i == first else _rdp_top(ladder, eps_b, pool, alpha)
            if not top > 0:
                continue
            count = max(count, int(top / curve[i] * (1 - 1e-12)))
            if times * curve[i] <= top:
                convert = functools.partial(_rdp_convert, alpha)
                reading = min(
                    reading, _readings(ladder, top, pool, eps_b, convert, [times * curve[i]])[0]
                )
        if count >= at_least:
            best_read = min(best_read, reading)
        best_count = max(best_count, count)
    return best_read, best_count


# ---------------------------------------------------------------------------- rdp, 1.8.0 on
#: the orders only the levels of a shaped ``rdp`` ladder use (weight 0 at level 1)
LEVEL_ORDERS = (80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0, 768.0, 1024.0)
#: the spacings of the shaped ``rdp`` members: r = 2^(1/steps)
RDP_STEPS = (4, 5, 6, 7, 8)
#: the span factors of the shaped ``rdp`` members: the levels evenly shared reach down to
#: 1/factor of level 1's multiple of the first declaration
RDP_SPANS = (30.0, 50.0, 100.0, 300.0)
#: the placements of a shaped member's levels: at N·r^−(k−1) (accounting 1.8.0), or at whole
#: numbers of repeats, one span level per number (1.9.0, ``rdp_shaped.WHOLE_REPEATS``)
PLACEMENTS = (False, True)
#: ``rdp_shaped.WHOLE_MARGIN``: a whole number j of repeats is placed at j·(1 + 10⁻⁸)
WHOLE_MARGIN = 1.0 + 1e-8


def rdp_shapes() -> list[tuple[LadderShape, bool]]:
    """The shaped ``rdp`` members (shape, whole repeats): steps in :data:`RDP_STEPS`, span
    factors :data:`RDP_SPANS`, level 1 at 0.9 of the pool (the share of the 1.4.0–1.7.0
    filters), 0.095 spread, 0.001 above, the tail the rest, each placement of
    :data:`PLACEMENTS`."""
    out: list[tuple[LadderShape, bool]] = []
    for steps in RDP_STEPS:
        for factor in RDP_SPANS:
            span = math.ceil(math.log(factor) / math.log(2.0 ** (1.0 / steps)))
            shape_ = LadderShape(steps, Decimal("0.9"), span, Decimal("0.095"), Decimal("0.001"))
            out.extend((shape_, whole) for whole in PLACEMENTS)
    return out


def _rdp_levels(
    ladder: LadderShape, eps_b: float, delta: float, curve: Sequence[float], whole: bool
) -> tuple[float, list[tuple[int, float, float]]]:
    """:func:`_placed`, memoised (the curve as a tuple)."""
    return _placed(ladder, eps_b, delta, tuple(curve), whole)


@functools.lru_cache(maxsize=4096)
def _placed(
    ladder: LadderShape, eps_b: float, delta: float, curve: tuple[float, ...], whole: bool
) -> tuple[float, list[tuple[int, float, float]]]:
    """(N, levels) of a shaped ``rdp`` ladder placed by a first declaration of ``curve`` on
    :data:`ORDERS` + :data:`LEVEL_ORDERS`, computed from its definition: level 1 every order of
    :data:`ORDERS` at B(α) on 0.9·w_α (the first declaration's order w = 0.9, the others
    0.1/15), N = max B(α)/C(α); level k ≠ 1 at the order minimising CKS20 Prop. 12 of
    n_k·C(α) at δ·weight(k), n_k = N·r^−(k−1) (the tail included; the levels above, for
    raises, left out). ``whole``: n_k ≥ 1 taken as ⌊n_k⌋·(1 + 10⁻⁸), one span level per whole
    number, the spread divided evenly among them. Levels: (order index, value, ε)."""
    grid = ORDERS + LEVEL_ORDERS
    n = _multiple(float(ladder.first), eps_b, delta, curve)
    placed: list[tuple[float, float]] = []  # (multiple, share of δ; -1: the span's, evenly)
    for k in range(2, ladder.depth + 1):
        nk = n * ladder.ratio ** (-(k - 1))
        span = k <= ladder.span + 1
        if whole and nk >= 1:
            nk = math.floor(nk) * WHOLE_MARGIN
            if span and any(m == nk for m, _ in placed):
                continue
        placed.append((nk, -1.0 if whole and span else delta * ladder.weight(k)))
    kept = sum(1 for _, d in placed if d < 0)
    shares = [delta * float(ladder.spread) / kept if dk < 0 else dk for _, dk in placed]
    table = _convert_each(grid, [[nk * c for c in curve] for nk, _ in placed], shares)
    levels = []
    for (nk, _), row in zip(placed, table, strict=True):
        best = min((e, i) for i, e in enumerate(row))
        levels.append((best[1], nk * curve[best[1]], best[0]))
    return n, levels


def _convert_each(
    grid: Sequence[float], values: Sequence[Sequence[float]], deltas: Sequence[float]
) -> list[list[float]]:
    """``_rdp_convert(grid[i], values[k][i], deltas[k])`` for every level k and order i, in one
    pass of :func:`cv.rdp_to_epsilon_rows`: one row per (k, i) holding ``values[k][i]`` at order
    i and ∞ at the others (an order at τ = ∞ gives ε = ∞, never the smallest unless all are),
    so each row's ε is the one-order conversion's to the last bit (the rows function performs
    the scalar function's operations on each element). A level at δ = 0 is converted order by
    order (the rows function would read the ∞ placeholders there)."""
    if not values:
        return []
    if any(d == 0.0 for d in deltas):
        return [
            [_rdp_convert(a, v, d) for a, v in zip(grid, row, strict=True)]
            for row, d in zip(values, deltas, strict=True)
        ]
    width = len(grid)
    rdp = np.full((len(values) * width, width), np.inf)
    rows = np.arange(width)
    for k, row in enumerate(values):
        rdp[k * width + rows, rows] = row
    out = cv.rdp_to_epsilon_rows(np.array(grid), rdp, [d for d in deltas for _ in grid])
    return [[eps for eps, _ in out[k * width : (k + 1) * width]] for k in range(len(values))]


def _multiple(w1: float, eps_b: float, delta: float, curve: Sequence[float]) -> float:
    """N = max B(α)/C(α): level 1 every order of :data:`ORDERS` at B(α) on w1·w_α (the first
    declaration's order w = 0.9, the others 0.1/15)."""
    rest = (1 - ORDER_SHARE) / (len(ORDERS) - 1)
    tops0 = [_top_at(eps_b, delta * ORDER_SHARE * w1, a) for a in ORDERS]
    first = max(range(len(ORDERS)), key=lambda i: tops0[i] / curve[i])
    tops = [
        tops0[i] if i == first else _top_at(eps_b, delta * rest * w1, a)
        for i, a in enumerate(ORDERS)
    ]
    return max(b / curve[i] for i, b in enumerate(tops) if b > 0)


def _top_at(eps_b: float, share: float, alpha: float) -> float:
    return eps_b + (math.log(share) + math.log(alpha - 1) - alpha * math.log1p(-1 / alpha)) / (
        alpha - 1
    )


def _shaped_reading(
    n: float,
    levels: list[tuple[int, float, float]],
    count: float,
    curve: Sequence[float],
    eps_b: float,
) -> float:
    if count > n * (1 + 1e-12):
        return math.inf
    best = eps_b
    for i, value, eps in levels:
        if count * curve[i] <= value:
            best = min(best, eps)
    return best


def shaped_gaussian_best(
    eps_b: float, delta: float, sigma: float, at_least: int = 0
) -> tuple[float, float]:
    """(worst ratio past 10 % of the budget, ratio at the last admitted) over the shaped
    ``rdp`` members that admit at least ``at_least`` repeats, for repeats of a Gaussian of
    noise σ (curve αρ)."""
    rho = 1.0 / (2 * sigma**2)
    curve = [a * rho for a in ORDERS + LEVEL_ORDERS]
    worst, last = math.inf, math.inf
    for ladder, whole in rdp_shapes():
        n, levels = _rdp_levels(ladder, eps_b, delta, curve, whole)
        count = int(n * (1 - 1e-12))
        if count < max(at_least, 1):
            continue
        exact = _exact(sigma, delta, count)
        ratios = [
            _shaped_reading(n, levels, j, curve, eps_b) / exact[j - 1] for j in range(1, count + 1)
        ]
        past = [r for r, e in zip(ratios, exact, strict=True) if e >= 0.1 * eps_b]
        worst, last = min(worst, max(past, default=0.0)), min(last, ratios[-1])
    return worst, last


def shaped_curve_best(
    curve: Sequence[float], eps_b: float, delta: float, times: int, at_least: int = 0
) -> float:
    """The smallest reading after ``times`` repeats of a declaration of RDP ``curve`` on
    :data:`ORDERS` + :data:`LEVEL_ORDERS` over the shaped ``rdp`` members that admit at least
    ``at_least`` repeats of it."""
    best = math.inf
    for ladder, whole in rdp_shapes():
        n, levels = _rdp_levels(ladder, eps_b, delta, curve, whole)
        if int(n * (1 - 1e-12)) >= at_least:
            best = min(best, _shaped_reading(n, levels, times, curve, eps_b))
    return best


def shaped_repeats(curve: Sequence[float], eps_b: float, delta: float) -> int:
    """How many repeats of a declaration of ``curve`` a shaped ``rdp`` filter admits (level 1
    at 0.9 of the pool, whatever the levels below): what the default admits."""
    return int(_multiple(0.9, eps_b, delta, curve) * (1 - 1e-12))
