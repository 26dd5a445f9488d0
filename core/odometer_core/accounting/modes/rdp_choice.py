"""The ``rdp`` ladder shaped by the first declaration (accounting 1.10.0).

An ``rdp`` configuration created from accounting 1.10.0 on says ``"ladder_rule":
"first_declaration"``: the spacing and span of its shaped ladder (:mod:`.rdp_shaped`) are not
the constant :data:`~.rdp_shaped.DEFAULT_RDP_LADDER` of 1.9.0 but are chosen, at the first
admission, by :func:`choose` from that first declaration's curve C (the state's ``design``)
and the creation target alone, recorded in the state (``"ladder"``) and kept from then on:
budget changes never choose again, and a replay recomputes the choice from the recorded curve.
A block chooses at its own first declaration, a quota and an organisation cap at the first
declaration they count, as the order weights of :data:`~.rdp_config.WEIGHTS_FIRST` do (the
same admission makes both choices).

Why this is sound: the first declaration is chosen before any output, so the shape it selects
is fixed before the first output too. Every candidate (:func:`candidates`) is a
:class:`~odometer_core.accounting.odometer.LadderShape` whose shares sum to at most 1 (checked
in exact decimals when it is built), placed at whole repeats (the span's share divided evenly
among the kept levels, each rounded down), and level 1 holds the same share 0.9 of the pool in
every candidate, so the filter's thresholds B(α) and what it admits do not depend on the
choice. Conditionally on the first declaration the ladder is a set of RDP filters fixed in
advance (Feldman–Zrnic 2021, Thm 4.3), each converted at its share by Canonne–Kamath–Steinke
2020, Prop. 12, and the union bound over its levels certifies the smallest ε among those that
hold the running curve, at every stopping time (``docs/accounting.md``, *rdp: the ladder shaped
by the first declaration*).

How the shape is chosen: the history judged is "the first declaration repeated until the
filter refuses" (j = 1 … N repeats, N the multiple level 1 holds); each candidate's reading
after j repeats is the smallest ε of its levels holding j·C. Only counts whose best reading over
the candidates is at least :data:`JUDGED_FROM` of the target are judged (the issue's "past
10 % of the budget"). A candidate's regret is the largest ratio of its reading to the best
reading over the candidates at the same count; among the candidates whose regret is within
:data:`REGRET_TOLERANCE` of the smallest, the one whose readings have the smallest sum of
logarithms over the judged counts is chosen (ties: the earlier of :func:`candidates`). No
reference conversion is needed: the readings are step functions of j, so the judgement reads
them only at the counts where some candidate's reading changes. Later work of another kind is
read by a ladder shaped for this one: served worse than by one shaped for it, never unsoundly.

Replay (``docs/accounting.md``, *What replay checks*): the readings are floats, and a first
declaration can sit on the edge of a criterion (a regret on the limit, two sums of logs apart by
the tie), where another machine's float library may choose the other way. Soundness needs only
that the shape is a candidate fixed before the first output, so, as for ``zcdp`` and ``gdp``
(:mod:`.first_ladder`), a replay (:func:`chosen`, within :func:`.first_ladder.recorded`)
accepts a recorded shape other than the recomputed one iff the rule could choose it with its
floats off by :data:`~.first_ladder.FLOAT_TOLERANCE` (:func:`could_choose`), and decides the
entry again with it; anything else is a mismatch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

import numpy as np

from odometer_core.accounting import conversions as cv
from odometer_core.accounting.exact import to_float_down
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes import rdp_shaped as shaped
from odometer_core.accounting.odometer import LadderShape

#: ``"ladder_rule"`` of an ``rdp`` configuration whose shape the first declaration chooses.
FIRST_DECLARATION: Final = "first_declaration"
#: The rule new ``rdp`` configurations record (``None``: 1.9.0's constant shape).
DEFAULT_LADDER_RULE: Final[str | None] = FIRST_DECLARATION

#: The candidates' spacings 2^(1/steps) and span factors (the even shares reach down to
#: 1/factor of level 1's multiple of the first declaration): the shaped members of
#: ``python -m benchmarks quote``'s family.
STEPS: Final = (4, 5, 6, 7, 8)
SPAN_FACTORS: Final = (30.0, 50.0, 100.0, 300.0)
#: Level 1's share (that of every ``rdp`` filter since 1.4.0: the epochs admitted stay), the
#: span's, and the levels above; the tail takes the rest (0.004).
FIRST: Final = Decimal("0.9")
SPREAD: Final = Decimal("0.095")
ABOVE: Final = Decimal("0.001")
#: Counts whose best reading is below this fraction of the target are not judged.
JUDGED_FROM: Final = 0.1
#: Candidates whose regret is within this factor of the smallest are compared by their sum of
#: log readings.
REGRET_TOLERANCE: Final = 0.01
#: Relative tolerance under which two scores tie (the earlier candidate wins), far above the
#: float noise of the conversions, so that a replay on another machine chooses the same.
TIE: Final = 1e-9


@functools.cache
def candidates() -> tuple[LadderShape, ...]:
    """The shapes :func:`choose` picks from, in the order ties are broken."""
    out = []
    for steps in STEPS:
        for factor in SPAN_FACTORS:
            span = math.ceil(math.log(factor) / math.log(2.0 ** (1.0 / steps)))
            out.append(LadderShape(steps, FIRST, span, SPREAD, ABOVE))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def choose(
    orders: tuple[float, ...],
    tops: tuple[float, ...],
    design: tuple[float, ...],
    pool: float,
    target: Decimal,
) -> LadderShape:
    """The shape a first declaration of RDP curve ``design`` (on ``orders``) chooses for a
    filter whose level 1 has the thresholds ``tops`` and whose ladder holds the δ ``pool``, of
    creation target ``target`` (module docstring). A deterministic function of its arguments,
    all fixed before any output; :data:`~.rdp_shaped.DEFAULT_RDP_LADDER` when the first
    declaration places no level (a curve 0 everywhere, or no repeat held)."""
    judged = _judgement(orders, tops, design, pool, target)
    if judged is None:
        return shaped.DEFAULT_RDP_LADDER
    regret, logs, limit = _scores(*judged)
    chosen, score = 0, math.inf
    for row in range(len(regret)):
        if regret[row] <= limit and (score == math.inf or logs[row] < score - TIE * abs(score)):
            chosen, score = row, float(logs[row])
    return candidates()[chosen]


def _scores(readings: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per candidate its regret (the largest ratio of its reading to the best at a judged
    count) and its sum of log readings over the judged counts; and the largest regret kept."""
    regret = (readings / readings.min(axis=0)).max(axis=1)
    logs = (np.log(readings) * lengths).sum(axis=1)
    return regret, logs, float(regret.min() * (1 + REGRET_TOLERANCE) * (1 + TIE))


