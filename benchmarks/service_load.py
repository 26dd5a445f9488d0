"""Load generator for ``benchmarks/service.py``, run as its own process.

``python -m benchmarks.service_load SPEC_JSON`` runs one measurement and prints one JSON object.
It is a separate process so that the generator's CPU is visible as what it is (a competitor of
the service for the machine's cores) and never shares a GIL with the orchestrator.

Three kinds of load, all closed-loop (each client sends its next request when the previous one
has been answered) and all timed per request from the client's side:

* ``http``: N asyncio clients, each on one keep-alive connection, sending raw HTTP/1.1
  ``POST`` requests. A hand-written request line and a minimal response reader cost a few tens
  of microseconds per request, an order of magnitude less than a general HTTP client, so the
  two shared cores go to the service and not to the measuring instrument.
* ``pg``: the same durable work as one admission without the service, on PostgreSQL through
  psycopg 3: ``BEGIN``; ``SELECT … FOR UPDATE`` of one budget row; ``UPDATE`` it; ``INSERT`` one
  hash-chained ledger row of the service's size; ``COMMIT``.
* ``sqlite``: the same on SQLite (``BEGIN IMMEDIATE``, WAL, ``synchronous=FULL``), one
  connection per client thread, writers of the process queued on a lock as the service does.

Only requests that start after the warm-up and end before the deadline are counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final

from odometer_core.ledger import EntryKind

#: A ledger row's JSON columns, at the size of a service row (``pure_dp`` acceptance).
_DECLARATION = {"type": "pure_dp", "epsilon": "0.001"}
_REQUEST = {"sub_budget": None, "conversion_delta": None}


@dataclass
class Samples:
    """What one measurement saw: latencies (s) of counted requests and status counts."""

    latencies: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, start: float, end: float, window: tuple[float, float], status: str) -> None:
        if start < window[0] or end > window[1]:
            return
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status.startswith("2"):
            self.latencies.append(end - start)
        else:
            self.errors += 1

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.examples) < 5:
            self.examples.append(what)


def summary(samples: Samples, duration: float) -> dict[str, Any]:
    """Throughput and latency percentiles (ms) of the counted requests."""
    lat = sorted(samples.latencies)

    def pct(p: float) -> float | None:
        if not lat:
            return None
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3)

    return {
        "ok": len(lat),
        "errors": samples.errors,
        "statuses": samples.statuses,
        "error_examples": samples.examples,
        "throughput": round(len(lat) / duration, 1),
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(lat[-1] * 1000, 3) if lat else None,
        "mean_ms": round(sum(lat) / len(lat) * 1000, 3) if lat else None,
    }


# ---------------------------------------------------------------------------- HTTP
async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one response (``Content-Length`` or chunked framing)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = -1
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        lname = name.strip().lower()
        if lname == b"content-length":
            length = int(value)
        elif lname == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if length >= 0:
        return status, await reader.readexactly(length)
    if not chunked:
        raise ValueError("response without Content-Length or chunked encoding")
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return status, bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


def _request_bytes(host: str, port: int, key: str, path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _http_client(
    spec: dict[str, Any], index: int, samples: Samples, window: tuple[float, float]
) -> None:
    host, port, key = spec["host"], spec["port"], spec["key"]
    paths: list[str] = spec["paths"]
    body = json.dumps(spec["body"]).encode()
    requests = [_request_bytes(host, port, key, p, body) for p in paths]
    rng = random.Random(index)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while True:
            start = time.perf_counter()
            if start >= window[1]:
                return
            req = requests[rng.randrange(len(requests))] if len(requests) > 1 else requests[0]
            try:
                writer.write(req)
                status, payload = await _read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                samples.error(f"transport: {exc!r}")
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            end = time.perf_counter()
            samples.add(start, end, window, str(status))
            if status >= 300 and len(samples.examples) < 5:
                samples.examples.append(f"{status}: {payload[:300]!r}")
    finally:
        writer.close()


async def run_http(spec: dict[str, Any]) -> dict[str, Any]:
    samples = Samples()
    t0 = time.perf_counter()
    window = (t0 + spec["warmup"], t0 + spec["warmup"] + spec["duration"])
    await asyncio.gather(*(_http_client(spec, i, samples, window) for i in range(spec["clients"])))
    return summary(samples, spec["duration"])


# ---------------------------------------------------------------------------- baselines
def _ledger_row(budget: str, seq: int, prev: str, spent: int) -> tuple[Any, ...]:
    """A ledger row with the service's columns and JSON sizes, hash-chained like the service
    (SHA-256 over the row's JSON)."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    state = {"spent_epsilon": str(spent), "reserved_epsilon": "0", "spent_delta": "0"}
    charge = {"epsilon": "0.001", "delta": "0"}
    payload = [
        budget,
        seq,
        EntryKind.INVOCATION_ACCEPTED.value,
        f"inv_{seq:032x}",
        "admin",
        at,
        "1",
        _DECLARATION,
        _REQUEST,
        charge,
        charge,
        None,
        None,
        None,
        None,
        state,
        None,
        None,
        prev,
    ]
    digest = hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()
    js = json.dumps
    return (
        budget,
        seq,
        EntryKind.INVOCATION_ACCEPTED.value,
        f"inv_{seq:032x}",
        "admin",
        at,
        "1",
        js(_DECLARATION),
        js(_REQUEST),
        js(charge),
        js(charge),
        js(state),
        prev,
        digest,
    )


INSERT_COLUMNS = (
    "dataset_id, seq, kind, invocation_id, actor, at, accounting_version, declaration, "
    "request, charge, requested, state, prev_hash, hash"
)


_PG_INSERT = f"INSERT INTO bench_ledger ({INSERT_COLUMNS}) VALUES ({', '.join(['%s'] * 14)})"


async def pg_admit(conn: Any, budget: str) -> int:
    """The baseline's durable work for one admission on a psycopg ``AsyncConnection``; returns
    the new ledger row's sequence number."""
    async with conn.transaction():
        cur = await conn.execute(
            "SELECT last_seq, head_hash, spent FROM bench_budget WHERE id = %s FOR UPDATE",
            (budget,),
        )
        seq, head, spent = await cur.fetchone()
        row = _ledger_row(budget, seq + 1, head, spent + 1)
        await conn.execute(
            "UPDATE bench_budget SET last_seq = %s, head_hash = %s, spent = %s, "
            "state = %s WHERE id = %s",
            (seq + 1, row[-1], spent + 1, row[11], budget),
        )
        await conn.execute(_PG_INSERT, row)
    return int(seq) + 1


async def _pg_client(
    spec: dict[str, Any],
    pool: asyncio.Queue[Any],
    index: int,
    samples: Samples,
    window: tuple[float, float],
) -> None:
    budgets: list[str] = spec["budgets"]
    rng = random.Random(index)
    while True:
        start = time.perf_counter()
        if start >= window[1]:
            return
        budget = budgets[rng.randrange(len(budgets))]
        conn = await pool.get()
        try:
            await pg_admit(conn, budget)
            status = "200"
        except Exception as exc:
            samples.error(f"pg: {exc!r}")
            status = ""
        finally:
            pool.put_nowait(conn)
        if status:
            samples.add(start, time.perf_counter(), window, status)


async def run_pg(spec: dict[str, Any]) -> dict[str, Any]:
    import psycopg

    pool: asyncio.Queue[Any] = asyncio.Queue()
    conns = [
        await psycopg.AsyncConnection.connect(spec["dsn"])
        for _ in range(min(spec["clients"], spec["max_connections"]))
    ]
    for conn in conns:
        pool.put_nowait(conn)
    samples = Samples()
    t0 = time.perf_counter()
    window = (t0 + spec["warmup"], t0 + spec["warmup"] + spec["duration"])
    try:
        await asyncio.gather(
            *(_pg_client(spec, pool, i, samples, window) for i in range(spec["clients"]))
        )
    finally:
        for conn in conns:
            await conn.close()
    out = summary(samples, spec["duration"])
    out["connections"] = len(conns)
    return out


def sqlite_connect(path: str) -> sqlite3.Connection:
    """A connection to the SQLite baseline as the service opens its own (autocommit, WAL,
    ``synchronous=FULL``)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


_SQLITE_INSERT: Final = (
    f"INSERT INTO bench_ledger ({INSERT_COLUMNS}) VALUES ({', '.join(['?'] * 14)})"
)


def sqlite_admit(conn: sqlite3.Connection, budget: str) -> int:
    """The baseline's durable work for one admission on SQLite; returns the new ledger row's
    sequence number. The caller holds the writers' gate."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        seq, head, spent = conn.execute(
            "SELECT last_seq, head_hash, spent FROM bench_budget WHERE id = ?",
            (budget,),
        ).fetchone()
        row = _ledger_row(budget, seq + 1, head, spent + 1)
        conn.execute(
            "UPDATE bench_budget SET last_seq = ?, head_hash = ?, spent = ?, "
            "state = ? WHERE id = ?",
            (seq + 1, row[-1], spent + 1, row[11], budget),
        )
        conn.execute(_SQLITE_INSERT, row)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return int(seq) + 1


