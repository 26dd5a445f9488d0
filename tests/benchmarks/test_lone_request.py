"""The lone-request benchmark replays exactly what a registration writes, and its verdict is
the arithmetic its report states."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks.lone_request import (
    Timing,
    capture,
    lone_service,
    render,
    renewed,
    replay,
    verdict,
)
from benchmarks.service_load import sqlite_connect


def test_replayed_statements_write_what_a_registration_writes(tmp_path: Path) -> None:
    """Two replays between real registrations: the ledger stays one contiguous sequence, each
    replay adds one entry and one invocation under its own id, and the dataset's last sequence
    number follows. The capture as it was (not renewed) breaks the ledger's unique sequence, so
    the renewal is what makes a replay a new registration's work."""
    service = lone_service(tmp_path)
    try:
        for _ in range(3):
            service.register()
        conn = sqlite_connect(str(service.path))
        before = service.last_seq(conn)  # the dataset's creation entry and three registrations
        assert before == 4
        captured = capture(service.register)
        assert captured.seq == 5
        sql = " ".join(s for s, _ in captured.statements)
        assert "INSERT INTO ledger_entries" in sql and "INSERT INTO invocations" in sql
        with pytest.raises(sqlite3.IntegrityError):
            replay(conn, captured.statements)
        for i, inv in enumerate(("inv_replay_a", "inv_replay_b"), start=1):
            base = service.last_seq(conn) - captured.seq
            replay(conn, renewed(captured, base + 1, inv))
            assert service.last_seq(conn) == 5 + i
        service.register()
        seqs = [r[0] for r in conn.execute("SELECT seq FROM ledger_entries ORDER BY seq")]
        ids = {r[0] for r in conn.execute("SELECT id FROM invocations")}
        assert seqs == list(range(1, 9))
        assert {"inv_replay_a", "inv_replay_b", captured.invocation_id} <= ids
        assert len(ids) == 7  # five registrations and two replays
        assert service.last_seq(conn) == 8
        conn.close()
    finally:
        service.close()


def test_verdict_is_the_reported_arithmetic() -> None:
    """raw 4,000 req/s → 0.25 ms; 0.4 of it allows 0.625 ms; a floor of 2,000 req/s (0.5 ms)
    leaves 0.125 ms; the register path's 0.6 − 0.2 = 0.4 ms in process."""
    local = {
        "raw": [Timing(0.2, 0.1), Timing(0.3, 0.1), Timing(0.1, 0.1)],
        "statements": [Timing(0.2, 0.1)],
        "service": [Timing(0.6, 0.5), Timing(0.7, 0.5), Timing(0.5, 0.5)],
    }
    http = [
        {"system": "raw", "throughput": 4000.0},
        {"system": "floor", "throughput": 2000.0},
        {"system": "floor", "throughput": 1000.0},
        {"system": "floor", "throughput": 3000.0},
        {"system": "service", "throughput": 800.0},
    ]
    v = verdict(local, http)
    assert (v.raw_ms, v.floor_ms, v.service_ms) == (0.25, 0.5, 1.25)
    assert v.added_in_process_ms == pytest.approx(0.4)
    assert v.target_ms == pytest.approx(0.625)
    assert v.room_ms == pytest.approx(0.125)
    assert v.service_over_floor_ms == pytest.approx(0.75)
    http = [{**r, "load": 0.5, "p50_ms": 1.0, "p99_ms": 2.0} for r in http]
    text = render(
        local, http, "2026-11-26 12:00 UTC", "python -m benchmarks.lone_request", [0.5], 10
    )
    assert "**0.625 ms** per request" in text
    assert "**0.125 ms** on top of it" in text
    # the service's 1.25 − 0.5 = 0.75 ms over the floor against 0.125 ms of room
    assert "fall from 0.750 ms (the register path 0.400 ms," in text
    assert "to at most 0.125 ms: ÷ 6.0." in text
