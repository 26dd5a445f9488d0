"""What ``rdp`` mode admits with its order grids, against dp_accounting's non-adaptive RDP and PLD.

For each workload of the table (one declaration repeated until the filter refuses it), the
count the ``rdp`` filter admits with the old default (equal weights on the 16 default orders),
the new default weights, and the grid chosen for the workload declared at creation; beside it
the largest count dp_accounting's non-adaptive RDP accountant (its default orders) and PLD
accountant allow at the same (ε_B, δ_B). Also the time of a heterogeneous DP-SGD run declared as
one ``composed`` invocation of 100 segments, charged in ``basic`` mode (PLD), and its ε beside
dp_accounting's PLD for the same schedule; and the steps a Gaussian sampled without replacement
gets with each of the two without-replacement bounds.

Run from the repository root:

    .venv/bin/python -m benchmarks grids          # or: make bench-grids

Writes the section between the ``grids`` markers of ``benchmarks/RESULTS.md`` and prints it
(``--no-results``: print only; ``--quick``: three workloads, seconds).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import dp_accounting
from dp_accounting import dp_event

from benchmarks.accounting import largest_fitting
from benchmarks.results import package_version, write_section
from odometer_core.accounting import (
    ConfigError,
    admit,
    initial_state,
    make_config,
    parse_declaration,
)
from odometer_core.accounting.modes import rdp

BEGIN, END = "<!-- grids:begin -->", "<!-- grids:end -->"
DELTA = "0.000001"
OLD_DEFAULT: dict[str, Any] = {
    "mode": "rdp",
    "orders": list(rdp.DEFAULT_RDP_ORDERS),
    "weights": ["0.0625"] * 16,
}


@dataclass(frozen=True)
class Workload:
    name: str
    epsilon: str
    mechanism: dict[str, Any]
    event: Any  # the dp_accounting event of one invocation
    unit: int = 1  # steps per invocation (DP-SGD chunks), to report counts in steps


def _sgd(q: str, sigma: str, steps: int) -> dict[str, Any]:
    return {"type": "dp_sgd", "sample_rate": q, "noise_multiplier": sigma, "steps": steps}


def _sgd_event(q: str, sigma: str, steps: int) -> Any:
    return dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(float(q), dp_event.GaussianDpEvent(float(sigma))), steps
    )


def _sgd_chunks(q: str, sigma: str, steps: int, epsilon: str) -> Workload:
    """Chunks of ``steps`` DP-SGD steps under ε_B = ``epsilon``, counted in steps."""
    name = f"DP-SGD q={q} σ={sigma}, {steps}-step chunks"
    return Workload(name, epsilon, _sgd(q, sigma, steps), _sgd_event(q, sigma, steps), steps)


def _gauss(sigma: str) -> dict[str, Any]:
    return {"type": "gaussian", "sigma": sigma, "sensitivity": "1"}


def _laplace(scale: str) -> dict[str, Any]:
    return {"type": "laplace", "scale": scale, "sensitivity": "1"}


_MIXED = {"type": "composed", "mechanisms": [_gauss("20"), _gauss("20"), _laplace("50")]}
_MIXED_EVENT = dp_event.ComposedDpEvent(
    [dp_event.GaussianDpEvent(20.0)] * 2 + [dp_event.LaplaceDpEvent(50.0)]
)

WORKLOADS = [
    _sgd_chunks("0.01", "1", 100, "3"),
    _sgd_chunks("0.001", "1.1", 100, "1"),
    _sgd_chunks("0.05", "2", 10, "8"),
    _sgd_chunks("0.004", "4", 1000, "1"),
    Workload("Gaussian σ=20", "1", _gauss("20"), dp_event.GaussianDpEvent(20.0)),
    Workload("Gaussian σ=30", "8", _gauss("30"), dp_event.GaussianDpEvent(30.0)),
    Workload("Laplace b=10 (ε=0.1 each)", "1", _laplace("10"), dp_event.LaplaceDpEvent(10.0)),
    Workload("Laplace b=100 (ε=0.01 each)", "1", _laplace("100"), dp_event.LaplaceDpEvent(100.0)),
    Workload("mixed: 2 Gaussians σ=20 + Laplace b=50", "2", _MIXED, _MIXED_EVENT),
]


def _filter_count(eps: str, accounting: dict[str, Any], mechanism: dict[str, Any]) -> int:
    cfg = make_config(eps, DELTA, "add_remove", accounting)
    decl = parse_declaration(mechanism)
    state, n = initial_state(cfg), 0
    while (d := admit(cfg, state, decl)).admitted:
        state, n = d.state, n + 1
    return n


def chunk_fill(accounting: dict[str, Any]) -> int:
    """The DP-SGD chunk case step for step: 100-step chunks (q = 0.01, σ = 1) until one is
    refused, then single steps, under (3, 1e-6); the steps admitted."""
    chunk = WORKLOADS[0].mechanism
    cfg = make_config("3", DELTA, "add_remove", accounting)
    state, steps = initial_state(cfg), 0
    for mechanism in (chunk, {**chunk, "steps": 1}):
        decl = parse_declaration(mechanism)
        while (d := admit(cfg, state, decl)).admitted:
            state, steps = d.state, steps + int(mechanism["steps"])
    return steps


def _dpa_count(event: Any, eps: float, *, pld: bool) -> int:
    def fits(k: int) -> bool:
        acc: Any = (
            dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
            if pld
            else dp_accounting.rdp.RdpAccountant()
        )
        acc.compose(event, k)
        return bool(acc.get_epsilon(float(DELTA)) <= eps)

    return largest_fitting(fits)


def table(workloads: list[Workload] = WORKLOADS) -> list[dict[str, Any]]:
    rows = []
    for w in workloads:
        t0 = time.process_time()
        chosen = make_config(
            w.epsilon,
            DELTA,
            "add_remove",
            {"mode": "rdp", "workload": [{"mechanism": w.mechanism, "count": 10**6}]},
        )
        choose_s = time.process_time() - t0
        assert isinstance(chosen, rdp.RDPConfig) and chosen.workload is not None
        workload_acc = {
            "mode": "rdp",
            "orders": [repr(a) for a in chosen.orders],
            "weights": [repr(x) for x in chosen.weights],
        }
        rows.append(
            {
                "name": w.name,
                "epsilon": w.epsilon,
                "unit": w.unit,
                "old_default": _filter_count(w.epsilon, OLD_DEFAULT, w.mechanism),
                "default": _filter_count(w.epsilon, {"mode": "rdp"}, w.mechanism),
                "workload": _filter_count(w.epsilon, workload_acc, w.mechanism),
                "order": chosen.workload.order,
                "choose_s": choose_s,
                "rdp": _dpa_count(w.event, float(w.epsilon), pld=False),
                "pld": _dpa_count(w.event, float(w.epsilon), pld=True),
            }
        )
    return rows


def segments(n: int = 100) -> list[dict[str, Any]]:
    """A heterogeneous DP-SGD run as one ``composed`` invocation of ``n`` segments (the same
    schedule as ``benchmarks/worst_case.py``)."""
    return [
        {
            "type": "dp_sgd",
            "noise_multiplier": f"{0.8 + 0.01 * i:.2f}",
            "sample_rate": f"{0.001 + 0.0001 * i:.4f}",
            "steps": 100 + 10 * i,
        }
        for i in range(n)
    ]


def composed_run(n: int = 100) -> dict[str, Any]:
    """CPU time of the ``basic``-mode charge of the ``n``-segment run, and the ε it charges beside
    dp_accounting's PLD ε at the same conversion δ."""
    segs = segments(n)
    decl = parse_declaration({"type": "composed", "mechanisms": segs})
    cfg = make_config("1000", "0.0001", "add_remove", {"mode": "basic"})
    t0 = time.process_time()
    d = admit(cfg, initial_state(cfg), decl)
    seconds = time.process_time() - t0
    ours = Decimal(d.charge.to_json()["epsilon"])
    acc = dp_accounting.pld.PLDAccountant()
    for s in segs:
        acc.compose(
            dp_event.PoissonSampledDpEvent(
                float(s["sample_rate"]), dp_event.GaussianDpEvent(float(s["noise_multiplier"]))
            ),
            s["steps"],
        )
    dpa = acc.get_epsilon(1e-5)
    return {"segments": n, "seconds": seconds, "ours": ours, "dpa": dpa, "delta": "1e-5"}


