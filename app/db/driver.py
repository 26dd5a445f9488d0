"""The write path's statements as the database driver receives them.

:func:`run` executes a statement's text on the connection's DBAPI cursor and raises a driver
error as SQLAlchemy raises it; :class:`PipelinedTransaction` is the PostgreSQL transaction
whose ``BEGIN`` goes out with the lock statement and whose write goes out with ``COMMIT``
(two round trips a registration); the rest is how the statements are written for the driver:
placeholders per dialect (:func:`param`), PostgreSQL's own numbered placeholders for a
statement whose parse psycopg does not cache (:func:`_native`), JSON column values as stored
(:func:`dump`) and as read back (:func:`loader`).

The statements themselves are :mod:`app.writepath.admission`'s (the lock statements) and
:mod:`app.db.writes`' (the write statement).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence, Sized
from contextlib import AbstractContextManager, suppress
from functools import lru_cache
from typing import Any, Final, cast

import orjson
from psycopg import Connection as PgConnection
from psycopg import RawCursor
from psycopg.pq import PipelineStatus, TransactionStatus
from sqlalchemy import JSON, ClauseElement, Connection, Table
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine.interfaces import DBAPICursor, Dialect

from app.db.engine import connection_lost


# ---------------------------------------------------------------------------- execution
# The statements are written out once per dialect and shape (``lru_cache`` in the modules that
# write them): SQLAlchemy compiled a multi-row INSERT inside a common table expression anew on
# every call, CPU spent on every admission, and its compiled cache did not help
# (``benchmarks/RESULTS.md``, *The write path's levers*). PostgreSQL receives the same text each
# time, so psycopg prepares it server-side after a few executions.
# Not exec_driver_sql: dearer per registration (RESULTS.md, *Measurements once quoted in the code*)
def run(
    conn: Connection,
    sql: str,
    params: dict[str, Any] | list[Any],
    *,
    native: bool = False,
    rows: bool = True,
    then: Callable[[], object] | None = None,
) -> list[Any]:
    """Execute ``sql`` on the connection's DBAPI cursor and return its rows (empty for a
    statement without any). The same statement text and parameters ``exec_driver_sql`` would
    send, on the same DBAPI connection and so in the same transaction. A driver error is
    raised as SQLAlchemy raises it (``IntegrityError``, ``OperationalError``, …: what the
    services and the error handlers catch), and a disconnect invalidates the connection, as
    SQLAlchemy does, so the pool does not hand it out again.

    ``native``: ``sql`` has PostgreSQL's own placeholders (``$1``, …; :func:`_native`) and
    ``params`` is their list, run on a psycopg ``RawCursor``, which sends the text as it is.
    A ``%(name)s`` statement whose parse psycopg does not cache (:func:`_parse_cached`: longer
    than 4 KiB or with more than 50 parameters, as a group's write statement) is converted so
    and run so: a cursor would parse its text on every execution, a cost that grows with the
    statement (``benchmarks/RESULTS.md``, *Registrations decided in groups*).

    ``rows=False``: a statement whose rows nobody reads (a write). In a pipelined transaction
    (:class:`PipelinedTransaction`) it is only queued: it goes out with the transaction's
    ``COMMIT``, and its outcome (a unique violation, say) is raised by the commit. Otherwise
    a statement waits for its answer, as outside a pipeline.

    ``then``: statements to send after this one and before its rows are read (in a pipelined
    transaction they go out together, one round trip for all; the server runs them in order,
    so they run once this one's locks are held). ``exec_driver_sql`` cannot read a pipelined
    statement's rows: its result, built before the answer came back, has none."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    pg = conn.dialect.name == "postgresql"
    if pg and isinstance(params, dict) and not _parse_cached(sql, params):
        sql, names = _native(sql)
        params = [params[name] for name in names]
        native = True
    cursor: DBAPICursor = (
        cast(DBAPICursor, RawCursor(cast(PgConnection[Any], raw))) if native else raw.cursor()
    )
    queued = False
    try:
        cursor.execute(sql, params)
        if then is not None:
            then()
        if pg and raw.pgconn.pipeline_status != PipelineStatus.OFF:  # _pipelined, inline
            if not rows:
                queued = True  # its cursor gets the outcome at the sync: not closed before
                return []
            return list(cursor.fetchall())  # a Flush, then the answer
        return list(cursor.fetchall()) if cursor.description is not None else []
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _driver_error(conn, exc, sql, params, raw, cursor) from exc
    finally:
        if not queued:
            cursor.close()


def run_writes(conn: Connection, sqls: Sequence[str], params: dict[str, Any]) -> None:
    """Execute ``sqls`` in order, statements whose rows nobody reads (a write's parts on
    SQLite, which runs one statement an ``execute``), each with the named parameters it takes
    from ``params``: as :func:`run` with ``rows=False`` on each, on one DBAPI cursor rather
    than one a statement (a cursor made, its description read and closed three times a
    registration; :func:`run` itself for one statement, or on PostgreSQL)."""
    if len(sqls) == 1 or conn.dialect.name == "postgresql":
        for sql in sqls:
            run(conn, sql, params, rows=False)
        return
    raw = conn.connection.dbapi_connection
    assert raw is not None
    cursor: DBAPICursor = raw.cursor()
    sql = ""
    try:
        for sql in sqls:
            cursor.execute(sql, params)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _driver_error(conn, exc, sql, params, raw, cursor) from exc
    finally:
        cursor.close()


def queued(conn: Connection, sql: str, params: dict[str, Any]) -> Callable[[], list[Any]]:
    """Send ``sql`` now and read its rows later, through the function returned: in a
    pipelined transaction the statement is queued and goes out with the next statement whose
    rows are read (the lock statement's, say: one round trip for both); elsewhere it runs at
    once. A driver error is raised as :func:`run` raises it, when the rows are read."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    cursor: DBAPICursor = raw.cursor()
    try:
        cursor.execute(sql, params)
    except conn.dialect.loaded_dbapi.Error as exc:
        cursor.close()
        raise _driver_error(conn, exc, sql, params, raw, cursor) from exc

    def rows() -> list[Any]:
        try:
            return list(cursor.fetchall())
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _driver_error(conn, exc, sql, params, raw, cursor) from exc
        finally:
            cursor.close()

    return rows


def _pipelined(conn: Connection, raw: Any) -> bool:
    """Whether ``raw`` is a psycopg connection in pipeline mode."""
    return conn.dialect.name == "postgresql" and raw.pgconn.pipeline_status != PipelineStatus.OFF


def _driver_error(
    conn: Connection,
    exc: Any,
    sql: str,
    params: dict[str, Any] | list[Any],
    raw: Any,
    cursor: DBAPICursor | None,
) -> sa_exc.StatementError:
    """A driver error as SQLAlchemy raises it; a disconnect (or a write refused by a server
    that is not the primary: :func:`~app.db.engine.connection_lost`) invalidates the
    connection."""
    disconnected = conn.dialect.is_disconnect(exc, raw, cursor) or connection_lost(exc)
    if disconnected:
        conn.invalidate(exc)
    error: sa_exc.StatementError = sa_exc.DBAPIError.instance(
        sql,
        params,
        exc,
        conn.dialect.loaded_dbapi.Error,
        connection_invalidated=disconnected,
        dialect=conn.dialect,
    )
    return error


class PipelinedTransaction:
    """A PostgreSQL write transaction in one psycopg pipeline: two round trips where a
    statement at a time takes four (``BEGIN``, the lock, the write, ``COMMIT``).

    The connection goes into autocommit mode (psycopg then sends no ``BEGIN`` of its own,
    which it would wait for) and into pipeline mode, and ``BEGIN`` is queued; the lock
    statement follows, and reading its rows (:func:`run`) sends both with a Flush and waits
    for their answers: one round trip, the locks held from then on. The write is queued
    (``rows=False``); :meth:`commit` queues ``COMMIT`` and leaves the pipeline, which sends
    them with a Sync and waits for every outcome: the second round trip. Nothing is answered
    before that: a caller hears of its registration only once the commit is durable.

    Atomicity is PostgreSQL's: once a statement of the pipeline fails, the server skips
    everything after it up to the Sync, the queued ``COMMIT`` included, and the transaction
    stays aborted until it is rolled back; the error is raised by :meth:`commit` (as
    SQLAlchemy raises it: a unique violation of the write is an ``IntegrityError`` there).
    :meth:`rollback` leaves the pipeline and rolls back. Either way the connection leaves as
    it came: out of pipeline and autocommit modes, no transaction open; if that cannot be done
    it is invalidated, never pooled again.
    """

    __slots__ = ("_conn", "_cursor", "_pipeline", "_raw")

    def __init__(self, conn: Connection) -> None:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        self._conn = conn
        self._raw = cast(PgConnection[Any], raw)
        self._pipeline: AbstractContextManager[Any] | None = None
        try:
            self._raw.autocommit = True
            pipeline = self._raw.pipeline()
            pipeline.__enter__()
            self._pipeline = pipeline
            self._cursor = self._raw.cursor()
            self._cursor.execute("BEGIN")  # queued: sent with the first statement
        except conn.dialect.loaded_dbapi.Error as exc:
            error = _driver_error(conn, exc, "BEGIN", {}, raw, None)
            self.rollback()  # out of the pipeline and of autocommit mode again (or invalidated)
            raise error from exc

    def commit(self) -> None:
        """Queue ``COMMIT`` and send it with everything queued; raise the first error of the
        transaction (nothing of it committed then)."""
        try:
            self._cursor.execute("COMMIT")
            self._leave_pipeline()
        except self._conn.dialect.loaded_dbapi.Error as exc:
            error = _driver_error(self._conn, exc, "COMMIT", {}, self._raw, None)
            self.rollback()
            raise error from exc
        self._restore()

    def rollback(self) -> None:
        """Leave the pipeline (its errors were raised already, or nobody waits for them) and
        roll back what is open: ``ROLLBACK`` goes out with the pipeline's last Sync (one round
        trip, as ``COMMIT`` does; a transaction that wrote nothing, such as a replayed
        idempotency key's, took two), or on its own if the pipeline was aborted."""
        if self._conn.invalidated:
            return
        try:
            if self._pipeline is not None:
                # an error here aborted the transaction: rolled back below
                with suppress(self._conn.dialect.loaded_dbapi.Error):
                    self._cursor.execute("ROLLBACK")
                with suppress(self._conn.dialect.loaded_dbapi.Error):
                    self._leave_pipeline()
            if self._raw.pgconn.transaction_status != TransactionStatus.IDLE:
                self._raw.rollback()
        except self._conn.dialect.loaded_dbapi.Error as exc:
            self._conn.invalidate(exc)
            return
        self._restore()

    def _leave_pipeline(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.__exit__(None, None, None)  # a Sync; waits for every outcome

    def _restore(self) -> None:
        """Out of autocommit mode again (the pool's other users expect psycopg's implicit
        transactions), or the connection is invalidated."""
        if self._conn.invalidated or self._raw.closed:
            return
        try:
            self._raw.autocommit = False
        except self._conn.dialect.loaded_dbapi.Error as exc:
            self._conn.invalidate(exc)


# ---------------------------------------------------------------------------- placeholders
def param(dialect: str, name: str) -> str:
    """The placeholder of parameter ``name`` (``%(name)s`` for psycopg, ``:name`` for SQLite)."""
    return f"%({name})s" if dialect == "postgresql" else f":{name}"


def json_param(dialect: str, name: str) -> str:
    """The placeholder of a JSON column's value (written by :func:`dump`)."""
    # psycopg sends a ``str`` parameter untyped; the column is ``json``
    return f"CAST(%({name})s AS JSON)" if dialect == "postgresql" else f":{name}"


#: The dialects statements built with SQLAlchemy's Core are written out in, with :func:`param`'s
#: placeholders (no casts rendered on the parameters: psycopg's dialect would add them)
_DIALECTS: Final[dict[str, Dialect]] = {
    "postgresql": PGDialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
    "sqlite": SQLiteDialect(paramstyle="named"),
}


def statement_text(statement: ClauseElement, dialect: str) -> str:
    """A Core statement as :func:`run` sends it (its bound parameters by name, as
    :func:`param` writes them), for a caller that writes it out once per shape."""
    return str(statement.compile(dialect=_DIALECTS[dialect]))


#: psycopg caches the parse of a ``%(name)s`` statement only up to this many bytes of text and
#: this many parameters (its ``MAX_CACHED_STATEMENT_LENGTH`` and ``MAX_CACHED_STATEMENT_PARAMS``);
#: any other is parsed anew on every execution, so it is sent with PostgreSQL's own
#: placeholders (:func:`_native`). One registration's write has 42 parameters (1.5 KB): it keeps
#: psycopg's cursor, whose cached parse costs less at one client than the native form
#: (``benchmarks/RESULTS.md``, *Server CPU at one client*). A group of two already has 79 (one
#: dataset) or 84 (two).
PARSE_CACHED_UP_TO: Final = 4096
PARSE_CACHED_PARAMS: Final = 50


def _parse_cached(sql: str, params: Sized) -> bool:
    """Whether psycopg caches the parse of ``sql`` run with ``params`` (at most as many
    parameters as it names: a write's ``params`` are exactly its statement's)."""
    return len(sql) <= PARSE_CACHED_UP_TO and len(params) <= PARSE_CACHED_PARAMS


_PLACEHOLDER: Final = re.compile(r"%\((\w+)\)s")


@lru_cache(maxsize=1024)
def _native(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``%(name)s`` placeholders numbered as PostgreSQL's own (``$1``, …, each
    name once), and the names in that order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return f"${len(names)}"

    return _PLACEHOLDER.sub(number, sql), tuple(names)


# ---------------------------------------------------------------------------- JSON values
def dump(value: Any) -> str | None:
    """A JSON column's value as stored (SQL NULL for ``None``, as ``Json(none_as_null)``):
    compact JSON text by orjson, far cheaper than the standard library's encoder on an
    ``rdp`` entry's curves (*Server CPU at one client* in ``benchmarks/RESULTS.md``). Keys
    that are not strings are written as text, as ``json.dumps`` writes them. The values are
    the ledger entry's, whose hashing refuses binary floats, so no NaN reaches here (orjson
    would write it as ``null``)."""
    return None if value is None else orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _identity(value: Any) -> Any:
    return value


def _parse(value: Any) -> Any:
    return None if value is None else orjson.loads(value)


def loader(conn: Connection) -> Callable[[Any], Any]:
    """How a JSON column's value is read: psycopg parses ``json`` itself; SQLite returns the
    text."""
    return _identity if conn.dialect.name == "postgresql" else _parse


def json_columns(table: Table) -> frozenset[str]:
    """The names of ``table``'s JSON columns (their values go through :func:`dump`)."""
    return frozenset(c.name for c in table.columns if isinstance(c.type, JSON))
