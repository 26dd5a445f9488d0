"""The first report after a start resumes from the position stored in the database
(:mod:`app.services._positions`), and only from one this server wrote for this ledger.

A process that remembers nothing (``VERIFIED.forget()``, as after a restart) reads the stored
position and re-runs only the entries after it; the verdict equals a full re-run's. A stored
position is ignored, and the ledger re-run from the genesis, when its MAC does not match (a
database writer's forgery), when it names another key or build of the core, or when it is
another dataset's. Without a checkpoint key nothing is stored.

The forgery case is the attack the MAC is for: the ledger's entry 4 rewritten with a zero
charge and its chain rehashed consistently (the dataset's head moved with it), and the stored
position's head moved to the forged chain's head. With the MAC check the report re-runs entry 4
and says so. Shown able to fail: with the check disabled (``hmac.compare_digest`` patched to
accept anything, the last part of :func:`test_a_forged_position_is_not_resumed`), the report
resumes from the forged position and says ``ok``: the zeroed charge is never re-run.
"""

from __future__ import annotations

import hmac
import json
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.models import VerifiedPosition
from app.db.uow import Database, UnitOfWork
from app.main import create_app
from app.services import _positions, _verified, verify_behind
from app.settings import Settings
from odometer_core.ledger.checkpoints import generate_key_pem
from tests.api.test_report_resume import (
    _dataset,
    _register,
    _rewritten,
    _verdict,
    counted_steps,
)
from tests.support import ADMIN_KEY, Backend


def _served(url: str, key: Path | None) -> tuple[TestClient, Database]:
    database = Database.from_settings(
        Settings(database_url=url, checkpoint_key=None if key is None else str(key))
    )
    settings = Settings(
        database_url=url, admin_key=ADMIN_KEY, checkpoint_key=None if key is None else str(key)
    )
    return TestClient(create_app(settings, database)), database


def _key(tmp_path: Path, name: str = "checkpoint.pem") -> Path:
    path = tmp_path / name
    path.write_bytes(generate_key_pem()[0])
    return path


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return counted_steps(monkeypatch)


@pytest.fixture
def keyed(
    fresh_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, Database]]:
    """A server with a checkpoint key, storing every clean report's position."""
    monkeypatch.setattr(_positions, "PERSIST_AFTER", 0.0)
    monkeypatch.setattr(_positions, "STORE_COST_PER_HELD", 0.0)
    _verified.VERIFIED.forget()
    client, database = _served(fresh_backend.url, _key(tmp_path))
    with client:
        yield client, database
    _verified.VERIFIED.forget()
    database.dispose()


def _row(database: Database, ds: str) -> VerifiedPosition | None:
    with UnitOfWork(database).read_only() as uow:
        return uow.session.get(VerifiedPosition, ds)


def _restarted(client: TestClient, ds: str) -> dict[str, Any]:
    """The report of a process that remembers nothing in memory."""
    _verified.VERIFIED.forget()
    return _verdict(client, ds)


