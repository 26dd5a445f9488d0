"""Service throughput and latency, side by side with the database's own limit.

``python -m benchmarks service [--quick]`` (or ``make bench-service``) measures, in one run:

* the **baseline**: the raw database doing the durable work of one admission without the
  service (lock one budget row, update it, append one hash-chained ledger row of the service's
  size, commit), with as many concurrent clients, through the same driver (psycopg 3 /
  sqlite3) and the same durability settings (PostgreSQL ``synchronous_commit=on``; SQLite WAL
  and ``synchronous=FULL``);
* the **service**: uvicorn with several workers, N concurrent HTTP clients registering
  invocations on one hot dataset, then spread over many datasets, in ``basic``, ``zcdp`` and
  ``rdp`` modes; for each N the baseline and the three modes run back to back (interleaved),
  so that the noise of a shared machine hits both sides alike;
* **growth**: admission latency on datasets whose ledgers already hold 10^3, 10^5, 10^6 rows,
  and the time to export (and, where the route exists, report) each ledger.

Writes ``benchmarks/service.json`` (raw), ``benchmarks/service.svg`` (plot) and the section of
``benchmarks/RESULTS.md`` between the ``service`` markers. Exit status 1 when a request failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import service_report
from benchmarks.results import write_section
from benchmarks.service_growth import prefill_postgres, prefill_sqlite
from benchmarks.service_setup import (
    ADMIN_KEY,
    Server,
    call,
    create_dataset,
    create_organisation,
    loadavg,
    migrate,
    pg_baseline_setup,
    pg_drop,
    pg_recreate,
    run_load,
    running_server,
    sqlite_baseline_setup,
    start_profile,
)

HERE = Path(__file__).resolve().parent
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/odometer_bench"

#: One declaration per mode, each admitted at a cost no run can exhaust.
MODES: dict[str, dict[str, str]] = {
    "basic": {"type": "pure_dp", "epsilon": "0.001"},
    "zcdp": {"type": "zcdp", "rho": "0.000001"},
    "rdp": {"type": "gaussian", "sigma": "100"},
}
#: The extra PostgreSQL system: ``basic`` datasets, each in an organisation of its own, to
#: show what the per-organisation lock (taken by every admission) costs when spread out.
ORGS = "basic, own orgs"
GROWTH_DECLARATION = {"type": "pure_dp", "epsilon": "0.0001"}
#: PostgreSQL's ``max_connections`` is 100 by default and is shared with other jobs, so both
#: sides get at most this many connections: the baseline opens min(N, this), the service's
#: workers share it as their pools (``ODOMETER_DB_POOL_SIZE`` per worker, no overflow). More
#: clients than connections queue for one, on both sides alike.
MAX_CONNECTIONS = 24
#: Round-robin passes of the growth admission runs over the ledger sizes.
GROWTH_ROUNDS = 3
#: A report slower than this is recorded as "> limit" (the route may replay the whole ledger).
REPORT_TIMEOUT_S = 240.0
#: The cell profiled with py-spy (hot dataset, ``basic``): the p99 target's client count.
PROFILED_CLIENTS = 32


@dataclass(frozen=True)
class Plan:
    clients: tuple[int, ...]
    duration: float
    warmup: float
    many: int
    sizes: tuple[int, ...]
    workers: int
    growth_duration: float
    export_page: int


QUICK = Plan((1, 8), 1.5, 0.5, 20, (1_000, 10_000), 2, 1.5, 100_000)
FULL = Plan((1, 8, 32, 128), 6.0, 1.5, 1_000, (1_000, 100_000, 1_000_000), 2, 5.0, 100_000)


# ---------------------------------------------------------------------------- machine
def machine(pg_url: str | None) -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gb: float | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": ram_gb,
        "python": platform.python_version(),
        "postgresql": None if pg_url is None else _pg_version(pg_url),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------------------- backends
@dataclass(frozen=True)
class Backend:
    """A database for the service and a baseline load that runs on the same engine."""

    name: str
    service_url: str
    baseline: dict[str, Any]
    prefill_target: str


def postgres_backend(url: str, many: int) -> Backend:
    raw = pg_recreate(url)
    migrate(raw)
    dsn = pg_baseline_setup(raw, many)
    return Backend(
        "postgresql",
        raw,
        {"kind": "pg", "dsn": dsn, "max_connections": MAX_CONNECTIONS},
        raw,
    )


def sqlite_backend(workdir: Path, many: int) -> Backend:
    path = workdir / "service.db"
    migrate(f"sqlite:///{path}")
    base = workdir / "baseline.db"
    sqlite_baseline_setup(base, many)
    return Backend("sqlite", f"sqlite:///{path}", {"kind": "sqlite", "path": str(base)}, str(path))


# ---------------------------------------------------------------------------- experiments
def _service_run(
    server: Server, spec: dict[str, Any], profile_to: Path | None = None
) -> dict[str, Any]:
    """One HTTP load, with the service's CPU time per answered request (ms; all its processes,
    and by role: :meth:`Server.cpu_by_role`): on a shared
    two-core machine this says how much of the latency is the service's own work. With
    ``profile_to``, one worker is sampled by py-spy meanwhile and the profile summarised. How
    the clients' connections were split between the workers is recorded half-way through."""
    cpu0 = server.cpu_by_role()
    spy = None
    if profile_to is not None and server.worker_pids():
        spy = start_profile(server.worker_pids()[0], spec["warmup"] + spec["duration"], profile_to)
    split: list[list[int]] = []
    sampler = threading.Timer(
        spec["warmup"] + spec["duration"] / 2,
        lambda: split.append(server.connections_per_worker()),
    )
    sampler.start()
    out = run_load(spec)
    cpu1 = server.cpu_by_role()
    sampler.cancel()
    sampler.join()
    if split:  # the clients' connections per worker, half-way through the measured seconds
        out["connections_per_worker"] = split[0]
    if spy is not None and profile_to is not None:
        spy.wait(120)
        if profile_to.exists():
            out["profile"] = service_report.profile_breakdown(profile_to)
    # the load runs warm-up + duration; requests are counted over the duration only
    total = out["ok"] * (spec["warmup"] + spec["duration"]) / spec["duration"]
    by_role = {role: max(0.0, cpu1[role] - cpu0.get(role, 0.0)) for role in cpu1}
    cpu = sum(by_role.values())
    out["service_cpu_ms_per_req"] = round(cpu * 1000 / total, 2) if total else None
    out["service_cpu_ms_per_req_by_role"] = (
        {role: round(v * 1000 / total, 3) for role, v in by_role.items()} if total else None
    )
    return out


