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

Replay (``docs/accounting.md``, *What replay checks*): the candidates are judged in floats, and a
criterion on its bound may fall the other way on another machine's float library. Soundness
needs only that the shape is fixed before the first output and is a candidate, so a replay
(:func:`recorded`) accepts a recorded shape other than the recomputed one iff the rule could
choose it with its floats off by :data:`FLOAT_TOLERANCE` (:func:`could_choose`), and decides
the entry again with it (:func:`chosen`); anything else is a mismatch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any, Final

import numpy as np

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
    from scipy.special import log_ndtr, ndtr

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
    of its arguments alone (memoised: a search of what fits tries many first declarations).

    A candidate's score is the largest of its ratios; one that already reaches the score it
    would have to beat is left unfinished (it cannot be chosen), so that the levels and
    references only a losing candidate needs are never computed."""
    judge = _Judge.of(top, convert, epsilon, pool, charge, mu_squared_per_unit)
    if judge is None:
        return None
    first = _first_share(judge, last_within)
    if first is None:
        return None
    shares = (first,) if first != "" else FIRSTS
    shapes = [candidate(s, f) for f in shares for s in STEPS]
    judge.prepare(shapes)
    best: tuple[float, LadderShape] | None = None
    for shape in shapes:
        beat = math.inf if best is None else best[0] * (1 - TIE)
        score = judge.worst(shape, beat)
        if best is None or score < beat:
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


#: Level 1's threshold per (mode, target, pool, share) (:func:`_level_one`).
_LEVEL_ONE: Final[dict[tuple[Top, Decimal, Decimal, str], Decimal]] = {}
_LEVEL_ONE_LIMIT: Final = 4096


def _level_one(top: Top, epsilon: Decimal, pool: Decimal, share: str) -> Decimal:
    """Level 1's threshold at ``share`` of the pool: it depends on the share alone (not on the
    spacing), and on the target, not on the first declaration, so a search over first
    declarations computes each once."""
    key = (top, epsilon, pool, share)
    found = _LEVEL_ONE.get(key)
    if found is None:
        found = top(epsilon, pool, candidate(STEPS[0], share))
        if len(_LEVEL_ONE) >= _LEVEL_ONE_LIMIT:
            _LEVEL_ONE.clear()
        _LEVEL_ONE[key] = found
    return found


def _known_level_one(top: Top, epsilon: Decimal, pool: Decimal, share: str) -> Decimal | None:
    """:func:`_level_one` if already computed, else ``None``."""
    return _LEVEL_ONE.get((top, epsilon, pool, share))


@functools.lru_cache(maxsize=1024)
def _judged_mu(epsilon: float, delta: float) -> float:
    """μ of the Gaussian whose exact ε at ``delta`` is :data:`JUDGED_FROM` of ``epsilon``
    (Dong–Roth–Su 2019, Cor. 2.13): where the judged repeats start."""
    return cv.gdp_mu_budget(JUDGED_FROM * epsilon, delta)


class _Judge:
    """The judgement of the candidates for one first declaration: each reference ε (of a running
    total) and each first judged repeat (of a repeat count) computed once, the references of a
    candidate in one vectorised bisection."""

    __slots__ = (
        "charge",
        "convert",
        "delta",
        "epsilon",
        "judged",
        "per_unit",
        "pool",
        "refs",
        "top",
        "unit",
    )

    def __init__(
        self,
        top: Top,
        convert: Convert,
        epsilon: Decimal,
        pool: Decimal,
        charge: Decimal,
        per_unit: float,
    ) -> None:
        self.top, self.convert, self.epsilon, self.pool = top, convert, epsilon, pool
        self.charge, self.per_unit = charge, per_unit
        self.delta = to_float_down(pool)
        self.unit = float(charge)
        self.refs: dict[float, float] = {}
        self.judged: dict[int, int | None] = {}

    @classmethod
    def of(
        cls,
        top: Top,
        convert: Convert,
        epsilon: Decimal,
        pool: Decimal,
        charge: Decimal,
        per_unit: float,
    ) -> _Judge | None:
        """The judge, or ``None`` for a charge no candidate is judged on (0, not finite, below
        or above the floats) or an empty pool: the constant shape stays."""
        if not charge > 0 or not pool > 0 or not charge.is_finite():
            return None
        judge = cls(top, convert, epsilon, pool, charge, per_unit)
        return judge if 0 < judge.unit < math.inf else None

    def level1(self, share: str) -> Decimal:
        return _level_one(self.top, self.epsilon, self.pool, share)

    def ladder(self, shape: LadderShape, level1: Decimal) -> odo.AnchoredLadder:
        return odo.AnchoredLadder(
            to_float_down(level1), self.delta, self.epsilon, self.convert, shape=shape
        )

    def references(self, totals: list[float]) -> list[float]:
        """The reference ε of each running total (:func:`gaussian_epsilons` is elementwise, so
        computing the missing ones together gives each the value it has alone)."""
        missing = sorted({t for t in totals if t not in self.refs})
        if missing:
            found = gaussian_epsilons(self.per_unit * np.array(missing), self.delta)
            self.refs.update(zip(missing, (float(e) for e in found), strict=True))
        return [self.refs[t] for t in totals]

    def steps(self, ladder: odo.AnchoredLadder, first: int, count: int) -> set[int]:
        """The repeats a candidate is read at: ``first``, ``count`` and, between them, the
        first repeat past each level's value."""
        points = {first, count}
        for k in range(2, ladder.depth + 1):
            j = math.floor(ladder.value(k) / self.unit) + 1
            if first <= j <= count:
                points.add(j)
        return points

    def prepare(self, shapes: list[LadderShape]) -> None:
        """Compute together the references every one of ``shapes`` may read (one vectorised
        bisection rather than one per candidate: at these sizes the calls, not the elements,
        cost): the repeats near each count's first judged one, then each candidate's
        steps."""
        counts = {}
        for shape in shapes:
            level1 = self.level1(fmt(shape.first))
            count = _repeats(level1, self.charge)
            if count >= 1:
                counts[shape] = (level1, count)
        self.references([t for c in {c for _, c in counts.values()} for t in self.near(c)[1]])
        wanted: list[float] = []
        for shape, (level1, count) in counts.items():
            first = self.first_judged(count)
            if first is not None:
                steps = self.steps(self.ladder(shape, level1), first, count)
                wanted.extend(float(j) * self.unit for j in steps)
        self.references(wanted)

    def near(self, count: int) -> tuple[range, list[float]]:
        """The repeats around the one whose Gaussian reads :data:`JUDGED_FROM` of the budget,
        with their totals."""
        mu = _judged_mu(float(self.epsilon), self.delta)
        where = mu * mu / self.per_unit / self.unit
        guess = max(1, min(count, math.floor(where))) if where < math.inf else count
        near = range(max(1, guess - 2), min(count, guess + 2) + 1)
        return near, [float(j) * self.unit for j in near]

    def first_judged(self, count: int) -> int | None:
        """The first of ``count`` repeats whose reference is at least :data:`JUDGED_FROM` of the
        budget (near the total whose Gaussian reads that much); ``None`` when none is."""
        if count not in self.judged:
            self.judged[count] = self._first_judged(count)
        return self.judged[count]

    def _first_judged(self, count: int) -> int | None:
        epsilon = float(self.epsilon)
        near, totals = self.near(count)
        refs = self.references(totals)
        judged = [j for j, ref in zip(near, refs, strict=True) if ref >= JUDGED_FROM * epsilon]
        if not judged and near[-1] >= count:
            return None
        return judged[0] if judged else near[-1] + 1

    def worst(self, shape: LadderShape, beat: float) -> float:
        """The largest reading ÷ reference over j = 1 … n repeats (n the count the candidate's
        level 1 admits) whose reference is at least :data:`JUDGED_FROM` of the budget: the
        readings are a step function of the total (rising where a level stops holding it), so
        the ratio is largest at the first j of each step, and only those (and the first judged
        j) are read. Stops at the first ratio of at least ``beat`` (returned: the candidate
        cannot be chosen)."""
        level1 = self.level1(fmt(shape.first))
        count = _repeats(level1, self.charge)
        if count < 1:
            return math.inf
        first = self.first_judged(count)
        if first is None:
            return 0.0
        ladder = self.ladder(shape, level1)
        js = sorted(self.steps(ladder, first, count), reverse=True)  # shallow levels first
        refs = self.references([float(j) * self.unit for j in js])
        worst = 0.0
        for j, ref in zip(js, refs, strict=True):
            found = _reading(ladder, min(float(j) * self.unit, ladder.top))
            if found is None:
                return math.inf
            worst = max(worst, float(found[0]) / ref)
            if worst >= beat:
                return worst
        return worst


