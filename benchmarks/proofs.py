"""Proofs over a 10^6-entry ledger on PostgreSQL: what revision 0013 takes to build the stored
subtree roots, what an inclusion and a consistency proof take to serve, and how many bytes
they are.

A fresh database is migrated to revision 0012, prefilled with N valid entries
(:mod:`benchmarks.service_growth`, the rows the service would have written, its frontier
beside the head), then migrated to 0013 (timed: the build of ``merkle_nodes``). Then, for
random ``(seq, size)`` and ``(from, to)`` pairs, the service's
:func:`app.services.proofs.inclusion_proof` and :func:`~app.services.proofs.consistency_proof`
are timed as the route calls them (visibility check, the stored-root reads, the hashing; the
HTTP and JSON layers are not included), each proof is verified with the core's verifiers, and
its size is reported in three encodings: raw (32 bytes a hash), base64 in a JSON list and hex
in a JSON list (what the routes serve today). Then ``BLOCK`` more entries are appended and the
catch-up a proof then does is timed. ``python -m benchmarks proofs [--entries N]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import subprocess
import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from app.db.engine import make_engine
from app.db.uow import Database, UnitOfWork
from app.services import proofs
from app.services.principals import Principal, Role
from benchmarks.service_growth import prefill_postgres
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks proofs")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--proofs", type=int, default=300)
    parser.add_argument("--cache", type=Path, default=None, help="the generated entries' cache")
    parser.add_argument(
        "--keep", action="store_true", help="keep the database, and reuse it when it exists"
    )
    args = parser.parse_args(argv)
    n = args.entries
    name = f"odometer_proofs_bench_{n}"
    url = BASE_URL + name
    listed = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc", "SELECT datname FROM pg_database"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    built = None
    if not (args.keep and name in listed):
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name])
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
        _alembic(url, "0012")
        t0 = time.perf_counter()
        prefill_postgres(f"postgresql://postgres@127.0.0.1:5432/{name}", DATASET, n, args.cache)
        print(f"prefilled {n} entries in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        _alembic(url, "0013")
        built = time.perf_counter() - t0
    engine = make_engine(url)
    database = Database.from_engine(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM merkle_nodes")).scalar_one()
        hashes = [h for (h,) in conn.execute(text(
            "SELECT hash FROM ledger_entries WHERE dataset_id = :d ORDER BY seq"
        ), {"d": DATASET})]  # fmt: skip
    if built is not None:
        print(f"revision 0013: {rows} stored roots built in {built:.1f} s")
    with engine.connect() as conn:
        t0 = time.perf_counter()
        for _ in range(200):
            conn.execute(text("SELECT 1")).all()
        rtt = (time.perf_counter() - t0) / 200
    print(f"one round trip to the database (SELECT 1): {rtt * 1e3:.2f} ms")
    admin = Principal("admin", Role.ADMIN, None)
    uow = UnitOfWork(database)
    rng = random.Random(52)
    incl: list[float] = []
    cons: list[float] = []
    cpu = [0.0, 0.0]
    worst_incl: dict[str, int] = {}
    worst_cons: dict[str, int] = {}
    for _ in range(args.proofs):
        size = rng.randint(1, n)
        seq = rng.randint(1, size)
        t0, c0 = time.perf_counter(), time.process_time()
        made = proofs.inclusion_proof(uow, admin, DATASET, seq, size)
        incl.append(time.perf_counter() - t0)
        cpu[0] += time.process_time() - c0
        leaf = entry_leaf_hash(hashes[seq - 1])
        assert verify_inclusion(leaf, seq - 1, size, made.path, made.tree.root)
        sizes = _sizes(made.path)
        if sizes["raw"] > worst_incl.get("raw", -1):
            worst_incl = sizes
        old = rng.randint(0, n)
        new = rng.randint(old, n)
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
    k = args.proofs
    print(
        f"inclusion proof, {k} random (seq, size): {_ms(incl)}, CPU {cpu[0] / k * 1e3:.2f} ms "
        f"a proof; largest {worst_incl}"
    )
    print(
        f"consistency proof, {k} random pairs: {_ms(cons)}, CPU {cpu[1] / k * 1e3:.2f} ms a "
        f"proof; largest {worst_cons}"
    )
    # the catch-up: the roots of the last four blocks dropped, as if their entries had been
    # written since the last proof; the next proof at the head stores them again
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
        f"a proof at the head after {n - cut} entries not caught up: {caught * 1e3:.1f} ms "
        f"(then {(time.perf_counter() - t0) * 1e3:.2f} ms)"
    )
    engine.dispose()
    if not args.keep:
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
