"""Proofs over a 10^6-entry ledger, on PostgreSQL and SQLite: what revision 0013 takes to build
the stored subtree roots, what an inclusion and a consistency proof take to serve, and how many
bytes they are; with ``--before DIR``, another checkout served from the same database, side by
side.

A fresh database is migrated to revision 0012, prefilled with N valid entries
(:mod:`benchmarks.service_growth`, the rows the service would have written, its frontier
beside the head), then migrated to 0013 (timed: the build of ``merkle_nodes``). Then:

- **in process**: for random ``(seq, size)`` and ``(from, to)`` pairs, this checkout's
  :func:`app.services.proofs.inclusion_proof` and :func:`~app.services.proofs.consistency_proof`
  as the route calls them (visibility, the one statement, the hashing, the check before
  serving; not the HTTP and JSON layers), each proof verified with the core's verifiers, and
  its size in three encodings: raw (32 bytes a hash), base64 in a JSON list and hex in a JSON
  list (what the routes serve);
- **served**: the same kind of requests to ``GET …/ledger/proof`` and ``…/ledger/consistency``
  of a uvicorn server of this checkout (and of ``--before``'s, each round the two in turn, the
  same requests to both), one client on one kept-alive connection with the admin key: the wall
  time of each request as the client sees it, and the CPU the server's process used, per
  proof;
- the catch-up: the roots of the last four blocks dropped, as if their entries had been
  written since the last proof; the next proof at the head stores them again.

``python -m benchmarks proofs [--entries N] [--backend postgresql|sqlite|both] [--before DIR]``.
It prints; ``benchmarks/RESULTS.md``'s section is written by hand from its output.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from app.db.engine import make_engine
from app.db.uow import Database, UnitOfWork
from app.services import proofs
from app.services.principals import Principal, Role
from benchmarks.results import commit_of
from benchmarks.service_growth import prefill_postgres, prefill_sqlite
from benchmarks.service_setup import ADMIN_KEY, Server, loadavg, running_server
from odometer_core.ledger.merkle import entry_leaf_hash, verify_consistency, verify_inclusion

ROOT = Path(__file__).resolve().parent.parent
BASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/"
DATASET = "ds_proofs_bench"


def _alembic(url: str, revision: str) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    command.upgrade(cfg, revision)


def _sizes(path: list[bytes]) -> dict[str, int]:
    return {
        "hashes": len(path),
        "raw": 32 * len(path),
        "base64_json": len(json.dumps([base64.b64encode(h).decode() for h in path])),
        "hex_json": len(json.dumps([h.hex() for h in path])),
    }


def _ms(samples: list[float]) -> str:
    samples = sorted(samples)
    p50 = statistics.median(samples) * 1e3
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {samples[-1] * 1e3:.2f} ms"


# ---------------------------------------------------------------------------- the database
def _postgres(n: int, keep: bool, cache: Path | None) -> tuple[str, float | None]:
    """The benchmark's PostgreSQL database of ``n`` entries (reused with ``keep``); its URL and
    how long revision 0013 took (``None``: reused)."""
    name = f"odometer_proofs_bench_{n}"
    url = BASE_URL + name
    listed = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc", "SELECT datname FROM pg_database"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if keep and name in listed:
        return url, None
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name])
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    _alembic(url, "0012")
    t0 = time.perf_counter()
    prefill_postgres(f"postgresql://postgres@127.0.0.1:5432/{name}", DATASET, n, cache)
    print(f"prefilled {n} entries in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    _alembic(url, "0013")
    built = time.perf_counter() - t0
    with make_engine(url, null_pool=True).connect() as conn:  # as autovacuum would, later
        conn.execute(text("ANALYZE"))
        conn.commit()
    return url, built


def _sqlite(n: int, keep: bool, cache: Path | None) -> tuple[str, float | None]:
    """The same on SQLite, in a file under the temporary directory."""
    path = Path(tempfile.gettempdir()) / f"odometer_proofs_bench_{n}.db"
    url = f"sqlite:///{path}"
    if keep and path.exists():
        return url, None
    for stale in path.parent.glob(f"{path.name}*"):
        stale.unlink()
    _alembic(url, "0012")
    t0 = time.perf_counter()
    prefill_sqlite(str(path), DATASET, n, cache)
    print(f"prefilled {n} entries in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    _alembic(url, "0013")
    return url, time.perf_counter() - t0


def _drop(url: str) -> None:
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        for stale in path.parent.glob(f"{path.name}*"):
            stale.unlink()
    else:
        name = url.rsplit("/", 1)[1]
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)


# ---------------------------------------------------------------------------- measurements
def _pairs(rng: random.Random, n: int, k: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``k`` random ``(seq, size)`` and ``(from, to)`` pairs in a tree of ``n`` entries."""
    out = []
    for _ in range(k):
        size = rng.randint(1, n)
        old = rng.randint(0, n)
        out.append(((rng.randint(1, size), size), (old, rng.randint(old, n))))
    return out