def _heavy_workload(items: int, segments_per_item: int = 256) -> list[dict[str, Any]]:
    """The costliest kind of workload a request can describe: ``items`` ``composed``
    declarations of distinct subsampled-Gaussian segments (every curve computed afresh on the
    candidate orders; the rates differ from one table row to the next, so nothing is cached)."""

    def rate(i: int, k: int) -> str:
        return f"{0.002 + 1e-4 * segments_per_item + 1e-6 * (i + k * segments_per_item):.6f}"

    return [
        {
            "mechanism": {
                "type": "composed",
                "mechanisms": [
                    _sgd(rate(i, k), f"{0.6 + 0.001 * i:.3f}", 10) for i in range(segments_per_item)
                ],
            },
            "count": 1,
        }
        for k in range(items)
    ]


def worst_choice() -> list[tuple[str, float, str]]:
    """CPU time of the choice for the costliest workloads (refused past the work limit)."""
    out = []
    for items, per in ((1, 5), (1, 10), (1, 20), (8, 256)):
        t0 = time.process_time()
        try:
            make_config(
                "3", DELTA, "add_remove", {"mode": "rdp", "workload": _heavy_workload(items, per)}
            )
            outcome = "chosen"
        except ConfigError:
            outcome = "422 (work limit)"
        out.append(
            (
                f"{items} × composed of {per} distinct DP-SGD segments",
                time.process_time() - t0,
                outcome,
            )
        )
    return out


