"""TEST ONLY: deliberately broken builds of the service, to prove the race checker can fail.

Nothing here is reachable from production code or configuration: uvicorn loads these
factories by import path in the race test only. Each factory patches the write path's lock
(``lock_levels`` and the statement it runs, ``read_levels``, module-level names of
:mod:`app.writepath.locking`) in the worker process that calls it, then builds the normal app.

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

from dataclasses import replace
from typing import Any, cast

from fastapi import FastAPI
from sqlalchemy import Connection, Engine, select

from app.db.engine import make_engine, read_only
from app.db.models import Dataset
from app.db.uow import Database, UnitOfWork, WriteGate
from app.main import create_app
from app.settings import get_settings
from app.writepath import locking
from app.writepath.admission import Locked, read_levels
from app.writepath.locking import Viewer

_real_lock_levels = locking.lock_levels
_real_read_levels = read_levels


def _stale_lock_levels(
    uow: UnitOfWork, viewer: Viewer, dataset_id: str, **kwargs: Any
) -> Locked | None:
    # The budget "check": before the write transaction begins, on a connection of its own.
    with read_only(uow.database.engine).connect() as conn:
        seen = conn.execute(
            select(Dataset.state_json).where(Dataset.id == dataset_id)
        ).scalar_one_or_none()
    locked = _real_lock_levels(uow, viewer, dataset_id, **kwargs)  # the lock, afterwards
    if seen is not None and locked is not None:
        # ... but charges on top of the check
        locked.dataset.state_json = cast(dict[str, Any], seen)
    return locked


def _unlocked_read_levels(conn: Connection, dataset_id: str, **kwargs: Any) -> Locked | None:
    kwargs["org_lock"] = None  # a plain SELECT: no FOR SHARE / FOR UPDATE
    return _real_read_levels(conn, dataset_id, **kwargs)


def _database(engine: Engine) -> Database:
    """The app's database without the SQLite writers' file lock (:class:`WriteGate`): that
    gate orders the writers of every process before their transactions begin, so on SQLite it
    would serialise the broken builds' unlocked reads too; each process still queues its own
    writers (as before the gate took a file lock). PostgreSQL has no gate."""
    database = Database.from_engine(engine)
    if database.write_gate is None:
        return database
    return replace(database, write_gate=WriteGate(None))


def create_stale_check_app() -> FastAPI:
    setattr(locking, "lock_levels", _stale_lock_levels)  # noqa: B010
    settings = get_settings()
    engine = make_engine(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    return create_app(settings, _database(engine))


def create_unlocked_app() -> FastAPI:
    setattr(locking, "read_levels", _unlocked_read_levels)  # noqa: B010
    settings = get_settings()
    engine = make_engine(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    # every transaction begins DEFERRED on SQLite (the reader option, used for writers too)
    return create_app(settings, _database(read_only(engine)))