#: Per ladder: the prefix minima of its levels' ε (:func:`_reading`), as far as read.
_MINIMA: Final[dict[odo.AnchoredLadder, list[tuple[Decimal, int]]]] = {}
_MINIMA_LIMIT: Final = 4096


def _reading(ladder: odo.AnchoredLadder, spent: float) -> tuple[Decimal, int] | None:
    """``ladder.reading(spent)`` (:meth:`~odometer_core.accounting.odometer.AnchoredLadder.
    reading`: below the top, the smallest ε_k over k = 1 … min(κ, depth), the shallowest on
    ties), with the prefix minima kept per ladder, so that reading a candidate at each of its
    steps reads each level once rather than once per step."""
    if not (0 < spent <= ladder.top < math.inf):
        return ladder.reading(spent)
    deepest = odo.level_of(spent, ladder.top, ladder.shape)
    assert deepest is not None and deepest >= 1
    depth = min(deepest, ladder.depth)
    minima = _MINIMA.get(ladder) or [(ladder.epsilon, 1)]
    if len(minima) < depth:
        minima = list(minima)  # extended in a copy: a thread reading the stored list is safe
        while len(minima) < depth:
            k = len(minima) + 1
            eps = odo._level_epsilon(ladder, k)  # the ladder's own cache, which status reads
            minima.append((eps, k) if eps < minima[-1][0] else minima[-1])
        if len(_MINIMA) >= _MINIMA_LIMIT:
            _MINIMA.clear()
        _MINIMA[ladder] = minima
    return minima[depth - 1]