#: Without-replacement Gaussian chunks (m = 1,000 of n = 100,000, replace-one): (σ, steps per
#: chunk, ε_B). One chunk is a ``composed`` invocation of that many steps.
WOR_CASES: tuple[tuple[str, int, str], ...] = (
    ("1", 10, "3"),
    ("2", 100, "3"),
    ("4", 100, "1"),
    ("8", 1000, "1"),
)


def _wor_chunk(sigma: str, steps: int) -> dict[str, Any]:
    step = {
        "type": "subsampled",
        "scheme": "without_replacement",
        "m": 1000,
        "n": 100_000,
        "mechanism": {"type": "gaussian", "sigma": sigma, "sensitivity": "1"},
    }
    return {"type": "composed", "mechanism": step, "count": steps}


def _wor_filter_count(eps: str, bound: str, mechanism: dict[str, Any]) -> tuple[int, float]:
    """Chunks admitted by a default ``rdp`` dataset charging ``bound``, and the CPU seconds of
    the first charge (the curve; later charges are cached)."""
    cfg = make_config(eps, DELTA, "replace_one", {"mode": "rdp", "wor_bound": bound})
    decl = parse_declaration(mechanism)
    state, n = initial_state(cfg), 0
    t0 = time.process_time()
    first: float | None = None
    while (d := admit(cfg, state, decl)).admitted:
        if first is None:
            first = time.process_time() - t0
        state, n = d.state, n + 1
    return n, first or 0.0


def _rdp_steps(event: Any, eps: str, chunk: int, *, replace_one: bool) -> int:
    """The most steps (whole chunks) dp_accounting's non-adaptive RdpAccountant allows.

    The event's curve is computed once: ``compose(event, count)`` adds ``count`` times that
    curve to the accountant's zeros, which is what each trial adds here (the same array
    operations, so the same ε to the last bit), instead of computing the curve again for every
    count the search tries."""
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if replace_one
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    unit = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    unit.compose(event, 1)
    curve = unit._rdp.copy()

    def fits(k: int) -> bool:
        acc = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
        acc._rdp += (k * chunk) * curve
        return bool(acc.get_epsilon(float(DELTA)) <= float(eps))

    return largest_fitting(fits) * chunk


def wor_table(cases: tuple[tuple[str, int, str], ...] = WOR_CASES) -> list[dict[str, Any]]:
    """Steps admitted with each without-replacement bound; beside them dp_accounting's
    non-adaptive RDP (WBK19 Thm 27) and the ceiling no sound RDP account can pass: the
    non-adaptive count of the Poisson-subsampled Gaussian at the same rate, whose divergence
    two neighbouring datasets attain under sampling without replacement
    (``tests/accounting/test_fswor.py``)."""
    rows = []
    for sigma, steps, eps in cases:
        chunk = _wor_chunk(sigma, steps)
        old, old_s = _wor_filter_count(eps, rdp.WOR_WBK19, chunk)
        new, new_s = _wor_filter_count(eps, rdp.WOR_TIGHT, chunk)
        wor_event = dp_event.SampledWithoutReplacementDpEvent(
            100_000, 1000, dp_event.GaussianDpEvent(float(sigma))
        )
        poisson_event = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(float(sigma)))
        rows.append(
            {
                "sigma": sigma,
                "eps": eps,
                "steps": steps,
                "old": old * steps,
                "new": new * steps,
                "old_s": old_s,
                "new_s": new_s,
                "wbk": _rdp_steps(wor_event, eps, steps, replace_one=True),
                "poisson": _rdp_steps(poisson_event, eps, steps, replace_one=False),
            }
        )
    return rows