def _count(tops: tuple[float, ...], design: tuple[float, ...], pool: float) -> tuple[float, int]:
    """The multiple N of the first declaration level 1 holds, and the whole repeats judged
    (0: none, the constant shape stays)."""
    n = shaped.multiple(tops, design)
    count = math.floor(n) if 0 < n < 2**53 else 0
    return n, count if pool > 0 else 0


def _judgement(
    orders: tuple[float, ...],
    tops: tuple[float, ...],
    design: tuple[float, ...],
    pool: float,
    target: Decimal,
    start: int | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """What :func:`choose` judges by: per candidate (rows) its reading at each judged count
    where some candidate's reading changes (columns, from the first judged count, ``start``
    when given), and how many counts each column stands for; ``None`` when no repeat is
    judged."""
    n, count = _count(tops, design, pool)
    if count < 1:
        return None
    eps = float(target)
    if start is None:
        start = _first_judged(orders, design, pool, eps * JUDGED_FROM, count)
    held, suffixes = _levels(orders, design, pool, n, start)
    points = {start}
    for m in held:
        points.update(math.floor(x) + 1 for x in m.tolist() if x < count)
    js = np.array(sorted(p for p in points if p <= count), dtype=np.float64)
    readings = np.empty((len(held), js.size))
    for row, (m, suffix) in enumerate(zip(held, suffixes, strict=True)):
        # the reading after j repeats: the smallest ε over the levels holding j (m_k ≥ j)
        at = np.searchsorted(m, js, side="left")
        readings[row] = np.minimum(np.append(suffix, eps)[at], eps)
    judged = js >= start
    lengths = np.diff(np.append(js, count + 1))[judged]
    return readings[:, judged], lengths


def _levels(
    orders: tuple[float, ...], design: tuple[float, ...], pool: float, n: float, start: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per candidate, the repeats m_k ≥ ``start`` each level k ≥ 2 holds (ascending) and the
    smallest ε of the levels holding at least as many (a suffix minimum): the levels of
    :func:`.rdp_shaped.statements` at whole repeats, all candidates converted in one pass
    (CKS20 Prop. 12 at each level's share, the best order of the grid). A level holding fewer
    than ``start`` repeats reads no judged count, so it is not converted."""
    curve = np.asarray(design, dtype=np.float64)
    usable = curve > 1e-300
    owners: list[int] = []
    shares: list[float] = []
    factors: list[float] = []
    for row, shape in enumerate(candidates()):
        values, parts = _placed(n, pool, shape)
        judged = values >= start  # below: it holds no judged count
        owners.extend([row] * int(judged.sum()))
        shares.extend(parts[judged].tolist())
        factors.extend(values[judged].tolist())
    rows = np.where(usable, np.array(factors, dtype=np.float64)[:, None] * curve, np.inf)
    converted = cv.rdp_to_epsilon_rows(orders, rows, shares)
    held: list[list[tuple[float, float]]] = [[] for _ in candidates()]
    for owner, factor, (epsilon, _) in zip(owners, factors, converted, strict=True):
        held[owner].append((factor, epsilon))
    ms, suffixes = [], []
    for placed in held:
        placed.sort()
        m = np.array([f for f, _ in placed], dtype=np.float64)
        e = np.array([x for _, x in placed], dtype=np.float64)
        ms.append(m)
        suffixes.append(np.minimum.accumulate(e[::-1])[::-1] if e.size else e)
    return ms, suffixes


@functools.lru_cache(maxsize=64)
def _ladder(pool: float, shape: LadderShape) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The levels k ≥ 2 of ``shape`` on ``pool`` (:func:`.rdp_shaped.level_shares`): each
    one's r^−(k−1) (the power :func:`~odometer_core.accounting.odometer.anchored_value`
    multiplies the top by, computed as it computes it), its share, whether it is a span level
    (2 ≤ k ≤ span + 1), and whether every level k ≥ 2 is one (then the tail keeps none)."""
    levels, parts = shaped.level_shares(pool, shape)
    ratio = shape.ratio
    below = [(k, share) for k, share in zip(levels, parts, strict=True) if k > 1]
    powers = np.array([ratio ** (-(k - 1)) for k, _ in below], dtype=np.float64)
    shares = np.array([share for _, share in below], dtype=np.float64)
    span = np.array([k <= shape.span + 1 for k, _ in below], dtype=np.bool_)
    for array in (powers, shares, span):
        array.setflags(write=False)
    return powers, shares, span, bool(span.all())


def _placed(n: float, pool: float, shape: LadderShape) -> tuple[np.ndarray, np.ndarray]:
    """The levels k ≥ 2 of :func:`.rdp_shaped.whole_levels` for a first declaration that level 1
    holds ``n`` times: each kept level's whole number of repeats and its share, in the order of
    the levels (the same floats, computed for all levels at once: the search for what would fit
    chooses once per candidate and level, :mod:`odometer_core.accounting.instead`). Each
    multiple n·r^−(k−1) ≥ 1 is rounded down to a whole number (× WHOLE_MARGIN); of the span's
    levels the first of each whole number is kept, the span's share divided evenly among them;
    the tail's keep their own shares."""
    powers, shares, span, _ = _ladder(pool, shape)
    factors = n * powers
    rounded = np.where(factors >= 1.0, np.floor(factors) * shaped.WHOLE_MARGIN, factors)
    spans = np.flatnonzero(span)
    _, first = np.unique(rounded[spans], return_index=True)
    keep = ~span
    keep[spans[first]] = True
    distinct = len(first)
    # as shaped.whole_levels rounds a span level's share (the levels above, k ≤ −1, are not
    # judged and not returned; their count does not enter the span's share)
    even = to_float_down(shape.spread) / float(distinct) * (1.0 - 1e-12) if distinct else 0.0
    each = pool * even
    span_share = math.nextafter(each * (1.0 - 1e-12), 0.0) if each > 0 else 0.0
    return rounded[keep], np.where(span, span_share, shares)[keep]


def _first_judged(
    orders: tuple[float, ...], design: tuple[float, ...], pool: float, floor: float, count: int
) -> int:
    """The fewest repeats whose RDP conversion at the whole pool (the non-adaptive reading of
    the same history) is at least ``floor`` (``count`` when none below it is): the first count
    judged."""
    curve = np.asarray(design, dtype=np.float64)

    def reads(j: int) -> float:
        return cv.rdp_to_epsilon(np.asarray(orders), j * curve, pool)[0]

    lo, hi = 0, count  # reads(lo) < floor (lo = 0 reads 0), the answer in (lo, hi]
    if reads(hi) < floor:
        return count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if reads(mid) < floor else (lo, mid)
    return hi


# ---------------------------------------------------------------------------- replay
def chosen(
    orders: tuple[float, ...],
    tops: tuple[float, ...],
    design: tuple[float, ...],
    pool: float,
    target: Decimal,
) -> LadderShape:
    """:func:`choose`, except in a replay (:func:`.first_ladder.recorded`): where the entry
    records an ``rdp`` shape other than the recomputed one that the rule could choose with its
    floats off by :data:`~.first_ladder.FLOAT_TOLERANCE` (:func:`could_choose`), that shape,
    so that the entry is decided again with it and everything after is checked exactly;
    otherwise the recomputed one (and a shape the rule could not choose is a mismatch)."""
    args = (orders, tops, design, pool, target)
    fresh = choose(*args)
    entry = first_ladder.replayed()
    if entry is None:
        return fresh
    shapes = recorded_in(entry)
    if not shapes or fresh in shapes:
        return fresh
    tolerance = first_ladder.FLOAT_TOLERANCE
    return next((s for s in shapes if could_choose(s, *args, tolerance=tolerance)), fresh)


def recorded_in(entry: object) -> list[LadderShape]:
    """Every shape an ``rdp`` first admission recorded in a ledger entry (a state, a
    sub-budget's, a quota's, a cap's: each ``{..., "design": C, "ladder": shape}``), found as
    :func:`.first_ladder.recorded_in` finds ``zcdp`` and ``gdp`` ones."""
    return first_ladder.recorded_in(entry, _rdp_ladder)


def _rdp_ladder(item: Mapping[str, Any]) -> object:
    """The shape an ``rdp`` state records beside its first declaration's curve, if any."""
    return item.get("ladder") if isinstance(item.get("design"), list) else None


def could_choose(
    shape: LadderShape,
    orders: tuple[float, ...],
    tops: tuple[float, ...],
    design: tuple[float, ...],
    pool: float,
    target: Decimal,
    tolerance: float = first_ladder.FLOAT_TOLERANCE,
) -> bool:
    """Whether :func:`choose` could return ``shape`` if each conversion it judges by (every
    reading, and those that fix the first judged count) were off by a relative ``tolerance``:
    each ratio, and so each regret, then off by a factor k = (1 + tolerance)/(1 − tolerance),
    each sum of logs by D = −L·log(1 − tolerance) over its L judged counts. Every comparison
    the rule makes is taken both ways where such noise could tip it (:func:`_possible`): a
    first judged count its search could stop at, a candidate's regret within the limit or not,
    a sum of logs below the best so far by the tie or not. The counts of repeats and the
    levels' places take no tolerance (the filter's own statements stand on them). With a
    tolerance of 0 only the rule's own choice could."""
    args = (orders, tops, design, pool, target)
    if shape == choose(*args):
        return True
    if shape not in candidates() or not 0 <= tolerance < 1:
        return False
    _, count = _count(tops, design, pool)
    if count < 1:
        return False  # the constant shape, which the rule returned
    floor = float(target) * JUDGED_FROM
    low = _first_judged(orders, design, pool, floor / (1 + tolerance), count)
    high = _first_judged(orders, design, pool, floor / (1 - tolerance), count)
    row = candidates().index(shape)
    for start in range(low, high + 1):
        judged = _judgement(*args, start=start)
        assert judged is not None
        if row in _possible(*judged, tolerance):
            return True
    return False


def _possible(readings: np.ndarray, lengths: np.ndarray, tolerance: float) -> set[int]:
    """The candidates :func:`choose`'s pass over the candidates could end at, judging these
    readings with each comparison taken both ways where the noise of :func:`could_choose`
    could tip it (exactly the rule's comparisons at a tolerance of 0)."""
    regret, logs, limit = _scores(readings, lengths)
    k = (1 + tolerance) / (1 - tolerance)
    noise = -math.log1p(-tolerance) * float(lengths.sum())
    ends: set[tuple[int, float]] = {(0, math.inf)}  # (the choice so far, its score)
    for row in range(len(regret)):
        held = bool(regret[row] <= k * k * limit), not regret[row] * (k * k) <= limit
        low, high = float(logs[row]) - noise, float(logs[row]) + noise
        after: set[tuple[int, float]] = set()
        for chosen, score in ends:
            best = score + noise - TIE * (abs(score) - noise)
            worst = score - noise - TIE * (abs(score) + noise)
            if held[0] and (score == math.inf or low < best):
                after.add((row, float(logs[row])))
            if held[1] or (score != math.inf and not high < worst):
                after.add((chosen, score))
        ends = after
    return {chosen for chosen, _ in ends}


__all__ = [
    "ABOVE",
    "DEFAULT_LADDER_RULE",
    "FIRST",
    "FIRST_DECLARATION",
    "JUDGED_FROM",
    "REGRET_TOLERANCE",
    "SPAN_FACTORS",
    "SPREAD",
    "STEPS",
    "candidates",
    "choose",
    "chosen",
    "could_choose",
    "recorded_in",
]
