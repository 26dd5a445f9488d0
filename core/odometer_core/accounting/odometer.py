"""Certified odometer readings: an (ε, δ) for what has been released so far, valid whenever
the analyst chooses (adaptively) to stop.

A filter (every mode of :mod:`odometer_core.accounting.modes`) certifies its target (ε_B, δ_B)
for everything ever released; an odometer certifies a *running* value. The readings here are
built from filters only, so they rest on the filter theorems the modes already cite; the
derivation is in ``docs/accounting.md`` (*Certified odometer readings*).

- ``basic``: the running sums (E + R, D) themselves (basic composition is pathwise: the privacy
  loss of a transcript is bounded by the sum of the ε charged along it, up to the δ charged along
  it; Rogers–Roth–Ullman–Vadhan 2016 basic composition, Hartmann et al. 2022 Thm 7 for ODP).
- ``zcdp``, ``rdp``, ``gdp``: a *ladder* of filters fixed in advance (the discretisation of
  Lécuyer 2021): level k ≥ 1 of a mode's running statistic s (Σρ, S(α), Σμ²) is
  c_k = c_top · r^−(k−1) with ratio r = :data:`LADDER_RATIO`, c_top the mode's own budget in
  that unit, and level k gets the share δ_k = δ_pool · 6/(π² k²) of the mode's conversion δ
  (Σ_k 6/(π² k²) = 1, so the shares sum to at most δ_pool). The filter "halt before s exceeds
  c_k" is, by the mode's filter theorem, c_k in the mode's unit at every stopping time; its
  conversion at δ_k is ε_k. The reading is ε_k for the smallest level c_k ≥ s (ε = 0 when
  s = 0). On every transcript the ladder's view up to the stopping time coincides with the view
  of the level it reports, so summing the levels' DP inequalities over the (disjoint) events
  "the reading came from level k" gives, for every stopping time T and every set E of
  transcripts: P_x[V_T ∈ E] ≤ E_{x'}[e^{ε(V_T)} 1{V_T ∈ E}] + Σ_k δ_k.
- The reading never exceeds the filter's target: when the ladder's ε reaches ε_B (or the
  ladder does not apply: approximate δ spent, or no conversion δ), the reading is the target
  (ε_B, δ_B), which the filter certifies at every stopping time.

Since accounting 1.4.0 a dataset's ladder is an :class:`AnchoredLadder`, fixed when the filter
is created and never rebuilt: level 1 *is* the filter (its threshold, computed at the share
:data:`FILTER_SHARE` of the pool, reads the creation target ε_B exactly), the levels below and
the levels above it (for raises) share the rest of the pool, so the one union over all levels
certifies every reading at the pool δ ≤ δ_B, capped or not. A curator's budget ε is enforced as
a cap on that reading (:meth:`AnchoredLadder.cap`), whatever the curator chooses and whenever:
the ladder does not depend on the budget in force, so no statement it certified is withdrawn
(``docs/accounting.md``, *Budget changes*).

Every ε is rounded up (:func:`odometer_core.accounting.exact.cost_from_float`), every δ share
down; levels are floats fixed by the configuration, compared exactly with the running totals.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

from odometer_core.accounting.exact import (
    INFINITY,
    ZERO,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    to_float_down,
)

#: Spacing of the ladder's levels (each level is 2^(1/4) ≈ 1.19 times the next lower one): a
#: finer ladder rounds the running total up by less but reaches a given total at a deeper level,
#: with a smaller δ share. Measured on zCDP budgets ε_B ∈ [0.1, 10], δ ∈ [1e-9, 1e-5], over three
#: decades below ρ_B: the reading is at most 1.37–1.76 times the non-adaptive conversion of the
#: same total with 2^(1/4), against 1.66–2.02 with 2 and no better with 2^(1/8)
#: (docs/accounting.md).
LADDER_RATIO: Final = 2.0**0.25

#: Σ_{k ≥ 1} 1/k² = π²/6: level k's weight is 6/(π² k²), rounded down with a relative margin
#: far above the float error of the product, so the weights sum to less than 1.
_SHARE_WEIGHT: Final = 6.0 / (math.pi * math.pi) * (1.0 - 1e-12)

#: Deepest level searched (a running total 2^(−MAX_LEVEL/4) below the top is read at this level).
MAX_LEVEL: Final = 20_000

Source = Literal["basic", "ladder", "pld_branch", "filter", "split"]

THEOREM_BASIC: Final = (
    "basic composition is pathwise: loss ≤ Σε_i up to Σδ_i at any stopping time "
    "(Rogers–Roth–Ullman–Vadhan 2016; Hartmann et al. 2022, Thm 7 for ODP cells)"
)
THEOREM_ZCDP: Final = (
    "ladder of zCDP filters (Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1; Feldman–Zrnic 2021, "
    "Rem. 4.4), each converted by Canonne–Kamath–Steinke 2020, Cor. 13 at its δ share "
    "(discretisation of Lécuyer 2021)"
)
THEOREM_RDP: Final = (
    "ladder of RDP filters per order (Feldman–Zrnic 2021, Thm 4.3), each converted by "
    "Canonne–Kamath–Steinke 2020, Prop. 12 at its δ share w_α·δ_c·6/(π²k²) "
    "(discretisation of Lécuyer 2021)"
)
THEOREM_GDP: Final = (
    "ladder of GDP filters (Smith–Thakurta 2022), each converted by Dong–Roth–Su 2019, "
    "Cor. 2.13 at its δ share (discretisation of Lécuyer 2021)"
)
FILTER_ZCDP: Final = (
    "filter target (Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1; Canonne–Kamath–Steinke 2020, Cor. 13)"
)
FILTER_RDP: Final = (
    "filter target (Feldman–Zrnic 2021, Thm 4.3 per order; union bound over the grid; "
    "Canonne–Kamath–Steinke 2020, Prop. 12)"
)
FILTER_GDP: Final = "filter target (Smith–Thakurta 2022; Dong–Roth–Su 2019, Cor. 2.13)"
THEOREM_SPLIT: Final = (
    "sum of the sub-budgets' odometers (concurrent composition: Vadhan–Zhang 2023, Thm 1.3; "
    "Haney et al. 2023 for adaptively chosen privacy-loss parameters)"
)


@dataclass(frozen=True, slots=True)
class Reading:
    """A certified odometer reading (ε, δ).

    ``source`` says which statement certifies it: ``basic`` (the running sums), ``ladder`` (a
    level of the ladder, ``level``; 0 when nothing was spent), ``pld_branch`` (the PLD branch's
    Σε_i, accounting 1.6.0 on: :mod:`.modes.statements`), ``filter`` (the filter's target,
    when the ladder would say more or does not apply), ``split`` (the sum of sub-budgets)."""

    epsilon: Decimal
    delta: Decimal
    source: Source
    theorem: str
    level: int | None = None
    #: the ladder's own reading before the cap at ε_B (``None`` where no ladder applies): alone,
    #: it is certified at the ladder's δ pool (docs/accounting.md)
    ladder_epsilon: Decimal | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": fmt(self.epsilon),
            "delta": fmt(self.delta),
            "certified": True,
            "source": self.source,
            "level": self.level,
            "ladder_epsilon": None if self.ladder_epsilon is None else fmt(self.ladder_epsilon),
            "theorem": self.theorem,
        }


# ---------------------------------------------------------------------------- the ladder
def level_value(top: float, k: int) -> float:
    """c_k = top · r^−(k−1) for level k ≥ 1 (a float fixed by ``top`` and ``k`` alone)."""
    return top * LADDER_RATIO ** (-(k - 1))


def level_share(pool: float, k: int) -> float:
    """δ_k = pool · 6/(π² k²), rounded down (Σ_k δ_k < pool)."""
    share = pool * _SHARE_WEIGHT / (float(k) * float(k))
    return math.nextafter(share * (1.0 - 1e-12), 0.0) if share > 0 else 0.0


def level_of(spent: float, top: float, shape: LadderShape | None = None) -> int | None:
    """The level whose value is the smallest c_k ≥ ``spent``: 0 when nothing was spent, ``None``
    when ``spent`` is above the top level (or the top is not a positive finite number); at
    the spacing :data:`LADDER_RATIO`, or the ``shape``'s."""
    if spent <= 0:
        return 0
    if not (0 < top < math.inf) or spent > top or math.isnan(spent):
        return None
    ratio = top / spent
    step = LADDER_RATIO if shape is None else shape.ratio
    estimate = math.log(ratio) / math.log(step) if ratio < math.inf else MAX_LEVEL
    k = max(1, min(1 + math.floor(estimate), MAX_LEVEL))
    # The estimate can be off by one either way (float logs): settle it with the exact values.
    while k > 1 and anchored_value(top, k, shape) < spent:
        k -= 1
    while k < MAX_LEVEL and anchored_value(top, k + 1, shape) >= spent:
        k += 1
    return k


