"""The write path's PostgreSQL transaction in one psycopg pipeline
(``app.db.driver.PipelinedTransaction``): ``BEGIN`` goes out with the lock statement, the
write with ``COMMIT``. The locks must be held from the lock statement's answer to the commit,
a failed write must commit nothing and surface as the SQLAlchemy error the services catch, and
the pooled connection must come back as the pool's other users expect it (no pipeline, no
autocommit, no transaction open)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.pq import PipelineStatus, TransactionStatus
from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from app.db import driver
from app.db.uow import Database, UnitOfWork

LOCK = "SELECT k, v FROM pipeline_probe WHERE k = %(k)s FOR UPDATE"
INSERT = "INSERT INTO pipeline_probe (k, v) VALUES (%(k)s, %(v)s)"
UPDATE = "UPDATE pipeline_probe SET v = %(v)s WHERE k = %(k)s"


@pytest.fixture
def pg(database: Database) -> Iterator[Database]:
    if database.engine.dialect.name != "postgresql":
        pytest.skip("the pipeline is PostgreSQL's")
    with database.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS pipeline_probe (k TEXT PRIMARY KEY, v TEXT NOT NULL)"
        )
    yield database


@pytest.fixture
def other(pg: Database) -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own, outside the pool (autocommit)."""
    url = pg.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def _key() -> str:
    return f"p_{secrets.token_hex(6)}"


def _seed(other: psycopg.Connection[Any], k: str) -> None:
    other.execute("INSERT INTO pipeline_probe (k, v) VALUES (%s, 'seed')", (k,))


def _value(other: psycopg.Connection[Any], k: str) -> str | None:
    row = other.execute("SELECT v FROM pipeline_probe WHERE k = %s", (k,)).fetchone()
    return None if row is None else str(row[0])


def _locked_elsewhere(other: psycopg.Connection[Any], k: str) -> bool:
    try:
        with other.transaction():
            other.execute("SELECT 1 FROM pipeline_probe WHERE k = %s FOR UPDATE NOWAIT", (k,))
    except pg_errors.LockNotAvailable:
        return True
    return False


def _seeded(other: psycopg.Connection[Any]) -> str:
    """A new row's key (its value ``seed``)."""
    k = _key()
    _seed(other, k)
    return k


def _lock_and_write(database: Database, k: str, v: str) -> int:
    """A whole pipelined transaction: lock the row, write it, commit; its backend's pid."""
    uow = UnitOfWork(database)
    with uow.core():
        conn = uow.connection()
        (pid,) = driver.run(conn, "SELECT pg_backend_pid()", {})[0]
        driver.run(conn, LOCK, {"k": k})
        driver.run(conn, UPDATE, {"k": k, "v": v}, rows=False)
        uow.commit()
    return int(pid)


def _lock_and_queue(uow: UnitOfWork, k: str, v: str) -> tuple[Connection, Any]:
    """In ``uow``'s open transaction: lock the row and queue its write (not committed); the
    connection and its driver connection."""
    conn = uow.connection()
    driver.run(conn, LOCK, {"k": k})
    driver.run(conn, UPDATE, {"k": k, "v": v}, rows=False)
    return conn, conn.connection.dbapi_connection


def _assert_clean(raw: Any) -> None:
    """As the pool's other users expect a connection."""
    assert raw.autocommit is False
    assert raw.pgconn.pipeline_status == PipelineStatus.OFF
    assert raw.pgconn.transaction_status == TransactionStatus.IDLE


def test_the_lock_is_held_from_its_answer_to_the_commit(
    pg: Database, other: psycopg.Connection[Any]
) -> None:
    k = _seeded(other)
    uow = UnitOfWork(pg)
    with uow.core():
        conn = uow.connection()
        raw = conn.connection.dbapi_connection
        rows = driver.run(conn, LOCK, {"k": k})
        assert [tuple(r) for r in rows] == [(k, "seed")]
        assert raw is not None and raw.pgconn.pipeline_status == PipelineStatus.ON
        assert _locked_elsewhere(other, k)
        assert driver.run(conn, UPDATE, {"k": k, "v": "written"}, rows=False) == []
        assert _value(other, k) == "seed"  # not committed: nothing visible, still locked
        assert _locked_elsewhere(other, k)
        uow.commit()
        _assert_clean(raw)
    assert _value(other, k) == "written"
    assert not _locked_elsewhere(other, k)


