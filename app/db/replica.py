"""The read replica: a streaming standby of the primary that serves heavy reads
(``ODOMETER_READ_DATABASE_URL``; the rule that routes a read there, or not, is
:mod:`app.services.reads`; ``docs/operations.md``, *Read replicas*).

What is read here: each dataset's ledger head (``datasets.last_seq``, the ledger sequence a
read must reach) and the replica's staleness. The replica is a :class:`~app.db.uow.Database`
whose *readers* are the replica's and whose *writers* and Core connections stay the primary's
(:func:`split`): a read-only unit of work opened on it reads the replica, and the little a read
writes (a report's verified position, :mod:`app.services._positions`) goes to the primary, as
every write does. A standby refuses writes (SQLSTATE 25006), and the engine would then take its
connection for a lost one (:func:`app.db.engine.not_the_primary`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Final

from sqlalchemy import Engine, bindparam, text
from sqlalchemy.orm import Session, sessionmaker

from app.db.engine import make_engine, read_only
from app.db.uow import Database

#: The replica's staleness by its own clock, in seconds: 0 when it has replayed all the WAL it
#: received (it has nothing it knows of to catch up on), else the age of the last transaction
#: it replayed (PostgreSQL documentation, *Monitoring*: ``pg_last_xact_replay_timestamp``); null
#: on a server that is not in recovery (a primary named as the read URL: nothing to lag).
LAG_SQL: Final = text(
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL "
    "WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) END"
)
HEADS_SQL: Final = text("SELECT id, last_seq FROM datasets WHERE id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)


def split(primary: Database, url: str, *, pool_size: int, max_overflow: int = 0) -> Database:
    """``primary`` with its read-only units of work on the replica at ``url`` (its own pool,
    disposed with :func:`reader_engine`); writes, Core connections, the signer and what
    commits are handed to stay ``primary``'s."""
    engine = make_engine(url, pool_size=pool_size, max_overflow=max_overflow)
    reader = sessionmaker(read_only(engine), expire_on_commit=False, autoflush=False)
    return replace(primary, reader=reader)


def reader_engine(database: Database) -> Engine:
    """The engine a database's readers use (the replica's, for a :func:`split` database)."""
    bound = database.reader.kw["bind"]
    assert isinstance(bound, Engine)
    return bound


def heads(session: Session, dataset_ids: Iterable[str]) -> dict[str, int]:
    """The ledger head (``last_seq``) of each of ``dataset_ids`` the database holds."""
    ids = sorted(set(dataset_ids))
    if not ids:
        return {}
    return {str(i): int(s) for i, s in session.execute(HEADS_SQL, {"ids": ids})}


def lag(session: Session) -> Decimal | None:
    """The replica's staleness in seconds (:data:`LAG_SQL`); ``None`` where it cannot lag (a
    server not in recovery, SQLite)."""
    if session.get_bind().dialect.name != "postgresql":
        return None
    value = session.execute(LAG_SQL).scalar()
    return None if value is None else max(Decimal(0), Decimal(value))