def ladder_epsilon(
    spent: float, top: float, pool: float, convert: Callable[[float, float], float]
) -> tuple[Decimal, int] | None:
    """(ε of the level that holds ``spent``, the level) on the ladder below ``top`` with δ pool
    ``pool``; ``convert(c, δ)`` is the mode's conversion of its unit at level value c to ε at δ
    (a float, rounded up here). ``None`` when no level holds ``spent`` or there is no δ to
    convert with."""
    k = level_of(spent, top)
    if k is None:
        return None
    if k == 0:
        return ZERO, 0
    share = level_share(pool, k)
    if not share > 0:
        return None
    return cost_from_float(convert(level_value(top, k), share)), k


def capped(
    ladder: tuple[Decimal, int] | None,
    epsilon_budget: Decimal,
    delta_budget: Decimal,
    pool: Decimal,
    theorem: str,
    filter_theorem: str,
) -> Reading:
    """The reading of a filter created before accounting 1.4.0, whose ladder (δ pool ``pool``)
    stands beside the filter's own statement (ε_B, δ_B) instead of containing it: the ladder's
    reading, or the filter's target when the ladder says more. The two statements are unioned
    over the transcripts, so the reading as a whole is certified at ``pool`` + δ_B, and that is
    the δ it shows; the ladder's own value (``ladder_epsilon``, certified alone at ``pool``) is
    kept in both cases. Where no ladder applies the reading is the target at δ_B."""
    if ladder is None:
        return Reading(epsilon_budget, delta_budget, "filter", filter_theorem)
    joint = add_up(pool, delta_budget)
    eps, level = ladder
    if eps < epsilon_budget:
        return Reading(eps, joint, "ladder", theorem, level, eps)
    return Reading(epsilon_budget, joint, "filter", filter_theorem, level, eps)


