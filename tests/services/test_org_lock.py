"""Admissions share an uncapped organisation's row; caps and settlements still hold it alone
(PostgreSQL; SQLite serialises every writer, so there is nothing to observe there)."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.uow import Database, UnitOfWork
from app.services.principals import Principal, Role
from app.writepath.locking import lock_levels
from tests.support import AUTH, Backend, new_organisation

ADMIN = Principal("admin", Role.ADMIN, None)


def _dataset(client: TestClient, org: str) -> str:
    r = client.post(
        "/v1/datasets",
        json={
            "name": "d",
            "budget": {"epsilon": "10", "delta": "0.00001"},
            "accounting": {"mode": "basic"},
            "organisation_id": org,
        },
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


@pytest.fixture
def pg(backend: Backend) -> Iterator[None]:
    if backend.name != "postgresql":
        pytest.skip("row locks are observable on PostgreSQL only")
    yield


def _holding(database: Database, dataset_id: str, admitting: bool) -> Generator[None]:
    """A transaction that has taken the levels of ``dataset_id`` and keeps them."""
    uow = UnitOfWork(database)
    with uow:
        lock_levels(uow, ADMIN.viewer, dataset_id, admitting=admitting)
        yield


def _try_lock(database: Database, dataset_id: str, admitting: bool) -> str:
    """Take the levels of ``dataset_id`` with a 1 s lock timeout: 'locked' or the error."""
    uow = UnitOfWork(database)
    try:
        with uow:
            uow.session.execute(text("SET LOCAL lock_timeout = '1s'"))
            lock_levels(uow, ADMIN.viewer, dataset_id, admitting=admitting)
        return "locked"
    except Exception as exc:  # the lock timeout's class depends on the driver
        return type(exc).__name__


def _in_thread(fn: object, *args: object) -> str:
    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)))  # type: ignore[operator]
    worker.start()
    worker.join(10)
    return out[0]


def test_admissions_on_two_datasets_of_an_uncapped_organisation_do_not_queue(
    pg: None, client: TestClient, database: Database
) -> None:
    """Shown able to fail: with ``lock_levels`` taking the organisation ``FOR UPDATE`` for
    admissions too (the code before this change), the second admission timed out waiting for
    the first one's organisation lock and this test failed with 'OperationalError'."""
    org = new_organisation(client)
    a, b = _dataset(client, org), _dataset(client, org)
    holder = _holding(database, a, admitting=True)
    next(holder)
    try:
        assert _in_thread(_try_lock, database, b, True) == "locked"
        # a settlement (may write the cap's state) or a cap change must still wait
        assert _in_thread(_try_lock, database, b, False) != "locked"
    finally:
        holder.close()


def test_a_capped_organisation_is_held_alone_by_admissions(
    pg: None, client: TestClient, database: Database
) -> None:
    org = new_organisation(client)
    r = client.patch(f"/v1/organisations/{org}/cap", json={"epsilon": 5, "delta": 0}, headers=AUTH)
    assert r.status_code == 200, r.text
    a, b = _dataset(client, org), _dataset(client, org)
    holder = _holding(database, a, admitting=True)
    next(holder)
    try:
        assert _in_thread(_try_lock, database, b, True) != "locked"
    finally:
        holder.close()
