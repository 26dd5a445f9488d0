"""What a user of the client pays to import it: ``import odometer_client`` in a fresh virtual
environment holding only the client's wheel and its dependencies (built offline from this
source tree), in wall time and modules loaded, beside the same import in the development
environment (every distribution installed). With ``--compare REV``, also ``import app.client``
of an older revision (the client inside the server's package) in the development environment.

    python -m benchmarks.client_import [--runs 9] [--compare 7986f99]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.results import commit_of, write_section
from tests.client.wheelhouse import ROOT, fresh_venv, installed, pip_install, wheelhouse

PROBE = (
    "import sys, time, json\n"
    "t = time.perf_counter()\n"
    "import {module}\n"
    "elapsed = time.perf_counter() - t\n"
    "print(json.dumps({{'s': elapsed, 'modules': len(sys.modules), "
    "'numpy': 'numpy' in sys.modules}}))\n"
)


def measure(
    python: Path, module: str, runs: int, cwd: Path, isolated: bool = True
) -> dict[str, float]:
    """Median and min wall seconds of the import over ``runs`` fresh interpreters."""
    results = []
    for _ in range(runs):
        args = [str(python), *(["-I"] if isolated else []), "-c", PROBE.format(module=module)]
        out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=cwd).stdout
        results.append(json.loads(out))
    seconds = [r["s"] for r in results]
    return {
        "median_ms": 1000 * statistics.median(seconds),
        "min_ms": 1000 * min(seconds),
        "modules": results[0]["modules"],
        "numpy": results[0]["numpy"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--compare", help="an older revision whose app.client to time too")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows: list[tuple[str, dict[str, float], str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        house = wheelhouse(["privacy-odometer-client"], work / "wheels")
        python = fresh_venv(work / "venv")
        pip_install(python, house, "privacy-odometer-client")
        env_size = len(installed(python))
        rows.append(
            (
                "`import odometer_client`, fresh venv (client wheel + httpx only)",
                measure(python, "odometer_client", args.runs, work),
                f"{env_size} distributions installed",
            )
        )
        rows.append(
            (
                "`import odometer_client`, development venv (all three distributions)",
                measure(Path(sys.executable), "odometer_client", args.runs, work),
                "",
            )
        )
        if args.compare:
            old = work / "old"
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(ROOT),
                    "worktree",
                    "add",
                    "-q",
                    "--detach",
                    str(old),
                    args.compare,
                ],
                check=True,
            )
            try:
                rows.append(
                    (
                        f"`import app.client` at {args.compare} (client inside the server)",
                        measure(Path(sys.executable), "app.client", args.runs, old, isolated=False),
                        "development venv",
                    )
                )
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True
                )
    lines = [
        "<!-- client-import:begin -->",
        "## Client import cost",
        "",
        f"`python -m benchmarks.client_import --runs {args.runs}"
        + (f" --compare {args.compare}`" if args.compare else "`")
        + f" at {commit_of(ROOT)}; wall time of the import in a new interpreter each run; "
        f"load average before the run {load[0]:.2f} ({os.cpu_count()} cores).",
        "",
        "| what | median | min | modules loaded | numpy loaded | note |",
        "|---|---|---|---|---|---|",
    ]
    for name, r, note in rows:
        lines.append(
            f"| {name} | {r['median_ms']:.0f} ms | {r['min_ms']:.0f} ms | {r['modules']:.0f} "
            f"| {'yes' if r['numpy'] else 'no'} | {note} |"
        )
    lines.append("<!-- client-import:end -->")
    write_section("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
