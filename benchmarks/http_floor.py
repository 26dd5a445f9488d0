"""How close an HTTP service can come to the raw baseline on this machine, and how close ours is.

Three systems, one hot budget row on PostgreSQL, closed-loop keep-alive clients from the load
generator of ``benchmarks/service_load.py``, cells interleaved round by round (the order rotates
each round, and the medians over rounds are reported):

* *raw*: the raw baseline (psycopg 3 in the load generator's process, no HTTP);
* *floor*: the same transaction behind uvicorn in a bare ASGI application
  (``benchmarks/http_floor_app.py``: no framework, validation, authentication or accounting),
  served as the service is (``python -m app.serve``, 2 workers, httptools, uvloop,
  ``TCP_NODELAY``) — the least any HTTP service on this stack can cost per admission here;
* *service*: ``POST /v1/datasets/{id}/invocations`` of a ``basic`` pure-ε declaration;
* *service@LABEL* (``--compare LABEL=DIR``, repeatable): the same, served from another checkout
  (a ``git worktree`` of an earlier commit), so that a lever is measured side by side with the
  code before it, in the same run. With ``--together`` the service and every compared build are
  loaded at the same time in each round (the raw baseline and the floor alone, as before): on a
  machine whose speed drifts from minute to minute, builds measured in the same seconds differ
  by what the builds differ by, so their CPU per request compares to a few per cent (each
  round's ratio is reported); their throughput then shares the cores, and compares only with
  each other's, and not at all between builds that keep different numbers of threads busy: the
  kernel shares the cores per thread, so a build with a runnable thread per request takes a
  larger share from one that runs a group's requests in one thread (measured: loaded at once,
  the latter answered 40 % fewer requests; alternating, 11–23 % more). Compare such builds
  without ``--together``.

Run from the repository root (PostgreSQL at ``--postgres``; a scratch database is created and
dropped):

    .venv/bin/python -m benchmarks http-floor

Writes the section between the ``http-floor`` markers of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.results import write_section
from benchmarks.service import (
    DEFAULT_PG,
    MAX_CONNECTIONS,
    MODES,
    Backend,
    postgres_backend,
    sqlite_backend,
)
from benchmarks.service_setup import (
    ADMIN_KEY,
    ROOT,
    Server,
    create_capped_organisation,
    create_dataset,
    loadavg,
    pg_drop,
    run_load,
    running_server,
)


def _markers(backend: str, datasets: int = 1, capped: bool = False) -> tuple[str, str]:
    name = "http-floor" if backend == "postgresql" else f"http-floor-{backend}"
    if datasets > 1:
        name += "-many"
    if capped:
        name += "-capped"
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


SYSTEMS = ("raw", "floor", "service")


def _systems(compare: dict[str, Path]) -> tuple[str, ...]:
    return SYSTEMS + tuple(f"service@{label}" for label in compare)


def _budgets(datasets: int) -> list[str]:
    """The raw baseline's budget rows (``postgres_backend``/``sqlite_backend`` create them)."""
    return [f"b{i:05d}" for i in range(datasets)]


def _cell(system: str, n: int, timing: dict[str, float], targets: dict[str, Any]) -> dict[str, Any]:
    if system == "raw":
        spec = {**targets["raw"], **timing, "clients": n, "budgets": targets["budgets"]}
        return run_load(spec)
    server: Server = targets[system]["server"]
    spec = {
        "kind": "http", "host": "127.0.0.1", "port": server.port, "key": ADMIN_KEY,
        "paths": targets[system]["paths"], "body": targets[system]["body"], "clients": n,
        **timing,
    }  # fmt: skip
    cpu0 = server.cpu_seconds()
    out = run_load(spec)
    answered = out["ok"] * (timing["warmup"] + timing["duration"]) / timing["duration"]
    out["cpu_ms"] = (server.cpu_seconds() - cpu0) * 1000 / answered if answered else None
    return out


def measure(
    url: str | None,
    clients: list[int],
    rounds: int,
    timing: dict[str, float],
    compare: dict[str, Path] | None = None,
    datasets: int = 1,
    together: bool = False,
    mode: str = "basic",
    burst: int = 0,
    workers: dict[str, int] | None = None,
    plain: frozenset[str] = frozenset(),
    caps: dict[str, str] | None = None,
) -> list[Any]:
    """The cells, on PostgreSQL at ``url`` or, with ``url=None``, on SQLite files of a
    temporary directory; each request on one of ``datasets`` budget rows, picked at random
    (one: a hot row)."""
    compare = compare or {}
    systems = _systems(compare)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="odometer-floor-") as tmp:
        backend = postgres_backend(url, datasets) if url else sqlite_backend(Path(tmp), datasets)
        try:
            _measure(
                backend, Path(tmp), clients, rounds, timing, compare, systems, runs, datasets,
                together, mode, burst, workers or {}, plain, caps or {},
            )  # fmt: skip
        finally:
            if backend.name == "postgresql":
                pg_drop(backend.service_url)
    return runs


