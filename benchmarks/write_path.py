"""The write path's levers, each measured side by side in one run.

**CPU per registration, in process.** The service's ``register_invocation`` called in a loop on
one dataset (``basic``, one request per transaction, no HTTP), in a fresh process per
measurement, with the process's CPU time (user + system, ``getrusage``) over ``--count``
registrations after 200 of warm-up; with and without an ``Idempotency-Key``. Each checkout
named by ``--compare LABEL=DIR`` (a ``git worktree`` of an earlier commit) is measured the same
way, round after round, interleaved with this checkout, so that the machine's noise hits every
column alike; the table shows the median of the rounds.

**Group commit, over HTTP.** The service (uvicorn, 2 workers) with ``ODOMETER_GROUP_COMMIT=1``
(a transaction per registration) against the default, N clients registering on one hot
dataset, the two servers' cells interleaved.

    git worktree add ../orm 6cb6c85          # the ORM write path
    git worktree add ../core f708b4b         # SQLAlchemy Core statements, compiled per call
    .venv/bin/python -m benchmarks write-path --compare orm=../orm --compare core=../core

Writes the section of ``benchmarks/RESULTS.md`` between the ``write-path`` markers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results import checkout_path, commit_of, write_section
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
BEGIN = "<!-- write-path: begin -->"
END = "<!-- write-path: end -->"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/odometer_write_path"

#: One process's measurement (:mod:`benchmarks.write_path_probe`), run as a script so that it
#: can measure another checkout: the name of its probe per layer of the table.
PROBE = Path(__file__).with_name("write_path_probe.py")
PROBES = {"service": "service", "service + ASGI app": "edge"}


def probe(
    checkout: Path, url: str, count: int, kind: str, *args: str, env: dict[str, str] | None = None
) -> float:
    """CPU ms per registration of ``checkout``'s service on a freshly migrated ``url``: the
    probe ``kind`` of :mod:`benchmarks.write_path_probe` with its ``args``; ``env``: variables
    the probe's process is given besides this one's (a checkpoint key)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": checkout_path(checkout)}
    env.pop("ODOMETER_DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-P", str(PROBE), kind, url, str(count), *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_ms"])


def _fresh(backend: str, pg_url: str, workdir: Path, checkout: Path, n: int) -> str:
    """A freshly migrated database of ``backend`` for one measurement (migrated by the
    checkout that is measured on it)."""
    if backend == "postgresql":
        url = pg_recreate(pg_url)
    else:
        url = f"sqlite:///{workdir / f'probe-{n}.db'}"
    migrate(url, checkout)
    return url


def _interleaved(
    checkouts: dict[str, Path], rounds: int, measure: Callable[[Path], float]
) -> dict[str, Any]:
    """``measure`` of every checkout, round after round (so that the machine's drift hits each
    alike): the median per checkout (``cpu_ms``) and every sample."""
    samples: dict[str, list[float]] = {label: [] for label in checkouts}
    for _ in range(rounds):
        for label, checkout in checkouts.items():
            samples[label].append(measure(checkout))
    return {
        "cpu_ms": {k: round(statistics.median(v), 3) for k, v in samples.items()},
        "samples": samples,
    }


def in_process(
    checkouts: dict[str, Path], backends: list[str], pg_url: str, rounds: int, count: int
) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="odometer-write-path-") as tmp:
        workdir, n = Path(tmp), 0
        for backend in backends:
            for (layer, kind), keyed in itertools.product(PROBES.items(), (False, True)):

                def one(
                    checkout: Path,
                    backend: str = backend,
                    kind: str = kind,
                    keyed: bool = keyed,
                ) -> float:
                    nonlocal n
                    n += 1
                    url = _fresh(backend, pg_url, workdir, checkout, n)
                    return probe(checkout, url, count, kind, "1" if keyed else "0")

                row = {
                    "backend": backend,
                    "layer": layer,
                    "keyed": keyed,
                    **_interleaved(checkouts, rounds, one),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
        if "postgresql" in backends:
            pg_drop(pg_url)
    return rows


def in_groups(
    checkouts: dict[str, Path], pg_url: str, rounds: int, count: int, sizes: list[int]
) -> list[dict[str, Any]]:
    """CPU per registration decided ``size`` at a time (the ``group`` probe), PostgreSQL."""
    rows = []
    for spread, size in itertools.product(("hot", "many"), sizes):

        def one(checkout: Path, size: int = size, spread: str = spread) -> float:
            url = _fresh("postgresql", pg_url, Path("."), checkout, 0)
            return probe(checkout, url, count, "group", str(size), spread)

        row = {"spread": spread, "size": size, **_interleaved(checkouts, rounds, one)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    pg_drop(pg_url)
    return rows


@contextmanager
def _serve(url: str, workdir: Path, group: int) -> Iterator[Server]:
    """The service with ``ODOMETER_GROUP_COMMIT=group`` (read by its workers at start)."""
    os.environ["ODOMETER_GROUP_COMMIT"] = str(group)
    try:
        server = running_server(url, workdir / f"server-{group}.log", 2)
        started = server.__enter__()
    finally:
        os.environ.pop("ODOMETER_GROUP_COMMIT", None)
    try:
        yield started
    finally:
        server.__exit__(None, None, None)


def group_commit(
    backends: list[str], pg_url: str, clients: list[int], duration: float
) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="odometer-group-") as tmp:
        workdir = Path(tmp)
        for backend in backends:
            url = pg_recreate(pg_url) if backend == "postgresql" else f"sqlite:///{workdir}/g.db"
            migrate(url)
            with _serve(url, workdir, 1) as alone, _serve(url, workdir, 64) as grouped:
                servers = {"a transaction each": alone, "group commit": grouped}
                paths = {
                    label: f"/v1/datasets/{create_dataset(s.port, label, 'basic')}/invocations"
                    for label, s in servers.items()
                }
                for n in clients:
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
                            "backend": backend,
                            "clients": n,
                            "system": label,
                            "loadavg": la,
                            "throughput": out["throughput"],
                            "p50_ms": out["p50_ms"],
                            "p99_ms": out["p99_ms"],
                            "errors": out["errors"],
                            "cpu_ms": round(cpu * 1000 / total, 2) if total else None,
                        }
                        print(json.dumps(row), flush=True)
                        rows.append(row)
            if backend == "postgresql":
                pg_drop(pg_url)
    return rows


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _head(marker: str, title: str, result: dict[str, Any]) -> list[str]:
    """A section's marker, title and the line that says when, where and how it was run."""
    return [
        marker,
        f"## {title}",
        "",
        f"Run {result['started'][:16].replace('T', ' ')} UTC on {result['machine']}; load "
        f"average at start {result['loadavg']}. Command: `{result['command']}`.",
    ]


