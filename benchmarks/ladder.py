"""What anchoring a curve-mode filter at creation costs, and what budget changes buy.

Since accounting 1.4.0 a ``zcdp``, ``rdp`` or ``gdp`` filter is level 1 of a ladder fixed at
creation (0.9 of the conversion δ; the levels below and above it hold the rest), and a budget
change caps the ladder's certified reading instead of deriving thresholds again
(``docs/accounting.md``, *Budget changes*). Three tables, each against the rule before (a filter
at the whole conversion δ, its ladder beside it, thresholds derived again at every change):

1. capacity: Gaussians (σ = 30) a new dataset admits, at five budgets;
2. readings: the certified reading over the non-adaptive conversion of the same total, as many
   small charges (Gaussians σ = 300) fill the budget;
3. changes: three Gaussians (σ = 30) on (1, 10⁻⁶), the reading, the lowest budget the service
   then accepts and the reading after it; and Gaussians admitted after a raise to ε = 2 and 3,
   against a dataset created with that budget.

Run from the repository root:

    .venv/bin/python -m benchmarks ladder

Writes the section between the ``ladder`` markers of ``benchmarks/RESULTS.md`` and prints it
(``--no-results``: print only).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from benchmarks.results import write_section
from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    InvalidTransition,
    admit,
    change_budget,
    initial_state,
    make_config,
    parse_declaration,
    status,
)
from odometer_core.accounting.modes import UnusableBudget, gdp, rdp, zcdp

BEGIN, END = "<!-- ladder:begin -->", "<!-- ladder:end -->"
MODES = ("zcdp", "rdp", "gdp")
BUDGETS: tuple[tuple[str, str], ...] = (
    ("1", "1e-6"),
    ("3", "1e-6"),
    ("1", "1e-9"),
    ("10", "1e-6"),
    ("0.1", "1e-6"),
)
GAUSSIAN = parse_declaration({"type": "gaussian", "sigma": "30", "sensitivity": 1})
SMALL = parse_declaration({"type": "gaussian", "sigma": "300", "sensitivity": 1})


def before(mode: str, eps: str, delta: str) -> AccountingConfig:
    """A filter as made before accounting 1.4.0 (the whole conversion δ, no anchor)."""
    e, d = Decimal(eps), Decimal(delta)
    if mode == "zcdp":
        return zcdp.make(e, d, "add_remove", d, anchored=False)
    if mode == "gdp":
        return gdp.make(e, d, "add_remove", anchored=False)
    weights = tuple(float(w) for w in rdp.DEFAULT_RDP_WEIGHTS)
    return rdp.make(e, d, "add_remove", d, rdp.DEFAULT_RDP_ORDERS, weights, anchored=False)


def now(mode: str, eps: str, delta: str) -> AccountingConfig:
    return make_config(eps, delta, "add_remove", {"mode": mode})


def fill(config: AccountingConfig, state: FilterState | None = None, limit: int = 10**5) -> int:
    """Gaussians (σ = 30) admitted until the filter refuses one."""
    state = initial_state(config) if state is None else state
    n = 0
    while n < limit and (d := admit(config, state, GAUSSIAN)).admitted:
        state, n = d.state, n + 1
    return n


def capacity_table(budgets: tuple[tuple[str, str], ...]) -> list[str]:
    rows = ["| mode | (ε_B, δ_B) | before 1.4.0 | now | change |", "|---|---|---|---|---|"]
    for mode in MODES:
        for eps, delta in budgets:
            old, new = fill(before(mode, eps, delta)), fill(now(mode, eps, delta))
            change = f"{100 * (new - old) / old:+.1f} %" if old else "–"
            rows.append(f"| {mode} | ({eps}, {delta}) | {old} | {new} | {change} |")
    return rows


def _reading(config: AccountingConfig, state: FilterState, uncapped: bool) -> Decimal:
    odo = status(config, state)["odometer"]
    value = odo["ladder_epsilon"] if uncapped and odo["ladder_epsilon"] else odo["epsilon"]
    return Decimal(value)


def readings_table(points: tuple[float, ...]) -> list[str]:
    """Reading / non-adaptive conversion at fractions of the filter's capacity in small
    Gaussians (before 1.4.0: the ladder's own, uncapped value, as docs/accounting.md measured
    it; at the larger fractions the old reading was capped at ε_B, holding only jointly at
    δ_pool + δ_B)."""
    head = " | ".join(f"{p:.0%}" for p in points)
    rows = [f"| mode | rule | {head} |", "|---|---|" + "---|" * len(points)]
    for mode in ("zcdp", "gdp"):
        for label, config, uncapped in (
            ("before 1.4.0", before(mode, "1", "1e-6"), True),
            ("now", now(mode, "1", "1e-6"), False),
        ):
            state = initial_state(config)
            total = 0
            while (d := admit(config, state, SMALL)).admitted:
                state, total = d.state, total + 1
            state, cells, done = initial_state(config), [], 0
            for p in points:
                while done < p * total:
                    state, done = admit(config, state, SMALL).state, done + 1
                estimate = Decimal(status(config, state)["spent_eps_delta"]["epsilon"])
                cells.append(f"{_reading(config, state, uncapped) / estimate:.2f}")
            rows.append(f"| {mode} | {label} | {' | '.join(cells)} |")
    return rows


def _lowest(config: AccountingConfig, state: FilterState, rule: bool) -> Decimal:
    """The lowest ε (to 10⁻⁴) a budget change is accepted at (rule: the anchored one); a budget
    that could never admit anything (``UnusableBudget``) is not accepted."""
    lo, hi = Decimal("0.0001"), config.epsilon
    while hi - lo > Decimal("0.0001"):
        mid = ((lo + hi) / 2).quantize(Decimal("0.0001"))
        try:
            change_budget(config, state, mid, config.delta, anchored=rule)
            hi = mid
        except (InvalidTransition, UnusableBudget):
            lo = mid
    return hi


def changes_table() -> list[str]:
    rows = [
        "| mode | rule | reading after 3 | lowest budget accepted | reading there "
        "| admitted after a raise to 2 / 3 | a new dataset at 2 / 3 |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        for label, make, rule in (("before 1.4.0", before, False), ("now", now, True)):
            config = make(mode, "1", "1e-6")
            state = initial_state(config)
            for _ in range(3):
                state = admit(config, state, GAUSSIAN).state
            reading = _reading(config, state, False)
            low = _lowest(config, state, rule)
            lowered, lowered_state = change_budget(config, state, low, "1e-6", anchored=rule)
            after = _reading(lowered, lowered_state, False)
            raised = []
            for target in ("2", "3"):
                up, up_state = change_budget(config, state, target, "1e-6", anchored=rule)
                raised.append(str(3 + fill(up, up_state)))
            fresh = [str(fill(make(mode, t, "1e-6"))) for t in ("2", "3")]
            rows.append(
                f"| {mode} | {label} | {reading:.4f} | {low} | {after:.4f} | "
                f"{' / '.join(raised)} | {' / '.join(fresh)} |"
            )
    return rows


def render(tables: dict[str, list[str]], stamp: str) -> str:
    out = [
        BEGIN,
        "## The ladder fixed at creation: what it costs, what budget changes buy",
        "",
        f"Run {stamp} on {platform.python_implementation()} {platform.python_version()}, "
        "`python -m benchmarks ladder` (deterministic: counts, not times).",
        "",
    ]
    for title, rows in tables.items():
        out += [f"**{title}**", "", *rows, ""]
    out.append(END)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-results", action="store_true", help="print only")
    parser.add_argument("--quick", action="store_true", help="one budget, two points (smoke)")
    args = parser.parse_args(argv)
    budgets = BUDGETS[:1] if args.quick else BUDGETS
    points = (0.1, 0.9) if args.quick else (0.01, 0.1, 0.3, 0.5, 0.7, 0.9)
    sections: dict[str, Callable[[], list[str]]] = {
        "Capacity: Gaussians σ = 30 a new dataset admits": lambda: capacity_table(budgets),
        "Readings: certified reading / non-adaptive conversion, (1, 10⁻⁶), Gaussians σ = 300 "
        "filling the capacity": lambda: readings_table(points),
        "Changes: three Gaussians σ = 30 on (1, 10⁻⁶), then the budget lowered or raised": (
            changes_table
        ),
    }
    tables: dict[str, list[str]] = {title: make() for title, make in sections.items()}
    block = render(tables, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__: list[Any] = ["main", "render"]
