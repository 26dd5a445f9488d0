"""The write path's statements run on the DBAPI cursor (``app.db.driver.run``): a driver
error must still reach the services as the SQLAlchemy exception they catch."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from app.db import driver
from app.db.uow import Database


def _param(database: Database, name: str) -> str:
    return f"%({name})s" if database.engine.dialect.name == "postgresql" else f":{name}"


def test_rows_come_back_and_a_unique_violation_is_an_integrity_error(database: Database) -> None:
    p = _param(database, "k")
    with database.engine.connect() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE driver_probe (k INTEGER PRIMARY KEY, v TEXT)"))
        assert (
            driver.run(conn, f"INSERT INTO driver_probe (k, v) VALUES ({p}, 'a')", {"k": 1}) == []
        )
        rows = driver.run(conn, f"SELECT k, v FROM driver_probe WHERE k = {p}", {"k": 1})
        assert [tuple(r) for r in rows] == [(1, "a")]
        assert driver.run(conn, f"SELECT k FROM driver_probe WHERE k = {p}", {"k": 2}) == []
        with pytest.raises(sa_exc.IntegrityError) as caught:
            driver.run(conn, f"INSERT INTO driver_probe (k, v) VALUES ({p}, 'b')", {"k": 1})
        # the services tell a ledger race from an idempotency race by the driver's message
        assert "driver_probe" in str(caught.value.orig) or "UNIQUE" in str(caught.value.orig)
        assert not caught.value.connection_invalidated
        conn.rollback()


def test_a_bad_statement_is_a_programming_or_operational_error(database: Database) -> None:
    with database.engine.connect() as conn:
        with pytest.raises((sa_exc.ProgrammingError, sa_exc.OperationalError)):
            driver.run(conn, "SELECT no_such_column FROM no_such_table", {})
        conn.rollback()
