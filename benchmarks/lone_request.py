"""What one registration served alone costs on SQLite, piece by piece, and what issue 14's
one-client target leaves for it.

Issue 14 asks the service to reach 0.4 of the raw baseline's throughput on a hot SQLite
dataset. With one client every request is served alone, one after another: the client's wall
time per request is the whole cost, and 0.4 of the raw baseline's throughput means at most
2.5 times the raw transaction's wall time per request. This benchmark measures, in one run:

* **in process**, cells interleaved round by round, on SQLite files of a temporary directory
  with the service's durability settings (WAL, ``synchronous=FULL``):

  - *raw*: the raw baseline's transaction (:func:`benchmarks.service_load.sqlite_admit`);
  - *statements*: the service's own statements of one registration, replayed on sqlite3 with
    no Python work between them: ``BEGIN IMMEDIATE``, then the statements a real
    registration ran through the write path's executor (:func:`app.db.admission._run`; the
    lock statement, the write), each replay with a new invocation id and the next sequence
    number, then ``COMMIT``. Equal to *raw* means the service's durable work is the baseline's;
  - *service*: the service's ``register_invocation`` in a loop (a ``basic`` pure-ε
    declaration, no idempotency key, no HTTP): the statements plus the Python work of the
    register path (the decision, the ledger entry and its hash, the rows, the unit of work);

* **over HTTP at one client**, the cells of ``benchmarks.http_floor --sqlite --clients 1``
  (*raw*, *floor*: the raw transaction behind uvicorn in a bare ASGI app, *service*).

The verdict is arithmetic on the medians: the room the target leaves for the service's own work
beyond the floor (2.5 × raw − floor, per request) against what the register path alone adds to
the raw transaction in process (*service* − *raw*; the HTTP edge's parsing, authentication and
response come on top). Results go to ``benchmarks/RESULTS.md`` (section *A registration
served alone on SQLite*)."""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from benchmarks import http_floor
from benchmarks.results import write_section
from benchmarks.service_load import sqlite_admit, sqlite_connect
from benchmarks.service_setup import loadavg, migrate, sqlite_baseline_setup

BEGIN: Final = "<!-- lone-request-sqlite: begin -->"
END: Final = "<!-- lone-request-sqlite: end -->"

#: The one-client target of issue 14: the service's throughput over the raw baseline's.
TARGET: Final = 0.4

CELLS: Final = ("raw", "statements", "service")

Statement = tuple[str, Any]


@dataclass(frozen=True)
class Capture:
    """One registration's statements as the write path ran them, and the values a replay must
    renew so that it writes a new entry (unique ``(dataset_id, seq)`` and invocation id)."""

    statements: list[Statement]
    invocation_id: str
    seq: int


def capture(register: Callable[[], object]) -> Capture:
    """The statements ``register()`` runs through :func:`app.db.admission._run`, with copies of
    their parameters."""
    from app.db import admission

    seen: list[Statement] = []
    original = admission._run

    def recording(conn: Any, sql: str, params: Any, **kwargs: Any) -> Any:
        seen.append((sql, dict(params) if isinstance(params, dict) else list(params)))
        return original(conn, sql, params, **kwargs)

    admission._run = recording
    try:
        register()
    finally:
        admission._run = original
    named = [p for _, p in seen if isinstance(p, dict)]
    ids = {v for p in named for v in p.values() if isinstance(v, str) and v.startswith("inv_")}
    seqs = {v for p in named for k, v in p.items() if k.endswith("seq")}
    if len(ids) != 1 or len(seqs) != 1:
        raise RuntimeError(f"expected one invocation id and one sequence number: {ids}, {seqs}")
    return Capture(seen, ids.pop(), seqs.pop())


def renewed(capture: Capture, offset: int, invocation_id: str) -> list[Statement]:
    """``capture``'s statements as the registration ``offset`` entries later would run them:
    its invocation id replaced by ``invocation_id``, its sequence numbers moved by ``offset``."""

    def value(name: str, v: Any) -> Any:
        if v == capture.invocation_id:
            return invocation_id
        if name.endswith("seq") and v == capture.seq:
            return v + offset
        return v

    return [
        (sql, {k: value(k, v) for k, v in params.items()} if isinstance(params, dict) else params)
        for sql, params in capture.statements
    ]


def replay(conn: sqlite3.Connection, statements: list[Statement]) -> None:
    """``statements`` in one write transaction, as the service's unit of work brackets them."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            conn.execute(sql, params).fetchall()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


@dataclass
class Timing:
    wall_ms: float
    cpu_ms: float


def timed(count: int, one: Callable[[int], object]) -> Timing:
    """Wall and CPU time (this process) per call of ``one(i)``, ``i`` in ``range(count)``."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for i in range(count):
        one(i)
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return Timing(1000 * (t1 - t0) / count, 1000 * cpu / count)


@dataclass(frozen=True)
class LoneService:
    """The service's register path on a SQLite file of its own, called in process."""

    path: Path
    dataset_id: str
    register: Callable[..., object]  #: one registration (any argument is ignored)
    close: Callable[[], None]

    def last_seq(self, conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "SELECT last_seq FROM datasets WHERE id = ?", (self.dataset_id,)
        ).fetchone()
        return int(row[0])