def _measure(
    backend: Backend,
    tmp: Path,
    clients: list[int],
    rounds: int,
    timing: dict[str, float],
    compare: dict[str, Path],
    systems: tuple[str, ...],
    runs: list[dict[str, Any]],
    datasets: int,
    together: bool = False,
    mode: str = "basic",
    burst: int = 0,
    workers: dict[str, int] | None = None,
    plain: frozenset[str] = frozenset(),
    caps: dict[str, str] | None = None,
) -> None:
    workers, caps = workers or {}, caps or {}
    with ExitStack() as stack:
        log = tmp / "server.log"
        where = (
            {"FLOOR_DSN": backend.baseline["dsn"]}
            if backend.name == "postgresql"
            else {"FLOOR_SQLITE": backend.baseline["path"]}
        )
        floor_env = {**where, "FLOOR_CONNECTIONS": str(MAX_CONNECTIONS // 2)}
        services = {"service": ROOT} | {f"service@{k}": v for k, v in compare.items()}
        floor = stack.enter_context(
            running_server(
                backend.service_url,
                log,
                workers.get("floor", 2),
                app="benchmarks.http_floor_app:create_app",
                env=floor_env,
            )
        )
        budgets = _budgets(datasets)
        targets: dict[str, Any] = {
            "raw": backend.baseline,
            "budgets": budgets,
            "floor": {"server": floor, "paths": [f"/{b}" for b in budgets], "body": {}},
        }
        for name, root in services.items():
            label = name.removeprefix("service@")
            count = workers.get(label, 2)
            server = stack.enter_context(
                running_server(
                    backend.service_url, log, count, nodelay=label not in plain, root=root
                )
            )
            cap = caps.get(label, caps.get(""))
            org = None if cap is None else create_capped_organisation(server.port, name, cap)
            ids = [create_dataset(server.port, f"{name}-{i}", mode, org) for i in range(datasets)]
            if burst:  # as a busy moment leaves a server: each worker's pool holds several
                with ThreadPoolExecutor(burst) as pool:
                    make = partial(create_dataset, server.port, mode=mode)
                    list(pool.map(make, [f"{name}-burst-{i}" for i in range(4 * burst)]))
            targets[name] = {
                "server": server,
                "paths": [f"/v1/datasets/{ds}/invocations" for ds in ids],
                "body": {"mechanism": MODES[mode]},
            }
        for r in range(rounds):
            k = r % len(systems)
            order = systems[k:] + systems[:k]
            for n in clients:
                loaded = [s for s in order if together and s.startswith("service")]
                for system in [s for s in order if s not in loaded]:
                    la = loadavg()
                    out = _cell(system, n, timing, targets)
                    runs.append(
                        {"round": r, "clients": n, "system": system, "load": la, "mode": mode,
                         **out}
                    )  # fmt: skip
                    print(system, n, out.get("throughput"), out.get("cpu_ms"), flush=True)
                if loaded:  # every build loaded at once
                    la = loadavg()
                    with ThreadPoolExecutor(len(loaded)) as pool:
                        cell = partial(_cell, n=n, timing=timing, targets=targets)
                        outs = list(pool.map(cell, loaded))
                    for system, out in zip(loaded, outs, strict=True):
                        runs.append(
                            {"round": r, "clients": n, "system": system, "load": la,
                             "mode": mode, "together": True, **out}
                        )  # fmt: skip
                        print(system, n, out.get("throughput"), out.get("cpu_ms"), flush=True)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _build(label: str) -> str:
    """A build as the tables name it ("" : every build)."""
    if not label:
        return "every build"
    return "*service*" if label == "service" else f"*service@{label}*"


def render(
    runs: list[dict[str, Any]],
    started: str,
    command: str,
    backend: str = "postgresql",
    datasets: int = 1,
    workers: dict[str, int] | None = None,
    caps: dict[str, str] | None = None,
) -> str:
    begin, end = _markers(backend, datasets, bool(caps))
    other = {k: n for k, n in (workers or {}).items() if n != 2}
    served = "2 workers" + (
        ""
        if not other
        else " unless said otherwise: "
        + ", ".join(
            f"*{k if k in ('floor', 'service') else 'service@' + k}* {n}" for k, n in other.items()
        )
    )
    mode = runs[0].get("mode", "basic") if runs else "basic"
    declaration = "a `basic` pure-ε" if mode == "basic" else f"the benchmark's `{mode}`"
    rows = (
        "One hot budget row"
        if datasets == 1
        else f"{datasets:,} budget rows (datasets), one picked at random per request"
    )
    if caps:
        named = ", ".join(f"{_build(k)}: `{m}`" for k, m in caps.items())
        rows += f", each build's datasets in one organisation under a cap ({named}), its row hot"
    database = "PostgreSQL" if backend == "postgresql" else "SQLite"
    raw_how = "psycopg 3" if backend == "postgresql" else "sqlite3, in process"
    clients = sorted({r["clients"] for r in runs})
    compared = sorted({r["system"] for r in runs} - set(SYSTEMS))
    rounds = len({r["round"] for r in runs})
    loads = [r["load"] for r in runs]
    errors = sum(r.get("errors", 0) for r in runs)
    lines = [
        begin,
        "## The HTTP floor: the raw baseline's transaction behind uvicorn (issue 14)"
        + ("" if backend == "postgresql" else f", {database}")
        + ("" if datasets == 1 else f", {datasets:,} datasets")
        + (", under an organisation cap" if caps else ""),
        "",
        f"Run {started} on {platform.machine()}, {os.cpu_count()} cores shared with other jobs "
        f"(1-minute load {min(loads):.2f}–{max(loads):.2f}); Python {platform.python_version()}. "
        f"Command: `{command}`. {rounds} rounds, cells interleaved (order rotated each round); "
        "medians over rounds.",
        "",
        f"*raw*: the raw baseline of the service benchmark ({raw_how}, no HTTP). *floor*: the same "
        "transaction behind uvicorn in a bare ASGI application (`benchmarks/http_floor_app.py`: no "
        "framework, validation, authentication or accounting), served as the service is "
        f"(`python -m app.serve`, {served}). *service*: registrations of {declaration} "
        f"declaration. {rows}, {database}; CPU = all processes of the server, per "
        "answered request.",
        "",
        "| N | raw req/s (p50 / p99 ms) | floor req/s (p50 / p99 ms), CPU ms | service req/s "
        "(p50 / p99 ms), CPU ms | floor / raw | service / raw | service / floor |"
        + "".join(f" {c} req/s (p50 / p99 ms), CPU ms | {c} / raw |" for c in compared),
        "|---|---|---|---|---|---|---|" + "---|---|" * len(compared),
    ]
    for n in clients:
        cell: dict[str, dict[str, float]] = {}
        for system in SYSTEMS + tuple(compared):
            rs = [r for r in runs if r["clients"] == n and r["system"] == system]
            cell[system] = {
                "tp": _median([r["throughput"] for r in rs]),
                "p50": _median([r["p50_ms"] for r in rs]),
                "p99": _median([r["p99_ms"] for r in rs]),
                "cpu": _median([r["cpu_ms"] for r in rs if r.get("cpu_ms") is not None] or [0.0]),
            }
        raw, floor, svc = cell["raw"], cell["floor"], cell["service"]
        lines.append(
            f"| {n} | {raw['tp']:,.0f} ({raw['p50']:.1f} / {raw['p99']:.1f}) | "
            f"{floor['tp']:,.0f} ({floor['p50']:.1f} / {floor['p99']:.1f}), {floor['cpu']:.2f} | "
            f"{svc['tp']:,.0f} ({svc['p50']:.1f} / {svc['p99']:.1f}), {svc['cpu']:.2f} | "
            f"{floor['tp'] / raw['tp']:.2f} | {svc['tp'] / raw['tp']:.2f} | "
            f"{svc['tp'] / floor['tp']:.2f} |"
            + "".join(
                f" {cell[c]['tp']:,.0f} ({cell[c]['p50']:.1f} / {cell[c]['p99']:.1f}), "
                f"{cell[c]['cpu']:.2f} | {cell[c]['tp'] / raw['tp']:.2f} |"
                for c in compared
            )
        )
    if any(r.get("together") for r in runs):
        lines += ["", *_together_lines(runs, clients, compared)]
    lines += [
        "",
        "Reading it: *floor / raw* is what HTTP and one Python process's event loop cost on this "
        "machine before any work of the service's own; *service / floor* is what the service's "
        "own work (parsing, authentication, the accounting decision, the ledger's hashing, its "
        "connection handling) costs on top, and the CPU columns say the same per request. With N "
        "closed-loop clients on one row the mean latency is N / throughput (Little's law), so a "
        "p99 of 50 ms at N = 32 needs at least 640 req/s and a p99 within 1.6× of the mean.",
        "",
        f"Errors (non-2xx or transport) in every cell: **{errors}**.",
        end,
    ]
    return "\n".join(lines)


def _together_lines(
    runs: list[dict[str, Any]], clients: list[int], compared: list[str]
) -> list[str]:
    """Each compared build against *service*, round by round (loaded at once: ``--together``)."""
    lines = [
        "*service* and the compared builds were loaded at the same time (`--together`): their "
        "throughput shares the machine, so read their columns against each other, not against "
        "*raw* or *floor*. Each round's ratio to *service*, median (min–max) over the rounds:",
        "",
    ]
    for c in compared:
        for n in clients:
            pairs = [
                (a, b)
                for a in runs
                for b in runs
                if a["system"] == c and b["system"] == "service"
                and a["clients"] == b["clients"] == n and a["round"] == b["round"]
            ]  # fmt: skip
            if not pairs:
                continue
            parts = []
            for key, label in (("cpu_ms", "CPU"), ("throughput", "req/s"), ("p99_ms", "p99")):
                ratios = [a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)]
                if ratios:
                    parts.append(
                        f"{label} {_median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
                    )
            lines.append(f"- {c} / service, N = {n}: " + ", ".join(parts))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks http-floor", description=__doc__)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("ODOMETER_BENCH_POSTGRES_URL", DEFAULT_PG),
        help="database the benchmark creates and drops",
    )
    parser.add_argument(
        "--sqlite", action="store_true", help="on SQLite files instead of PostgreSQL"
    )
    parser.add_argument(
        "--datasets",
        type=int,
        default=1,
        help="budget rows (datasets) each request picks one of at random (default: one hot row)",
    )
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="also serve the checkout at DIR (a git worktree), as service@LABEL",
    )
    parser.add_argument(
        "--mode",
        choices=sorted(MODES),
        default="basic",
        help="the service's datasets' accounting mode and declaration (raw and floor unchanged)",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="load the service and the --compare builds at the same time in each round",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=0,
        metavar="K",
        help="before measuring, create 4K more datasets on each service build, K at a time (its "
        "workers' pools then hold several connections, as after a busy moment)",
    )
    parser.add_argument(
        "--workers",
        action="append",
        default=[],
        metavar="LABEL=N",
        help="uvicorn workers of the floor (LABEL floor), the service (service) or a --compare "
        "build (its LABEL); default 2 each",
    )
    parser.add_argument(
        "--plain",
        action="append",
        default=[],
        metavar="LABEL",
        help="serve the service (service) or a --compare build (its LABEL) with the plain "
        "`uvicorn --factory` command line instead of `python -m app.serve`",
    )
    parser.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="[LABEL=]MODE",
        help="put each service build's datasets in one organisation with a cap in MODE that no "
        "run exhausts (its lock is then the hot row); LABEL= sets it for one build (service or "
        "a --compare LABEL), e.g. --cap zcdp --cap before=basic",
    )
    parser.add_argument("--no-results", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    workers = {label: int(n) for label, _, n in (w.partition("=") for w in args.workers)}
    caps = {
        (label if sep else ""): (mode if sep else label)
        for label, sep, mode in (c.partition("=") for c in args.cap)
    }
    compare = {
        label: Path(path).resolve() for label, _, path in (c.partition("=") for c in args.compare)
    }
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    clients = [int(c) for c in args.clients.split(",")]
    timing = {"duration": args.duration, "warmup": args.warmup}
    runs = measure(
        None if args.sqlite else args.postgres,
        clients,
        args.rounds,
        timing,
        compare,
        args.datasets,
        args.together,
        args.mode,
        args.burst,
        workers,
        frozenset(args.plain),
        caps,
    )
    command = "python -m benchmarks http-floor " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = render(
        runs,
        started,
        command.strip(),
        "sqlite" if args.sqlite else "postgresql",
        args.datasets,
        workers,
        caps,
    )
    if not args.no_results:
        write_section(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
