"""Shaped ladders of ``rdp`` filters (accounting 1.8.0; ``docs/accounting.md``, *Readings as
the smallest of several statements*).

Before 1.8.0 every order α of an ``rdp`` grid had its own ladder below its threshold B(α), on
the order's share w_α of the pool: a reading below the top was read at an order chosen for the
budget (the first declaration's, holding 0.9 of the pool at level 1) or at an order holding a
few per cent of it, and the grid stopped at α = 64, far below the orders that convert small
totals well. A configuration created from 1.8.0 on (default grid, no workload) records a
:class:`~odometer_core.accounting.odometer.LadderShape` (:data:`DEFAULT_RDP_LADDER`) and adds
:data:`LEVEL_ORDERS` to its grid with weight 0 (they hold no level 1). Its statements are:

- level 1, the filter: every order of weight w_α > 0 at B(α), on the share ``first``·w_α of
  the ladder's pool (the thresholds of 1.7.0, on the shape's level-1 share);
- every other level k (k = 2 … ``depth`` below, k = −1 … −:data:`ABOVE` above, for raises):
  one RDP filter at one order α_k with threshold c_k = n_k·C(α_k), on the share
  ``shape.weight(k)`` of the pool, where C is the first declaration's curve on the grid (the
  state's ``design``), n_k = N·r^−(k−1) (N·r^|k| above) and N = max_α B(α)/C(α), the
  multiple of the first declaration the filter admits; α_k is the order whose conversion of
  n_k·C(α) at the level's share is the smallest (Canonne–Kamath–Steinke 2020, Prop. 12).

The levels' orders and thresholds are a deterministic function of the configuration and the
first declaration, chosen before any output (as the weights of :data:`WEIGHTS_FIRST
<odometer_core.accounting.modes.rdp_config.WEIGHTS_FIRST>`): each (α_k, c_k) is then an RDP
filter fixed in advance (Feldman–Zrnic 2021, Thm 4.3), and the shares sum to at most the pool
(``first``·Σw_α + spread + tail + above ≤ 1, exact decimals: the shape and the weights are
checked at creation), so the union bound over all statements certifies the smallest ε among
those whose threshold holds the running curve, at every stopping time. A history of repeats of
the first declaration meets its levels where they were placed; later work of a different kind
is read at the same statements, only less closely.

From accounting 1.9.0 a new configuration records ``"levels": "whole_repeats"``
(:data:`WHOLE_REPEATS`) and the shape :data:`DEFAULT_RDP_LADDER` (34 levels below level 1,
totals down to 2 % of the filter's): every level's multiple of the first declaration is a whole
number of repeats, one span level per number, the span's share divided evenly among them.
Configurations stored before keep the placement and the shape they record (1.8.0:
:data:`LADDER_1_8`, multiples) and their readings.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.exact import cost_from_float, to_float_down
from odometer_core.accounting.odometer import LadderShape

#: Orders new ``rdp`` configurations (default grid) track for their ladder's levels only
#: (weight 0 at level 1): a total far below the budget converts best at a high order (for a
#: Gaussian, α − 1 ≈ √(log(1/δ)/ρ)), which the 16 default orders (up to 64) do not reach.
LEVEL_ORDERS: Final[tuple[float, ...]] = (
    80.0,
    96.0,
    128.0,
    160.0,
    192.0,
    256.0,
    320.0,
    384.0,
    512.0,
    768.0,
    1024.0,
)

#: The ladder of ``rdp`` configurations created by accounting 1.8.0: r = 2^(1/6); level 1 (the
#: filter, every order at its weight) 0.9 of the pool, as the 1.4.0–1.7.0 filters hold, so that
#: it admits what they admit; the 40 levels below (totals down to 1 % of the filter's, in
#: multiples of the first declaration) 0.095 evenly; the tail 0.004; the levels above 0.001.
LADDER_1_8: Final = LadderShape(6, Decimal("0.9"), 40, Decimal("0.095"), Decimal("0.001"))

#: The ladder of ``rdp`` configurations created from accounting 1.9.0 on (with
#: :data:`WHOLE_REPEATS`): as :data:`LADDER_1_8`, but the 0.095 spread over the 34 levels that
#: reach totals down to 2 % of the filter's (2^(−34/6) ≈ 1/50), whole numbers of repeats of the
#: first declaration. Chosen from the family of ``python -m benchmarks quote``
#: (docs/accounting.md): over that family's Gaussian histories and DP-SGD jobs it is the member
#: whose largest ratio to each row's best is the smallest.
DEFAULT_RDP_LADDER: Final = LadderShape(6, Decimal("0.9"), 34, Decimal("0.095"), Decimal("0.001"))

#: The placement of the levels k ≠ 1 recorded by configurations created from accounting 1.9.0
#: on (stored ``"levels": "whole_repeats"``; absent: :data:`LEVELS_1_8`). Every level's multiple
#: n_k of the first declaration that is at least 1 is rounded down to a whole number ⌊n_k⌋ (and
#: placed at ⌊n_k⌋·:data:`WHOLE_MARGIN`); of the levels of the span (k = 2 … span + 1) that
#: round to the same number only the first (the smallest k) is kept, and the span's share
#: ``spread`` is divided evenly among the kept ones. A history of j repeats of the first
#: declaration is held by a level exactly when ⌊n_k⌋ ≥ j, as by n_k ≥ j, but the level's
#: threshold is lower, so its ε is smaller, and no share is spent twice on one threshold. The
#: levels and their shares remain a deterministic function of the configuration and the first
#: declaration, fixed before any output; the kept span levels' shares sum to at most
#: ``spread``, so the union bound is unchanged. Later work of another kind meets thresholds a
#: little lower than 1.8.0's, and is read a level higher where it falls between the two.
WHOLE_REPEATS: Final = "whole_repeats"
#: A whole number of repeats j is placed at j·(1 + 10⁻⁸) of the first declaration: the state's
#: running sums are rounded up at every admission (a relative excess below 10⁻¹⁰ after 10⁶
#: of them), and the level must hold exactly j repeats; its ε is converted at that value.
WHOLE_MARGIN: Final = 1.0 + 1e-8
#: Every level at n_k·C(α), each span level at spread/span (accounting 1.8.0).
LEVELS_1_8: Final = "multiples"
#: The placement new configurations record (with :data:`DEFAULT_RDP_LADDER`).
DEFAULT_LEVELS: Final = WHOLE_REPEATS

#: Levels above the top (raises) that carry a statement: up to 2^(60/6) = 1024 times the top.
ABOVE: Final = 60

THEOREM: Final = (
    "shaped ladder of RDP filters (Feldman–Zrnic 2021, Thm 4.3), each level at the order that "
    "converts its multiple of the first declaration best, converted by Canonne–Kamath–Steinke "
    "2020, Prop. 12 at its share of a shape fixed at creation (union bound over the levels; "
    "discretisation of Lécuyer 2021)"
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One level k ≠ 1: the RDP filter "S(α) ≤ ``value``" at the grid's order ``index``,
    read as ``epsilon`` (CKS20 Prop. 12 at α, at the level's share, rounded up)."""

    level: int
    index: int
    value: float
    epsilon: Decimal