def lone_service(workdir: Path) -> LoneService:
    """A migrated service database in ``workdir`` with one ``basic`` dataset, and a callable
    registering a pure-ε declaration on it (admin, no idempotency key)."""
    from app.db.uow import Database, UnitOfWork
    from app.services import datasets, invocations
    from app.services.principals import Principal, Role
    from app.settings import Settings
    from odometer_core.accounting import parse_declaration

    path = workdir / "service.db"
    url = f"sqlite:///{path}"
    migrate(url)
    db = Database.from_settings(Settings(database_url=url))
    uow = UnitOfWork(db)
    admin = Principal("admin", Role.ADMIN, None)
    new = datasets.NewDataset(
        name="lone", epsilon="1000000", delta="0.00001", relation="add_remove",
        accounting={"mode": "basic"},
    )  # fmt: skip
    ds = str(datasets.create_dataset(uow, admin, new)["id"])
    request = invocations.InvocationRequest(
        parse_declaration({"type": "pure_dp", "epsilon": "0.001"})
    )

    def register(_: object = None) -> None:
        invocations.register_invocation(uow, admin, ds, request, None)

    return LoneService(path, ds, register, db.dispose)


def in_process(workdir: Path, rounds: int, count: int) -> dict[str, list[Timing]]:
    """The three in-process cells, interleaved (the order rotates each round)."""
    from app.main import freeze_startup_objects

    service = lone_service(workdir)
    baseline = workdir / "baseline.db"
    sqlite_baseline_setup(baseline, 1)
    raw = sqlite_connect(str(baseline))
    for _ in range(200):  # warm: statement caches, the pool, the decision's memos
        service.register()
        sqlite_admit(raw, "b00000")
    captured = capture(service.register)
    statements = sqlite_connect(str(service.path))

    def replayed(n: int) -> Timing:
        # The replays continue the service's own ledger (their write moves the dataset's last
        # sequence number as a registration's does), and the service cell continues theirs.
        base = service.last_seq(statements) - captured.seq
        batch = [renewed(captured, base + i + 1, f"inv_{uuid.uuid4().hex}") for i in range(n)]
        return timed(n, lambda i: replay(statements, batch[i]))

    cells: dict[str, Callable[[], Timing]] = {
        "raw": lambda: timed(count, lambda _: sqlite_admit(raw, "b00000")),
        "statements": lambda: replayed(count),
        "service": lambda: timed(count, service.register),
    }
    out: dict[str, list[Timing]] = {c: [] for c in CELLS}
    freeze_startup_objects()  # as the service's workers do before they serve
    for r in range(rounds):
        order = CELLS[r % len(CELLS) :] + CELLS[: r % len(CELLS)]
        for cell in order:
            out[cell].append(cells[cell]())
            print(cell, out[cell][-1], flush=True)
    statements.close()
    raw.close()
    service.close()
    return out


def over_http(rounds: int, duration: float, warmup: float) -> list[dict[str, Any]]:
    """``benchmarks.http_floor --sqlite --clients 1`` cells."""
    return http_floor.measure(None, [1], rounds, {"duration": duration, "warmup": warmup})


def _median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass(frozen=True)
class Verdict:
    """The arithmetic of the one-client target, per request, in ms of wall time."""

    raw_ms: float  #: the raw baseline over the load generator (1 / its throughput)
    floor_ms: float
    service_ms: float
    added_in_process_ms: float  #: the register path's work beyond the raw transaction

    @property
    def target_ms(self) -> float:
        """The most a request may take for the service to reach :data:`TARGET` of raw."""
        return self.raw_ms / TARGET

    @property
    def room_ms(self) -> float:
        """What the target leaves for the service's own work beyond the floor's."""
        return self.target_ms - self.floor_ms

    @property
    def service_over_floor_ms(self) -> float:
        return self.service_ms - self.floor_ms


def verdict(local: dict[str, list[Timing]], http: list[dict[str, Any]]) -> Verdict:
    def tp(system: str) -> float:
        return _median([r["throughput"] for r in http if r["system"] == system])

    def wall(cell: str) -> float:
        return _median([t.wall_ms for t in local[cell]])

    return Verdict(
        raw_ms=1000 / tp("raw"),
        floor_ms=1000 / tp("floor"),
        service_ms=1000 / tp("service"),
        added_in_process_ms=wall("service") - wall("raw"),
    )


