"""What deciding a selection of blocks costs, with 10⁶ blocks: in the core, and in the service
on its database.

A partitioned dataset of 10⁶ blocks (daily or bucket blocks), per mode (``basic`` pure
ε = 0.001, ``rdp`` Gaussians σ = 50): the time of 1,000 charges over random ranges (1 … 10⁵
blocks) and the runs they leave, then the decision on 10⁴ contiguous blocks (p50 over 20 random
places) and on all 10⁶ blocks. Runs grow with the number of charges (distinct histories), not
the number of blocks.

- the core alone (``odometer_core.accounting.blocks``): no HTTP, no database;
- ``--database URL`` (PostgreSQL for the issue's figures): the same, through the service's write
  path in process (``register_invocation``: the window of runs read under the dataset's lock,
  decided, written back and committed, with its ledger entry), on a dataset of 10⁶ daily
  blocks; and, side by side, interleaved, one-block admissions on that dataset against
  admissions on a whole dataset of the same mode (CPU and wall time per admission).

Run::

    .venv/bin/python -m benchmarks blocks
    .venv/bin/python -m benchmarks blocks --database postgresql+psycopg://postgres@127.0.0.1:5432/bench_blocks

Writes the section between the ``blocks`` markers of ``benchmarks/RESULTS.md`` and prints it
(``--no-results``: print only; ``--blocks N --charges K`` for a smaller run).
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from benchmarks.results import write_section
from odometer_core.accounting import initial_state, make_config, parse_declaration
from odometer_core.accounting.blocks import Blocks, decide_selection
from odometer_core.ledger.blocks import Partitioned

BEGIN, END = "<!-- blocks:begin -->", "<!-- blocks:end -->"
WORKLOADS = {
    "basic": {"type": "pure_dp", "epsilon": "0.001"},
    "rdp": {"type": "gaussian", "sigma": "50", "sensitivity": "1"},
}


def run(mode: str, blocks: int, charges: int, seed: int = 1) -> dict[str, float]:
    config = make_config("10", "0.00001", "add_remove", {"mode": mode})
    declaration = parse_declaration(WORKLOADS[mode])
    state = Blocks().open(0, blocks, initial_state(config))
    rng = random.Random(seed)
    started = time.perf_counter()
    for _ in range(charges):
        lo = rng.randrange(0, blocks)
        hi = min(blocks, lo + rng.randrange(1, max(2, blocks // 10)))
        decided = decide_selection(config, state, [(lo, hi)], declaration)
        if not decided.admitted:
            raise RuntimeError(f"a charge was refused: {decided.refused[0].decision.reason}")
        state = decided.blocks
    history = time.perf_counter() - started
    span = min(10**4, blocks)
    times = []
    for _ in range(20):
        lo = rng.randrange(0, blocks - span + 1)
        at = time.perf_counter()
        decide_selection(config, state, [(lo, lo + span)], declaration)
        times.append(time.perf_counter() - at)
    at = time.perf_counter()
    everything = decide_selection(config, state, [(0, blocks)], declaration)
    whole = time.perf_counter() - at
    if not everything.admitted:
        raise RuntimeError("the charge over every block was refused")
    return {
        "runs": len(state.runs),
        "history_s": history,
        "span": span,
        "span_p50_ms": statistics.median(times) * 1000,
        "all_ms": whole * 1000,
    }


def vacuum(url: str) -> None:
    """``VACUUM ANALYZE`` on PostgreSQL before a measured phase: this machine's cluster runs
    with autovacuum off, and the runs table a partitioned dataset churns (runs split, merged
    and rewritten) would otherwise slow every later phase with dead rows that autovacuum
    removes in production."""
    if not url.startswith("postgresql"):
        return
    import psycopg

    with psycopg.connect(
        url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as c:
        c.execute("VACUUM ANALYZE")


#: admissions of each kind over HTTP, in rounds of :data:`HTTP_BATCH` alternating kinds
HTTP_ROUNDS, HTTP_BATCH = 400, 50


def over_http(url: str, ds: str, whole: str, days: list[str]) -> dict[str, float]:
    """One-block admissions on ``ds`` beside whole-dataset admissions on ``whole``, over HTTP
    to a one-worker server on ``url`` (one keep-alive connection, requests one after another),
    alternating in batches: p50 latency and the server's CPU per admission of each kind."""
    import http.client
    import json
    import tempfile
    from pathlib import Path

    from benchmarks.service_setup import ADMIN_KEY, running_server

    mechanism = WORKLOADS_BY_DS[ds]
    times: dict[str, list[float]] = {"one": [], "whole": []}
    cpu = {"one": 0.0, "whole": 0.0}
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_server(url, Path(tmp) / "server.log", 1) as server,
    ):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}

        def admit(kind: str, day: str) -> None:
            body: dict[str, object] = {"mechanism": mechanism}
            target = whole
            if kind == "one":
                body["blocks"] = {"from": day, "to": day}
                target = ds
            at = time.perf_counter()
            conn.request("POST", f"/v1/datasets/{target}/invocations", json.dumps(body), headers)
            response = conn.getresponse()
            response.read()
            times[kind].append(time.perf_counter() - at)
            if response.status != 201:
                raise RuntimeError(f"refused over HTTP: {response.status}")

        for warm in days[:20]:
            admit("one", warm)
            admit("whole", warm)
        times = {"one": [], "whole": []}
        for start in range(0, len(days), HTTP_BATCH):
            for kind in ("one", "whole"):
                before = server.cpu_seconds()
                for day in days[start : start + HTTP_BATCH]:
                    admit(kind, day)
                cpu[kind] += server.cpu_seconds() - before
        conn.close()
    return {
        "http_one_p50_ms": statistics.median(times["one"]) * 1000,
        "http_whole_p50_ms": statistics.median(times["whole"]) * 1000,
        "http_one_cpu_ms": cpu["one"] / len(times["one"]) * 1000,
        "http_whole_cpu_ms": cpu["whole"] / len(times["whole"]) * 1000,
    }