def multiple(tops: Sequence[float], design: Sequence[float]) -> float:
    """N = max_α B(α)/C(α) over the orders with a level 1 (B(α) > 0) and C(α) > 0: how many
    repeats of the first declaration level 1 holds (0 when none)."""
    ratios = [b / c for b, c in zip(tops, design, strict=True) if b > 0 and c > 1e-300]
    return max(ratios, default=0.0)


@functools.lru_cache(maxsize=256)
def statements(
    orders: tuple[float, ...],
    tops: tuple[float, ...],
    design: tuple[float, ...],
    pool: float,
    shape: LadderShape,
    whole: bool = False,
) -> tuple[Statement, ...]:
    """The levels k ≠ 1 of a shaped ladder placed by the first declaration's curve ``design``
    (module docstring), on the ladder's δ ``pool``; empty when the curve is 0 everywhere.
    ``whole``: the levels at whole numbers of repeats (:data:`WHOLE_REPEATS`)."""
    n = multiple(tops, design)
    if not 0 < n < math.inf:
        return ()
    curve = np.asarray(design, dtype=np.float64)
    usable = curve > 1e-300
    levels, shares = level_shares(pool, shape)
    factors = [odo.anchored_value(n, k, shape) for k in levels]
    if whole:
        levels, shares, factors = whole_levels(levels, shares, factors, pool, shape)
    # every level's n_k·C(α) at once (the products of the one-level computation, row by row),
    # each row converted at its share in one pass: the same floats as one call per level
    values = np.where(usable, np.array(factors, dtype=np.float64)[:, None] * curve, np.inf)
    converted = cv.rdp_to_epsilon_rows(orders, values, shares)
    out: list[Statement] = []
    for row, (k, (epsilon, alpha)) in enumerate(zip(levels, converted, strict=True)):
        i = orders.index(alpha)
        value = float(values[row, i])
        if not 0 < value < math.inf:
            continue
        # the level reads its one order's conversion (CKS20 Prop. 12 at α_k): the minimum
        # over the orders is attained there, so it is ``epsilon`` itself
        out.append(Statement(k, i, value, cost_from_float(epsilon)))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def level_shares(pool: float, shape: LadderShape) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The levels k ≠ 1 that hold a share of ``pool`` (k = 2 … depth, then −1 … −ABOVE), and
    their shares δ_k (:func:`~odometer_core.accounting.odometer.anchored_share`): the same for
    every first declaration placed on the ladder."""
    levels: list[int] = []
    shares: list[float] = []
    for k in (*range(2, shape.depth + 1), *range(-1, -ABOVE - 1, -1)):
        share = odo.anchored_share(pool, k, shape)
        if share > 0:
            levels.append(k)
            shares.append(share)
    return tuple(levels), tuple(shares)


def whole_levels(
    levels: tuple[int, ...],
    shares: tuple[float, ...],
    factors: list[float],
    pool: float,
    shape: LadderShape,
) -> tuple[tuple[int, ...], tuple[float, ...], list[float]]:
    """The levels of :data:`WHOLE_REPEATS`: each multiple ≥ 1 rounded down to a whole number;
    of the span's levels one per whole number (the first), the span's share divided evenly
    among them (rounded down as :func:`~odometer_core.accounting.odometer.anchored_share`
    rounds); the tail's and the levels above keep their shares."""
    rounded = [math.floor(f) * WHOLE_MARGIN if f >= 1.0 else f for f in factors]
    last = shape.span + 1
    seen: set[float] = set()
    kept = []
    for row, k in enumerate(levels):
        if 2 <= k <= last:
            if rounded[row] in seen:
                continue
            seen.add(rounded[row])
        kept.append(row)
    # as LadderShape.weight and anchored_share round a span level's share (the same floats
    # when no level is dropped)
    even = to_float_down(shape.spread) / float(len(seen)) * (1.0 - 1e-12) if seen else 0.0
    each = pool * even
    span_share = math.nextafter(each * (1.0 - 1e-12), 0.0) if each > 0 else 0.0
    return (
        tuple(levels[r] for r in kept),
        tuple(span_share if 2 <= levels[r] <= last else shares[r] for r in kept),
        [rounded[r] for r in kept],
    )


