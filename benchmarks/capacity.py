"""How many more fit: the count of :func:`~odometer_core.accounting.capacity` beside the loop
of the core's admission it replaces, per mode, up to 10⁶.

Each row is a filter (a new one of (ε, δ) = (1, 10⁻⁶) unless the row says otherwise) and a
declaration. "fast" is ``capacity`` as the service calls it: a galloping, then binary, search
over n, each step one real ``admit`` on the state n − 1 admissions leave, advanced at once and
exactly by :mod:`~odometer_core.accounting.fastforward` (docs/accounting.md, *How many more
fit*). "loop" is what ``capacity`` did before (up to 10⁴ then): ``admit`` on the state the
previous one left, until a refusal or 10⁶. Both start with the declaration's charge already
computed, as a preview computes it before counting (:mod:`~odometer_core.accounting.memo`), and
the two counts and reasons are compared. Target: ≤ 50 ms of CPU for counts up to 10⁶.

A second table: what the status summary's ``more`` (how many more of the last declaration fit)
costs per status read, counting to 1,000 (its limit before) and to 10⁶ (its limit now).

Run from the repository root:

    .venv/bin/python -m benchmarks capacity

CPU time of this process (``time.process_time``): "fast" is the median of ``--repeat`` runs, the
loop one run. The load average is recorded before and after. Writes the section between the
``capacity`` markers of ``benchmarks/RESULTS.md`` and prints it (``--no-results``: print only;
``--quick``: only the rows below 10⁴, without the summary table).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from benchmarks.results import package_version, write_section
from odometer_core.accounting import (
    AccountingConfig,
    Capacity,
    FilterState,
    admit,
    capacity,
    initial_state,
    make_config,
    memo,
    parse_declaration,
    status,
)
from odometer_core.accounting.exact import UP
from odometer_core.accounting.modes.basic import BasicState
from odometer_core.accounting.summary import MORE_LIMIT, compose

BEGIN, END = "<!-- capacity:begin -->", "<!-- capacity:end -->"
LIMIT = 1_000_000
TARGET_MS = 50.0


def _gaussian(sigma: object) -> dict[str, Any]:
    return {"type": "gaussian", "sigma": sigma}


def _nearly_full(config: AccountingConfig) -> FilterState:
    """ε spent 1 − 5000·10⁻⁶⁰: each charge of 3·10⁻⁶⁵ adds 10⁻⁶⁰ at the context's 60 digits."""
    return BasicState(spent_epsilon=UP.subtract(Decimal(1), Decimal("5000E-60")))


SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {
            "name": "train",
            "budget": {"epsilon": "1", "delta": "1e-7"},
            "accounting": {"mode": "rdp"},
        },
        {
            "name": "stats",
            "budget": {"epsilon": "1", "delta": "0"},
            "accounting": {"mode": "basic"},
        },
    ],
}


@dataclass(frozen=True)
class Row:
    mode: str
    label: str
    mechanism: dict[str, Any]
    accounting: dict[str, Any]
    budget: tuple[str, str] = ("1", "1e-6")
    sub_budget: str | None = None
    state: Callable[[AccountingConfig], FilterState] | None = None

    def filter(self) -> tuple[AccountingConfig, FilterState]:
        config = make_config(*self.budget, "add_remove", self.accounting)
        return config, initial_state(config) if self.state is None else self.state(config)


ODP_NEAR = {
    "type": "odp",
    "cells": [
        {"name": "a", "epsilon": "0.0000005"},
        {"name": "b", "epsilon": "0.0000010000001"},
    ],
    "delta": "1e-18",
}