def _in_process(url: str, n: int, k: int) -> None:
    """This checkout's service functions, timed and checked; the sizes; the catch-up."""
    engine = make_engine(url)
    database = Database.from_engine(engine)
    with engine.connect() as conn:
        hashes = [h for (h,) in conn.execute(text(
            "SELECT hash FROM ledger_entries WHERE dataset_id = :d ORDER BY seq"
        ), {"d": DATASET})]  # fmt: skip
    admin = Principal("admin", Role.ADMIN, None)
    uow = UnitOfWork(database)
    incl: list[float] = []
    cons: list[float] = []
    cpu = [0.0, 0.0]
    worst_incl: dict[str, int] = {}
    worst_cons: dict[str, int] = {}
    for (seq, size), (old, new) in _pairs(random.Random(52), n, k):
        t0, c0 = time.perf_counter(), time.process_time()
        made = proofs.inclusion_proof(uow, admin, DATASET, seq, size)
        incl.append(time.perf_counter() - t0)
        cpu[0] += time.process_time() - c0
        leaf = entry_leaf_hash(hashes[seq - 1])
        assert verify_inclusion(leaf, seq - 1, size, made.path, made.tree.root)
        sizes = _sizes(made.path)
        if sizes["raw"] > worst_incl.get("raw", -1):
            worst_incl = sizes
        t0, c0 = time.perf_counter(), time.process_time()
        c = proofs.consistency_proof(uow, admin, DATASET, old, new)
        cons.append(time.perf_counter() - t0)
        cpu[1] += time.process_time() - c0
        assert verify_consistency(old, new, c.old.root, c.new.root, c.path)
        sizes = _sizes(c.path)
        if sizes["raw"] > worst_cons.get("raw", -1):
            worst_cons = sizes
    # the worst consistency proof's length: old = 2^k + 1 style pairs near the top
    for old in (n // 2 + 1, n - 1, 3, (1 << (n.bit_length() - 1)) - 1):
        c = proofs.consistency_proof(uow, admin, DATASET, old, n)
        sizes = _sizes(c.path)
        if sizes["raw"] > worst_cons.get("raw", -1):
            worst_cons = sizes
    print(
        f"  in process, inclusion proof, {k} random (seq, size): {_ms(incl)}, CPU "
        f"{cpu[0] / k * 1e3:.2f} ms a proof; largest {worst_incl}"
    )
    print(
        f"  in process, consistency proof, {k} random pairs: {_ms(cons)}, CPU "
        f"{cpu[1] / k * 1e3:.2f} ms a proof; largest {worst_cons}"
    )
    cut = (n // proofs.BLOCK - 4) * proofs.BLOCK
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM merkle_nodes WHERE (idx + 1) * power(2, level) > :cut"),
            {"cut": cut},
        )
    t0 = time.perf_counter()
    proofs.inclusion_proof(uow, admin, DATASET, n, None)
    caught = time.perf_counter() - t0
    t0 = time.perf_counter()
    proofs.inclusion_proof(uow, admin, DATASET, n, None)
    print(
        f"  a proof at the head after {n - cut} entries not caught up: {caught * 1e3:.1f} ms "
        f"(then {(time.perf_counter() - t0) * 1e3:.2f} ms)"
    )
    engine.dispose()


@dataclass
class _Served:
    """One checkout's served proofs, over every round."""

    label: str
    wall: dict[str, list[float]] = field(default_factory=lambda: {"proof": [], "consistency": []})
    cpu: dict[str, float] = field(default_factory=lambda: {"proof": 0.0, "consistency": 0.0})
    count: dict[str, int] = field(default_factory=lambda: {"proof": 0, "consistency": 0})


def _get(conn: http.client.HTTPConnection, path: str) -> None:
    conn.request("GET", path, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")


def _round(
    port: int,
    cpu_seconds: Callable[[], float],
    requests: list[tuple[str, str]],
    into: _Served,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _, path in requests[:20]:  # warm: the connection, psycopg's prepared statements
            _get(conn, path)
        for kind in ("proof", "consistency"):
            mine = [path for k, path in requests if k == kind]
            c0 = cpu_seconds()
            for path in mine:
                t0 = time.perf_counter()
                _get(conn, path)
                into.wall[kind].append(time.perf_counter() - t0)
            into.cpu[kind] += cpu_seconds() - c0
            into.count[kind] += len(mine)
    finally:
        conn.close()


def _serving_cpu(server: Server) -> float:
    return server.cpu_by_role()["serving"]


def _served(url: str, n: int, k: int, rounds: int, checkouts: list[tuple[str, Path]]) -> None:
    """Each checkout's server on ``url``, ``rounds`` rounds of ``k`` requests of each kind, the
    checkouts in turn within a round (the same requests to each)."""
    results = [_Served(label) for label, _ in checkouts]
    logs = Path(tempfile.mkdtemp(prefix="proofs-bench-"))
    rng = random.Random(9162)
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                running_server(url, logs / f"{i}.log", 1, pool_connections=2, root=root)
            )
            for i, (_, root) in enumerate(checkouts)
        ]
        loads = []
        for r in range(rounds):
            requests = []
            for (seq, size), (old, new) in _pairs(rng, n, k):
                base = f"/v1/datasets/{DATASET}/ledger"
                requests.append(("proof", f"{base}/proof?seq={seq}&size={size}"))
                requests.append(("consistency", f"{base}/consistency?from={old}&to={new}"))
            order = list(zip(servers, results, strict=True))
            if r % 2:
                order.reverse()
            for server, into in order:
                _round(server.port, partial(_serving_cpu, server), requests, into)
            loads.append(loadavg())
    print(f"  served, {rounds} rounds of {k} of each, load average {min(loads)}–{max(loads)}:")
    for res in results:
        for kind in ("proof", "consistency"):
            per = res.cpu[kind] / res.count[kind] * 1e3
            print(
                f"    {res.label:>10} {kind:<12} {_ms(res.wall[kind])}, server CPU {per:.2f} ms "
                "a proof"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks proofs")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--proofs", type=int, default=300, help="of each kind, per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="served: rounds of --proofs each")
    parser.add_argument("--backend", choices=("postgresql", "sqlite", "both"), default="both")
    parser.add_argument(
        "--before", type=Path, default=None, help="another checkout, served side by side"
    )
    parser.add_argument("--cache", type=Path, default=None, help="the generated entries' cache")
    parser.add_argument(
        "--keep", action="store_true", help="keep the databases, and reuse them when they exist"
    )
    args = parser.parse_args(argv)
    n = args.entries
    checkouts = [("this checkout", ROOT)]
    if args.before is not None:
        checkouts.insert(0, (f"{commit_of(args.before) or 'before'} (before)", args.before))
    backends = ("postgresql", "sqlite") if args.backend == "both" else (args.backend,)
    print(f"{n} entries; load average {os.getloadavg()[0]:.1f} at the start")
    for backend in backends:
        url, built = (_postgres if backend == "postgresql" else _sqlite)(n, args.keep, args.cache)
        print(f"{backend}:")
        engine = make_engine(url, null_pool=True)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT count(*) FROM merkle_nodes")).scalar_one()
            t0 = time.perf_counter()
            for _ in range(200):
                conn.execute(text("SELECT 1")).all()
            rtt = (time.perf_counter() - t0) / 200
        engine.dispose()
        if built is not None:
            print(f"  revision 0013: {rows} stored roots built in {built:.1f} s")
        print(f"  one round trip to the database (SELECT 1): {rtt * 1e3:.3f} ms")
        _served(url, n, args.proofs, args.rounds, checkouts)
        _in_process(url, n, args.proofs)
        if not args.keep:
            _drop(url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
