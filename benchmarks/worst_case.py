"""Worst-case admission decisions: CPU time of one ``admit()`` on adversarial declarations.

Each case is one valid-looking declaration the API accepts (the smallest σ, rates near 1, huge
step counts, many composed segments, the most expensive RDP grid a curator can configure),
decided on a fresh dataset of the given mode, in a subprocess of its own with a wall-clock cap
(``--cap`` seconds, default 20): a case still running at the cap is killed and reported as
"> cap". The figure is the subprocess's CPU time (user + system) for the decision alone,
measured with ``resource.getrusage`` around the call, after the accounting core and dp_accounting
are imported.

``--before DIR`` runs every case a second time against another checkout of this repository (a
``git worktree`` of an earlier commit), in the same run, case by case, so the two columns are
measured under the same machine load:

    git worktree add ../before fec6aa8~1
    .venv/bin/python -m benchmarks worst-case --before ../before   # → benchmarks/RESULTS.md
    .venv/bin/python -m benchmarks worst-case --cap 5 --no-write    # a quicker look
    .venv/bin/python -m benchmarks worst-case --case gdp --no-write # one case (smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results import checkout_path, commit_of, has_core, write_section

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- worst-case: begin -->"
END = "<!-- worst-case: end -->"

#: The most expensive grid a curator can configure: 64 orders, 63 of them fractional.
RDP_64 = {"mode": "rdp", "orders": [f"{1 + 0.015625 * (i + 1):.6f}" for i in range(63)] + ["64"]}


@dataclass(frozen=True)
class Case:
    name: str
    mode: str
    mechanism: dict[str, Any]
    accounting: dict[str, Any] | None = None
    relation: str = "add_remove"


def _dp_sgd_segments(n: int, sigma: float = 0.8, steps: int = 100) -> dict[str, Any]:
    """A heterogeneous DP-SGD run declared as one ``composed`` invocation of ``n`` segments."""
    return {
        "type": "composed",
        "mechanisms": [
            {
                "type": "dp_sgd",
                "noise_multiplier": f"{sigma + 0.01 * i:.2f}",
                "sample_rate": f"{0.001 + 0.0001 * i:.4f}",
                "steps": steps + 10 * i,
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


def _dp_sgd(q: str, sigma: str, steps: int) -> dict[str, Any]:
    return {"type": "dp_sgd", "noise_multiplier": sigma, "sample_rate": q, "steps": steps}


_GAUSSIAN_1E7 = {
    "type": "composed",
    "count": 10**7,
    "mechanism": {"type": "gaussian", "sigma": "1", "sensitivity": "1"},
}
_RDP_NEAR_1 = {"type": "rdp", "orders": ["1.0000001", "1000000"], "values": ["1e-300", "1000000"]}
_SVT = {"type": "svt", "epsilon1": "0.001", "epsilon2": "0.001", "c": 1023}
_Q1, _Q99 = "0.999999", "0.99"

_WOR = {
    "type": "subsampled",
    "scheme": "without_replacement",
    "m": 999999999999,
    "n": 1000000000000,
    "mechanism": {"type": "gaussian", "sigma": "0.001", "sensitivity": "1"},
}

CASES: tuple[Case, ...] = (
    Case("dp_sgd q=0.5 σ=0.5 10^6 steps", "basic", _dp_sgd("0.5", "0.5", 10**6)),
    Case("dp_sgd q=0.5 σ=0.5 10^7 steps", "basic", _dp_sgd("0.5", "0.5", 10**7)),
    Case("dp_sgd q=1-1e-6 σ=1e12 10^7 steps", "basic", _dp_sgd("0.999999", "1000000000000", 10**7)),
    Case("dp_sgd q=0.01 σ=1 10^7 steps", "basic", _dp_sgd("0.01", "1", 10**7)),
    Case("dp_sgd q=0.5 σ=1 10^4 steps", "basic", _dp_sgd("0.5", "1", 10**4)),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-3", "basic", _subsampled_gaussian("0.999999", "0.001")),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-300", "basic", _subsampled_gaussian(_Q1, "1e-300")),
    Case("subsampled Gaussian q=0.99 σ=0.01", "basic", _subsampled_gaussian("0.99", "0.01")),
    Case("subsampled Gaussian q=0.9 σ=0.05", "basic", _subsampled_gaussian("0.9", "0.05")),
    Case("subsampled Gaussian q=1e-300 σ=0.01", "basic", _subsampled_gaussian("1e-300", "0.01")),
    Case("subsampled without replacement σ=1e-3", "basic", _WOR, relation="replace_one"),
    Case("composed Gaussian σ=1 × 10^7", "basic", _GAUSSIAN_1E7),
    Case("composed DP-SGD, 100 segments", "basic", _dp_sgd_segments(100)),
    Case("composed DP-SGD, 256 segments σ≈0.5", "basic", _dp_sgd_segments(256, 0.5, 10**6)),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-3", "rdp", _subsampled_gaussian("0.999999", "0.001")),
    Case("subsampled Gaussian q=1-1e-6 σ=1e-300", "rdp", _subsampled_gaussian(_Q1, "1e-300")),
    Case("dp_sgd q=0.5 σ=0.5 10^6 steps", "rdp", _dp_sgd("0.5", "0.5", 10**6)),
    Case("subsampled without replacement σ=1e-3", "rdp", _WOR, relation="replace_one"),
    Case("composed DP-SGD, 100 segments", "rdp", _dp_sgd_segments(100)),
    Case("composed DP-SGD, 256 segments σ≈0.5", "rdp", _dp_sgd_segments(256, 0.5, 10**6)),
    Case(
        "composed DP-SGD, 256 segments σ≈0.5",
        "rdp, 64 orders",
        _dp_sgd_segments(256, 0.5, 10**6),
        RDP_64,
    ),
    Case("rdp curve, orders near 1", "zcdp", _RDP_NEAR_1),
    Case("svt c=1023", "basic", _SVT),
    Case("gdp μ=10^6", "gdp", {"type": "gdp", "mu": "1000000"}),
)

#: Decides one case in the subprocess (run as a script, so that it can serve another checkout).
RUNNER = Path(__file__).with_name("worst_case_runner.py")


def run_case(case: Case, cap: float, root: Path = ROOT) -> tuple[float | None, str]:
    """(CPU seconds, outcome) of one decision with the code at ``root``, or (None, "killed").

    The accounting is imported from ``root`` itself: its ``core`` distribution where it has one,
    else (a checkout from before the core was split out) its ``app.accounting``; the subprocess
    refuses to run with any other copy, such as the one installed in the environment."""
    accounting = case.accounting or {"mode": case.mode}
    arg = json.dumps([case.mode, case.relation, accounting, case.mechanism])
    package = "odometer_core.accounting" if has_core(root) else "app.accounting"
    env = {**os.environ, "PYTHONPATH": checkout_path(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-P", str(RUNNER), arg, package, str(root)],
            capture_output=True,
            text=True,
            timeout=cap,
            env=env,
            cwd=root,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, "killed"
    if done.returncode != 0:
        return None, f"crashed: {done.stderr.strip().splitlines()[-1][:80]}"
    cpu, outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return float(cpu), str(outcome)


def _shown(cpu: float | None, outcome: str, cap: float) -> str:
    if cpu is None:
        return f"> {cap:g} ({outcome})" if outcome == "killed" else outcome
    return f"{cpu:.2f} ({outcome})"


def render(
    rows: list[tuple[Case, tuple[float | None, str], tuple[float | None, str] | None]],
    cap: float,
    before: str | None,
) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    command = "`.venv/bin/python -m benchmarks worst-case"
    command += f" --cap {cap:g}" + (" --before BEFORE`" if before else "`")
    lines = [
        BEGIN,
        "## Worst-case admission decisions",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores, load average at start {load}; Python "
        f"{platform.python_version()}. Command: {command}. One `admit()` per case on a fresh "
        "dataset (ε = 10, δ = 1e-5), in a subprocess killed at the cap; CPU seconds of the "
        "decision alone (imports excluded), and its outcome (422: refused as a request)."
        + (
            f" *Before* is the same case decided by `BEFORE`, a worktree of {before} (the "
            "accounting before bounded work), measured in the same run, case after case."
            if before
            else ""
        ),
        "",
        "| declaration | mode | before: CPU s (outcome) | after: CPU s (outcome) |"
        if before
        else "| declaration | mode | CPU s (outcome) |",
        "|---|---|---|---|" if before else "|---|---|---|",
    ]
    for case, after, old in rows:
        cells = [case.name, case.mode]
        if old is not None:
            cells.append(_shown(*old, cap))
        cells.append(_shown(*after, cap))
        lines.append("| " + " | ".join(cells) + " |")
    worst = max((a[0] for _, a, _ in rows if a[0] is not None), default=0.0)
    lines += ["", f"Slowest decision now: {worst:.2f} s of CPU (target ≤ 1 s).", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=float, default=20.0, help="seconds before a case is killed")
    parser.add_argument("--before", help="a checkout of an earlier commit to compare with")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    parser.add_argument(
        "--case",
        metavar="TEXT",
        help="only the cases whose declaration or mode contains TEXT (a quicker look)",
    )
    args = parser.parse_args(argv)
    before = Path(args.before).resolve() if args.before else None
    rows = []
    cases = [c for c in CASES if not args.case or args.case in f"{c.name} {c.mode}"]
    for case in cases:
        old = run_case(case, args.cap, before) if before else None
        after = run_case(case, args.cap)
        print(f"{case.mode:6} {case.name}: before {old} after {after}", flush=True)
        rows.append((case, after, old))
    label = None
    if before is not None:
        sha = commit_of(before)
        label = f"commit {sha}" if sha else "an earlier commit"
    text = render(rows, args.cap, label)
    if not args.no_write:
        write_section(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
