"""Ladder shapes chosen by the first declaration, for ``zcdp`` and ``gdp`` (accounting 1.9.0).

A ``zcdp`` or ``gdp`` configuration created from accounting 1.9.0 on says ``"ladder_rule":
"first_declaration"``: its ladder's shape (:class:`~odometer_core.accounting.odometer.
LadderShape`) is not the constant of 1.7.0 but is chosen, at the first admission, by
:func:`choose` from that first declaration's charge c₁ (ρ in ``zcdp``, μ² in ``gdp``) and the
creation target alone, recorded in the state with it, and kept from then on: budget changes never
choose again, and a replay recomputes it from the recorded charge.

Why this is sound: the first declaration is chosen before any output, so the shape it selects is
fixed before the first output too. Conditionally on it, the ladder is a set of filters fixed in
advance whose δ shares sum to at most the pool (every candidate is a :class:`LadderShape`, whose
shares are checked to sum to ≤ 1 in exact decimals), and the union bound over its levels
(``docs/accounting.md``, *Certified odometer readings*) certifies every reading at the pool: each
level is a ρ_k-zCDP filter (Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1) converted by
Canonne–Kamath–Steinke 2020, Cor. 13, or a μ_k-GDP filter (Smith–Thakurta 2022) converted by
Dong–Roth–Su 2019, Cor. 2.13. The first declaration itself is admitted by the filter of the shape
it chose (level 1 at that shape's share of the pool).

How the shape is chosen (``docs/accounting.md``, *Ladders shaped by the first declaration*):
the candidates are the ladders of ``python -m benchmarks quote``'s construction family (spacing
2^(1/steps), level 1's share ``first`` of the pool, the levels down to 1 % of the top sharing
0.95 of the rest evenly, 0.01 above, the tail the remainder), judged on the history "the first
declaration repeated until the filter refuses" against the exact ε of the Gaussian of the same
total (Dong–Roth–Su 2019, Cor. 2.13 at μ = √(2ρ) or μ). Level 1's share is the smallest of
:data:`FIRSTS` whose reading at the last repeat admitted is within ``last_within`` of that ε
(the smallest that leaves the most δ to the levels below); the spacing is the one of
:data:`STEPS` whose worst ratio past 10 % of the budget is the smallest. A later history of
another kind is read by a ladder shaped for this one: it is served worse than by a ladder
shaped for it, never unsoundly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

import numpy as np
from scipy.special import log_ndtr, ndtr

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.exact import fmt, to_float_down
from odometer_core.accounting.modes.common import ConfigError
from odometer_core.accounting.odometer import LadderShape

#: ``"ladder_rule"`` of a configuration whose shape the first declaration chooses (1.9.0 on).
FIRST_DECLARATION: Final = "first_declaration"

#: The candidates' spacings (2^(1/steps)) and level-1 shares, in the order ties are broken.
STEPS: Final = (4, 6, 8, 12)
FIRSTS: Final = ("0.5", "0.6", "0.7", "0.8", "0.85", "0.9")
#: The levels evenly shared reach down to 1/SPAN_FACTOR of the top (where readings pass 10 % of
#: the budget), with SPREAD of what level 1 and the levels above (ABOVE) leave.
SPAN_FACTOR: Final = 100.0
SPREAD: Final = Decimal("0.95")
ABOVE: Final = Decimal("0.01")
#: Readings below this fraction of the budget are not judged (the issue's "past 10 %").
JUDGED_FROM: Final = 0.1
#: Relative tolerance under which two candidates' scores tie (the earlier one wins), far above
#: the float noise of the conversions, so that a replay on another machine chooses the same.
TIE: Final = 1e-9


def candidate(steps: int, first: str) -> LadderShape:
    """A member of the family: spacing 2^(1/steps), level 1 at ``first`` of the pool."""
    span = math.ceil(math.log(SPAN_FACTOR) / math.log(2.0 ** (1.0 / steps)))
    share = Decimal(first)
    rest = 1 - share - ABOVE
    return LadderShape(steps, share, span, (rest * SPREAD).quantize(Decimal("1e-6")), ABOVE)


def gaussian_epsilon(mu_squared: float, delta: float) -> float:
    """The exact ε at δ of the Gaussian mechanism of μ² = ``mu_squared`` (Dong–Roth–Su 2019,
    Cor. 2.13): the reference a candidate's readings are judged against."""
    return float(gaussian_epsilons(np.array([mu_squared]), delta)[0])


