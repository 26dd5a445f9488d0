"""The HTTP floor benchmark: its bare app runs exactly the raw baseline's transaction, the raw
baseline's load measures it, and the table's ratios are the cells'. The whole benchmark starts
servers (three systems, uvicorn with two workers each): a tiny SQLite run of it is a long test."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from benchmarks import http_floor
from benchmarks.http_floor_app import SqliteFloorApp
from benchmarks.service_load import run_sqlite
from benchmarks.service_setup import sqlite_baseline_setup


async def _post(app: SqliteFloorApp, path: str) -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_the_floor_app_appends_hash_chained_rows(tmp_path: Path) -> None:
    path = tmp_path / "floor.db"
    sqlite_baseline_setup(path, 2)
    app = SqliteFloorApp(str(path), 2)

    async def three() -> list[tuple[int, dict[str, Any]]]:
        return [await _post(app, "/b00001") for _ in range(3)]

    answers = asyncio.run(three())
    assert answers == [(201, {"status": "accepted", "seq": s}) for s in (1, 2, 3)]
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT seq, prev_hash, hash FROM bench_ledger WHERE dataset_id = 'b00001' ORDER BY seq"
    ).fetchall()
    head = conn.execute("SELECT last_seq, head_hash FROM bench_budget WHERE id = 'b00001'")
    assert [r[0] for r in rows] == [1, 2, 3]
    assert rows[0][1] == "0" * 64 and rows[1][1] == rows[0][2] and rows[2][1] == rows[1][2]
    assert head.fetchone() == (3, rows[2][2])
    conn.close()


def test_the_raw_load_and_the_table(tmp_path: Path) -> None:
    """A 0.3 s raw baseline load on SQLite, in process, then the table from its figures with a
    floor at half and a service at a quarter of its throughput."""
    path = tmp_path / "raw.db"
    sqlite_baseline_setup(path, 1)
    spec = {"kind": "sqlite", "path": str(path), "budgets": ["b00000"], "clients": 1}
    raw = run_sqlite({**spec, "duration": 0.3, "warmup": 0.05})
    assert raw["ok"] > 10 and raw["errors"] == 0 and raw["p50_ms"] <= raw["p99_ms"]
    cell = {"clients": 1, "round": 0, "load": 1.0, "errors": 0}
    tp = raw["throughput"]
    runs = [
        {**cell, **raw, "system": "raw"},
        {**cell, "system": "floor", "throughput": tp / 2, "p50_ms": 1.0, "p99_ms": 2.0,
         "cpu_ms": 0.3},
        {**cell, "system": "service", "throughput": tp / 4, "p50_ms": 2.0, "p99_ms": 4.0,
         "cpu_ms": 0.8},
    ]  # fmt: skip
    text = http_floor.render(runs, "now", "python -m benchmarks http-floor --sqlite", "sqlite")
    assert text.startswith("<!-- http-floor-sqlite: begin -->")
    assert f"| 1 | {tp:,.0f} (" in text
    assert "), 0.30 | " in text and "), 0.80 | 0.50 | 0.25 | 0.50 |" in text
    assert "Errors (non-2xx or transport) in every cell: **0**." in text


@pytest.mark.skipif(
    os.environ.get("ODOMETER_LONG_TESTS") != "1",
    reason="starts the floor and the service (two uvicorn workers each); ODOMETER_LONG_TESTS=1",
)
def test_a_tiny_sqlite_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sqlite", "--clients", "1", "--rounds", "1", "--duration", "0.5"]
    assert http_floor.main([*argv, "--warmup", "0.2", "--no-results"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| 1 | "))
    ratios = [float(x) for x in row.rstrip(" |").split(" | ")[-3:]]
    assert all(0 < r < 10 for r in ratios), row
    assert "Errors (non-2xx or transport) in every cell: **0**." in out


def test_a_capped_run_has_its_own_section_and_names_each_builds_cap() -> None:
    cell = {"clients": 32, "round": 0, "load": 1.0, "errors": 0, "p50_ms": 1.0, "p99_ms": 2.0}
    runs = [
        {**cell, "system": s, "throughput": 100.0, "cpu_ms": 1.0}
        for s in ("raw", "floor", "service", "service@before")
    ]
    caps = {"": "zcdp", "before": "basic"}
    text = http_floor.render(runs, "now", "cmd", "postgresql", 3, None, caps)
    assert text.startswith("<!-- http-floor-many-capped: begin -->")
    assert "under an organisation cap" in text.splitlines()[1]
    assert "(every build: `zcdp`, *service@before*: `basic`), its row hot" in text