def render(result: dict[str, Any]) -> str:
    labels = list(result["checkouts"])
    lines = [
        *_head(BEGIN, "The write path's levers (`benchmarks/write_path.py`)", result),
        "",
        "**CPU per registration in process**, `basic`, one request at a time, median of "
        f"{result['rounds']} interleaved rounds of {result['count']:,} registrations each in a "
        "fresh process: *service* = the service's `register_invocation` in a loop (no HTTP); "
        "*service + ASGI app* = the same request through the app's ASGI interface (routing, "
        "authentication, validation, middleware, the thread hop; no sockets, no uvicorn). "
        "Columns: " + "; ".join(f"*{k}* = {v}" for k, v in result["checkouts"].items()) + ".",
        "",
        "| backend | layer | Idempotency-Key | " + " | ".join(labels) + " |",
        "|---|---|---|" + "---|" * len(labels),
    ]
    for row in result["in_process"]:
        cells = " | ".join(f"{_f(row['cpu_ms'][k], 2)} ms" for k in labels)
        lines.append(
            f"| {row['backend']} | {row['layer']} | {'yes' if row['keyed'] else 'no'} | {cells} |"
        )
    lines += [
        "",
        "**Group commit over HTTP** (uvicorn, 2 workers, N clients on one hot `basic` dataset; "
        "`ODOMETER_GROUP_COMMIT=1` against the default 64, cells interleaved; CPU = the "
        "server's CPU time per answered request).",
        "",
        "| backend | N | load | a transaction each: req/s (p50 / p99 ms), CPU ms | "
        "group commit: req/s (p50 / p99 ms), CPU ms | throughput × |",
        "|---|---|---|---|---|---|",
    ]
    rows = result["group_commit"]
    for backend in dict.fromkeys(r["backend"] for r in rows):
        for n in dict.fromkeys(r["clients"] for r in rows if r["backend"] == backend):
            a = next(
                r
                for r in rows
                if (r["backend"], r["clients"], r["system"]) == (backend, n, "a transaction each")
            )
            g = next(
                r
                for r in rows
                if (r["backend"], r["clients"], r["system"]) == (backend, n, "group commit")
            )
            gain = g["throughput"] / a["throughput"] if a["throughput"] else None
            lines.append(
                f"| {backend} | {n} | {a['loadavg']} | {_f(a['throughput'], 0)} "
                f"({_f(a['p50_ms'])} / {_f(a['p99_ms'])}), {_f(a['cpu_ms'], 2)} | "
                f"{_f(g['throughput'], 0)} ({_f(g['p50_ms'])} / {_f(g['p99_ms'])}), "
                f"{_f(g['cpu_ms'], 2)} | {_f(gain, 2)} |"
            )
    errors = sum(r["errors"] for r in rows)
    lines += ["", f"Errors in the HTTP cells: **{errors}**.", "", END]
    return "\n".join(lines)