def gaussian_epsilons(mu_squared: np.ndarray, delta: float) -> np.ndarray:
    """:func:`gaussian_epsilon` of every element, by one vectorised bisection on
    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Dong–Roth–Su 2019, Cor. 2.13), decreasing in ε, to
    the float's resolution (a reference for choosing a shape, not a charge: never rounded)."""
    mu = np.sqrt(np.maximum(mu_squared, 0.0))
    safe = np.where(mu > 0, mu, 1.0)

    def excess(e: np.ndarray) -> np.ndarray:
        # e^ε Φ(·) as exp(ε + log Φ(·)): at most Φ(μ/2 − ε/μ) ≤ 1, so it never overflows
        out: np.ndarray = ndtr(-e / safe + safe / 2) - np.exp(e + log_ndtr(-e / safe - safe / 2))
        return out - delta

    lo = np.zeros_like(mu)
    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    for _ in range(64):  # δ(hi) ≤ δ, doubling where it is not yet
        over = excess(hi) > 0
        if not over.any():
            break
        hi = np.where(over, hi * 2, hi)
    for _ in range(64):
        mid = (lo + hi) / 2
        above = excess(mid) > 0
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    nothing = (mu == 0) | (excess(lo * 0) <= 0)
    result: np.ndarray = np.where(nothing, 0.0, hi)
    return result


#: ``top(ε_B, pool, shape)``: the filter's exact threshold at level 1 under ``shape``, as the mode
#: makes it (a module-level function, so that :func:`choose`'s memo recognises it)
Top = Callable[[Decimal, Decimal, LadderShape], Decimal]
#: ``convert(c, δ)``: the mode's conversion of a level value c at δ
Convert = Callable[[float, float], float]


@functools.lru_cache(maxsize=4096)
def choose(
    top: Top,
    convert: Convert,
    epsilon: Decimal,
    pool: Decimal,
    charge: Decimal,
    mu_squared_per_unit: float,
    last_within: float,
) -> LadderShape | None:
    """The shape a first declaration of ``charge`` (in the mode's unit; ``mu_squared_per_unit``
    converts it to the μ² of the Gaussian of the same total: 2 in ``zcdp``, 1 in ``gdp``)
    chooses for a filter of target ``epsilon`` and δ pool ``pool``; ``None`` when no candidate
    admits it even once (the mode keeps its constant shape, which refuses it too). A function
    of its arguments alone (memoised: a search of what fits tries many first declarations)."""
    if not charge > 0 or not pool > 0 or not charge.is_finite():
        return None
    delta = to_float_down(pool)
    unit = float(charge)
    if not 0 < unit < math.inf:  # below the floats (or above them): the constant shape
        return None
    reference = functools.partial(_references, mu_squared_per_unit, delta)
    first = _first_share(top, convert, epsilon, pool, charge, reference, last_within)
    if first is None:
        return None
    shares = (first,) if first != "" else FIRSTS
    best: tuple[float, LadderShape] | None = None
    for steps, share in ((s, f) for f in shares for s in STEPS):
        shape = candidate(steps, share)
        level1 = top(epsilon, pool, shape)
        ladder = odo.AnchoredLadder(to_float_down(level1), delta, epsilon, convert, shape=shape)
        count = _repeats(level1, charge)
        score = _worst(ladder, count, unit, float(epsilon), reference, mu_squared_per_unit, delta)
        if best is None or score < best[0] * (1 - TIE):
            best = (score, shape)
    assert best is not None
    return best[1]


#: Repeats beyond which a count is held at this value (the judgement reads levels, not repeats).
MAX_REPEATS: Final = 10**15