def _datasets(port: int, many: int, *, with_organisations: bool) -> dict[str, dict[str, list[str]]]:
    """Per mode, one hot dataset and ``many`` others (created 8 at a time); on PostgreSQL
    also ``many`` ``basic`` datasets each in an organisation of its own (scenario ``ORGS``)."""
    ids: dict[str, dict[str, list[str]]] = {}
    with ThreadPoolExecutor(8) as pool:
        for mode in MODES:
            ids[mode] = {
                "hot": [create_dataset(port, f"hot-{mode}", mode)],
                "many": list(
                    pool.map(
                        lambda i, m=mode: create_dataset(port, f"many-{m}-{i}", m), range(many)
                    )
                ),
            }
        if with_organisations:
            orgs = list(
                pool.map(lambda i: create_organisation(port, f"bench-org-{i}"), range(many))
            )
            ids[ORGS] = {
                "many": list(
                    pool.map(
                        lambda io: create_dataset(port, f"own-org-{io[0]}", "basic", io[1]),
                        enumerate(orgs),
                    )
                )
            }
    return ids


def body_of(system: str) -> str:
    """The mode whose declaration a system sends (``ORGS`` is ``basic`` on other datasets)."""
    return "basic" if system == ORGS else system


def throughput_matrix(
    backend: Backend, server: Server, plan: Plan, log: Any, workdir: Path
) -> list[dict[str, Any]]:
    """For each scenario and N: the baseline, then the service in every mode."""
    port = server.port
    ids = _datasets(port, plan.many, with_organisations=backend.name == "postgresql")
    budgets = {"hot": ["b00000"], "many": [f"b{i:05d}" for i in range(plan.many)]}
    timing = {"duration": plan.duration, "warmup": plan.warmup}
    profiled = PROFILED_CLIENTS if PROFILED_CLIENTS in plan.clients else max(plan.clients)
    runs: list[dict[str, Any]] = []
    for scenario in ("hot", "many"):
        for n in plan.clients:
            cell = {"backend": backend.name, "scenario": scenario, "clients": n}
            la = loadavg()
            spec = {**backend.baseline, **timing, "clients": n, "budgets": budgets[scenario]}
            runs.append({**cell, "system": "baseline", "loadavg": la, **run_load(spec)})
            log(runs[-1])
            for mode in [*MODES, *([ORGS] if ORGS in ids else [])]:
                if mode == ORGS and scenario == "hot":
                    continue
                la = loadavg()
                spec = {
                    "kind": "http", "host": "127.0.0.1", "port": port, "key": ADMIN_KEY,
                    "paths": [f"/v1/datasets/{d}/invocations" for d in ids[mode][scenario]],
                    "body": {"mechanism": MODES[body_of(mode)]}, "clients": n, **timing,
                }  # fmt: skip
                prof = (
                    workdir / f"{backend.name}-{mode}-{n}.pyspy"
                    if scenario == "hot" and mode == "basic" and n == profiled
                    else None
                )
                runs.append(
                    {**cell, "system": mode, "loadavg": la, **_service_run(server, spec, prof)}
                )
                log(runs[-1])
    return runs


