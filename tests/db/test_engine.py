"""Backend set-up: SQLite durability pragmas and BEGIN IMMEDIATE; PostgreSQL READ COMMITTED."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc

from app.db.engine import make_engine, session_ended
from app.db.uow import Database, UnitOfWork
from app.services import datasets
from app.services.principals import Principal, Role
from app.settings import Settings, normalise_database_url

ADMIN = Principal("admin", Role.ADMIN, None)


def test_url_spellings_select_psycopg3() -> None:
    assert normalise_database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_database_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert (
        Settings(database_url="postgresql://u@h/db").database_url == "postgresql+psycopg://u@h/db"
    )
    assert normalise_database_url("sqlite:///./x.db") == "sqlite:///./x.db"


def test_a_multi_host_url_reaches_libpq_whole() -> None:
    """The URL of an HA pair (docs/operations.md, *The connection URL*): every host, port and
    libpq option reaches psycopg's connect as libpq reads them, in both of SQLAlchemy's
    spellings. (Connecting through one: ``tests/reliability/test_failover.py``.)"""
    options = "target_session_attrs=read-write&connect_timeout=5&tcp_user_timeout=15000"
    for url, hosts, ports in (
        (f"postgresql://u:p@/db?host=pg-a,pg-b&port=5432,5433&{options}", "pg-a,pg-b", "5432,5433"),
        (f"postgres://u:p@/db?host=pg-a:5432&host=pg-b:5433&{options}", "pg-a,pg-b", "5432,5433"),
    ):
        engine = make_engine(Settings(database_url=url).database_url)
        try:
            _, kwargs = engine.dialect.create_connect_args(engine.url)
        finally:
            engine.dispose()
        assert kwargs["host"] == hosts and str(kwargs["port"]) == ports, kwargs
        assert kwargs["dbname"] == "db" and kwargs["user"] == "u"
        assert kwargs["target_session_attrs"] == "read-write"
        assert kwargs["connect_timeout"] == "5" and kwargs["tcp_user_timeout"] == "15000"


def test_backend_settings(database: Database) -> None:
    with database.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            pragmas = {
                p: conn.exec_driver_sql(f"PRAGMA {p}").scalar()
                for p in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            }
            assert pragmas == {
                "journal_mode": "wal",
                "synchronous": 2,
                "busy_timeout": 30000,
                "foreign_keys": 1,
            }
        else:
            assert conn.exec_driver_sql("SHOW transaction_isolation").scalar() == "read committed"


def test_the_aggregate_lock_holds_off_a_second_writer(database: Database) -> None:
    """``get_for_update`` (FOR UPDATE on PostgreSQL, BEGIN IMMEDIATE on SQLite) makes a second
    writer of the same dataset wait until the first one's transaction ends."""
    ds = datasets.create_dataset(
        UnitOfWork(database),
        ADMIN,
        datasets.NewDataset("lock", "1", "0", "add_remove", {"mode": "basic"}),
    )
    # a second Database: its own pool (and, on SQLite, its own in-process write gate)
    other = Database.from_engine(make_engine(str(database.engine.url.render_as_string(False))))
    first, second = UnitOfWork(database), UnitOfWork(other)
    order: list[str] = []
    with first:
        assert first.datasets.get_for_update(ds["id"]) is not None
        order.append("first locked")

        def writer() -> None:
            with second:
                assert second.datasets.get_for_update(ds["id"]) is not None
                order.append("second locked")

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(0.5)
        order.append("first done")
    thread.join(10)
    other.dispose()
    assert order == ["first locked", "first done", "second locked"]


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    assert isinstance(pid, int)
    return pid


def test_a_pooled_connection_whose_server_end_went_away_is_not_handed_out(
    database: Database,
) -> None:
    """The pool checks a connection for life without a round trip (no pre-ping): a backend
    terminated while its connection sat in the pool (as a restarted server ends them all) is
    replaced at checkout, and a live one is handed out again as it is."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no server end")
    url = database.engine.url.render_as_string(hide_password=False)
    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        first = _backend_pid(engine)
        assert _backend_pid(engine) == first  # alive: the same connection again
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (first,))
            deadline = time.monotonic() + 10
            while other.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (first,)
            ).fetchone():
                assert time.monotonic() < deadline
                time.sleep(0.02)
        # the pooled connection's backend is gone: without the check this statement would
        # fail with "terminating connection due to administrator command"
        second = _backend_pid(engine)
        assert second != first
        assert _backend_pid(engine) == second
    finally:
        engine.dispose()


def test_a_session_ending_error_invalidates_its_connection_before_psycopg_sees_the_close(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``FATAL`` error ends the server's session: its connection is invalidated at once,
    even when psycopg raised on the goodbye before it read the end of file that follows (then
    it does not call itself broken, and SQLAlchemy's psycopg dialect, which looks at nothing
    else, would pool the dead connection again). That race is forced here by a dialect that
    never sees a disconnect."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no server end")
    url = database.engine.url.render_as_string(hide_password=False)
    engine = make_engine(url, pool_size=1, max_overflow=0)
    monkeypatch.setattr(engine.dialect, "is_disconnect", lambda *_: False)
    try:
        with engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(sa_exc.DBAPIError) as caught:
                conn.exec_driver_sql("SELECT 1")
            assert isinstance(caught.value.orig, psycopg.errors.AdminShutdown)
            assert caught.value.connection_invalidated
            assert session_ended(caught.value.orig)
        with engine.connect() as conn:  # an ordinary error ends nothing
            with pytest.raises(sa_exc.DBAPIError) as caught:
                conn.exec_driver_sql("SELECT 1 / 0")
            assert isinstance(caught.value.orig, psycopg.errors.DivisionByZero)
            assert not caught.value.connection_invalidated
            assert not session_ended(caught.value.orig)
        assert _backend_pid(engine) != pid
    finally:
        engine.dispose()


def test_the_pool_hands_out_the_connection_given_back_last(database: Database) -> None:
    """Last in, first out: after a burst opened several connections, a lone client keeps
    reusing one backend (first in, first out would cycle through all of them, each a
    PostgreSQL process of its own woken in turn)."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no server end")
    url = database.engine.url.render_as_string(hide_password=False)
    engine = make_engine(url, pool_size=3, max_overflow=0)
    try:
        burst = [engine.connect() for _ in range(3)]
        pids = [conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() for conn in burst]
        assert len(set(pids)) == 3
        for conn in burst:  # given back first to last
            conn.close()
        assert [_backend_pid(engine) for _ in range(4)] == [pids[-1]] * 4
    finally:
        engine.dispose()
