"""The write-path benchmark's probes, each in a process of its own as the benchmark runs them
(``benchmarks/write_path_probe.py``): CPU per registration of this checkout's register path,
in process and through the ASGI app, and decided in groups. The whole benchmark also serves
the app over HTTP (group commit): a tiny SQLite run of it is a long test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks import write_path
from benchmarks.service_setup import migrate, pg_drop, pg_recreate

POSTGRES = os.environ.get(
    "ODOMETER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _postgres_reachable() -> bool:
    try:
        import psycopg

        with psycopg.connect(POSTGRES, connect_timeout=2):
            return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite database this checkout migrated (``alembic upgrade head``, about 2 s of CPU in
    a process of its own), copied for each probe instead of migrating one per probe: every
    probe still starts on a freshly migrated database of its own."""
    path = tmp_path_factory.mktemp("migrated") / "probe.db"
    migrate(f"sqlite:///{path}")
    return path


def _fresh(migrated: Path, path: Path) -> str:
    shutil.copyfile(migrated, path)
    return f"sqlite:///{path}"


@pytest.mark.parametrize("kind", ["service", "edge"])
def test_a_probe_measures_this_checkouts_registrations(
    tmp_path: Path, migrated: Path, kind: str
) -> None:
    url = _fresh(migrated, tmp_path / "probe.db")
    cpu_ms = write_path.probe(write_path.ROOT, url, 100, kind, "1")
    assert 0.01 < cpu_ms < 100  # about 1 ms on the benchmark machine


@pytest.mark.skipif(not _postgres_reachable(), reason=f"no PostgreSQL at {POSTGRES}")
def test_the_group_probe_decides_k_at_a_time() -> None:
    scratch = POSTGRES.rsplit("/", 1)[0] + "/odometer_write_path_smoke"
    url = pg_recreate(scratch)
    try:
        migrate(url)
        cpu_ms = write_path.probe(write_path.ROOT, url, 60, "group", "3", "many")
        assert 0.01 < cpu_ms < 100
    finally:
        pg_drop(scratch)


def test_the_groups_table() -> None:
    result = {
        "started": "2026-01-01T00:00:00", "machine": "m", "loadavg": "1", "command": "c",
        "rounds": 1, "count": 60, "checkouts": {"before": "`abc`", "this commit": "`def`"},
        "groups": [{"spread": "hot", "size": 2, "cpu_ms": {"before": 1.0, "this commit": 0.5}}],
    }  # fmt: skip
    text = write_path.render_groups(result)
    assert text.startswith(write_path.GROUPS_BEGIN) and text.endswith(write_path.GROUPS_END)
    assert "| datasets | K | before | this commit |" in text
    assert "| hot | 2 | 1.000 ms | 0.500 ms |" in text


@pytest.mark.skipif(
    os.environ.get("ODOMETER_LONG_TESTS") != "1",
    reason="starts two servers (group commit on and off); ODOMETER_LONG_TESTS=1 runs it",
)
def test_a_tiny_sqlite_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--postgres", "none", "--rounds", "1", "--count", "50", "--clients", "1"]
    assert write_path.main([*argv, "--duration", "0.5", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "| sqlite | service + ASGI app | yes | " in out
    row = next(line for line in out.splitlines() if line.startswith("| sqlite | 1 | "))
    assert row.endswith(" |") and "Errors in the HTTP cells: **0**." in out


@pytest.mark.parametrize("kind", ["service", "edge"])
def test_a_probe_given_a_checkpoint_key_signs_with_it(
    tmp_path: Path, migrated: Path, kind: str
) -> None:
    """``python -m benchmarks compare --checkpoint-key``: the probe's process is given the key
    and its registrations sign with it, in process as the served app does (here a checkpoint
    at every entry, counted in the probe's database; without the key, none)."""
    import sqlite3

    from odometer_core.ledger.checkpoints import generate_key_pem

    pem = tmp_path / "key.pem"
    pem.write_bytes(generate_key_pem()[0])
    signed = {"ODOMETER_CHECKPOINT_KEY": str(pem), "ODOMETER_CHECKPOINT_EVERY": "1"}
    counts: list[int] = []
    for env in ({"ODOMETER_CHECKPOINT_EVERY": "1"}, signed):
        path = tmp_path / f"probe-{len(counts)}.db"
        write_path.probe(write_path.ROOT, _fresh(migrated, path), 10, kind, "0", env=env)
        with sqlite3.connect(path) as conn:
            counts.append(conn.execute("SELECT count(*) FROM ledger_checkpoints").fetchone()[0])
    assert counts == [0, 211]  # the creation entry, 200 of warm-up, then 10
