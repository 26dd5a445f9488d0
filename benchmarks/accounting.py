"""Accounting-core benchmarks: admission latency per mode vs history length, MTZ speed against
dp_accounting, and a tightness table against dp_accounting's RDP and PLD accountants.

Run from the repository root:

    .venv/bin/python -m benchmarks accounting          # or: make bench-accounting

Writes the results section of ``benchmarks/RESULTS.md`` (between the ``accounting`` markers)
and ``benchmarks/accounting.json``, and prints it (``--no-results``: print only; ``--quick``:
short histories and few repeats, seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

from benchmarks import rdp_speed
from benchmarks.results import package_version, write_section
from odometer_core.accounting.conversions import pure_dp_rdp
from odometer_core.accounting.declarations import Declaration, parse_declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    FilterState,
    admit,
    initial_state,
    make_config,
    settle,
)

RESULTS = Path(__file__).with_name("RESULTS.md")
BEGIN, END = "<!-- accounting:begin -->", "<!-- accounting:end -->"


# ---------------------------------------------------------------------------- admission latency
def _absorb(cfg: AccountingConfig, decl: Declaration, n: int) -> FilterState:
    state = initial_state(cfg)
    for _ in range(n):
        d = admit(cfg, state, decl)
        assert d.outcome == "accepted", "benchmark budget too small"
        state = d.state
    return state


def _median_admit_us(
    cfg: AccountingConfig, state: FilterState, decl: Declaration, calls: int = 3000
) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        admit(cfg, state, decl)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000.0


def admission_latency(
    sizes: tuple[int, ...] = (0, 1000, 100_000), calls: int = 3000
) -> list[dict[str | int, Any]]:
    cases: list[tuple[str, AccountingConfig, Declaration]] = [
        (
            "basic",
            make_config(10**6, "0.5", "add_remove", None),
            parse_declaration({"type": "pure_dp", "epsilon": "0.001"}),
        ),
        (
            "zcdp",
            make_config(10**5, "1e-6", "add_remove", {"mode": "zcdp"}),
            parse_declaration({"type": "gaussian", "sigma": "100", "sensitivity": 1}),
        ),
        (
            "gdp",
            make_config(1000, "1e-6", "add_remove", {"mode": "gdp"}),
            parse_declaration({"type": "gaussian", "sigma": "1000", "sensitivity": 1}),
        ),
        (
            "rdp",
            make_config(10**5, "1e-6", "add_remove", {"mode": "rdp"}),
            parse_declaration({"type": "gaussian", "sigma": "100", "sensitivity": 1}),
        ),
        (
            "rdp (dp_sgd decl.)",
            make_config(10**5, "1e-6", "add_remove", {"mode": "rdp"}),
            parse_declaration(
                {"type": "dp_sgd", "noise_multiplier": "5", "sample_rate": "0.001", "steps": 10}
            ),
        ),
    ]
    rows = []
    for name, cfg, decl in cases:
        row: dict[str | int, Any] = {"mode": name}
        for n in sizes:
            state = _absorb(cfg, decl, n)
            row[n] = _median_admit_us(cfg, state, decl, calls)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------- tightness
def _count_admitted(
    cfg: AccountingConfig, decl: Declaration, limit: int = 100_000, cell: str | None = None
) -> int:
    state, n = initial_state(cfg), 0
    while n < limit:
        d = admit(cfg, state, decl)
        if d.outcome == "rejected":
            return n
        state = d.state
        if d.reservation is not None and cell is not None:
            state = settle(cfg, state, d.reservation, cell).state
        n += 1
    return n


def _dp_accounting_rdp_count(event_fn: Callable[[int], Any], eps: float, delta: float) -> int:
    k = 0
    while True:
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(event_fn(k + 1))
        if acc.get_epsilon(delta) > eps:
            return k
        k += 1


def largest_fitting(fits: Callable[[int], bool]) -> int:
    """The largest k ≥ 0 with ``fits(k)`` for a monotone ``fits`` (doubling, then bisection)."""
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _dp_accounting_pld_count(event_fn: Callable[[int], Any], eps: float, delta: float) -> int:
    def fits(k: int) -> bool:
        acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(event_fn(k))
        return bool(acc.get_epsilon(delta) <= eps)

    return largest_fitting(fits)


def _smallest_rdp_budget(decl: Declaration, delta: float) -> float:
    """The smallest ε_B for which an ``rdp``-mode dataset (default grid, all δ to conversion)
    admits the declaration: the ε the rdp filter effectively charges."""
    lo, hi = 0.01, 100.0
    for _ in range(50):
        mid = (lo + hi) / 2
        cfg = make_config(repr(mid), repr(delta), "add_remove", {"mode": "rdp"})
        if admit(cfg, initial_state(cfg), decl).outcome == "accepted":
            hi = mid
        else:
            lo = mid
    return hi


def tightness() -> dict[str, Any]:
    out: dict[str, Any] = {}
    # DP-SGD, q = 0.01, σ = 1.1, T = 10^4, δ = 1e-5 (reference vector #14)
    sgd = parse_declaration(
        {
            "type": "dp_sgd",
            "noise_multiplier": "1.1",
            "sample_rate": "0.01",
            "steps": 10000,
            "delta": "1e-5",
        }
    )
    basic = make_config(100, "1e-4", "add_remove", None)
    out["sgd_basic"] = float(admit(basic, initial_state(basic), sgd).charge.to_json()["epsilon"])
    out["sgd_rdp_mode"] = _smallest_rdp_budget(sgd, 1e-5)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 10000
    )
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(event)
    out["sgd_dpa_rdp"] = acc.get_epsilon(1e-5)
    pacc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pacc.compose(event)
    out["sgd_dpa_pld"] = pacc.get_epsilon(1e-5)

    # k Gaussian queries (σ = 20, Δ = 1) under (ε = 1, δ = 1e-6)
    g = parse_declaration({"type": "gaussian", "sigma": "20", "sensitivity": 1})
    counts = {
        "basic": _count_admitted(make_config(1, "1e-6", "add_remove", None), g),
        "zcdp": _count_admitted(make_config(1, "1e-6", "add_remove", {"mode": "zcdp"}), g),
        "rdp": _count_admitted(make_config(1, "1e-6", "add_remove", {"mode": "rdp"}), g),
        "gdp": _count_admitted(make_config(1, "1e-6", "add_remove", {"mode": "gdp"}), g),
    }

    def gauss_event(k: int) -> Any:
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(20.0), k)

    counts["dp_accounting RDP (fixed k)"] = _dp_accounting_rdp_count(gauss_event, 1.0, 1e-6)
    counts["dp_accounting PLD (fixed k)"] = _dp_accounting_pld_count(gauss_event, 1.0, 1e-6)
    out["gauss_counts"] = counts

    # SVT (ε₁ = 0.1, ε₂ = 0.4, c = 4) where every run ends with one ⊤ answer, budget ε = 1
    svt = parse_declaration({"type": "svt", "epsilon1": "0.1", "epsilon2": "0.4", "c": 4})
    svt_counts = {
        "basic + ODP settle (tops=1)": _count_admitted(
            make_config(3, "1e-6", "add_remove", None), svt, cell="tops=1"
        ),
        "basic, never settled (worst case)": _count_admitted(
            make_config(3, "1e-6", "add_remove", None), svt
        ),
        "zcdp (worst case)": _count_admitted(
            make_config(3, "1e-6", "add_remove", {"mode": "zcdp"}), svt
        ),
        "rdp (worst case)": _count_admitted(
            make_config(3, "1e-6", "add_remove", {"mode": "rdp"}), svt
        ),
    }
    # fixed-k RDP composition of the worst case (pure ε = 0.5, randomized-response curve),
    # converted by dp_accounting's compute_epsilon: what a non-adaptive RDP accountant allows
    orders = np.asarray(rdp_acc.DEFAULT_RDP_ORDERS, dtype=np.float64)
    rr = pure_dp_rdp(0.5, orders)
    k = 0
    while rdp_acc.compute_epsilon(orders, rr * (k + 1), 1e-6)[0] <= 3.0:
        k += 1
    svt_counts["RDP composition of the worst case, fixed k (dp_accounting conversion)"] = k
    out["svt_counts"] = svt_counts
    return out


# ---------------------------------------------------------------------------- report
_POWERS = {1000: "10³", 100_000: "10⁵"}


def render(
    lat: list[dict[str | int, Any]],
    speed: dict[str, Any],
    tight: dict[str, Any],
    command: str = "python -m benchmarks accounting",
    calls: int = 3000,
) -> str:
    sizes = [k for k in lat[0] if isinstance(k, int)]
    lines = [
        BEGIN,
        "## Accounting core",
        "",
        f"Run {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"numpy {np.__version__}, dp-accounting {package_version('dp_accounting')}. "
        f"Command: `{command}` (or `make bench-accounting`).",
        "",
        "### Median `admit()` time (µs) by history length",
        "",
        f"Each cell: median of {calls:,} calls on a state that has already absorbed N "
        "invocations. "
        "Targets: ≤ 50 µs basic/zcdp/gdp, ≤ 200 µs rdp (|Λ| = 16).",
        "",
        "| mode | " + " | ".join(f"N = {_POWERS.get(n, n)}" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for row in lat:
        lines.append(f"| {row['mode']} | " + " | ".join(f"{row[n]:.1f}" for n in sizes) + " |")
    lines += [
        "",
        "### Poisson-subsampled Gaussian RDP over dp_accounting's default orders",
        "",
        "| q | σ | ours (µs) | dp_accounting RdpAccountant (µs) | speed-up "
        "| max rel. diff (raw) | max rel. diff where RDP > 1e-6 | ours ≥ reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in speed["cases"]:
        lines.append(
            f"| {r['q']:.6g} | {r['sigma']} | {r['ours_median_s'] * 1e6:.0f} "
            f"| {r['dp_accounting_median_s'] * 1e6:.0f} | {r['speedup']:.1f}× "
            f"| {r['max_rel_diff_raw']:.1e} "
            f"| {r['max_rel_diff_postprocessed_where_rdp_gt_1e-6']:.1e} "
            f"| {r['ours_never_below_postprocessed']} |"
        )
    lines += [
        "",
        "Raw differences of ~1e-6 near α = 1 are dp_accounting's truncated fractional-order "
        "series (it drops the tail; ours adds a proven bound on it), see "
        "`core/odometer_core/accounting/subsampling.py`.",
    ]
    lines += [
        "",
        "### Tightness",
        "",
        "DP-SGD, q = 0.01, σ = 1.1, T = 10⁴, δ = 1e-5 (ε charged):",
        "",
        "| accountant | ε |",
        "|---|---|",
        f"| `basic` mode (PLD, pessimistic, charge) | {tight['sgd_basic']:.6f} |",
        f"| `rdp` mode (smallest ε_B admitting the run, 16-order grid, δ split) "
        f"| {tight['sgd_rdp_mode']:.4f} |",
        "| `zcdp` / `gdp` modes | rejected (subsampling has no certified ρ / μ) |",
        f"| dp_accounting RDP (156 orders, fixed schedule) | {tight['sgd_dpa_rdp']:.6f} |",
        f"| dp_accounting PLD (1e-4, fixed schedule) | {tight['sgd_dpa_pld']:.6f} |",
        "",
        f"`basic` charge / PLD = {tight['sgd_basic'] / tight['sgd_dpa_pld']:.5f} "
        "(target within 0.5 %, never below).",
        "",
        "Gaussian queries (σ = 20, Δ = 1) admitted under (ε = 1, δ = 1e-6):",
        "",
        "| accountant | queries |",
        "|---|---|",
    ]
    for k, v in tight["gauss_counts"].items():
        lines.append(f"| {k} | {v} |")
    lines += [
        "",
        "The dp_accounting rows compose a fixed, pre-declared number of queries (no filter); "
        "the modes are fully adaptive filters. `basic` is limited by δ: each Gaussian spends "
        "its conversion δ (default δ_B/10).",
        "",
        "SVT (ε₁ = 0.1, ε₂ = 0.4, c = 4), each run releasing one ⊤, budget (ε = 3, δ = 1e-6):",
        "",
        "| accountant | SVT runs admitted |",
        "|---|---|",
    ]
    for k, v in tight["svt_counts"].items():
        lines.append(f"| {k} | {v} |")
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="short histories, few calls: seconds (smoke)"
    )
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args(argv)
    calls = 300 if args.quick else 3000
    lat = admission_latency((0, 100) if args.quick else (0, 1000, 100_000), calls)
    speed = rdp_speed.run(repeats=5, reference_repeats=1) if args.quick else rdp_speed.run()
    tight = tightness()
    command = "python -m benchmarks accounting" + (" --quick" if args.quick else "")
    text = render(lat, speed, tight, command, calls)
    if not args.no_results:
        raw = Path(__file__).with_name("accounting.json")
        raw.write_text(
            json.dumps({"latency": lat, "mtz": speed, "tightness": tight}, indent=1, default=str)
        )
        write_section(text, RESULTS)
    print(text)
    ok = math.isfinite(tight["sgd_basic"]) and tight["sgd_basic"] >= tight["sgd_dpa_pld"] * 0.99999
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