def _sqlite_client(
    spec: dict[str, Any],
    gate: threading.Lock,
    index: int,
    samples: Samples,
    window: tuple[float, float],
    lock: threading.Lock,
) -> None:
    conn = sqlite_connect(spec["path"])
    budgets: list[str] = spec["budgets"]
    rng = random.Random(index)
    try:
        while True:
            start = time.perf_counter()
            if start >= window[1]:
                return
            budget = budgets[rng.randrange(len(budgets))]
            try:
                with gate:
                    sqlite_admit(conn, budget)
            except Exception as exc:
                with lock:
                    samples.error(f"sqlite: {exc!r}")
                continue
            end = time.perf_counter()
            with lock:
                samples.add(start, end, window, "200")
    finally:
        conn.close()


def run_sqlite(spec: dict[str, Any]) -> dict[str, Any]:
    samples = Samples()
    gate, lock = threading.Lock(), threading.Lock()
    t0 = time.perf_counter()
    window = (t0 + spec["warmup"], t0 + spec["warmup"] + spec["duration"])
    threads = [
        threading.Thread(target=_sqlite_client, args=(spec, gate, i, samples, window, lock))
        for i in range(spec["clients"])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summary(samples, spec["duration"])


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[1])
    kind = spec["kind"]
    if kind == "http":
        result = asyncio.run(run_http(spec))
    elif kind == "pg":
        result = asyncio.run(run_pg(spec))
    elif kind == "sqlite":
        result = run_sqlite(spec)
    else:
        raise SystemExit(f"unknown load kind {kind!r}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