# ---------------------------------------------------------------------------- shaped ladders
#: Levels of a shaped ladder's tail that a reading searches below its span.
TAIL_DEPTH: Final = 40


@dataclass(frozen=True, slots=True)
class LadderShape:
    """The spacing and δ shares of a ladder fixed at creation (accounting ≥ 1.7.0).

    Level values are c_k = top · r^−(k−1) with r = 2^(1/``steps``). Of the ladder's pool, level
    1 (the filter itself) gets ``first``; the ``span`` levels k = 2 … span + 1 below it get
    ``spread``/span each (spread evenly where histories stop: the decades below the budget a
    history passes through on its way to it); the tail k ≥ span + 2 gets
    (1 − first − spread − above)·6/(π²(k − span − 1)²); the levels above (k ≤ −1, reached only
    after a raise) ``above``·6/(π²k²). The four parts sum to at most 1 (checked exactly at
    construction), so the whole ladder spends at most its pool: the union bound over its levels
    of ``docs/accounting.md``, *Certified odometer readings*, with Σ_{j ≥ 1} 6/(π²j²) = 1.
    Any shares fixed before the first output are sound (Lécuyer 2021's discretisation only
    needs Σδ_k ≤ pool); the shape is chosen to bring readings past 10 % of the budget close to
    the non-adaptive value (``python -m benchmarks quote``, the best-over-family column)."""

    steps: int
    first: Decimal
    span: int
    spread: Decimal
    above: Decimal

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= 64 or not 0 <= self.span <= 1000:
            raise ValueError("a ladder's steps are in 1…64 and its span in 0…1000")
        parts = (self.first, self.spread, self.above)
        if not 0 < self.first < 1 or any(p < 0 for p in parts) or sum(parts) > 1:
            raise ValueError("a ladder's shares are ≥ 0, its first in (0, 1), summing to ≤ 1")
        if self.span == 0 and self.spread != 0:
            raise ValueError("a ladder without a span has no spread")

    @property
    def ratio(self) -> float:
        return float(2.0 ** (1.0 / self.steps))

    @property
    def tail(self) -> Decimal:
        """The share of the levels below the span: what the other three leave."""
        return 1 - self.first - self.spread - self.above

    @property
    def depth(self) -> int:
        """Levels below the top a reading searches: the span and :data:`TAIL_DEPTH` more."""
        return self.span + 1 + TAIL_DEPTH

    def weight(self, k: int) -> float:
        """Level k's fraction of the pool, as a float rounded down (:func:`anchored_share`
        rounds the product down again)."""
        if k == 1:
            part = to_float_down(self.first)
        elif 2 <= k <= self.span + 1:
            part = to_float_down(self.spread) / float(self.span)
        elif k >= 2:
            j = k - self.span - 1
            part = to_float_down(self.tail) * _SHARE_WEIGHT / float(j * j)
        else:
            part = to_float_down(self.above) * _SHARE_WEIGHT / float(k * k)
        return part * (1.0 - 1e-12)

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "first": fmt(self.first),
            "span": self.span,
            "spread": fmt(self.spread),
            "above": fmt(self.above),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> LadderShape | None:
        if obj is None:
            return None
        return LadderShape(
            int(obj["steps"]),
            Decimal(obj["first"]),
            int(obj["span"]),
            Decimal(obj["spread"]),
            Decimal(obj["above"]),
        )