def reading(
    found: Sequence[Statement],
    tops: Sequence[float],
    spent: Sequence[float],
    target: Decimal,
) -> tuple[Decimal, int] | None:
    """The smallest ε among the statements holding the running curve ``spent``: level 1
    (``target``, the creation ε) where some order's S(α) ≤ B(α), any level k whose order's
    S(α_k) ≤ c_k; ``None`` when none holds it."""
    best: tuple[Decimal, int] | None = None
    if any(b > 0 and s <= b for s, b in zip(spent, tops, strict=True)):
        best = (target, 1)
    for st in found:
        if spent[st.index] <= st.value and (best is None or st.epsilon < best[0]):
            best = (st.epsilon, st.level)
    return best


def caps(
    found: Sequence[Statement], tops: Sequence[float], epsilon: Decimal, target: Decimal
) -> tuple[float, ...]:
    """Each order's threshold under the budget ``epsilon``: the largest value of a statement
    at that order reading at most ``epsilon`` (level 1's B(α) when ``epsilon`` ≥ the creation
    ``target``), −∞ where none does. "Some order holds its running value within its threshold"
    is then "the reading is at most ``epsilon``"."""
    out = [b if b > 0 and epsilon >= target else -math.inf for b in tops]
    for st in found:
        if st.epsilon <= epsilon and st.value > out[st.index]:
            out[st.index] = st.value
    return tuple(out)


__all__ = [
    "ABOVE",
    "DEFAULT_LEVELS",
    "DEFAULT_RDP_LADDER",
    "LADDER_1_8",
    "LEVELS_1_8",
    "LEVEL_ORDERS",
    "THEOREM",
    "WHOLE_REPEATS",
    "Statement",
    "caps",
    "level_shares",
    "multiple",
    "reading",
    "statements",
    "whole_levels",
]
