"""The ledger is append-only in the database itself: UPDATE and DELETE abort (both backends)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db.uow import Database, UnitOfWork
from app.services import datasets
from app.services.principals import Principal, Role

ADMIN = Principal("admin", Role.ADMIN, None)


@pytest.fixture
def dataset_id(uow: UnitOfWork) -> str:
    ds = datasets.create_dataset(
        uow, ADMIN, datasets.NewDataset("append-only", "1", "0", "add_remove", {"mode": "basic"})
    )
    return str(ds["id"])


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger_entries SET actor = 'mallory' WHERE dataset_id = :id",
        "UPDATE ledger_entries SET seq = seq WHERE dataset_id = :id",
        "DELETE FROM ledger_entries WHERE dataset_id = :id",
    ],
)
def test_update_and_delete_are_refused(database: Database, dataset_id: str, statement: str) -> None:
    with database.engine.connect() as conn:
        with pytest.raises(DBAPIError, match="append-only"):
            conn.execute(text(statement), {"id": dataset_id})
        conn.rollback()
        rows = conn.execute(
            text("SELECT actor, seq FROM ledger_entries WHERE dataset_id = :id"), {"id": dataset_id}
        ).all()
    assert [tuple(r) for r in rows] == [("admin", 1)]


def test_truncate_is_refused_on_postgresql(database: Database, dataset_id: str) -> None:
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no TRUNCATE")
    with database.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
        conn.execute(text("TRUNCATE ledger_entries CASCADE"))
