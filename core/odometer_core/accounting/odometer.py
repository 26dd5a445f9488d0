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

Every ε is rounded up (:func:`odometer_core.accounting.exact.cost_from_float`), every δ share
down; levels are floats fixed by the configuration, compared exactly with the running totals.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

from odometer_core.accounting.exact import ZERO, add_up, cost_from_float, fmt

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

Source = Literal["basic", "ladder", "filter", "split"]

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
    level of the ladder, ``level``; 0 when nothing was spent), ``filter`` (the filter's target,
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


def level_of(spent: float, top: float) -> int | None:
    """The level whose value is the smallest c_k ≥ ``spent``: 0 when nothing was spent, ``None``
    when ``spent`` is above the top level (or the top is not a positive finite number)."""
    if spent <= 0:
        return 0
    if not (0 < top < math.inf) or spent > top or math.isnan(spent):
        return None
    ratio = top / spent
    estimate = math.log(ratio) / math.log(LADDER_RATIO) if ratio < math.inf else MAX_LEVEL
    k = max(1, min(1 + math.floor(estimate), MAX_LEVEL))
    # The estimate can be off by one either way (float logs): settle it with the exact values.
    while k > 1 and level_value(top, k) < spent:
        k -= 1
    while k < MAX_LEVEL and level_value(top, k + 1) >= spent:
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
    theorem: str,
    filter_theorem: str,
) -> Reading:
    """The ladder's reading at δ_B, or the filter's target (ε_B, δ_B) when the ladder says more
    or does not apply: a reading never exceeds the target the filter certifies. The ladder's
    own value is kept (``ladder_epsilon``) in both cases."""
    if ladder is None:
        return Reading(epsilon_budget, delta_budget, "filter", filter_theorem)
    eps, level = ladder
    if eps < epsilon_budget:
        return Reading(eps, delta_budget, "ladder", theorem, level, eps)
    return Reading(epsilon_budget, delta_budget, "filter", filter_theorem, level, eps)


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
    "FILTER_GDP",
    "FILTER_RDP",
    "FILTER_ZCDP",
    "LADDER_RATIO",
    "MAX_LEVEL",
    "THEOREM_BASIC",
    "THEOREM_GDP",
    "THEOREM_RDP",
    "THEOREM_SPLIT",
    "THEOREM_ZCDP",
    "Reading",
    "capped",
    "ladder_epsilon",
    "level_of",
    "level_share",
    "level_value",
    "rdp_ladder_epsilon",
    "split_sum",
]