def _timed_get(port: int, path: str, timeout: float = 600) -> tuple[int, float, int]:
    t0 = time.perf_counter()
    status, body = call(port, "GET", path, timeout=timeout)
    return status, time.perf_counter() - t0, len(body)


#: Where generated growth ledgers are kept (``--cache``); None: the run's temporary directory.
CACHE: Path | None = None


def _prefill(backend: Backend, ds: str, size: int, workdir: Path) -> float:
    t0 = time.perf_counter()
    cache = (CACHE or workdir) / f"ledger-{size}.pickle"
    if backend.name == "postgresql":
        prefill_postgres(backend.prefill_target, ds, size, cache)
    else:
        prefill_sqlite(backend.prefill_target, ds, size, cache)
    return time.perf_counter() - t0


def _median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def _admission_rounds(
    port: int, plan: Plan, datasets: dict[int, str], log: Any
) -> dict[int, dict[str, Any]]:
    """One client admitting on each grown dataset in turn, ``GROWTH_ROUNDS`` times round-robin
    (so that the machine's load drifts over every size alike); per size the medians."""
    rounds: dict[int, list[dict[str, Any]]] = {size: [] for size in datasets}
    for _ in range(GROWTH_ROUNDS):
        for size, ds in datasets.items():
            spec = {
                "kind": "http", "host": "127.0.0.1", "port": port, "key": ADMIN_KEY,
                "paths": [f"/v1/datasets/{ds}/invocations"],
                "body": {"mechanism": GROWTH_DECLARATION}, "clients": 1,
                "duration": plan.growth_duration, "warmup": plan.warmup,
            }  # fmt: skip
            rounds[size].append({"loadavg": loadavg(), **run_load(spec)})
            log({"growth_admission": size, **rounds[size][-1]})
    out: dict[int, dict[str, Any]] = {}
    for size, rs in rounds.items():
        out[size] = {
            "ok": sum(r["ok"] for r in rs),
            "errors": sum(r["errors"] for r in rs),
            "throughput": _median([r["throughput"] for r in rs]),
            "p50_ms": _median([r["p50_ms"] for r in rs]),
            "p99_ms": _median([r["p99_ms"] for r in rs]),
            "rounds": rs,
        }
    return out