def _repeats(level1: Decimal, charge: Decimal) -> int:
    """⌊level1 / charge⌋, at most :data:`MAX_REPEATS` (a tiny charge's quotient has more digits
    than the decimal context holds)."""
    if level1 >= charge * MAX_REPEATS:
        return MAX_REPEATS
    return int(level1 // charge)


def _references(per_unit: float, delta: float, totals: np.ndarray) -> np.ndarray:
    return gaussian_epsilons(per_unit * totals, delta)


#: ``reference(totals)``: the reference ε of each running total (an array)
Reference = Callable[[np.ndarray], np.ndarray]


def _first_share(
    top: Top,
    convert: Convert,
    epsilon: Decimal,
    pool: Decimal,
    charge: Decimal,
    reference: Reference,
    last_within: float,
) -> str | None:
    """The smallest level-1 share of :data:`FIRSTS` whose reading after the last repeat of
    ``charge`` it admits is within ``last_within`` of the reference; ``""`` when none is (every
    share is then tried, and one that admits no repeat scores ∞); ``None`` when none admits
    one."""
    fallback = None
    for first in FIRSTS:
        shape = candidate(STEPS[0], first)  # level 1's threshold depends on the share alone
        level1 = top(epsilon, pool, shape)
        n = _repeats(level1, charge)
        if n < 1:
            continue
        fallback = ""
        ladder = odo.AnchoredLadder(
            to_float_down(level1), to_float_down(pool), epsilon, convert, shape=shape
        )
        total = float(n * charge)
        found = ladder.reading(min(total, ladder.top))
        if found is not None and float(found[0]) <= last_within * reference(np.array([total]))[0]:
            return first
    return fallback


def _worst(
    ladder: odo.AnchoredLadder,
    count: int,
    unit: float,
    epsilon: float,
    reference: Reference,
    per_unit: float,
    delta: float,
) -> float:
    """The largest reading ÷ reference over j = 1 … ``count`` repeats of ``unit`` whose
    reference is at least :data:`JUDGED_FROM` of the budget: the readings are a step function
    of the total (rising where a level stops holding it), so the ratio is largest at the first
    j of each step, and only those (and the first judged j) are read."""
    if count < 1:
        return math.inf
    # the first judged repeat: near the total whose Gaussian reads JUDGED_FROM of the budget
    mu = cv.gdp_mu_budget(JUDGED_FROM * epsilon, delta)
    where = mu * mu / per_unit / unit
    guess = max(1, min(count, math.floor(where))) if where < math.inf else count
    near = np.arange(max(1, guess - 2), min(count, guess + 2) + 1, dtype=float)
    judged = near[reference(near * unit) >= JUDGED_FROM * epsilon]
    if judged.size == 0 and near[-1] >= count:
        return 0.0
    first = int(judged[0]) if judged.size else int(near[-1]) + 1
    points = {first, count}
    for k in range(2, ladder.depth + 1):
        j = math.floor(ladder.value(k) / unit) + 1
        if first <= j <= count:
            points.add(j)
    js = np.array(sorted(points), dtype=float)
    refs = reference(js * unit)
    worst = 0.0
    for j, ref in zip(js, refs, strict=True):
        found = ladder.reading(min(j * unit, ladder.top))
        if found is None:
            return math.inf
        worst = max(worst, float(found[0]) / float(ref))
    return worst


# ---------------------------------------------------------------------------- stored form
def rule_from_json(raw: object) -> str | None:
    """A stored ``ladder_rule`` (``None`` when absent: before 1.9.0), or a :class:`ConfigError`."""
    if raw is None:
        return None
    if raw != FIRST_DECLARATION:
        raise ConfigError(f"ladder_rule must be '{FIRST_DECLARATION}'")
    return FIRST_DECLARATION


def first_to_json(unit: str, charge: Decimal, shape: LadderShape | None) -> dict[str, Any]:
    """What a state records of its first admission under a ladder rule: the declaration's
    charge in the mode's ``unit`` and the shape it chose."""
    return {unit: fmt(charge), "ladder": None if shape is None else shape.to_json()}


def first_from_json(unit: str, raw: object) -> tuple[Decimal | None, LadderShape | None]:
    """The inverse of :func:`first_to_json` (``(None, None)`` when absent)."""
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raise ConfigError("first must be an object")
    try:
        return Decimal(raw[unit]), LadderShape.from_json(raw.get("ladder"))
    except (ValueError, KeyError, TypeError, ArithmeticError) as bad:
        raise ConfigError(f"invalid first declaration: {bad}") from None


__all__ = [
    "ABOVE",
    "FIRSTS",
    "FIRST_DECLARATION",
    "JUDGED_FROM",
    "SPAN_FACTOR",
    "SPREAD",
    "STEPS",
    "TIE",
    "candidate",
    "choose",
    "first_from_json",
    "first_to_json",
    "gaussian_epsilon",
    "gaussian_epsilons",
    "rule_from_json",
]
