"""TEST ONLY: deliberately broken builds of the service, to prove the race checker can fail.

Nothing here is reachable from production code or configuration: uvicorn loads these
factories by import path in the race test only. Each factory patches the repository's lock
in the worker process that calls it, then builds the normal app.

``create_stale_check_app`` - the classic read-check-write bug. The budget check reads the
aggregate's state with a plain SELECT on its own connection, outside any lock (on SQLite a
deferred transaction), and only then does the write take the lock; the charge is computed
from what the check saw. Concurrent requests all see the same remaining budget and all pass.

``create_unlocked_app`` - the lock removed, as a reviewer might do by accident: ``FOR UPDATE``
becomes a plain SELECT and SQLite's ``BEGIN IMMEDIATE`` a deferred ``BEGIN``. The check and the
write are still one transaction, so the ledger's per-dataset ``UNIQUE(dataset_id, seq)`` and
SQLite's snapshot rule make the losers fail instead of overspending: the checker sees the
failures (409 ConcurrentUpdate / 5xx), not an overspend.
"""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import Engine, select
from sqlalchemy.orm.attributes import set_committed_value

from app.db.engine import make_engine, read_only
from app.db.models import Dataset
from app.db.repositories import DatasetRepository
from app.db.uow import Database
from app.main import create_app
from app.settings import get_settings

_locked_get = DatasetRepository.get_for_update
_plain_get = DatasetRepository.get


def _stale_read(self: DatasetRepository, dataset_id: str) -> object:
    engine = self.session.get_bind()
    assert isinstance(engine, Engine)
    with read_only(engine).connect() as conn:  # the "check" read: no lock, own snapshot
        return conn.execute(
            select(Dataset.state_json).where(Dataset.id == dataset_id)
        ).scalar_one_or_none()


def _stale_first_get(self: DatasetRepository, dataset_id: str) -> Dataset | None:
    # The first read of a write transaction (the access check, before the organisation and
    # dataset locks): the broken build does its budget "check" here, before any lock.
    if not self.session.in_transaction():
        self.session.info.setdefault("stale", {})[dataset_id] = _stale_read(self, dataset_id)
    return _plain_get(self, dataset_id)


def _stale_check_get(self: DatasetRepository, dataset_id: str) -> Dataset | None:
    stale: dict[str, object] = self.session.info.get("stale", {})
    seen = stale.pop(dataset_id) if dataset_id in stale else _stale_read(self, dataset_id)
    ds = _locked_get(self, dataset_id)  # the "write" path takes the lock afterwards
    if ds is not None and seen is not None:
        set_committed_value(ds, "state_json", seen)  # ... but charges on top of the check
    return ds


def _unlocked_get(self: DatasetRepository, dataset_id: str) -> Dataset | None:
    return self.session.scalars(select(Dataset).where(Dataset.id == dataset_id)).one_or_none()


def create_stale_check_app() -> FastAPI:
    DatasetRepository.get = _stale_first_get  # type: ignore[method-assign]
    DatasetRepository.get_for_update = _stale_check_get  # type: ignore[method-assign]
    return create_app()


def create_unlocked_app() -> FastAPI:
    DatasetRepository.get_for_update = _unlocked_get  # type: ignore[method-assign]
    settings = get_settings()
    engine = make_engine(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    # every transaction begins DEFERRED on SQLite (the reader option, used for writers too)
    return create_app(settings, Database.from_engine(read_only(engine)))