ROWS: tuple[Row, ...] = (
    Row("basic", "pure ε = 0.001", {"type": "pure_dp", "epsilon": "0.001"}, {"mode": "basic"}),
    Row("basic", "pure ε = 10⁻⁵", {"type": "pure_dp", "epsilon": "0.00001"}, {"mode": "basic"}),
    Row(
        "basic",
        "pure ε = 1.0000001·10⁻⁶",
        {"type": "pure_dp", "epsilon": "0.0000010000001"},
        {"mode": "basic"},
    ),
    Row("basic", "ODP, reserved at its worst cell", ODP_NEAR, {"mode": "basic"}),
    Row(
        "basic",
        "Gaussian σ = 300 at δ_conv 10⁻⁹, (10, 10⁻³)",
        _gaussian(300),
        {"mode": "basic", "conversion_delta": "1e-9"},
        ("10", "1e-3"),
    ),
    Row(
        "basic",
        "pure ε = 3·10⁻⁶⁵ on ε spent 1 − 5·10⁻⁵⁷ (60-digit rounding)",
        {"type": "pure_dp", "epsilon": "3e-65"},
        {"mode": "basic"},
        state=_nearly_full,
    ),
    Row("zcdp", "Gaussian σ = 300", _gaussian(300), {"mode": "zcdp"}),
    Row("zcdp", "Gaussian σ = 4548", _gaussian(4548), {"mode": "zcdp"}),
    Row(
        "zcdp",
        "approx (0.001, 10⁻¹¹), δ_c 5·10⁻⁷",
        {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-11"},
        {"mode": "zcdp", "final_conversion_delta": "5e-7"},
    ),
    Row("gdp", "Gaussian σ = 300", _gaussian(300), {"mode": "gdp"}),
    Row("gdp", "Gaussian σ = 4245", _gaussian(4245), {"mode": "gdp"}),
    Row("gdp", "Gaussian σ = 5000 (past the limit)", _gaussian(5000), {"mode": "gdp"}),
    Row("rdp", "Gaussian σ = 300 (orders die one by one)", _gaussian(300), {"mode": "rdp"}),
    Row("rdp", "Gaussian σ = 4995", _gaussian(4995), {"mode": "rdp"}),
    Row(
        "rdp",
        "DP-SGD q = 0.001, σ = 1.2, 10 steps, (30, 10⁻⁶)",
        {"type": "dp_sgd", "sample_rate": 0.001, "noise_multiplier": 1.2, "steps": 10},
        {"mode": "rdp"},
        ("30", "1e-6"),
    ),
    Row(
        "rdp",
        "approx (0.001, 10⁻¹¹), δ_c 5·10⁻⁷",
        {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-11"},
        {"mode": "rdp", "final_conversion_delta": "5e-7"},
    ),
    Row(
        "rdp",
        "Gaussian σ = 3000, grid chosen for it",
        _gaussian(3000),
        {"mode": "rdp", "workload": [{"mechanism": _gaussian(3000), "count": 100000}]},
    ),
    Row(
        "split",
        "Gaussian σ = 3500 on an rdp sub-budget (1, 10⁻⁷)",
        _gaussian(3500),
        SPLIT,
        ("2", "1e-6"),
        sub_budget="train",
    ),
)


#: The rows of ``--quick`` (counts below 10⁴).
QUICK = ("pure ε = 0.001", "Gaussian σ = 300")


def _cpu(call: Callable[[], Any]) -> tuple[float, Any]:
    at = time.process_time()
    out = call()
    return (time.process_time() - at) * 1000, out


def loop(
    config: AccountingConfig, state: FilterState, row: Row, limit: int = LIMIT
) -> tuple[int, str | None]:
    """The loop of the core's admission (what ``capacity`` did, to 10⁴)."""
    declaration, count = parse_declaration(row.mechanism), 0
    while count < limit:
        decision = admit(config, state, declaration, sub_budget=row.sub_budget)
        if not decision.admitted:
            return count, decision.reason
        state, count = decision.state, count + 1
    return count, None


def measure(row: Row, repeat: int) -> dict[str, Any]:
    config, state = row.filter()
    declaration = parse_declaration(row.mechanism)
    with memo.charges():
        admit(config, state, declaration, sub_budget=row.sub_budget)  # the charge, ahead
        runs = [
            _cpu(lambda: capacity(config, state, declaration, sub_budget=row.sub_budget))
            for _ in range(repeat)
        ]
        loop_ms, looped = _cpu(lambda: loop(config, state, row))
    found: Capacity = runs[0][1]
    return {
        "found": found,
        "fast_ms": statistics.median(ms for ms, _ in runs),
        "loop_ms": loop_ms,
        "same": (found.count, found.reason) == looped,
    }


def summary_row(row: Row, repeat: int) -> str:
    """A status read's cost: the view, and ``more`` counted to 1,000 (the loop, then the
    search) and to 10⁶ (the search)."""
    config, state = row.filter()
    declaration = parse_declaration(row.mechanism)
    with memo.charges():
        admit(config, state, declaration, sub_budget=row.sub_budget)

        def median(call: Callable[[], Any]) -> float:
            return statistics.median(_cpu(call)[0] for _ in range(repeat))

        view = median(lambda: compose(status(config, state)))
        before = median(lambda: loop(config, state, row, 1000))
        fast_1000 = median(
            lambda: capacity(config, state, declaration, sub_budget=row.sub_budget, limit=1000)
        )
        fast_all = median(
            lambda: capacity(config, state, declaration, sub_budget=row.sub_budget, limit=LIMIT)
        )
    return (
        f"| {row.mode} | {row.label} | {view:.2f} | {before:.2f} | {fast_1000:.2f} | "
        f"{fast_all:.2f} |"
    )


def table(rows: tuple[Row, ...], repeat: int) -> tuple[list[str], bool]:
    lines = [
        "| mode | declaration | count | fast, CPU ms | loop, CPU ms | loop / fast | same count "
        "and reason |",
        "|---|---|---|---|---|---|---|",
    ]
    ok = True
    for row in rows:
        m = measure(row, repeat)
        found: Capacity = m["found"]
        count = f"{'≥ ' if found.at_least else ''}{found.count:,}"
        ok = ok and m["same"] and m["fast_ms"] <= TARGET_MS
        lines.append(
            f"| {row.mode} | {row.label} | {count} | {m['fast_ms']:.2f} | {m['loop_ms']:,.0f} | "
            f"{m['loop_ms'] / max(m['fast_ms'], 1e-3):,.0f}× | {'yes' if m['same'] else 'NO'} |"
        )
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks capacity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=5, help="fast runs per row (median)")
    parser.add_argument("--quick", action="store_true", help="only the rows below 10^4")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()
    rows = ROWS
    if args.quick:
        rows = tuple(r for r in ROWS if r.label.split(" (")[0] in QUICK)
    lines, ok = table(rows, args.repeat)
    summary: list[str] = []
    if not args.quick:
        summary = [
            "",
            f"The status summary's `more`, per status read (CPU ms, median of {args.repeat}; "
            f"its limit is now {MORE_LIMIT:,}):",
            "",
            "| mode | last declaration | status view + summary | `more` ≤ 1,000, loop (before) "
            "| `more` ≤ 1,000, search | `more` ≤ 10⁶, search (now) |",
            "|---|---|---|---|---|---|",
            *(summary_row(r, args.repeat) for r in ROWS if r.mode != "split"),
        ]
    load_after = os.getloadavg()
    block = "\n".join(
        [
            BEGIN,
            "## How many more fit: the search beside the loop (`benchmarks/capacity.py`)",
            "",
            f"`python -m benchmarks capacity` — {started}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs, CPython {platform.python_version()}, numpy "
            f"{package_version('numpy')}; load average {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after. CPU time of the process: fast = `capacity()` (median of "
            f"{args.repeat}), loop = `admit()` on the state the previous one left until a "
            "refusal or 10⁶ (one run); the charge computed ahead of both, as a preview does. "
            "Filters of (1, 10⁻⁶) unless the row says. Target ≤ 50 ms up to 10⁶: "
            f"{'met in every row' if ok else 'NOT met in every row'}.",
            "",
            *lines,
            *summary,
            END,
        ]
    )
    print(block)
    if not args.no_results:
        write_section(block)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
