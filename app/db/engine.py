"""Engine construction for the two supported backends.

SQLite (embedded default): pysqlite's own transaction handling opens transactions lazily and
SQLAlchemy's SQLite dialect silently drops ``FOR UPDATE``; a check-and-charge would then run on
a snapshot another writer may invalidate. We therefore switch pysqlite to autocommit
(``isolation_level = None``) and emit the ``BEGIN`` ourselves (SQLAlchemy docs, "Serializable
isolation / Savepoints / Transactional DDL" for pysqlite): ``BEGIN IMMEDIATE`` takes SQLite's
write lock at the start of every write transaction, so a budget aggregate read inside it cannot
change until commit. Read-only units of work use a plain (deferred) ``BEGIN`` so that readers
never wait for writers under WAL.

PostgreSQL: psycopg 3, READ COMMITTED; the budget aggregate is locked with
``SELECT … FOR UPDATE`` (see :meth:`app.db.repositories.DatasetRepository.get_for_update`).
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from app.settings import normalise_database_url

#: Execution option read by the SQLite ``begin`` hook: "IMMEDIATE" (writers) or "DEFERRED".
SQLITE_BEGIN_OPTION: Final = "odometer_sqlite_begin"


def make_engine(
    url: str,
    *,
    busy_timeout_ms: int = 30_000,
    pool_size: int = 10,
    max_overflow: int = 10,
    null_pool: bool = False,
) -> Engine:
    """Create an engine with the backend-specific durability and locking set-up."""
    url = normalise_database_url(url)
    kwargs: dict[str, Any] = {}
    if null_pool:
        kwargs["poolclass"] = NullPool
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
            **kwargs,
        )
        _install_sqlite_hooks(engine, busy_timeout_ms)
        return engine
    if not null_pool:
        kwargs.update(pool_size=pool_size, max_overflow=max_overflow)
    return create_engine(url, isolation_level="READ COMMITTED", pool_pre_ping=True, **kwargs)


def _install_sqlite_hooks(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite; _on_begin issues BEGIN explicitly.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk before we answer (no acknowledged write may be lost on
            # a crash).
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "IMMEDIATE")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN DEFERRED")


def read_only(engine: Engine) -> Engine:
    """The same pool, for read-only units of work (deferred BEGIN on SQLite)."""
    return engine.execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})
