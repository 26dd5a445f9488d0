"""How a multi-worker server shares its connections out between its workers, and what that
does to throughput: N keep-alive clients registering on one hot dataset (``basic``) against
``python -m app.serve --workers 2``, with the connections each worker holds counted from the
kernel's table of established sockets (``/proc``) in the middle of the measurement. Each build
(this checkout, and each ``--compare LABEL=DIR``, a ``git worktree`` of an earlier commit) is
served in turn, round after round, each round on a fresh server (the split is decided when the
clients connect), so that the machine's noise hits every build alike.

    git worktree add ../before <commit>
    .venv/bin/python -m benchmarks.worker_split --compare before=../before [--postgres URL]

SQLite unless ``--postgres`` names a server (a scratch database is created and dropped).
Writes the section of ``benchmarks/RESULTS.md`` between the ``worker-split-sqlite`` (or
``worker-split-postgresql``) markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results import commit_of, write_section
from benchmarks.service import MODES
from benchmarks.service_setup import (
    ADMIN_KEY,
    cpu_of,
    create_dataset,
    loadavg,
    migrate,
    pg_drop,
    pg_recreate,
    run_load,
    running_server,
)

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/odometer_worker_split"


def wait_until_idle(pids: list[int], quiet: float = 0.5, limit: float = 20.0) -> None:
    """Until no worker has used CPU for ``quiet`` seconds: each has finished starting (a server
    is ready when one worker answers; a connection made while another still starts goes to
    the ready one whatever the accept does)."""
    deadline = time.monotonic() + limit
    last = [cpu_of([pid]) for pid in pids]
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = [cpu_of([pid]) for pid in pids]
        if now == last:
            return
        last = now


#: Clients of the second load of each cell, each opening a connection per request.
SHORT_CLIENTS = 16


async def _short_connections(port: int, path: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` clients registering for ``seconds``, each request on a connection of its
    own (``Connection: close``): what a client without keep-alive costs the accept path."""
    body = json.dumps({"mechanism": MODES["basic"]}).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal errors
        while time.perf_counter() < end:
            start = time.perf_counter()
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(request)
                answer = await reader.read()
                writer.close()
            except OSError:
                errors += 1
                continue
            if answer.startswith(b"HTTP/1.1 201 "):
                latencies.append(time.perf_counter() - start)
            else:
                errors += 1

    await asyncio.gather(*(client() for _ in range(clients)))
    latencies.sort()
    p99 = 1000 * latencies[int(0.99 * len(latencies))] if latencies else None
    return {"throughput": len(latencies) / seconds, "p99_ms": p99, "errors": errors}


def one_cell(
    url: str, root: Path, clients: int, warmup: float, duration: float, workdir: Path
) -> dict[str, Any]:
    """A fresh server of the checkout at ``root``, loaded by ``clients`` clients."""
    with running_server(url, workdir / "server.log", WORKERS, root=root) as server:
        dataset = create_dataset(server.port, f"split-{time.monotonic_ns()}", "basic")
        path = f"/v1/datasets/{dataset}/invocations"
        spec = {
            "kind": "http", "host": "127.0.0.1", "port": server.port, "key": ADMIN_KEY,
            "paths": [path],
            "body": {"mechanism": MODES["basic"]}, "clients": clients,
            "warmup": warmup, "duration": duration,
        }  # fmt: skip
        pids = server.worker_pids()
        wait_until_idle(pids)
        split: list[int] = []

        def look() -> None:
            time.sleep(warmup + duration / 2)
            split.extend(sorted(server.connections_per_worker(), reverse=True))

        watcher = threading.Thread(target=look)
        watcher.start()
        load = loadavg()
        cpu0, t0 = [cpu_of([pid]) for pid in pids], time.perf_counter()
        result = run_load(spec)
        cpu1, t1 = [cpu_of([pid]) for pid in pids], time.perf_counter()
        watcher.join()
        busy = sorted(((b - a) / (t1 - t0) for a, b in zip(cpu0, cpu1, strict=True)), reverse=True)
        short = asyncio.run(_short_connections(server.port, path, SHORT_CLIENTS, duration))
    return {
        "busy": busy,
        "short": short,
        "split": split,
        "throughput": result["throughput"],
        "p50_ms": result.get("p50_ms"),
        "p99_ms": result.get("p99_ms"),
        "errors": result.get("errors", 0),
        "loadavg": load,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--postgres",
        nargs="?",
        const=DEFAULT_PG,
        help=f"PostgreSQL, in a scratch database of this name (default {DEFAULT_PG}); else SQLite",
    )
    p.add_argument("--clients", default="8,32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--compare", action="append", default=[], metavar="LABEL=DIR")
    p.add_argument("--no-results", action="store_true", help="print, do not write RESULTS.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    builds = [("this", ROOT)] + [
        (label, Path(path).resolve())
        for label, path in (item.split("=", 1) for item in args.compare)
    ]
    clients = [int(n) for n in args.clients.split(",")]
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    started = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for r in range(args.rounds):
            order = builds[r % len(builds) :] + builds[: r % len(builds)]
            for n in clients:
                for label, root in order:
                    if args.postgres:
                        url = pg_recreate(args.postgres)
                    else:
                        url = f"sqlite:///{workdir / f'split-{label}-{r}-{n}.db'}"
                    migrate(url, root)
                    cell = one_cell(url, root, n, args.warmup, args.duration, workdir)
                    cells.setdefault((label, n), []).append(cell)
                    print(label, n, cell, file=sys.stderr, flush=True)
                    if args.postgres:
                        pg_drop(args.postgres)
    block = render(args, builds, clients, cells, started)
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