#: the declaration each dataset of :func:`service` is charged (for :func:`over_http`)
WORKLOADS_BY_DS: dict[str, dict[str, str]] = {}


def service(url: str, mode: str, blocks: int, charges: int, seed: int = 1) -> dict[str, float]:
    """The same history through the service's write path on ``url`` (a migrated database)."""
    from app.db.uow import Database, UnitOfWork
    from app.services import blocks as block_service
    from app.services import datasets
    from app.services.invocations import register_invocation
    from app.services.principals import Principal, Role
    from app.services.registration import InvocationRequest
    from app.settings import Settings

    db = Database.from_settings(Settings(database_url=url))
    uow = UnitOfWork(db)
    admin = Principal("admin", Role.ADMIN, None)

    def new(partitioned: bool) -> str:
        made = datasets.NewDataset(
            name=f"bench-{mode}",
            epsilon="10",
            delta="0.00001",
            relation="add_remove",
            accounting={"mode": mode},
            partition={"kind": "day", "unit": "record", "timezone": "UTC"} if partitioned else None,
        )
        return str(datasets.create_dataset(uow, admin, made)["id"])

    ds, whole = new(True), new(False)
    WORKLOADS_BY_DS[ds] = WORKLOADS[mode]
    first = datetime(2000, 1, 1, tzinfo=UTC).date()

    def key(i: int) -> str:
        return (first + timedelta(days=i)).isoformat()

    block_service.open_or_retire(uow, admin, ds, opening=(key(0), key(blocks - 1)), retiring=None)
    declaration = parse_declaration(WORKLOADS[mode])

    def charge(lo: int, hi: int, dataset: str = ds) -> float:
        sent = None if dataset == whole else {"from": key(lo), "to": key(hi - 1)}
        at = time.perf_counter()
        out = register_invocation(uow, admin, dataset, InvocationRequest(declaration, blocks=sent))
        took = time.perf_counter() - at
        if out.decision != "accepted":
            raise RuntimeError(f"a charge was refused: {out.body[:300]}")
        return took

    rng = random.Random(seed)
    started = time.perf_counter()
    for _ in range(charges):
        lo = rng.randrange(0, blocks)
        charge(lo, min(blocks, lo + rng.randrange(1, max(2, blocks // 10))))
    history = time.perf_counter() - started
    with uow.read_only():
        row = uow.datasets.get(ds)
        assert row is not None
        runs = Partitioned.from_json(row.state_json).runs
    vacuum(url)
    span = min(10**4, blocks)
    spans = [
        charge(lo, lo + span) for lo in (rng.randrange(0, blocks - span + 1) for _ in range(20))
    ]
    everything = charge(0, blocks)
    vacuum(url)
    one, plain = [], []
    cpu_one = cpu_plain = 0.0
    for _ in range(400):  # interleaved: a block of the partitioned dataset, then the whole one
        b = rng.randrange(0, blocks)
        at = time.process_time()
        one.append(charge(b, b + 1))
        cpu_one += time.process_time() - at
        at = time.process_time()
        plain.append(charge(0, 0, whole))
        cpu_plain += time.process_time() - at
    db.dispose()
    vacuum(url)
    http = over_http(url, ds, whole, [key(rng.randrange(0, blocks)) for _ in range(HTTP_ROUNDS)])
    return {
        **http,
        "runs": runs,
        "history_s": history,
        "span": span,
        "span_p50_ms": statistics.median(spans) * 1000,
        "all_ms": everything * 1000,
        "one_p50_ms": statistics.median(one) * 1000,
        "whole_p50_ms": statistics.median(plain) * 1000,
        "one_cpu_ms": cpu_one / len(one) * 1000,
        "whole_cpu_ms": cpu_plain / len(plain) * 1000,
    }


def _service_rows(url: str, blocks: int, charges: int) -> tuple[list[str], str]:
    from benchmarks.service_setup import loadavg, migrate, pg_drop, pg_recreate

    rows = []
    for mode in WORKLOADS:
        postgres = url.startswith("postgresql")
        if postgres:
            pg_recreate(url)  # the benchmark's own database, anew for each mode
        migrate(url)
        r = service(url, mode, blocks, charges)
        if postgres:
            pg_drop(url.replace("postgresql+psycopg://", "postgresql://"))
        ratio = r["one_p50_ms"] / r["whole_p50_ms"]
        http_ratio = r["http_one_p50_ms"] / r["http_whole_p50_ms"]
        rows.append(
            f"| `{mode}` | {blocks:,} | {charges:,} | {r['runs']:,.0f} | "
            f"{r['history_s']:.1f} s | {r['span_p50_ms']:.1f} ms | {r['all_ms']:.0f} ms | "
            f"{r['http_one_p50_ms']:.2f} / {r['http_whole_p50_ms']:.2f} ms "
            f"(**{http_ratio:.2f}×**); CPU {r['http_one_cpu_ms']:.2f} / "
            f"{r['http_whole_cpu_ms']:.2f} ms | "
            f"{r['one_p50_ms']:.2f} / {r['whole_p50_ms']:.2f} ms ({ratio:.2f}×); "
            f"CPU {r['one_cpu_ms']:.2f} / {r['whole_cpu_ms']:.2f} ms |"
        )
    return rows, f"load {loadavg():.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks blocks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--blocks", type=int, default=10**6)
    parser.add_argument("--charges", type=int, default=1000)
    parser.add_argument(
        "--database",
        help="also measure the service's write path on this database (its own: dropped and "
        "created anew; PostgreSQL for the issue's figures)",
    )
    parser.add_argument("--no-results", action="store_true", help="print only")
    parser.add_argument(
        "--attack",
        nargs="+",
        metavar="URL",
        help="run only the fragmenting attack, on each of these databases (each its own: "
        "dropped and created anew): benchmarks/blocks_attack.py",
    )
    parser.add_argument("--buckets", type=int, default=10**7, help="the attack's buckets")
    parser.add_argument("--registrations", type=int, default=50, help="the attack's size")
    parser.add_argument("--keys", type=int, default=1000, help="keys per registration")
    parser.add_argument("--repeat", type=int, default=5, help="timings per request (p50)")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if args.attack:
        from benchmarks import blocks_attack

        block = blocks_attack.section(
            args.attack, args.buckets, args.registrations, args.keys, args.repeat, started
        )
        print(block)
        if not args.no_results:
            write_section(block)
        return 0
    rows = []
    for mode in WORKLOADS:
        r = run(mode, args.blocks, args.charges)
        rows.append(
            f"| `{mode}` | {args.blocks:,} | {args.charges:,} | {r['runs']:,.0f} | "
            f"{r['history_s']:.2f} s | {r['span_p50_ms']:.2f} ms ({r['span']:,.0f} blocks) | "
            f"{r['all_ms']:.1f} ms |"
        )
    lines = [
        BEGIN,
        "## Partitioned datasets: a selection of blocks decided",
        "",
        f"`python -m benchmarks blocks` — {started}, Python {platform.python_version()}, "
        f"{platform.machine()}. Charges over random ranges of 1 … blocks/10 blocks, then one "
        "charge over a contiguous span of 10⁴ blocks (p50 of 20) and one over every block; "
        "each decision is made once per distinct history.",
        "",
        "The core alone (no HTTP, no database):",
        "",
        "| mode | blocks | random-range charges | runs after them | their time | "
        "p50 of one span | all blocks |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    if args.database:
        service_rows, load = _service_rows(args.database, args.blocks, args.charges)
        backend = args.database.split(":", 1)[0].split("+", 1)[0]
        lines += [
            "",
            f"The service on {backend} (`--database`; daily blocks). The charges are made "
            "through the write path in process (decided, written and committed with their "
            "ledger entry). Then one-block admissions beside whole-dataset admissions of the "
            "same mode, side by side: over HTTP to a one-worker server (one connection, "
            f"{HTTP_ROUNDS} of each in alternating batches of {HTTP_BATCH}; p50 latency and "
            "server CPU per admission), and in process (400 of each, interleaved; p50 and "
            f"CPU). {load} at the end:",
            "",
            "| mode | blocks | random-range charges | runs after them | their time | "
            "p50 over 10⁴ blocks | all blocks | HTTP: one block / whole dataset | "
            "in process: one block / whole dataset |",
            "|---|---|---|---|---|---|---|---|---|",
            *service_rows,
        ]
    lines.append(END)
    block = "\n".join(lines)
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