GROUPS_BEGIN = "<!-- write-path-groups: begin -->"
GROUPS_END = "<!-- write-path-groups: end -->"


def render_groups(result: dict[str, Any]) -> str:
    labels = list(result["checkouts"])
    lines = [
        *_head(
            GROUPS_BEGIN,
            "Registrations decided in groups, in process (`benchmarks/write_path.py --groups`)",
            result,
        ),
        "",
        "**CPU per registration** when group commit decides K `basic` registrations of one "
        "caller in one transaction (the group's runner called directly, so the group's size is "
        "fixed): *hot* = the K on one dataset, *many* = on K datasets; PostgreSQL, median of "
        f"{result['rounds']} interleaved rounds of about {result['count']:,} registrations each "
        "in a fresh process. Columns: "
        + "; ".join(f"*{k}* = {v}" for k, v in result["checkouts"].items())
        + ".",
        "",
        "| datasets | K | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    for row in result["groups"]:
        cells = " | ".join(f"{_f(row['cpu_ms'][k], 3)} ms" for k in labels)
        lines.append(f"| {row['spread']} | {row['size']} | {cells} |")
    lines += ["", GROUPS_END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="another checkout to measure in process beside this one (repeatable)",
    )
    p.add_argument(
        "--postgres",
        default=os.environ.get("ODOMETER_BENCH_POSTGRES_URL", DEFAULT_PG),
        help="database the benchmark (re)creates and drops; 'none' to skip PostgreSQL",
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument(
        "--groups",
        metavar="K,...",
        help="measure only registrations decided K at a time (PostgreSQL, in process)",
    )
    p.add_argument(
        "--no-write", action="store_true", help="do not touch RESULTS.md or write_path.json"
    )
    args = p.parse_args(argv)
    checkouts = {
        label: Path(path).resolve() for label, path in (c.split("=", 1) for c in args.compare)
    }
    checkouts["this commit"] = ROOT
    backends = ["sqlite"] + ([] if args.postgres == "none" else ["postgresql"])
    described = {}
    for label, path in checkouts.items():
        rev = commit_of(path, "%h %s")
        described[label] = f"`{rev[:80]}`" if rev else "a checkout that is not a git worktree"
    command = "python -m benchmarks write-path " + " ".join(
        f"--compare {c.split('=', 1)[0]}=DIR" for c in args.compare
    )
    run: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "loadavg": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "rounds": args.rounds,
        "count": args.count,
        "checkouts": described,
    }
    if args.groups:
        sizes = [int(k) for k in args.groups.split(",")]
        groups = {
            **run,
            "command": f"{command} --groups {args.groups} --rounds {args.rounds}",
            "groups": in_groups(checkouts, args.postgres, args.rounds, args.count, sizes),
        }
        block = render_groups(groups)
        print(block)
        if not args.no_write:
            write_section(block)
        return 0
    result = {
        **run,
        "command": command,
        "in_process": in_process(checkouts, backends, args.postgres, args.rounds, args.count),
        "group_commit": group_commit(
            backends, args.postgres, [int(c) for c in args.clients.split(",")], args.duration
        ),
    }
    block = render(result)
    print(block)
    if not args.no_write:  # the raw figures behind the section, kept with it
        (Path(__file__).with_name("write_path.json")).write_text(json.dumps(result, indent=1))
        write_section(block)
    return 1 if any(r["errors"] for r in result["group_commit"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