def render(
    args: argparse.Namespace,
    builds: list[tuple[str, Path]],
    clients: list[int],
    cells: dict[tuple[str, int], list[dict[str, Any]]],
    started: datetime,
) -> str:
    backend = "PostgreSQL" if args.postgres else "SQLite"
    loads = [c["loadavg"] for cs in cells.values() for c in cs]
    names = ", ".join(f"*{label}* = {commit_of(root) or root.name}" for label, root in builds)
    rows: list[str] = []
    for n in clients:
        for label, _ in builds:
            cs = cells[(label, n)]
            splits = ", ".join(" / ".join(str(x) for x in c["split"]) for c in cs)
            busy = ", ".join(" / ".join(f"{100 * x:.0f}" for x in c["busy"]) for c in cs)
            p99s = [c["p99_ms"] for c in cs if c["p99_ms"] is not None]
            p99 = f"{statistics.median(p99s):.1f}" if p99s else "–"
            throughput = statistics.median(c["throughput"] for c in cs)
            errors = sum(c["errors"] for c in cs)
            rows.append(
                f"| {label} | {n} | {splits} | {busy} | {throughput:,.0f} | {p99} | {errors} |"
            )
    short_rows: list[str] = []
    for label, _ in builds:
        shorts = [c["short"] for n in clients for c in cells[(label, n)]]
        p99s = [x["p99_ms"] for x in shorts if x["p99_ms"] is not None]
        p99 = f"{statistics.median(p99s):.1f}" if p99s else "–"
        throughput = statistics.median(x["throughput"] for x in shorts)
        errors = sum(x["errors"] for x in shorts)
        short_rows.append(f"| {label} | {throughput:,.0f} | {p99} | {errors} |")
    cores = os.cpu_count()
    marker = f"worker-split-{'postgresql' if args.postgres else 'sqlite'}"
    lines = [
        f"<!-- {marker}: begin -->",
        f"## Connections shared out between {WORKERS} workers, {backend}",
        "",
        f"Run {started:%Y-%m-%d %H:%M} UTC on {platform.machine()}, {cores} cores "
        f"shared with other jobs (1-minute load {min(loads):.2f}–{max(loads):.2f}); Python "
        f"{platform.python_version()}. Command: `python -m benchmarks.worker_split "
        + " ".join(f"--compare {item.split('=', 1)[0]}=…" for item in args.compare)
        + ("" if not args.postgres else " --postgres …")
        + f"` ({args.rounds} rounds, builds in rotating order, a fresh server per cell). "
        f"Builds: {names}.",
        "",
        "N keep-alive clients registering a `basic` declaration on one hot dataset; *split*: "
        "the connections each worker held, counted from `/proc` halfway through each cell "
        "(one entry per round); req/s and p99 are medians over rounds.",
        "",
        "| build | N | split (per round) | workers' CPU, % of a core (per round) | req/s "
        "| p99 ms | errors |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Then, on the same servers, {SHORT_CLIENTS} clients opening a connection per request "
        "(`Connection: close`, no keep-alive), so that every request goes through the accept "
        "path (medians over every cell of the build):",
        "",
        "| build | req/s | p99 ms | errors |",
        "|---|---|---|---|",
        *short_rows,
    ]
    lines += [
        "",
        "Reading it: a worker serves its connections on one core at a time, so a split of "
        "N / 0 leaves the service one core whatever the machine has: the busiest worker's CPU "
        "near 100 % is that ceiling. On this machine the workers share "
        f"{cores} cores with the database and the load generator, so throughput can only move "
        "by what an idle core was worth here; on a machine with a core per worker to spare, "
        "the split bounds it.",
        f"<!-- {marker}: end -->",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
