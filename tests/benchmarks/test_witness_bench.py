"""The witness benchmark: its table (medians of the rounds, systems in their order) in process;
a tiny SQLite run starts three servers, a long test."""

from __future__ import annotations

import os

import pytest

from benchmarks import witness


def _row(system: str, r: int, throughput: float, cpu_ms: float) -> dict[str, object]:
    return {
        "backend": "sqlite", "clients": 1, "round": r, "system": system, "loadavg": 1.5,
        "throughput": throughput, "p50_ms": 2.0, "p99_ms": 9.0, "errors": 0, "cpu_ms": cpu_ms,
    }  # fmt: skip


def test_the_table_gives_each_systems_median_in_order() -> None:
    rows = [
        _row("witness, lag 1 s", 0, 300.0, 0.9),
        _row("witness, lag 0", 0, 80.0, 3.0),
        _row("no witness", 0, 200.0, 1.4),
        _row("no witness", 1, 240.0, 1.2),
        _row("no witness", 2, 220.0, 1.3),
        _row("witness, lag 0", 1, 90.0, 3.2),
        _row("witness, lag 1 s", 1, 320.0, 0.95),
    ]
    text = witness.render(rows, "python -m benchmarks witness --backends sqlite")
    assert text.startswith(witness.BEGIN) and text.endswith(witness.END + "\n")
    assert "`python -m benchmarks witness --backends sqlite` (" in text
    table = [line for line in text.splitlines() if line.startswith("| sqlite |")]
    assert table == [
        "| sqlite | 1 | no witness | 220 | 2.0 | 9.0 | 1.30 | 1.50 | 0 |",
        "| sqlite | 1 | witness, lag 0 | 90 | 2.0 | 9.0 | 3.20 | 1.50 | 0 |",
        "| sqlite | 1 | witness, lag 1 s | 320 | 2.0 | 9.0 | 0.95 | 1.50 | 0 |",
    ]
    assert "earlier build" not in text


@pytest.mark.skipif(
    os.environ.get("ODOMETER_LONG_TESTS") != "1",
    reason="starts three servers (no witness, lag 0, lag 1 s); ODOMETER_LONG_TESTS=1 runs it",
)
def test_a_tiny_sqlite_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--backends", "sqlite", "--clients", "1", "--duration", "0.5", "--rounds", "1"]
    assert witness.main([*argv, "--no-write"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| sqlite | 1 | ")]
    assert [row.split(" | ")[2] for row in rows] == list(witness.SYSTEMS)
    assert all(row.endswith(" | 0 |") for row in rows)