def _export_and_report(port: int, plan: Plan, ds: str) -> dict[str, Any]:
    """Every page of the ledger export, then the report (when the route exists)."""
    status, raw = call(port, "GET", f"/v1/datasets/{ds}")
    head = json.loads(raw)["ledger"]["last_seq"] if status == 200 else None
    export_s, export_bytes, export_errors = 0.0, 0, 0
    after = 0
    while head is not None and after < head:
        code, dt, nbytes = _timed_get(
            port, f"/v1/datasets/{ds}/ledger?after_seq={after}&limit={plan.export_page}"
        )
        export_s += dt
        export_bytes += nbytes
        export_errors += code != 200
        after += plan.export_page
    try:
        report_status, report_s, _n = _timed_get(
            port, f"/v1/datasets/{ds}/report", timeout=REPORT_TIMEOUT_S
        )
    except TimeoutError:
        report_status, report_s = 0, REPORT_TIMEOUT_S
    return {
        "export_s": round(export_s, 3),
        "export_mb": round(export_bytes / 1e6, 1),
        "export_errors": export_errors,
        "report_status": report_status,
        "report_s": round(report_s, 3) if report_status in (0, 200) else None,
        "report_timed_out": report_status == 0,
        "entries_after": head,
    }


def growth(
    backend: Backend, port: int, plan: Plan, log: Any, workdir: Path
) -> list[dict[str, Any]]:
    """Admission latency and export / report time on ledgers of growing length."""
    datasets = {size: f"ds_growth_{size:09d}" for size in plan.sizes}
    prefill: dict[int, tuple[float, float]] = {}
    for size, ds in datasets.items():
        la = loadavg()
        prefill[size] = (la, _prefill(backend, ds, size, workdir))
        log({"prefilled": size, "seconds": round(prefill[size][1], 1), "loadavg": la})
    admission = _admission_rounds(port, plan, datasets, log)
    rows: list[dict[str, Any]] = []
    for size, ds in datasets.items():
        la = loadavg()
        row = {
            "backend": backend.name,
            "size": size,
            "loadavg": la,
            "prefill_s": round(prefill[size][1], 2),
            "admission": admission[size],
            **_export_and_report(port, plan, ds),
        }
        rows.append(row)
        log({k: v for k, v in row.items() if k != "admission"})
    return rows


def nagle_check(backend: Backend, plan: Plan, workdir: Path, log: Any) -> list[dict[str, Any]]:
    """The hot ``basic`` cell at the smallest and the profiled N, served by the plain uvicorn
    command line (as ``make run`` and the Dockerfile do) instead of the TCP_NODELAY launcher,
    on the same database, to compare with the matrix's cells at the same N."""
    server_log = workdir / f"{backend.name}-plain-server.log"
    clients = sorted({min(plan.clients), max(c for c in plan.clients if c <= PROFILED_CLIENTS)})
    rows: list[dict[str, Any]] = []
    with running_server(backend.service_url, server_log, plan.workers, nodelay=False) as plain:
        ds = create_dataset(plain.port, "hot-plain-uvicorn", "basic")
        for n in clients:
            spec = {
                "kind": "http", "host": "127.0.0.1", "port": plain.port, "key": ADMIN_KEY,
                "paths": [f"/v1/datasets/{ds}/invocations"], "body": {"mechanism": MODES["basic"]},
                "clients": n, "duration": plan.duration, "warmup": plan.warmup,
            }  # fmt: skip
            la = loadavg()
            row = {"backend": backend.name, "clients": n, "server": "uvicorn CLI", "loadavg": la}
            rows.append({**row, **_service_run(plain, spec)})
            log(rows[-1])
    return rows


def bench_backend(backend: Backend, plan: Plan, workdir: Path, log: Any) -> dict[str, Any]:
    server_log = workdir / f"{backend.name}-server.log"
    with running_server(backend.service_url, server_log, plan.workers) as server:
        runs = throughput_matrix(backend, server, plan, log, workdir)
        grown = growth(backend, server.port, plan, log, workdir)
    return {
        "runs": runs,
        "growth": grown,
        "plain_uvicorn": nagle_check(backend, plan, workdir, log),
    }


