"""The witness's cost on the write path, measured side by side in one run.

The service (uvicorn, 2 workers, group commit on) without a witness against the same service
with ``ODOMETER_WITNESS_DIR`` set (committed heads written to a directory by one writer per
process: a temporary file fsynced and renamed under a per-dataset ``flock``) at
``ODOMETER_WITNESS_LAG_SECONDS`` 0 (each answer waits for its heads) and 1 s, N clients
registering on one hot dataset each, the servers' cells interleaved on the same database.
Server CPU per registration is the two workers' user + system time over the measurement.
``--before DIR`` adds a fourth server: another checkout's build (``app`` and ``core``) with the
witness at its own default, e.g. the earlier synchronous witness (``git archive`` of a commit).

    .venv/bin/python -m benchmarks witness [--before DIR]

Writes the section of ``benchmarks/RESULTS.md`` between the ``witness`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results import commit_of, write_section
from benchmarks.service import MODES
from benchmarks.service_setup import (
    ADMIN_KEY,
    Server,
    create_dataset,
    loadavg,
    migrate,
    pg_drop,
    pg_recreate,
    run_load,
    running_server,
)

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- witness: begin -->"
END = "<!-- witness: end -->"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/odometer_witness_bench"


#: the systems compared: no witness, and the witness at each lag (seconds)
SYSTEMS: dict[str, float | None] = {
    "no witness": None,
    "witness, lag 0": 0.0,
    "witness, lag 1 s": 1.0,
}


#: the label of ``--before``'s server
BEFORE = "witness, earlier build"


@contextmanager
def _serve(
    url: str, workdir: Path, label: str, lag: float | None, root: Path = ROOT
) -> Iterator[Server]:
    env = {}
    if lag is not None:
        env = {
            "ODOMETER_WITNESS_DIR": str(workdir / f"witness-{label}"),
            "ODOMETER_WITNESS_LAG_SECONDS": str(lag),
        }
    os.environ.update(env)
    try:
        server = running_server(url, workdir / f"server-{label}.log", 2, root=root)
        started = server.__enter__()
    finally:
        for name in env:
            os.environ.pop(name, None)
    try:
        yield started
    finally:
        server.__exit__(None, None, None)


def measure(
    backends: list[str],
    pg_url: str,
    clients: list[int],
    duration: float,
    rounds: int,
    before: Path | None = None,
) -> list[dict[str, Any]]:
    rows = []
    systems: dict[str, tuple[float | None, Path]] = {k: (v, ROOT) for k, v in SYSTEMS.items()}
    if before is not None:
        systems[BEFORE] = (0.0, before.resolve())
    with tempfile.TemporaryDirectory(prefix="odometer-witness-", dir=ROOT) as tmp:
        workdir = Path(tmp)
        for backend in backends:
            url = pg_recreate(pg_url) if backend == "postgresql" else f"sqlite:///{workdir}/w.db"
            migrate(url)
            with ExitStack() as stack:
                servers = {
                    label: stack.enter_context(_serve(url, workdir, f"{backend}-{i}", lag, root))
                    for i, (label, (lag, root)) in enumerate(systems.items())
                }
                paths = {
                    label: f"/v1/datasets/{create_dataset(s.port, label, 'basic')}/invocations"
                    for label, s in servers.items()
                }
                for n in clients:
                    for r in range(rounds):
                        for label, server in servers.items():
                            spec = {
                                "kind": "http", "host": "127.0.0.1", "port": server.port,
                                "key": ADMIN_KEY, "paths": [paths[label]],
                                "body": {"mechanism": MODES["basic"]}, "clients": n,
                                "duration": duration, "warmup": 1.0,
                            }  # fmt: skip
                            la = loadavg()
                            cpu0 = server.cpu_seconds()
                            out = run_load(spec)
                            cpu = server.cpu_seconds() - cpu0
                            total = out["ok"] * (duration + 1.0) / duration
                            row = {
                                "backend": backend, "clients": n, "round": r, "system": label,
                                "loadavg": la, "throughput": out["throughput"],
                                "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"],
                                "errors": out["errors"],
                                "cpu_ms": round(cpu * 1000 / total, 3) if total else None,
                            }  # fmt: skip
                            print(json.dumps(row), flush=True)
                            rows.append(row)
            if backend == "postgresql":
                pg_drop(pg_url)
    return rows


def _median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def render(rows: list[dict[str, Any]], command: str) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    out = [
        BEGIN,
        "## The witness's cost on the write path",
        "",
        f"`{command}` ({when}, commit {commit_of(ROOT)}, {platform.machine()}, "
        f"{os.cpu_count()} cores; median of the rounds; load average before each cell shown). "
        "Servers (uvicorn, 2 workers, group commit) on one database: one without a "
        "witness, one with `ODOMETER_WITNESS_DIR` (fsync on) and `ODOMETER_WITNESS_LAG_SECONDS=0` "
        "(each answer waits for its heads to be written), one with a lag of 1 s (heads written "
        "in the background by one writer per process)"
        + (
            f", and `--before`'s build ({BEFORE!r}, its witness at its own default)"
            if any(r["system"] == BEFORE for r in rows)
            else ""
        )
        + "; N clients registering on one hot dataset each, cells interleaved.",
        "",
        "| backend | clients | system | registrations/s | p50 ms | p99 ms | server CPU ms "
        "per registration | load | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["backend"], r["clients"], r["system"]) for r in rows}, key=str)
    order = [*SYSTEMS, BEFORE]
    for backend, n, system in sorted(keys, key=lambda k: (k[0], k[1], order.index(k[2]))):
        key = (backend, n, system)
        cell = [r for r in rows if (r["backend"], r["clients"], r["system"]) == key]
        out.append(
            f"| {backend} | {n} | {system} | {_median([r['throughput'] for r in cell]):,.0f} "
            f"| {_median([r['p50_ms'] for r in cell]):.1f} "
            f"| {_median([r['p99_ms'] for r in cell]):.1f} "
            f"| {_median([r['cpu_ms'] or 0 for r in cell]):.2f} "
            f"| {_median([r['loadavg'] for r in cell]):.2f} | {sum(r['errors'] for r in cell)} |"
        )
    out.append(END)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks witness",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--backends", default="sqlite,postgresql")
    p.add_argument("--pg-url", default=os.environ.get("ODOMETER_BENCH_POSTGRES_URL", DEFAULT_PG))
    p.add_argument("--clients", default="1,32")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    p.add_argument("--before", type=Path, help="another checkout's build, served alongside")
    args = p.parse_args(argv)
    rows = measure(
        args.backends.split(","),
        args.pg_url,
        [int(c) for c in args.clients.split(",")],
        args.duration,
        args.rounds,
        args.before,
    )
    command = ".venv/bin/python -m benchmarks witness " + " ".join(argv or [])
    block = render(rows, command.strip())
    print(block)
    if not args.no_write:
        write_section(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