# ---------------------------------------------------------------------------- anchored ladders
#: Shares of the pool in a ladder fixed at creation (accounting ≥ 1.4.0): level 1, the filter
#: itself, gets FILTER_SHARE; the levels below it (k ≥ 2) BELOW_SHARE · 6/(π²(k−1)²); the levels
#: above it (k = −1, −2, …, reached only after a raise) ABOVE_SHARE · 6/(π²k²). The three sum
#: to 1, so the whole ladder spends at most the pool. The filter's share costs it about 1 % of
#: its capacity against a filter holding the whole pool (docs/accounting.md, *Budget changes*).
FILTER_SHARE: Final = 0.9
BELOW_SHARE: Final = 0.08
ABOVE_SHARE: Final = 0.02

#: Levels below the top that a reading searches for its smallest ε (k = 1 … DEPTH, down to
#: 2^(−(DEPTH−1)/4) ≈ 10⁻⁶ of the top); a smaller spend is read at level DEPTH, which holds it.
DEPTH: Final = 80
#: Levels above the top a raise can reach (up to 2^(HEIGHT/4) times the top).
HEIGHT: Final = 256


def anchored_value(top: float, k: int, shape: LadderShape | None = None) -> float:
    """c_k = top · r^−(k−1) for k ≥ 1 (level 1 is the top), top · r^|k| for k ≤ −1 (above);
    r = :data:`LADDER_RATIO`, or the ``shape``'s."""
    ratio = LADDER_RATIO if shape is None else shape.ratio
    return top * ratio ** (-(k - 1)) if k >= 1 else top * ratio ** (-k)