# ---------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="a short smoke run (seconds, not minutes)")
    p.add_argument(
        "--postgres",
        default=os.environ.get("ODOMETER_BENCH_POSTGRES_URL", DEFAULT_PG),
        help="database the benchmark (re)creates and drops; 'none' to skip PostgreSQL",
    )
    p.add_argument("--no-sqlite", action="store_true", help="skip the SQLite backend")
    p.add_argument("--workers", type=int, help="uvicorn workers (default: the plan's)")
    p.add_argument("--duration", type=float, help="seconds measured per cell")
    p.add_argument("--warmup", type=float, help="seconds of warm-up before each cell")
    p.add_argument("--many", type=int, help="datasets in the spread-out scenario")
    p.add_argument("--sizes", help="ledger sizes for the growth runs, comma-separated")
    p.add_argument("--clients", help="client counts, comma-separated")
    p.add_argument("--out", type=Path, default=HERE, help="where service.json/.svg go")
    p.add_argument("--no-results", action="store_true", help="do not touch RESULTS.md")
    p.add_argument(
        "--cache",
        type=Path,
        help="keep the generated growth ledgers here between runs (10^6 entries take minutes "
        "to generate); default: the run's temporary directory",
    )
    p.add_argument(
        "--render",
        type=Path,
        help="measure nothing: re-render the plot and RESULTS.md section from this raw JSON",
    )
    return p.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else FULL
    changes: dict[str, Any] = {}
    if args.workers:
        changes["workers"] = args.workers
    if args.duration:
        changes["duration"] = args.duration
        changes["growth_duration"] = args.duration
    if args.warmup is not None:
        changes["warmup"] = args.warmup
    if args.many:
        changes["many"] = args.many
    if args.sizes:
        changes["sizes"] = tuple(int(s) for s in args.sizes.split(","))
    if args.clients:
        changes["clients"] = tuple(int(s) for s in args.clients.split(","))
    return Plan(**{**asdict(plan), **changes})


def main(argv: list[str] | None = None) -> int:
    global CACHE
    args = parse_args(argv)
    if args.render is not None:
        return render(json.loads(args.render.read_text()), args)
    plan = make_plan(args)
    CACHE = args.cache
    if CACHE is not None:
        CACHE.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)

    def log(item: dict[str, Any]) -> None:
        print(json.dumps(item, default=str), flush=True)

    pg_url: str | None = None if args.postgres == "none" else args.postgres
    info = machine(pg_url)
    backends_done: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="odometer-bench-") as tmp:
        workdir = Path(tmp)
        if pg_url is not None:
            try:
                backend = postgres_backend(pg_url, plan.many)
            except Exception as exc:
                skipped["postgresql"] = f"{type(exc).__name__}: {exc}"
                pg_url = None
            else:
                try:
                    backends_done["postgresql"] = bench_backend(backend, plan, workdir, log)
                finally:
                    pg_drop(backend.service_url)
        if not args.no_sqlite:
            backend = sqlite_backend(workdir, plan.many)
            backends_done["sqlite"] = bench_backend(backend, plan, workdir, log)
    result = {
        "started": started.isoformat(),
        "finished": datetime.now(UTC).isoformat(),
        "command": "python -m benchmarks service" + (" --quick" if args.quick else ""),
        "plan": asdict(plan),
        "machine": info,
        "skipped": skipped,
        "backends": backends_done,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "service-quick" if args.quick else "service"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    return render(result, args)


def render(result: dict[str, Any], args: argparse.Namespace) -> int:
    """The plot next to the raw JSON and, for a full run, the RESULTS.md section."""
    quick = "--quick" in result["command"]
    name = "service-quick" if quick else "service"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.svg").write_text(service_report.svg(result))
    text = service_report.markdown(result, svg_name=f"{name}.svg")
    if not args.no_results and not quick:
        write_section(text, HERE / "RESULTS.md")
    print(text)
    return 1 if service_report.total_errors(result) else 0


def _pg_version(url: str) -> str | None:
    """The server's version (from the maintenance database: the benchmark's is dropped)."""
    import psycopg

    maintenance = url.rsplit("/", 1)[0] + "/postgres"
    try:
        with psycopg.connect(maintenance, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else None
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