def _first_share(judge: _Judge, last_within: float) -> str | None:
    """The smallest level-1 share of :data:`FIRSTS` whose reading after the last repeat of the
    first declaration it admits is within ``last_within`` of the reference; ``""`` when none is
    (every share is then tried, and one that admits no repeat scores ∞); ``None`` when none
    admits one."""
    # the references of the shares whose level 1 is known, with those near their first judged
    # repeat, together (they are almost always read: only a share meeting the bound stops)
    soon: list[float] = []
    for first in FIRSTS:
        known = _known_level_one(judge.top, judge.epsilon, judge.pool, first)
        n = 0 if known is None else _repeats(known, judge.charge)
        if n >= 1:
            soon.append(float(n * judge.charge))
            soon.extend(judge.near(n)[1])
    judge.references(soon)
    fallback = None
    for first in FIRSTS:
        level1 = judge.level1(first)
        n = _repeats(level1, judge.charge)
        if n < 1:
            continue
        fallback = ""
        # level 1's threshold depends on the share alone; the last repeat is read at steps 4
        ladder = judge.ladder(candidate(STEPS[0], first), level1)
        total = float(n * judge.charge)
        found = _reading(ladder, min(total, ladder.top))
        if found is not None and float(found[0]) <= last_within * judge.references([total])[0]:
            return first
    return fallback


# ---------------------------------------------------------------------------- replay
#: The relative error each float the rule judges by (a reading, a reference ε) may carry on
#: another machine's float library, far above what the conversions' last digits differ by.
FLOAT_TOLERANCE: Final = 1e-9

#: The ledger entry being replayed (:func:`recorded`); ``None``: no replay.
_RECORDED: ContextVar[object | None] = ContextVar("recorded", default=None)


@contextmanager
def recorded(entry: object) -> Iterator[None]:
    """Within the block, :func:`chosen` takes a shape that the ledger ``entry`` being replayed
    records (:func:`recorded_in`, read only where a first admission is decided again) over the
    one it recomputes, if the rule could have chosen it on another machine."""
    token = _RECORDED.set(entry)
    try:
        yield
    finally:
        _RECORDED.reset(token)


def replayed() -> object | None:
    """The ledger entry being replayed (within :func:`recorded`), ``None`` outside a replay:
    what another mode's choice (``rdp``: :func:`.rdp_choice.chosen`) reads its recorded
    shapes from."""
    return _RECORDED.get()


def recorded_in(
    entry: object, where: Callable[[Mapping[str, Any]], object] | None = None
) -> list[LadderShape]:
    """Every ladder shape a first admission recorded anywhere in a ledger entry (its state, a
    sub-budget's, a block's, a quota's, a cap's: each ``"first": {..., "ladder": shape}``), for
    :func:`recorded`; malformed ones are left to the replay's exact comparison. ``where``
    finds the stored shape in an object of the entry another way (``rdp``'s states record it
    beside their first curve: :func:`.rdp_choice.recorded_in`)."""
    found: list[LadderShape] = []
    stack = [entry]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            raw = (where or _first_ladder)(item)
            if isinstance(raw, Mapping):
                try:
                    shape = LadderShape.from_json(raw)
                except (ValueError, KeyError, TypeError, ArithmeticError):
                    shape = None
                if shape is not None and shape not in found:
                    found.append(shape)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _first_ladder(item: Mapping[str, Any]) -> object:
    """The shape a ``zcdp`` / ``gdp`` state records with its first admission, if any."""
    first = item.get("first")
    return first.get("ladder") if isinstance(first, Mapping) else None