def anchored_share(pool: float, k: int, shape: LadderShape | None = None) -> float:
    """δ_k of an anchored ladder (:data:`FILTER_SHARE`, :data:`BELOW_SHARE`,
    :data:`ABOVE_SHARE`; or the ``shape``'s weights), rounded down."""
    if shape is not None:
        weight = shape.weight(k)
    elif k == 1:
        weight = FILTER_SHARE
    elif k >= 2:
        weight = BELOW_SHARE * _SHARE_WEIGHT / float((k - 1) * (k - 1))
    else:
        weight = ABOVE_SHARE * _SHARE_WEIGHT / float(k * k)
    share = pool * weight
    return math.nextafter(share * (1.0 - 1e-12), 0.0) if share > 0 else 0.0


@dataclass(frozen=True, slots=True)
class AnchoredLadder:
    """A ladder of filters fixed when its filter was created, in the filter's own unit.

    ``top`` is the filter's threshold c_1, computed so that c_1 in the mode's unit converts to
    the creation target ``epsilon`` at level 1's share of ``pool``: level 1 reads ``epsilon``
    exactly (the filter theorem at its threshold). ``convert(c, δ)`` is the mode's conversion
    (a float, rounded up here); it must compare equal by value (a plain function, or a frozen
    dataclass), since readings are cached per ladder.

    Every level k is the filter "halt before the running total would exceed c_k", fixed in
    advance; the levels' shares sum to at most ``pool``. Any rule that reads, on every
    transcript, one level whose threshold holds the running total is certified at ``pool``
    (the union over levels of *Certified odometer readings*), whatever else happened: budget
    changes only decide which invocations are admitted, never what a level certifies."""

    top: float
    pool: float
    epsilon: Decimal
    convert: Callable[[float, float], float]
    #: the pool the levels other than 1 take their shares from, where it differs from ``pool``
    #: (level 1's): an ``rdp`` order whose weights differ by level (``modes/rdp.py``)
    others: float | None = None
    #: the ladder's spacing and shares fixed at creation (accounting ≥ 1.7.0,
    #: :class:`LadderShape`); ``None``: the constants of 1.4.0–1.6.0 (:data:`LADDER_RATIO`,
    #: :data:`FILTER_SHARE`, :data:`BELOW_SHARE`, :data:`ABOVE_SHARE`)
    shape: LadderShape | None = None

    @property
    def depth(self) -> int:
        """Levels below the top a reading searches (:data:`DEPTH`, or the shape's)."""
        return DEPTH if self.shape is None else self.shape.depth

    def value(self, k: int) -> float:
        """c_k of this ladder (:func:`anchored_value` at its spacing)."""
        return anchored_value(self.top, k, self.shape)

    def epsilon_at(self, k: int) -> Decimal:
        """ε_k: the creation target at level 1; elsewhere the conversion of c_k at δ_k."""
        if k == 1:
            return self.epsilon
        share = anchored_share(self.pool if self.others is None else self.others, k, self.shape)
        if not share > 0:
            return INFINITY
        return cost_from_float(self.convert(self.value(k), share))

    def reading(self, spent: float) -> tuple[Decimal, int] | None:
        """(ε, level) for a running total ``spent``: the smallest ε_k among the levels
        k = 1 … min(κ, DEPTH) below the top that hold it (κ the deepest, :func:`level_of`), or,
        above the top, the lowest level above that holds it; (0, 0) when nothing was spent;
        ``None`` above every level. The smallest ε over levels that hold the total is itself a
        function of the transcript, so the union over levels certifies it; since the budget in
        force plays no part, the reading never moves when only a budget changes."""
        if spent <= 0:
            return ZERO, 0
        if not (0 < self.top < math.inf) or math.isnan(spent):
            return None
        if spent <= self.top:
            deepest = level_of(spent, self.top, self.shape)
            assert deepest is not None and deepest >= 1
            return _prefix_min(self, min(deepest, self.depth))
        for j in range(1, HEIGHT + 1):
            if self.value(-j) >= spent:
                return self.epsilon_at(-j), -j
        return None

    def cap(self, epsilon: Decimal) -> tuple[int, float] | None:
        """The highest level whose reading is at most ``epsilon``, with its value: the largest
        running total the budget ``epsilon`` lets the filter reach, so that admitting while the
        total stays at most this value is admitting while the reading stays at most
        ``epsilon``. ``None`` when no level reads that little."""
        if epsilon >= self.epsilon:
            best = 1
            for j in range(1, HEIGHT + 1):
                if self.epsilon_at(-j) > epsilon:
                    break  # the levels above read more the higher they are
                best = -j
            return best, self.value(best)
        for k in range(2, self.depth + 1):  # the first level reading that little is the highest
            if _level_epsilon(self, k) <= epsilon:
                return k, self.value(k)
        return None


