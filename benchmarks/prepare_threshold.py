"""``python -m benchmarks prepare-threshold``: what ``?prepare_threshold=none`` (psycopg's
server-side prepared statements off, needed behind PgBouncer before 1.21 in transaction
pooling: ``docs/operations.md``, *PgBouncer*) costs a registration in CPU.

Two servers (one worker each, 8 pooled connections) on one fresh database of the PostgreSQL
server at ``--url``: one with psycopg's default (a statement prepared on its fifth run on a
connection), one with ``?prepare_threshold=none``, each connection named by its
``application_name``. Round after round (``--rounds``, the order alternating), each server takes
``--count`` pure-DP registrations from ``--clients`` clients (one keep-alive connection each)
on ``--datasets`` datasets. Measured per window: the server's CPU (its processes), its PostgreSQL
backends' CPU (the backends with its ``application_name``), and registrations per second. The
answer is the median over the rounds of each round's ratio ``none`` / default (1.0 =
unchanged), so that the machine's other load falls on both alike. Before the rounds each
server takes ``--warm`` registrations (its pool filled, psycopg's statements prepared).

It prints a line per window and the table; it writes nothing to ``RESULTS.md``. (``python -m
benchmarks.prepare_threshold`` runs it too.)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import psycopg

from benchmarks.service_setup import (
    ADMIN_KEY,
    cpu_of,
    create_dataset,
    loadavg,
    migrate,
    pg_drop,
    pg_recreate,
    running_server,
)

CONDITIONS = ("default", "none")
HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}
PURE = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": "0.000001"}})


def _register(port: int, datasets: list[str], count: int, clients: int) -> int:
    """``count`` registrations by ``clients`` threads; how many were not 201."""
    failed = [0]
    lock = threading.Lock()

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for i in range(n, count, clients):
            path = f"/v1/datasets/{datasets[i % len(datasets)]}/invocations"
            conn.request("POST", path, PURE, HEADERS)
            response = conn.getresponse()
            response.read()
            if response.status != 201:
                with lock:
                    failed[0] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed[0]


def _backends(libpq: str, name: str) -> list[int]:
    with psycopg.connect(libpq, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchall()
    return [int(r[0]) for r in rows]


def _descendants(pid: int) -> list[int]:
    from benchmarks.read_replica import descendants

    return descendants(pid)


def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    url = args.url.replace("postgresql+psycopg://", "postgresql://")
    libpq = pg_recreate(url)
    sa_url = libpq.replace("postgresql://", "postgresql+psycopg://")
    migrate(sa_url)
    per: dict[str, list[dict[str, float]]] = {c: [] for c in CONDITIONS}
    try:
        with TemporaryDirectory(prefix="odometer-bench-prepare-") as tmp:
            urls = {
                "default": f"{sa_url}?application_name=bench_prepare_default",
                "none": f"{sa_url}?prepare_threshold=none&application_name=bench_prepare_none",
            }
            with (
                running_server(urls["default"], Path(tmp) / "d.log", 1, pool_connections=8) as a,
                running_server(urls["none"], Path(tmp) / "n.log", 1, pool_connections=8) as b,
            ):
                servers = {"default": a, "none": b}
                datasets = [create_dataset(a.port, f"prep-{i}", "basic") for i in range(8)]
                for server in servers.values():  # warm: pools, psycopg's prepares
                    _register(server.port, datasets, args.warm, args.clients)
                for r in range(args.rounds):
                    order = CONDITIONS if r % 2 == 0 else tuple(reversed(CONDITIONS))
                    for condition in order:
                        server = servers[condition]
                        procs = _descendants(server.process.pid)
                        backends = _backends(libpq, f"bench_prepare_{condition}")
                        app0, pg0, t0 = cpu_of(procs), cpu_of(backends), time.monotonic()
                        failed = _register(server.port, datasets, args.count, args.clients)
                        seconds = time.monotonic() - t0
                        app = cpu_of(procs) - app0
                        backends_after = _backends(libpq, f"bench_prepare_{condition}")
                        pg = cpu_of(backends_after) - pg0
                        if app <= 0 or pg <= 0:  # CPU is read in clock ticks (10 ms)
                            raise SystemExit(
                                f"prepare-threshold: {condition}'s window measured no CPU "
                                f"(server {app} s, PostgreSQL {pg} s): raise --count"
                            )
                        row = {
                            "rate": args.count / seconds,
                            "app_ms": 1000 * app / args.count,
                            "pg_ms": 1000 * pg / args.count,
                            "failed": failed,
                        }
                        per[condition].append(row)
                        print(
                            f"round {r + 1} {condition:>7}: {row['rate']:6.1f} reg/s, server "
                            f"{row['app_ms']:.3f} ms, PostgreSQL {row['pg_ms']:.3f} ms CPU per "
                            f"registration, failed {failed}, load {loadavg():.1f}",
                            flush=True,
                        )
    finally:
        pg_drop(libpq)
    out: dict[str, dict[str, float]] = {}
    for key in ("rate", "app_ms", "pg_ms"):
        ratios = [n[key] / d[key] for d, n in zip(per["default"], per["none"], strict=True)]
        out[key] = {
            "default": statistics.median(w[key] for w in per["default"]),
            "none": statistics.median(w[key] for w in per["none"]),
            "ratio": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    total = [
        (n["app_ms"] + n["pg_ms"]) / (d["app_ms"] + d["pg_ms"])
        for d, n in zip(per["default"], per["none"], strict=True)
    ]
    out["total_ms"] = {
        "default": statistics.median(w["app_ms"] + w["pg_ms"] for w in per["default"]),
        "none": statistics.median(w["app_ms"] + w["pg_ms"] for w in per["none"]),
        "ratio": statistics.median(total),
        "min": min(total),
        "max": max(total),
    }
    return out


def table(rows: dict[str, dict[str, float]]) -> str:
    names = {
        "rate": "registrations/s",
        "app_ms": "server CPU per registration (ms)",
        "pg_ms": "PostgreSQL CPU per registration (ms)",
        "total_ms": "both (ms)",
    }
    lines = [
        "| | default (prepared) | `prepare_threshold=none` | none / default, same round "
        "(median, range) |",
        "|---|---:|---:|---:|",
    ]
    for key, v in rows.items():
        lines.append(
            f"| {names[key]} | {v['default']:.3f} | {v['none']:.3f} | {v['ratio']:.3f} "
            f"({v['min']:.3f} … {v['max']:.3f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "ODOMETER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/odometer_prep"
        ),
        help="the benchmark's own database (dropped and created again)",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--warm", type=int, default=400, help="registrations per server before the rounds"
    )
    args = parser.parse_args(argv)
    print(f"load {loadavg():.1f}, {os.cpu_count()} CPUs", flush=True)
    print(table(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