def chosen(
    top: Top,
    convert: Convert,
    epsilon: Decimal,
    pool: Decimal,
    charge: Decimal,
    mu_squared_per_unit: float,
    last_within: float,
) -> LadderShape | None:
    """:func:`choose`, except in a replay (:func:`recorded`): where the entry records a shape
    other than the recomputed one that the rule could choose with its floats off by
    :data:`FLOAT_TOLERANCE` (:func:`could_choose`), that shape, so that the entry is decided
    again with it and everything after is checked exactly; otherwise the recomputed one (and
    a shape the rule could not choose is a replay mismatch)."""
    args = (top, convert, epsilon, pool, charge, mu_squared_per_unit, last_within)
    fresh = choose(*args)
    entry = _RECORDED.get()
    if entry is None or fresh is None:
        return fresh
    shapes = recorded_in(entry)
    if not shapes or fresh in shapes:
        return fresh
    tolerance = FLOAT_TOLERANCE
    return next((s for s in shapes if could_choose(s, *args, tolerance=tolerance)), fresh)


def could_choose(
    shape: LadderShape,
    top: Top,
    convert: Convert,
    epsilon: Decimal,
    pool: Decimal,
    charge: Decimal,
    mu_squared_per_unit: float,
    last_within: float,
    tolerance: float = FLOAT_TOLERANCE,
) -> bool:
    """Whether :func:`choose` could return ``shape`` if each reading and reference ε it judges
    by were off by a relative ``tolerance`` (each ratio, and each score, then by a factor
    ``k`` = (1 + tolerance)/(1 − tolerance)): ``shape`` is a candidate; its level-1 share is
    one the first test could pick (every smaller share's reading at its last repeat could be
    above ``last_within`` × the reference, its own could be within: reading ≤ k · bound), or
    every share is judged (each could be above); and no candidate judged with it scores below
    its score by more than the tie (score · (1 − :data:`TIE`) ≤ k² · every other score).
    The decisions of exact decimals (how many repeats a level 1 admits) take no tolerance,
    and neither does a score of 0 or ∞. The rule's own choice always could."""
    args = (top, convert, epsilon, pool, charge, mu_squared_per_unit)
    if shape == choose(*args, last_within):
        return True
    judge = _Judge.of(*args)
    if judge is None or shape not in {candidate(s, f) for f in FIRSTS for s in STEPS}:
        return False
    k = (1 + tolerance) / (1 - tolerance)
    for share in _possible_shares(judge, last_within, k):
        shapes = [candidate(s, f) for f in ((share,) if share else FIRSTS) for s in STEPS]
        if shape not in shapes:
            continue
        judge.prepare(shapes)
        scores = {c: judge.worst(c, math.inf) for c in shapes}
        mine = scores[shape]
        if 0 < mine < math.inf and all(mine * (1 - TIE) <= k * k * v for v in scores.values()):
            return True
    return False


def _possible_shares(judge: _Judge, last_within: float, k: float) -> list[str]:
    """What :func:`_first_share` could return with each ratio off by a factor ``k``."""
    possible: list[str] = []
    admits = False
    for first in FIRSTS:
        level1 = judge.level1(first)
        n = _repeats(level1, judge.charge)
        if n < 1:
            continue
        admits = True
        ladder = judge.ladder(candidate(STEPS[0], first), level1)
        total = float(n * judge.charge)
        found = _reading(ladder, min(total, ladder.top))
        if found is None:
            continue
        reading, bound = float(found[0]), last_within * judge.references([total])[0]
        if reading <= k * bound:
            possible.append(first)
        if reading * k <= bound:  # within it however the floats fall: the search stops
            return possible
    return [*possible, ""] if admits else possible


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
    "FLOAT_TOLERANCE",
    "JUDGED_FROM",
    "SPAN_FACTOR",
    "SPREAD",
    "STEPS",
    "TIE",
    "candidate",
    "choose",
    "chosen",
    "could_choose",
    "first_from_json",
    "first_to_json",
    "gaussian_epsilon",
    "gaussian_epsilons",
    "recorded",
    "recorded_in",
    "replayed",
    "rule_from_json",
]