def render(
    rows: list[dict[str, Any]],
    run: dict[str, Any],
    started: str,
    load: str,
    worst: list[tuple[str, float, str]],
    fill: dict[str, int],
    wor: list[dict[str, Any]],
    command: str = "python -m benchmarks grids",
) -> str:
    lines = [
        BEGIN,
        "## `rdp` order grids: default and workload-aware",
        "",
        f"Run {started} on {platform.machine()}, {os.cpu_count()} cores, load average at start "
        f"{load}; Python {platform.python_version()}, dp-accounting "
        f"{package_version('dp_accounting')}. Command: `{command}`.",
        "",
        "Each workload is one declaration repeated until refused, δ_B = 1e-6 (all of it to the",
        "final conversion). Counts are invocations (× steps per chunk for DP-SGD). *old default*:",
        "equal weights on the 16 default orders (datasets created before); *default*: the new",
        "default weights; *workload*: the grid chosen for the workload declared at creation",
        "(chosen order α*, CPU time of the choice). *RDP* and *PLD*: the largest count",
        "dp_accounting's non-adaptive RdpAccountant (its default orders) and PLDAccountant",
        "(interval 1e-4) allow at the same (ε_B, δ_B): no filter may beat PLD's count.",
        "",
        "| workload | ε_B | old default | default | workload (α*, s) | RDP | PLD |",
        "|---|---|---|---|---|---|---|",
    ]
    n = run["segments"]
    for r in rows:
        u = r["unit"]

        def c(n: int, u: int = u) -> str:
            return f"{n * u:,}"

        lines.append(
            f"| {r['name']} | {r['epsilon']} | {c(r['old_default'])} | {c(r['default'])} | "
            f"{c(r['workload'])} ({r['order']:g}, {r['choose_s']:.2f}) | {c(r['rdp'])} | "
            f"{c(r['pld'])} |"
        )
    lines += [
        "",
        "The first row counts whole chunks; filling the rest with single steps admits "
        f"{fill['old']:,} steps with the old default, {fill['default']:,} with the default "
        f"and {fill['workload']:,} with the workload grid (`tests/accounting/test_rdp_grids.py`).",
        "",
        f"Heterogeneous DP-SGD run, one `composed` invocation of {n} segments (q 0.001–"
        f"{0.001 + 0.0001 * (n - 1):.4f}, σ 0.80–{0.8 + 0.01 * (n - 1):.2f}, 100–"
        f"{100 + 10 * (n - 1):,} steps), charged in `basic` mode: {run['seconds']:.2f} s of CPU, "
        f"ε = {run['ours']:.6f} at δ = {run['delta']}; dp_accounting's PLDAccountant for the "
        f"same schedule: ε = {run['dpa']:.6f} (ours is never below it; "
        "`tests/accounting/test_composed_pld.py`).",
        "",
        "CPU time of choosing a grid for the costliest workloads a request can describe:",
        "",
        "| workload | CPU s | outcome |",
        "|---|---|---|",
        *[f"| {name} | {sec:.2f} | {outcome} |" for name, sec, outcome in worst],
        "",
        "Gaussian on a sample of m = 1,000 of n = 100,000 drawn without replacement (replace-one),",
        "steps admitted by a default `rdp` dataset, declared in chunks (one `composed`",
        "invocation each, then refused): *WBK19* charges by Wang–Balle–Kasiviswanathan 2019",
        "Thm 27 alone (datasets created before accounting 1.3.0), *default* by the smaller of it",
        "and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 per order (CPU s of the first",
        "charge, the curve). Beside them dp_accounting's non-adaptive RDP for the same sampling",
        "(WBK19), and the ceiling no sound RDP account passes: the non-adaptive RDP count of the",
        "Poisson-subsampled Gaussian at rate 0.01, whose divergence two neighbouring datasets",
        "attain under this sampling (`docs/accounting.md`, *Without-replacement Gaussian*).",
        "",
        "| σ | ε_B | chunk | WBK19 (s) | default (s) | dp_accounting RDP (WBK19) | ceiling |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {r['sigma']} | {r['eps']} | {r['steps']:,} | {r['old']:,} ({r['old_s']:.2f}) | "
            f"{r['new']:,} ({r['new_s']:.2f}) | {r['wbk']:,} | {r['poisson']:,} |"
            for r in wor
        ],
        END,
    ]
    return "\n".join(lines)


#: ``--quick``: the workloads whose counts take well under a second (Gaussian σ = 20 and both
#: Laplace rows), a 10-segment composed run and the first without-replacement case.
QUICK_WORKLOADS = [WORKLOADS[4], WORKLOADS[6], WORKLOADS[7]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="three workloads, seconds (smoke)")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = table(QUICK_WORKLOADS if args.quick else WORKLOADS)
    run = composed_run(10 if args.quick else 100)
    worst = worst_choice()
    workload = {"mode": "rdp", "workload": [{"mechanism": WORKLOADS[0].mechanism, "count": 20}]}
    fill = {
        "old": chunk_fill(OLD_DEFAULT),
        "default": chunk_fill({"mode": "rdp"}),
        "workload": chunk_fill(workload),
    }
    wor = wor_table(WOR_CASES[:1] if args.quick else WOR_CASES)
    command = "python -m benchmarks grids" + (" --quick" if args.quick else "")
    text = render(rows, run, started, load, worst, fill, wor, command)
    if not args.no_results:
        write_section(text)
    print(text)
    ok = all(r["workload"] <= r["pld"] and r["default"] <= r["pld"] for r in rows)
    ok = ok and all(r["old"] <= r["new"] <= r["poisson"] for r in wor)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