def render(
    local: dict[str, list[Timing]],
    http: list[dict[str, Any]],
    started: str,
    command: str,
    loads: list[float],
    count: int,
) -> str:
    v = verdict(local, http)
    rounds = len(local["raw"])

    def cell(name: str) -> str:
        ts = local[name]
        return (
            f"{_median([t.wall_ms for t in ts]):.3f} ms ({min(t.wall_ms for t in ts):.3f}–"
            f"{max(t.wall_ms for t in ts):.3f}) | {_median([t.cpu_ms for t in ts]):.3f} ms"
        )

    def http_cell(system: str) -> str:
        rs = [r for r in http if r["system"] == system]
        cpu = [r["cpu_ms"] for r in rs if r.get("cpu_ms") is not None]
        return (
            f"{_median([r['throughput'] for r in rs]):,.0f} | "
            f"{1000 / _median([r['throughput'] for r in rs]):.3f} ms | "
            + (f"{_median(cpu):.2f} ms" if cpu else "—")
        )

    raw_wall = _median([t.wall_ms for t in local["raw"]])
    stmt_wall = _median([t.wall_ms for t in local["statements"]])
    svc_wall = _median([t.wall_ms for t in local["service"]])
    errors = sum(r.get("errors", 0) for r in http)
    lines = [
        BEGIN,
        "## A registration served alone on SQLite: where issue 14's one-client target goes",
        "",
        f"Run {started} on {platform.machine()}, {os.cpu_count()} cores shared with other jobs "
        f"(1-minute load {min(loads):.2f}–{max(loads):.2f}); Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}. Command: `{command}`.",
        "",
        f"**In process**, {rounds} rounds, cells interleaved (order rotated each round), "
        f"{count:,} registrations per cell, medians (range) of the rounds' means. *raw*: the "
        "raw baseline's transaction; *statements*: the service's own statements of one "
        "registration (its lock statement and its write, as the write path ran them for a real "
        "registration) replayed on sqlite3 in `BEGIN IMMEDIATE` … `COMMIT`, nothing between "
        "them; *service*: `register_invocation` in a loop (`basic`, pure ε, no key, no HTTP). "
        "WAL, `synchronous=FULL` in all three.",
        "",
        "| cell | wall per registration | CPU per registration |",
        "|---|---|---|",
        *(f"| {c} | {cell(c)} |" for c in CELLS),
        "",
        "**Over HTTP, one client** (`benchmarks.http_floor --sqlite --clients 1`, same run, "
        "medians of its rounds):",
        "",
        "| system | req/s | wall per request | server CPU per request |",
        "|---|---|---|---|",
        *(f"| {s} | {http_cell(s)} |" for s in http_floor.SYSTEMS),
        "",
        f"Errors over HTTP: **{errors}**.",
        "",
        "**The arithmetic** (per request, wall time, one client):",
        "",
        f"- {TARGET} of the raw baseline's throughput allows 1 / {TARGET} × {v.raw_ms:.3f} = "
        f"**{v.target_ms:.3f} ms** per request.",
        f"- The floor (the raw transaction behind uvicorn, nothing else) takes {v.floor_ms:.3f} "
        f"ms: the target leaves the service's own work **{v.room_ms:.3f} ms** on top of it.",
        f"- The service's own statements, replayed with nothing between them, take "
        f"{stmt_wall:.3f} ms against the raw transaction's {raw_wall:.3f} ms in process "
        f"(a difference of {stmt_wall - raw_wall:+.3f} ms; the service also writes the "
        "invocation's row). The "
        f"register path (no HTTP) adds **{v.added_in_process_ms:.3f} ms** to the raw "
        f"transaction, {svc_wall - stmt_wall:.3f} ms of it Python work around the statements: "
        f"{v.added_in_process_ms / v.room_ms:.1f} × the room, before the edge's parsing, "
        "authentication and response."
        if v.room_ms > 0
        else f"- The target leaves no room: the floor alone is slower than {TARGET} of raw.",
        f"- Measured over HTTP, the service adds {v.service_over_floor_ms:.3f} ms to the floor "
        f"and reaches {v.raw_ms / v.service_ms:.2f} of the raw baseline.",
        _conclusion(v),
        END,
    ]
    return "\n".join(lines) + "\n"


def _conclusion(v: Verdict) -> str:
    """The last line of the arithmetic: how far the service's own work per request (over the
    floor, as measured over HTTP) would have to fall for the target to be met."""
    if v.room_ms <= 0:
        return (
            "- So the target is out of reach at one client for any service on this stack: the "
            "floor alone misses it."
        )
    return (
        f"- So the target needs the service's own work per request to fall from "
        f"{v.service_over_floor_ms:.3f} ms (the register path {v.added_in_process_ms:.3f} ms, "
        f"the HTTP edge's parsing, authentication and response the rest) to at most "
        f"{v.room_ms:.3f} ms: ÷ {v.service_over_floor_ms / v.room_ms:.1f}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lone_request", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="in-process rounds")
    parser.add_argument("--count", type=int, default=2000, help="registrations per cell")
    parser.add_argument("--http-rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--no-results", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    loads = [loadavg()]
    with tempfile.TemporaryDirectory(prefix="odometer-lone-") as tmp:
        local = in_process(Path(tmp), args.rounds, args.count)
    loads.append(loadavg())
    http = over_http(args.http_rounds, args.duration, args.warmup)
    loads += [r["load"] for r in http]
    command = "python -m benchmarks.lone_request " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-results"
    )
    block = render(local, http, started, command.strip(), loads, args.count)
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