def _from_scratch(client: TestClient, ds: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The verdict of a full re-run: nothing remembered, nothing stored read."""
    with monkeypatch.context() as patched:
        patched.setattr(_positions, "stored", lambda uow, dataset_id: None)
        return _restarted(client, ds)


def test_a_restart_resumes_from_the_stored_position(
    keyed: tuple[TestClient, Database], steps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, database = keyed
    ds = _dataset(client, 6)
    first = _verdict(client, ds)
    assert first["ok"] is True and steps == [2, 3, 4, 5, 6, 7, 8]
    row = _row(database, ds)
    assert row is not None and row.entries == 8 and row.head_hash == first["head_hash"]
    assert row.code == _positions.code_identity()

    steps.clear()
    assert _restarted(client, ds) == first
    assert steps == []  # resumed at the stored head: nothing re-run

    _register(client, ds, 2, seed=8)
    steps.clear()
    resumed = _restarted(client, ds)
    assert steps == [9, 10]
    assert resumed["ok"] is True and resumed["entries"] == 10
    stored_again = _row(database, ds)
    assert stored_again is not None and stored_again.entries == 10
    steps.clear()
    assert _from_scratch(client, ds, monkeypatch) == resumed
    assert steps == list(range(2, 11))


def test_a_forged_position_is_not_resumed(
    keyed: tuple[TestClient, Database], steps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, database = keyed
    ds = _dataset(client, 5)
    assert _verdict(client, ds)["ok"] is True
    forged_chain = _rewritten(database, ds)
    head = forged_chain[-1]["hash"]
    # the stored position moved to the forged chain's head, its MAC left as it was
    with UnitOfWork(database) as uow:
        row = uow.session.get(VerifiedPosition, ds)
        assert row is not None and row.entries == 7
        body = json.loads(zlib.decompress(row.body))
        body["head_hash"] = body["chain"]["prev_hash"] = head
        row.body = zlib.compress(json.dumps(body).encode())
        row.head_hash = head
        uow.commit()
    steps.clear()
    verdict = _restarted(client, ds)
    assert verdict["ok"] is False
    assert verdict["first_problem"] is not None and "entry 4 " in verdict["first_problem"]
    assert 4 in steps
    assert _from_scratch(client, ds, monkeypatch) == verdict

    # what the MAC stops: accepted, the forged position hides the zeroed charge
    with monkeypatch.context() as patched:
        patched.setattr(hmac, "compare_digest", lambda a, b: True)
        steps.clear()
        fooled = _restarted(client, ds)
    assert fooled["ok"] is True and steps == []


def test_another_key_build_or_dataset_is_not_resumed(
    keyed: tuple[TestClient, Database],
    steps: list[int],
    tmp_path: Path,
    fresh_backend: Backend,
) -> None:
    client, database = keyed
    ds = _dataset(client, 3)
    other = _dataset(client, 3)
    assert _verdict(client, ds)["ok"] is True
    assert _verdict(client, other)["ok"] is True

    # another build of the core: ignored (and replaced by this build's once re-run)
    with UnitOfWork(database) as uow:
        uow.session.execute(
            text("UPDATE verified_positions SET code = :c WHERE dataset_id = :d"),
            {"c": "0" * 64, "d": ds},
        )
        uow.commit()
    steps.clear()
    assert _restarted(client, ds)["ok"] is True
    assert steps == list(range(2, 6))

    # another dataset's row copied over this one's: its MAC names the other dataset
    with UnitOfWork(database) as uow:
        source = uow.session.get(VerifiedPosition, other)
        target = uow.session.get(VerifiedPosition, ds)
        assert source is not None and target is not None
        target.entries, target.head_hash, target.mac, target.body = (
            source.entries,
            source.head_hash,
            source.mac,
            source.body,
        )
        uow.commit()
    steps.clear()
    assert _restarted(client, ds)["ok"] is True
    assert steps == list(range(2, 6))

    # another server key: the position is not this server's
    second, second_db = _served(fresh_backend.url, _key(tmp_path, "b.pem"))
    with second:
        steps.clear()
        assert _restarted(second, ds)["ok"] is True
        assert steps == list(range(2, 6))
    second_db.dispose()


def test_without_a_checkpoint_key_nothing_is_stored(
    fresh_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_positions, "PERSIST_AFTER", 0.0)
    monkeypatch.setattr(_positions, "STORE_COST_PER_HELD", 0.0)
    _verified.VERIFIED.forget()
    client, database = _served(fresh_backend.url, None)
    with client:
        ds = _dataset(client, 3)
        assert _verdict(client, ds)["ok"] is True
        assert _row(database, ds) is None
    _verified.VERIFIED.forget()
    database.dispose()


def test_a_position_is_stored_once_it_saves_more_than_it_costs() -> None:
    """Stored after 50 ms of re-runs, or after what writing its runs costs when that is more
    (about 0.2 s for 100,000 runs)."""
    assert not _positions.due(0.049, 0)
    assert _positions.due(0.05, 0)
    assert not _positions.due(0.1, 100_000)
    assert not _positions.due(0.199, 100_000)
    assert _positions.due(0.2, 100_000)


def _runs(database: Database, ds: str) -> int:
    with UnitOfWork(database).read_only() as uow:
        state = uow.session.execute(
            text("SELECT state_json FROM datasets WHERE id = :id"), {"id": ds}
        ).scalar_one()
    state = json.loads(state) if isinstance(state, str) else state
    return int(state["blocks"]["runs"])


def test_a_restarted_server_reads_the_fragmented_positions_before_any_report(
    fresh_backend: Backend,
    tmp_path: Path,
    steps: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At start the background verifier reads the positions stored for the fragmented datasets
    into the process's memory (``BehindVerifier.warm``), before its first round and before any
    report, so the first report after a restart neither reads nor decodes the position (about
    0.2 s of CPU at 10⁵ runs) nor re-runs anything. A dataset below the runs' threshold is left
    to its report. Failed before the warm-up (nothing remembered until a report came)."""
    monkeypatch.setattr(_positions, "PERSIST_AFTER", 0.0)
    monkeypatch.setattr(_positions, "STORE_COST_PER_HELD", 0.0)
    key = _key(tmp_path)
    _verified.VERIFIED.forget()
    client, database = _served(fresh_backend.url, key)
    with client:
        fragmented = _dataset(client, 6)
        few = _dataset(client, 1)
        first = _verdict(client, fragmented)
        assert _verdict(client, few)["ok"] is True
    database.dispose()
    for ds in (fragmented, few):
        row = _row(database, ds)
        assert row is not None, ds  # both positions stored by their reports
    many, less = (_runs(database, ds) for ds in (fragmented, few))
    assert many > less
    monkeypatch.setattr(verify_behind, "FRAGMENTED_RUNS", many)  # fragmented: it, not the other

    _verified.VERIFIED.forget()  # a new process
    settings = Settings(
        database_url=fresh_backend.url,
        admin_key=ADMIN_KEY,
        checkpoint_key=str(key),
        verify_behind_seconds=60,  # no round during the test: only the warm-up at start
    )
    restarted = Database.from_settings(settings)
    try:
        with TestClient(create_app(settings, restarted)) as again:
            deadline = time.monotonic() + 10
            while _verified.VERIFIED.get(fragmented) is None:
                assert time.monotonic() < deadline, "the position was not read at start"
                time.sleep(0.02)
            assert again.app.state.verifier.rounds == 0  # type: ignore[attr-defined]
            assert _verified.VERIFIED.get(few) is None
            steps.clear()
            assert _verdict(again, fragmented) == first
            assert steps == []
    finally:
        _verified.VERIFIED.forget()
        restarted.dispose()


def test_a_clean_stop_stores_the_positions_re_run_since_the_stored_ones(
    fresh_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running process stores a position only once it saves more than writing it costs, so
    a restart re-ran up to that much (0.2 s of CPU for the fragmenting attack's 10⁵ runs). At a
    clean stop (a deploy) the background verifier writes every position re-run past the stored
    one, and the first report after the restart re-runs nothing. Failed before (nothing stored
    at the stop)."""
    monkeypatch.setattr(_positions, "PERSIST_AFTER", 3600.0)  # never due while running
    _verified.VERIFIED.forget()
    settings = Settings(
        database_url=fresh_backend.url,
        admin_key=ADMIN_KEY,
        checkpoint_key=str(_key(tmp_path)),
        verify_behind_seconds=60,  # on, and no round during the test
    )
    database = Database.from_settings(settings)
    client = TestClient(create_app(settings, database))
    try:
        with client:
            ds = _dataset(client, 6)
            first = _verdict(client, ds)
            assert first["ok"] is True
            assert _row(database, ds) is None  # not due: nothing stored while running
        row = _row(database, ds)  # the stop stored it
        assert row is not None
        assert (row.entries, row.head_hash) == (first["entries"], first["head_hash"])
    finally:
        _verified.VERIFIED.forget()
        database.dispose()
