"""No regression past 10 %: the ladder choice constrained never to read above the earlier version.

The issue "The number to quote" asks two things of the quote benchmark's Gaussian histories:
that readings past 10 % of the budget be close to the exact ε (≤ 1.35× in ``gdp``, ≤ 1.45× in
``zcdp`` and ``rdp``, or within 2 % of the construction family's best), and that every such
reading be below today's, i.e. the version before the mode's shaped ladder (``zcdp``, ``gdp``:
1.6.0; ``rdp``: 1.7.0). This module measures, for each Gaussian row of ``python -m benchmarks
quote``, what the second requirement costs the first within the family.

For each row the first declaration's ladder is forced to each candidate in turn (the first
admission's choice, :func:`.first_ladder.chosen` / :func:`.rdp_choice.chosen`, replaced for
the run; everything else is the service's own admission and ``status``), and the Gaussian is
admitted until refused. A candidate is *admissible* when none of its readings past 10 % of the
budget is above the pre-shaped version's at the same count (relative tolerance
:data:`TOLERANCE`; counts the pre-shaped version does not reach have nothing to compare with).
The constrained choice is today's rule among the admissible candidates (``zcdp``/``gdp``: the
level-1 share test, then the smallest worst ratio; ``rdp``: regret within 1 % of the smallest,
then the smallest sum of log readings), the pre-shaped version itself when none is admissible.
The candidates: ``zcdp``/``gdp`` the 24 members of :mod:`.first_ladder` and the pre-shaped
ladder written as a shape (:data:`PRE_SHAPED`: it reads as the pre-shaped version to ~1e-13
relative, the weights rounded twice); ``rdp`` the candidates of :mod:`.rdp_choice` (the 1.7.0
ladder, one per order, is no member: it is the fallback). Every candidate's full history is
simulated (no pruning): about 30 s of CPU in all.

Run from the repository root:

    .venv/bin/python -m benchmarks quote --no-regression

Writes the section between the ``quote-no-regression`` markers of ``benchmarks/RESULTS.md``
(never the main ``quote`` section) and prints it (``--no-results``: print only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from unittest import mock

from benchmarks import quote
from odometer_core.accounting import admit, initial_state, make_config, parse_declaration
from odometer_core.accounting.modes import first_ladder, rdp_choice
from odometer_core.accounting.odometer import LadderShape

BEGIN, END = "<!-- quote-no-regression:begin -->", "<!-- quote-no-regression:end -->"
#: The relative margin under which a reading counts as not above the earlier one (the
#: pre-shaped ladder written as a shape rounds its weights twice: ~1e-13).
TOLERANCE = 1e-9
#: The ladder of ``zcdp`` and ``gdp`` before 1.7.0 (the 1.4.0 ladder) as a shape.
PRE_SHAPED = LadderShape(4, Decimal("0.9"), 0, Decimal("0"), Decimal("0.02"))
#: The quote benchmark's Gaussian rows: (mode, ε, δ, σ).
ROWS: tuple[tuple[str, str, str, str], ...] = tuple(
    (mode, eps, delta, sigma)
    for mode in ("gdp", "zcdp", "rdp")
    for eps, delta in (("1", "0.00001"), ("1", "0.000001"), ("3", "0.0000001"))
    for sigma in ("20", "60")
)


@dataclass(frozen=True)
class History:
    """A Gaussian admitted until refused: the count, the worst reading ÷ exact ε past 10 % of
    the budget, that ratio at the last admitted, and the readings past 10 % by count."""

    count: int
    worst: float
    last: float
    past: dict[int, Decimal]


@dataclass(frozen=True)
class Row:
    mode: str
    eps: str
    delta: str
    sigma: str
    today: History
    pre: History
    chosen: History
    label: str  # the constrained choice, in words
    admissible: int
    candidates: int
    reproduced: bool  # today's rule over every candidate chooses as the service does
    pre_as_shape: float | None  # largest relative gap, PRE_SHAPED's readings ÷ pre-shaped's
    best_worst: float  # the family's best admitting ≥ the constrained choice's count
    best_last: float
    cpu: float


def above(new: History, old: History, tolerance: float = TOLERANCE) -> tuple[int, float]:
    """How many of ``new``'s readings past 10 % are above ``old``'s at the same count (beyond
    ``tolerance``), and the largest ratio new ÷ old among them (1 when none)."""
    up = [
        float(r / old.past[k])
        for k, r in new.past.items()
        if k in old.past and r > old.past[k] * Decimal(1 + tolerance)
    ]
    return len(up), max(up, default=1.0)


def largest_gap(new: History, old: History) -> float:
    """The largest relative difference between two histories' readings past 10 % at the same
    counts (∞ when they admit differently)."""
    if new.count != old.count or new.past.keys() != old.past.keys():
        return math.inf
    return max((abs(float(r / old.past[k]) - 1) for k, r in new.past.items()), default=0.0)


@contextmanager
def forced(shape: LadderShape | None, seen: list[tuple[Any, ...]]) -> Iterator[None]:
    """Within the block, the first admission's ladder choice (``zcdp``/``gdp``: :func:`.first_
    ladder.chosen`; ``rdp``: :func:`.rdp_choice.chosen`) returns ``shape`` (``None``: the
    service's own choice); the arguments each is called with are appended to ``seen``."""
    own_first, own_rdp = first_ladder.chosen, rdp_choice.chosen

    def wrap(own: Callable[..., LadderShape | None]) -> Callable[..., LadderShape | None]:
        def choice(*args: Any) -> LadderShape | None:
            seen.append(args)
            return own(*args) if shape is None else shape

        return choice

    with (
        mock.patch.object(first_ladder, "chosen", wrap(own_first)),
        mock.patch.object(rdp_choice, "chosen", wrap(own_rdp)),
    ):
        yield


def history(mode: str, eps: str, delta: str, sigma: str, shape: LadderShape | None) -> History:
    """The service's history of the row's Gaussian with the first ladder forced to ``shape``
    (``None``: as the service chooses)."""
    config = make_config(eps, delta, "add_remove", {"mode": mode})
    declaration = parse_declaration({"type": "gaussian", "sigma": sigma, "sensitivity": 1})
    with forced(shape, []):
        return History(*quote._gaussian_history(config, declaration, eps))


def pre_shaped(mode: str, eps: str, delta: str, sigma: str) -> History:
    """The history under the version before the mode's shaped ladder."""
    config = quote._before_shape(make_config(eps, delta, "add_remove", {"mode": mode}))
    declaration = parse_declaration({"type": "gaussian", "sigma": sigma, "sensitivity": 1})
    return History(*quote._gaussian_history(config, declaration, eps))


def choice_arguments(mode: str, eps: str, delta: str, sigma: str) -> tuple[Any, ...]:
    """The arguments the service's first admission passes to its ladder choice."""
    config = make_config(eps, delta, "add_remove", {"mode": mode})
    declaration = parse_declaration({"type": "gaussian", "sigma": sigma, "sensitivity": 1})
    seen: list[tuple[Any, ...]] = []
    with forced(None, seen):
        admit(config, initial_state(config), declaration)
    assert seen, "the first admission chose no ladder"
    return seen[0]


def candidates(mode: str) -> list[LadderShape]:
    if mode == "rdp":
        return list(rdp_choice.candidates())
    members = [
        first_ladder.candidate(s, f) for f in first_ladder.FIRSTS for s in first_ladder.STEPS
    ]
    return [*members, PRE_SHAPED]


def ladder_rule(args: tuple[Any, ...], allowed: list[LadderShape]) -> LadderShape | None:
    """``zcdp``/``gdp``: :func:`.first_ladder.choose`'s rule over ``allowed`` only: the smallest
    level-1 share among theirs whose reading at the last repeat of the first declaration is
    within ``last_within`` of the exact ε, then among that share's (every allowed shape when
    none passes) the smallest worst ratio past 10 % (ties: the earlier)."""
    judge = first_ladder._Judge.of(*args[:6])
    if judge is None or not allowed:
        return None
    last_within = float(args[6])
    shares = [f for f in first_ladder.FIRSTS if any(s.first == Decimal(f) for s in allowed)]
    pick = None
    for share in shares:
        level1 = judge.level1(share)
        n = first_ladder._repeats(level1, judge.charge)
        if n < 1:
            continue
        ladder = judge.ladder(first_ladder.candidate(first_ladder.STEPS[0], share), level1)
        total = float(n * judge.charge)
        found = first_ladder._reading(ladder, min(total, ladder.top))
        if found is not None and float(found[0]) <= last_within * judge.references([total])[0]:
            pick = Decimal(share)
            break
    best: tuple[float, LadderShape] | None = None
    for shape in allowed:
        if pick is not None and shape.first != pick:
            continue
        beat = math.inf if best is None else best[0] * (1 - first_ladder.TIE)
        score = judge.worst(shape, beat)
        if best is None or score < beat:
            best = (score, shape)
    return None if best is None else best[1]


def rdp_rule(args: tuple[Any, ...], allowed: list[int]) -> LadderShape | None:
    """``rdp``: :func:`.rdp_choice.choose`'s rule over the candidates of index ``allowed``
    only (regret against the best allowed, within 1 % of the smallest, then the smallest sum
    of log readings; ties: the earlier)."""
    judged = rdp_choice._judgement(*args)
    if judged is None or not allowed:
        return None
    readings, lengths = judged
    regret, logs, limit = rdp_choice._scores(readings[allowed], lengths)
    chosen, score = 0, math.inf
    for row in range(len(allowed)):
        if regret[row] <= limit and (
            score == math.inf or logs[row] < score - rdp_choice.TIE * abs(score)
        ):
            chosen, score = row, float(logs[row])
    return rdp_choice.candidates()[allowed[chosen]]


def describe(shape: LadderShape) -> str:
    if shape == PRE_SHAPED:
        return "the pre-shaped ladder as a shape"
    return f"steps {shape.steps}, level 1 {shape.first}, span {shape.span}"


def measure(mode: str, eps: str, delta: str, sigma: str) -> Row:
    started = time.process_time()
    args = choice_arguments(mode, eps, delta, sigma)
    today, pre = history(mode, eps, delta, sigma, None), pre_shaped(mode, eps, delta, sigma)
    shapes = candidates(mode)
    runs = [history(mode, eps, delta, sigma, shape) for shape in shapes]
    ok = [i for i, run in enumerate(runs) if above(run, pre)[0] == 0]
    if mode == "rdp":
        choice = rdp_rule(args, ok)
        reproduced = rdp_rule(args, list(range(len(shapes)))) == rdp_choice.choose(*args)
        pre_as_shape = None
    else:
        choice = ladder_rule(args, [shapes[i] for i in ok])
        members = shapes[:-1]  # today's rule judges the family, not the pre-shaped ladder
        reproduced = ladder_rule(args, members) == first_ladder.choose(*args)
        pre_as_shape = largest_gap(runs[-1], pre)
    if choice is None:
        chosen, label = pre, "none admissible: the pre-shaped version"
    else:
        chosen, label = runs[shapes.index(choice)], describe(choice)
    best_w, best_l = quote._gaussian_best(mode, eps, delta, sigma, chosen.count)
    cpu = time.process_time() - started
    return Row(
        mode, eps, delta, sigma, today, pre, chosen, label, len(ok), len(shapes), reproduced,
        pre_as_shape, best_w, best_l, cpu,
    )  # fmt: skip


def table(rows: list[Row]) -> list[str]:
    out = [
        "| mode | budget | σ | today: admitted, worst past 10 %, last | readings past 10 % "
        "above the pre-shaped version's: today (largest ratio) | pre-shaped: admitted, worst, "
        "last | admissible candidates | constrained choice | admitted | worst past 10 % | "
        "last admitted | readings above the pre-shaped: constrained | family best admitting ≥ "
        "as many: worst, last | constrained ÷ family best (worst) | within 2 % | target met "
        "(worst) | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = {"gdp": 1.35, "zcdp": 1.45, "rdp": 1.45}
    for r in rows:
        n_today, max_today = above(r.today, r.pre)
        n_chosen, _ = above(r.chosen, r.pre)
        ratio = r.chosen.worst / r.best_worst
        out.append(
            f"| {r.mode} | ({r.eps}, {r.delta}) | {r.sigma} | {r.today.count}, "
            f"{r.today.worst:.3f}, {r.today.last:.3f} | {n_today} ({max_today:.3f}×) | "
            f"{r.pre.count}, {r.pre.worst:.3f}, {r.pre.last:.3f} | {r.admissible} of "
            f"{r.candidates} | {r.label} | {r.chosen.count} | {r.chosen.worst:.3f} | "
            f"{r.chosen.last:.3f} | {n_chosen} | {r.best_worst:.3f}, {r.best_last:.3f} | "
            f"{ratio:.3f}× | {'yes' if ratio <= 1.02 else 'NO'} | "
            f"{'yes' if r.chosen.worst <= targets[r.mode] else 'NO'} | {r.cpu:.1f} |"
        )
    return out


def section(rows: list[Row] | None = None) -> str:
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.process_time()
    rows = [measure(*row) for row in ROWS] if rows is None else rows
    cpu = time.process_time() - t0
    fallback = sum(r.chosen is r.pre or r.label.startswith("the pre-shaped") for r in rows)
    far = [r for r in rows if r.chosen.worst > 1.02 * r.best_worst]
    spread = ", ".join(f"{r.chosen.worst / r.best_worst:.3f}×" for r in far)
    reproduced = all(r.reproduced for r in rows)
    gaps = [r.pre_as_shape for r in rows if r.pre_as_shape is not None]
    return "\n".join(
        [
            BEGIN,
            "## The number to quote: no reading above the earlier version's",
            "",
            f"`python -m benchmarks quote --no-regression` — {started}; deterministic (the "
            f"core's admission and `status`, no timing; {cpu:.0f} s of CPU). For each Gaussian "
            "row of the quote section, the first declaration's ladder forced to each candidate "
            "(zcdp, gdp: the 24 members of the family and the pre-shaped ladder as a shape; "
            "rdp: its 20 candidates, every one's full history simulated, none pruned); "
            "*admissible*: no reading past 10 % of the budget above the version before the "
            "mode's shaped ladder (zcdp, gdp: 1.6.0; rdp: 1.7.0) at the same count (relative "
            f"tolerance {TOLERANCE:g}); the constrained choice: today's rule among the "
            "admissible, the pre-shaped version when none is. Today's rule over every candidate "
            f"chooses as the service does in every row: {'yes' if reproduced else 'NO'}; the "
            "pre-shaped ladder as a shape reads as the pre-shaped version within "
            f"{max(gaps, default=0.0):.1e} relative.",
            "",
            *table(rows),
            "",
            f"The constrained choice is the pre-shaped ladder in {fallback} of {len(rows)} rows; "
            f"it is more than 2 % above the family's best in {len(far)} ({spread or '–'}): "
            "within the family, reading nowhere above the earlier version past 10 % and "
            "reading close to the family's best conflict.",
            END,
        ]
    )