def test_a_failed_write_is_raised_by_the_commit_and_nothing_commits(
    pg: Database, other: psycopg.Connection[Any]
) -> None:
    k, taken = _seeded(other), _seeded(other)
    uow = UnitOfWork(pg)
    with uow.core():
        conn, raw = _lock_and_queue(uow, k, "written")
        driver.run(conn, INSERT, {"k": taken, "v": "twice"}, rows=False)  # unique violation
        with pytest.raises(sa_exc.IntegrityError) as caught:
            uow.commit()
        assert "pipeline_probe" in str(caught.value.orig)
        assert not caught.value.connection_invalidated
        _assert_clean(raw)
    assert _value(other, k) == "seed"  # the update before the failed insert did not commit
    assert not _locked_elsewhere(other, k)
    _lock_and_write(pg, k, "again")  # the connection went back to the pool usable
    assert _value(other, k) == "again"


def test_a_rollback_releases_the_locks_and_the_next_statement_begins_anew(
    pg: Database, other: psycopg.Connection[Any]
) -> None:
    k = _seeded(other)
    uow = UnitOfWork(pg)
    with uow.core():
        conn, raw = _lock_and_queue(uow, k, "dropped")
        uow.rollback()
        _assert_clean(raw)
        # rolled back, not committed by the pipeline's Sync (which ends an implicit
        # transaction by committing it: hence the explicit BEGIN)
        assert _value(other, k) == "seed"
        assert not _locked_elsewhere(other, k)
        conn = uow.connection()  # a new transaction, locked again (as after a wrong guess)
        driver.run(conn, LOCK, {"k": k})
        assert _locked_elsewhere(other, k)
        driver.run(conn, UPDATE, {"k": k, "v": "kept"}, rows=False)
        uow.commit()
    assert _value(other, k) == "kept"


def test_leaving_without_a_commit_rolls_back(pg: Database, other: psycopg.Connection[Any]) -> None:
    k = _seeded(other)
    uow = UnitOfWork(pg)
    with pytest.raises(RuntimeError, match="refused"), uow.core():
        _, raw = _lock_and_queue(uow, k, "dropped")
        raise RuntimeError("refused")
    _assert_clean(raw)
    assert _value(other, k) == "seed"
    assert not _locked_elsewhere(other, k)


def test_a_backend_gone_mid_transaction_fails_the_commit_and_is_not_pooled_again(
    pg: Database, other: psycopg.Connection[Any]
) -> None:
    k = _seeded(other)
    uow = UnitOfWork(pg)
    with uow.core():
        conn = uow.connection()
        (pid,) = driver.run(conn, "SELECT pg_backend_pid()", {})[0]
        driver.run(conn, LOCK, {"k": k})
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # psycopg may read the server's goodbye as it sends the queued write, or only at the
        # commit's Sync: either raises, and nothing commits
        with pytest.raises(sa_exc.DBAPIError) as caught:
            driver.run(conn, UPDATE, {"k": k, "v": "lost"}, rows=False)
            uow.commit()
        assert caught.value.connection_invalidated
    assert _value(other, k) == "seed"
    assert _lock_and_write(pg, k, "written") != pid
    assert _value(other, k) == "written"


def test_a_session_ending_error_invalidates_even_before_psycopg_sees_the_close(
    pg: Database, other: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a clean-clone CI run once met in the test above: psycopg raised the server's
    ``FATAL`` goodbye (``AdminShutdown``) before it read the end of file that follows, so it
    did not call the connection broken, SQLAlchemy's psycopg dialect saw no disconnect, and
    the dead connection would have gone back to the pool. Forced here: a real goodbye, taken
    from a terminated connection of its own, meets a dialect that sees no disconnect."""
    url = pg.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as doomed:
        other.execute("SELECT pg_terminate_backend(%s)", (doomed.info.backend_pid,))
        with pytest.raises(pg_errors.AdminShutdown) as goodbye:
            doomed.execute("SELECT 1")
    monkeypatch.setattr(pg.engine.dialect, "is_disconnect", lambda *_: False)
    uow = UnitOfWork(pg)
    with uow.core():
        conn = uow.connection()
        raw = conn.connection.dbapi_connection
        error = driver._driver_error(conn, goodbye.value, "COMMIT", {}, raw, None)
        assert isinstance(error, sa_exc.DBAPIError)
        assert error.connection_invalidated
        assert conn.invalidated
    uow = UnitOfWork(pg)
    with uow.core():  # an ordinary error ends no session
        conn = uow.connection()
        with pytest.raises(sa_exc.DBAPIError) as ordinary:
            driver.run(conn, "SELECT 1 / 0", {})
        assert isinstance(ordinary.value.orig, pg_errors.DivisionByZero)
        assert not ordinary.value.connection_invalidated
        assert not conn.invalidated
