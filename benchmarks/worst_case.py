"""Worst-case admission decisions: CPU time of one ``admit()`` on adversarial declarations.

Each case is one valid-looking declaration the API accepts (the smallest σ, rates near 1, huge
step counts, many composed segments) decided on a fresh dataset of the given mode, in a child
process of its own with a wall-clock cap (``--cap`` seconds, default 20): a case still running at
the cap is killed and reported as "> cap". The figure is the child's CPU time (user + system)
for the decision alone, measured with ``resource.getrusage`` around the call.

    .venv/bin/python -m benchmarks.worst_case            # all cases → benchmarks/RESULTS.md
    .venv/bin/python -m benchmarks.worst_case --cap 5    # a quicker look
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from benchmarks.results import write_section

BEGIN = "<!-- worst-case: begin -->"
END = "<!-- worst-case: end -->"


@dataclass(frozen=True)
class Case:
    name: str
    mode: str
    mechanism: dict[str, Any]


def _dp_sgd_segments(n: int) -> dict[str, Any]:
    """A heterogeneous DP-SGD run declared as one ``composed`` invocation of ``n`` segments."""
    return {
        "type": "composed",
        "mechanisms": [
            {
                "type": "dp_sgd",
                "noise_multiplier": f"{0.8 + 0.01 * i:.2f}",
                "sample_rate": f"{0.001 + 0.0001 * i:.4f}",
                "steps": 100 + 10 * i,
            }
            for i in range(n)
        ],
    }


def _subsampled_gaussian(rate: str, sigma: str) -> dict[str, Any]:
    return {
        "type": "subsampled",
        "scheme": "poisson",
        "rate": rate,
        "mechanism": {"type": "gaussian", "sigma": sigma, "sensitivity": "1"},
    }


CASES: tuple[Case, ...] = (
    Case(
        "dp_sgd q=0.5 σ=0.5 10^6 steps",
        "basic",
        {"type": "dp_sgd", "noise_multiplier": "0.5", "sample_rate": "0.5", "steps": 1000000},
    ),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-3", "basic", _subsampled_gaussian("0.999999", "0.001")),
    Case("subsampled Gaussian q=0.99 σ=0.01", "basic", _subsampled_gaussian("0.99", "0.01")),
    Case("subsampled Gaussian q=0.9 σ=0.05", "basic", _subsampled_gaussian("0.9", "0.05")),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-3", "rdp", _subsampled_gaussian("0.999999", "0.001")),
    Case(
        "dp_sgd q=0.5 σ=0.5 10^6 steps",
        "rdp",
        {"type": "dp_sgd", "noise_multiplier": "0.5", "sample_rate": "0.5", "steps": 1000000},
    ),
    Case("composed DP-SGD, 100 segments", "basic", _dp_sgd_segments(100)),
    Case("composed DP-SGD, 100 segments", "rdp", _dp_sgd_segments(100)),
)  # fmt: skip


def _decide(case: Case, out: Connection) -> None:
    from app.accounting import admit, initial_state, make_config, parse_declaration

    config = make_config(10, "1e-5", "add_remove", {"mode": case.mode})
    state = initial_state(config)
    declaration = parse_declaration(case.mechanism)
    before = resource.getrusage(resource.RUSAGE_SELF)
    decision = admit(config, state, declaration)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out.send((cpu, decision.outcome))


def run_case(case: Case, cap: float) -> tuple[float | None, str]:
    """(CPU seconds, outcome) of one decision, or (None, "killed") past ``cap`` seconds."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_decide, args=(case, send))
    child.start()
    ready = receive.poll(cap)
    if not ready:
        child.kill()
        child.join()
        return None, "killed"
    cpu, outcome = receive.recv()
    child.join()
    return float(cpu), str(outcome)


def render(rows: list[tuple[Case, float | None, str]], cap: float) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        BEGIN,
        "## Worst-case admission decisions",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores, load average at start {load}; Python "
        f"{platform.python_version()}. Command: `.venv/bin/python -m benchmarks.worst_case "
        f"--cap {cap:g}`. One `admit()` per case on a fresh dataset (ε = 10, δ = 1e-5), in a "
        "child process killed at the cap; CPU seconds of the decision alone.",
        "",
        "| declaration | mode | CPU (s) | outcome |",
        "|---|---|---|---|",
    ]
    for case, cpu, outcome in rows:
        shown = f"> {cap:g} (killed)" if cpu is None else f"{cpu:.2f}"
        lines.append(f"| {case.name} | {case.mode} | {shown} | {outcome} |")
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=float, default=20.0, help="seconds before a case is killed")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    rows = []
    for case in CASES:
        cpu, outcome = run_case(case, args.cap)
        print(f"{case.mode:6} {case.name}: {'killed' if cpu is None else f'{cpu:.2f} s'} {outcome}")
        rows.append((case, cpu, outcome))
    text = render(rows, args.cap)
    if not args.no_write:
        write_section(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