def cap_amount(ladder: AnchoredLadder, epsilon: Decimal, top: Decimal) -> Decimal:
    """:meth:`AnchoredLadder.cap` as an exact budget amount of a scalar unit: the filter's own
    threshold ``top`` (exact, as created) at level 1, another level's value rounded down, 0
    when no level reads at most ``epsilon``."""
    found = ladder.cap(epsilon)
    if found is None:
        return ZERO
    return top if found[0] == 1 else budget_from_float(found[1])


@functools.lru_cache(maxsize=1 << 16)
def _level_epsilon(ladder: AnchoredLadder, k: int) -> Decimal:
    """ε_k of a ladder, computed once per ladder, level and process (a status call reads up
    to :data:`DEPTH` levels of each ladder)."""
    return ladder.epsilon_at(k)


def _prefix_min(ladder: AnchoredLadder, depth: int) -> tuple[Decimal, int]:
    """min over k = 1 … ``depth`` of ε_k, with its level (the shallowest on ties)."""
    best = (ladder.epsilon, 1)
    for k in range(2, depth + 1):
        eps = _level_epsilon(ladder, k)
        if eps < best[0]:
            best = (eps, k)
    return best


def rdp_ladder_epsilon(
    spent: Sequence[float],
    orders: Sequence[float],
    thresholds: Sequence[float],
    weights: Sequence[float],
    pool: float,
    convert: Callable[[float, float, float], float],
) -> tuple[Decimal, int] | None:
    """The smallest reading over one ladder per order α (top: the order's threshold B(α), δ pool
    w_α·``pool``; ``convert(α, c, δ)`` the RDP conversion at α), with its level. Every (α, level)
    pair is one filter of the union bound; orders dropped from the grid (B(α) = −∞) or over
    their threshold give no reading. ``None`` when no order gives one."""
    best: tuple[Decimal, int] | None = None
    for alpha, s, b, w in zip(orders, spent, thresholds, weights, strict=True):
        if not b > 0:
            continue
        reading = ladder_epsilon(s, b, pool * w, functools.partial(convert, alpha))
        if reading is not None and (best is None or reading[0] < best[0]):
            best = reading
    return best


def split_sum(parts: Sequence[Reading], epsilon_budget: Decimal, delta_budget: Decimal) -> Reading:
    """Σ of the sub-budgets' readings (each ≤ its sub-budget, and the sub-budgets sum to at most
    the dataset's target, so the sum never exceeds (ε_B, δ_B))."""
    eps = add_up(*(p.epsilon for p in parts))
    dlt = add_up(*(p.delta for p in parts))
    return Reading(min(eps, epsilon_budget), min(dlt, delta_budget), "split", THEOREM_SPLIT)


__all__ = [
    "ABOVE_SHARE",
    "BELOW_SHARE",
    "DEPTH",
    "FILTER_GDP",
    "FILTER_RDP",
    "FILTER_SHARE",
    "FILTER_ZCDP",
    "HEIGHT",
    "LADDER_RATIO",
    "MAX_LEVEL",
    "TAIL_DEPTH",
    "THEOREM_BASIC",
    "THEOREM_GDP",
    "THEOREM_RDP",
    "THEOREM_SPLIT",
    "THEOREM_ZCDP",
    "AnchoredLadder",
    "LadderShape",
    "Reading",
    "anchored_share",
    "anchored_value",
    "cap_amount",
    "capped",
    "ladder_epsilon",
    "level_of",
    "level_share",
    "level_value",
    "rdp_ladder_epsilon",
    "split_sum",
]
