"""The write path of register, settle and cancel, in SQLAlchemy Core.

One statement locks every budget level of an invocation and reads what the decision needs;
one more writes everything the decision changed (ledger rows, invocation rows, idempotency
records, the levels' new states); then the transaction commits. On PostgreSQL the writes are
one statement (data-modifying common table expressions), sent with the ``COMMIT`` in one
pipeline (:class:`PipelinedTransaction`), so a request takes two round trips: ``BEGIN`` and
the lock, then the write and ``COMMIT``. SQLite has no data-modifying CTEs, but it is in the
process: there each write is its own statement, and round trips cost nothing.

The ORM is not used here: its identity-map bookkeeping and unit-of-work flushes were CPU spent
on every admission while the budget row was locked (``benchmarks/RESULTS.md``, *The write
path's levers*).

**Locking.** The one statement takes the locks in the fixed order organisation → dataset →
grant (PostgreSQL locks the rows of a ``SELECT … FOR …`` in the order its locking clauses name
them), so writers spending at several levels never wait on each other in a cycle. The
organisation row is shared (``FOR SHARE``) by admissions under an organisation without a cap,
which never write it; it is held alone otherwise. Whether a cap is in force is known only once
the row is read: the caller guesses (:class:`OrganisationModes`) and, when the guess was
``share`` but a cap is in force, rolls back and locks again alone (a shared lock must not be
upgraded: two sharers upgrading deadlock).

**Visibility before locking.** The statement's ``WHERE`` holds the caller's visibility (its
organisation; an analyst's grant is joined), so a caller never locks a dataset it may not see:
rows that do not match are never locked.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence, Sized
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Final, Literal, cast

import orjson
from psycopg import Connection as PgConnection
from psycopg import RawCursor
from psycopg.pq import PipelineStatus, TransactionStatus
from sqlalchemy import JSON, Connection, Table
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine.interfaces import DBAPICursor

from app.db.engine import session_ended
from app.db.models import (
    Dataset,
    Grant,
    IdempotencyRecord,
    Invocation,
    LedgerCheckpoint,
    LedgerEntry,
    Organisation,
)

OrgLock = Literal["share", "update"]

_DATASETS = cast(Table, Dataset.__table__)
_ORGS = cast(Table, Organisation.__table__)
_GRANTS = cast(Table, Grant.__table__)
_LEDGER = cast(Table, LedgerEntry.__table__)
_INVOCATIONS = cast(Table, Invocation.__table__)
_IDEMPOTENCY = cast(Table, IdempotencyRecord.__table__)
_CHECKPOINTS = cast(Table, LedgerCheckpoint.__table__)


# ---------------------------------------------------------------------------- rows
@dataclass(slots=True)
class DatasetRow:
    """The budget aggregate as locked; ``state_json``, ``last_seq`` and ``head_hash`` move
    with each decision of the transaction."""

    id: str
    relation: str
    config_json: dict[str, Any]
    state_json: dict[str, Any]
    last_seq: int
    head_hash: str
    updated_at: str | None = None  # set when the transaction wrote the aggregate


@dataclass(slots=True)
class OrgRow:
    """The organisation level (its cap's filter)."""

    id: str
    cap_json: dict[str, Any] | None
    cap_state_json: dict[str, Any]
    dirty: bool = False


@dataclass(slots=True)
class GrantRow:
    """An analyst's grant on the dataset (its quota's filter, if any); ``granted_seq`` tells it
    apart from the analyst's earlier and later grants (:class:`app.db.models.Grant`)."""

    id: int
    principal_id: str
    quota_config_json: dict[str, Any] | None
    quota_state_json: dict[str, Any] | None
    granted_seq: int
    dirty: bool = False


@dataclass(slots=True)
class InvocationRow:
    """What settle and cancel need of an invocation (and change)."""

    id: str
    status: str
    actor: str
    reservation: dict[str, Any] | None
    levels: dict[str, Any] | None
    #: the declaration as registered (a settle from the released output derives its cell)
    declaration: dict[str, Any] | None = None
    charge: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None
    cell: str | None = None
    updated_at: str | None = None


@dataclass(frozen=True, slots=True)
class Locked:
    """The levels of one invocation, as locked (``invocation``: when one was asked for and it
    belongs to the dataset)."""

    org: OrgRow
    dataset: DatasetRow
    grant: GrantRow | None
    invocation: InvocationRow | None = None


@dataclass(frozen=True, slots=True)
class StoredResponse:
    fingerprint: str
    outcome: str
    response_body: str


# ---------------------------------------------------------------------------- statements
# The statements are written out once per dialect and shape (``lru_cache``) and run through
# the driver (:func:`_run`, as ``exec_driver_sql`` would): SQLAlchemy compiled a multi-row
# INSERT inside a common table expression anew on every call, CPU spent on every admission,
# and its compiled cache did not help (``benchmarks/RESULTS.md``, *The write path's levers*).
# PostgreSQL receives the same text each time, so psycopg prepares it server-side after a few
# executions.
def _run(
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
    send, on the same DBAPI connection and so in the same transaction, without building an
    execution context and a result object per statement (a share of a serving worker's CPU at
    one client: ``benchmarks/RESULTS.md``, *Server CPU at one client*). A driver error is
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
    so they run once this one's locks are held)."""
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
        if _pipelined(conn, raw):
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
    """A driver error as SQLAlchemy raises it; a disconnect invalidates the connection."""
    disconnected = conn.dialect.is_disconnect(exc, raw, cursor) or session_ended(exc)
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
    statement follows, and reading its rows (:func:`_run`) sends both with a Flush and waits
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
        roll back what is open."""
        if self._conn.invalidated:
            return
        try:
            if self._pipeline is not None:
                # an error here aborted the transaction: rolled back below
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


def _param(dialect: str, name: str) -> str:
    return f"%({name})s" if dialect == "postgresql" else f":{name}"


def _json_param(dialect: str, name: str) -> str:
    # psycopg sends a ``str`` parameter untyped; the column is ``json``
    return f"CAST(%({name})s AS JSON)" if dialect == "postgresql" else f":{name}"


def _dump(value: Any) -> str | None:
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


def _loader(conn: Connection) -> Callable[[Any], Any]:
    """How a JSON column's value is read: psycopg parses ``json`` itself; SQLite returns the
    text."""
    return _identity if conn.dialect.name == "postgresql" else _parse


def _json_columns(table: Table) -> frozenset[str]:
    return frozenset(c.name for c in table.columns if isinstance(c.type, JSON))


@lru_cache(maxsize=64)
def _lock_sql(
    dialect: str,
    org_lock: OrgLock | None,
    analyst: bool,
    scoped: bool,
    invocation: bool,
    datasets: int = 0,
) -> str:
    """``SELECT`` the organisation, the dataset, the analyst's grant (joined: no grant, no row)
    and optionally one invocation of the dataset; lock them when ``org_lock`` is given.
    ``datasets`` > 0: that many datasets (parameters ``dataset0``, …), in the order of their
    ids, which is the order their rows are locked in (the locking clause applies to the sorted
    rows)."""
    p = partial(_param, dialect)
    cols = [
        "d.id, d.relation, d.config_json, d.state_json, d.last_seq, d.head_hash",
        "o.id, o.cap_json, o.cap_state_json",
    ]
    joins = ["FROM organisations o JOIN datasets d ON d.organisation = o.id"]
    if analyst:
        cols.append("g.id, g.principal_id, g.quota_config_json, g.quota_state_json, g.granted_seq")
        joins.append(f"JOIN grants g ON g.dataset_id = d.id AND g.principal_id = {p('principal')}")
    if invocation:
        cols.append("i.id, i.status, i.actor, i.reservation, i.levels, i.declaration")
        joins.append(f"LEFT JOIN invocations i ON i.id = {p('invocation')} AND i.dataset_id = d.id")
    ids = ", ".join(p(f"dataset{i}") for i in range(datasets))
    where = (f"WHERE d.id IN ({ids})" if datasets else f"WHERE d.id = {p('dataset')}") + (
        f" AND d.organisation = {p('scope')}" if scoped else ""
    )
    order = " ORDER BY d.id" if datasets else ""
    locks = ""
    if org_lock is not None and dialect == "postgresql":
        org_clause = "FOR SHARE OF o" if org_lock == "share" else "FOR UPDATE OF o"
        # the locking clauses' order is the lock order: organisation → dataset → grant
        locks = f" {org_clause} FOR UPDATE OF d" + (", g" if analyst else "")
    return f"SELECT {', '.join(cols)} {' '.join(joins)} {where}{order}{locks}"


def read_levels(
    conn: Connection,
    dataset_id: str,
    *,
    scope: str | None,
    analyst: str | None,
    org_lock: OrgLock | None,
    invocation_id: str | None = None,
    then: Callable[[], object] | None = None,
) -> Locked | None:
    """The levels of an invocation on ``dataset_id`` as seen by a caller confined to
    ``scope`` (an organisation; ``None``: all) and, for an analyst, holding a grant; locked
    when ``org_lock`` is given. ``None`` when the caller may not see the dataset (or it does
    not exist): nothing was locked then. ``then``: as for :func:`_run`."""
    sql = _lock_sql(
        conn.dialect.name,
        org_lock,
        analyst is not None,
        scope is not None,
        invocation_id is not None,
    )
    params: dict[str, Any] = {"dataset": dataset_id}
    if scope is not None:
        params["scope"] = scope
    if analyst is not None:
        params["principal"] = analyst
    if invocation_id is not None:
        params["invocation"] = invocation_id
    rows = _run(conn, sql, params, then=then)
    if not rows:
        return None
    return _locked(rows[0], _loader(conn), analyst is not None, invocation_id is not None)


def read_many_levels(
    conn: Connection,
    dataset_ids: Sequence[str],
    *,
    scope: str | None,
    analyst: str | None,
    then: Callable[[], object] | None = None,
) -> dict[str, Locked]:
    """The levels of several datasets, as :func:`read_levels` reads one, locked in one
    statement in the order of the datasets' ids, every organisation row shared (the caller
    checks that none has a cap: a capped organisation's row is to be held alone). The datasets
    the caller may not see are missing from the answer: nothing of theirs was locked.
    ``then``: as for :func:`_run`."""
    sql = _lock_sql(
        conn.dialect.name, "share", analyst is not None, scope is not None, False, len(dataset_ids)
    )
    params: dict[str, Any] = {f"dataset{i}": d for i, d in enumerate(dataset_ids)}
    if scope is not None:
        params["scope"] = scope
    if analyst is not None:
        params["principal"] = analyst
    load = _loader(conn)
    rows = _run(conn, sql, params, then=then)
    found = (_locked(row, load, analyst is not None, False) for row in rows)
    return {locked.dataset.id: locked for locked in found}


def _locked(
    row: Sequence[Any], load: Callable[[Any], Any], grant: bool, invocation: bool
) -> Locked:
    """A row of :func:`_lock_sql`'s statement as the levels it locked."""
    dataset = DatasetRow(row[0], row[1], load(row[2]), load(row[3]), row[4], row[5])
    org = OrgRow(row[6], load(row[7]), load(row[8]))
    rest = row[9:]
    grant_row = None
    if grant:
        grant_row = GrantRow(rest[0], rest[1], load(rest[2]), load(rest[3]), rest[4])
        rest = rest[5:]
    inv = None
    if invocation and rest[0] is not None:
        inv = InvocationRow(rest[0], rest[1], rest[2], load(rest[3]), load(rest[4]), load(rest[5]))
    return Locked(org, dataset, grant_row, inv)


@lru_cache(maxsize=4)
def _grant_sql(dialect: str) -> str:
    lock = " FOR UPDATE" if dialect == "postgresql" else ""
    p = partial(_param, dialect)
    return (
        "SELECT id, principal_id, quota_config_json, quota_state_json, granted_seq FROM grants"
        f" WHERE dataset_id = {p('dataset')} AND principal_id = {p('principal')}{lock}"
    )


def lock_grant(conn: Connection, dataset_id: str, principal_id: str) -> GrantRow | None:
    """Another analyst's grant (settled by the admin), locked after the dataset (the fixed
    order's last lock)."""
    sql = _grant_sql(conn.dialect.name)
    rows = _run(conn, sql, {"dataset": dataset_id, "principal": principal_id})
    row = rows[0] if rows else None
    if row is None:
        return None
    load = _loader(conn)
    return GrantRow(row[0], row[1], load(row[2]), load(row[3]), row[4])


class OrganisationModes:
    """This process's last knowledge of which datasets' organisations have a cap in force:
    the guess of the organisation lock an admission asks for (verified under the lock)."""

    def __init__(self) -> None:
        self._capped: dict[str, bool] = {}
        self._lock = threading.Lock()

    def guess(self, dataset_id: str) -> OrgLock:
        return "update" if self._capped.get(dataset_id, False) else "share"

    def learn(self, dataset_id: str, capped: bool) -> None:
        if self._capped.get(dataset_id) is capped:
            return  # what is known already (the common case: no lock taken)
        with self._lock:
            if len(self._capped) > 100_000:
                self._capped.clear()
            self._capped[dataset_id] = capped


# ---------------------------------------------------------------------------- idempotency
@lru_cache(maxsize=128)
def _stored_sql(dialect: str, n: int) -> str:
    keys = ", ".join(_param(dialect, f"k{i}") for i in range(n))
    return (
        'SELECT "key", fingerprint, outcome, response_body FROM idempotency_keys'
        f' WHERE principal_id = {_param(dialect, "principal")} AND "key" IN ({keys})'
    )


def stored_responses(
    conn: Connection, principal_id: str, keys: Iterable[str]
) -> dict[str, StoredResponse]:
    """The stored responses of ``principal_id`` under ``keys`` (one query)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    params = {"principal": principal_id} | {f"k{i}": k for i, k in enumerate(wanted)}
    rows = _run(conn, _stored_sql(conn.dialect.name, len(wanted)), params)
    return {
        key: StoredResponse(fingerprint, outcome, body) for key, fingerprint, outcome, body in rows
    }


# ---------------------------------------------------------------------------- the writes
@dataclass(slots=True)
class Writes:
    """Everything one write transaction changes, written by :func:`write` at once."""

    ledger: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)
    idempotency: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    finished: list[InvocationRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ledger or self.idempotency)


_LEDGER_COLUMNS: Final = tuple(c.name for c in _LEDGER.columns if c.name != "id")
_INVOCATION_COLUMNS: Final = tuple(c.name for c in _INVOCATIONS.columns)
_IDEMPOTENCY_COLUMNS: Final = tuple(c.name for c in _IDEMPOTENCY.columns if c.name != "id")
_CHECKPOINT_COLUMNS: Final = tuple(c.name for c in _CHECKPOINTS.columns if c.name != "id")
_INSERTS: Final = {
    "l": (_LEDGER.name, _LEDGER_COLUMNS),
    "i": (_INVOCATIONS.name, _INVOCATION_COLUMNS),
    "k": (_IDEMPOTENCY.name, _IDEMPOTENCY_COLUMNS),
    "c": (_CHECKPOINTS.name, _CHECKPOINT_COLUMNS),
}
_FINISHED_COLUMNS: Final = ("status", "cell", "charge", "refund", "updated_at")
_DATASET_COLUMNS: Final = ("state_json", "last_seq", "head_hash", "updated_at")
#: The updates by statement prefix: table, columns set, key column
_UPDATES: Final = {
    "f": (_INVOCATIONS.name, _FINISHED_COLUMNS, "id"),
    "o": (_ORGS.name, ("cap_state_json",), "id"),
    "g": (_GRANTS.name, ("quota_state_json",), "id"),
    "d": (_DATASETS.name, _DATASET_COLUMNS, "id"),
}
#: JSON columns by statement prefix
_JSON: Final = {
    "l": _json_columns(_LEDGER),
    "i": _json_columns(_INVOCATIONS),
    "f": _json_columns(_INVOCATIONS),
    "d": _json_columns(_DATASETS),
    "o": _json_columns(_ORGS),
    "g": _json_columns(_GRANTS),
    "k": frozenset[str](),
    "c": frozenset[str](),
}


def _value(dialect: str, prefix: str, column: str, name: str) -> str:
    if column in _JSON[prefix]:
        return _json_param(dialect, name)
    return _param(dialect, name)


@lru_cache(maxsize=1024)
def _write_sql(dialect: str, shape: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """The statements of a write of ``shape`` (prefix, rows): the inserts, the invocations
    finished, the organisation's and grants' new states, the dataset's new head. PostgreSQL:
    one statement, every part but the last a data-modifying CTE of the last (each runs,
    exactly once, whether or not the last refers to it)."""
    parts: list[str] = []
    for prefix, n in shape:
        if prefix in _INSERTS:
            table, columns = _INSERTS[prefix]
            names = ", ".join(f'"{c}"' for c in columns)
            rows = ", ".join(
                "("
                + ", ".join(_value(dialect, prefix, c, f"{prefix}{r}_{c}") for c in columns)
                + ")"
                for r in range(n)
            )
            parts.append(f"INSERT INTO {table} ({names}) VALUES {rows}")
            continue
        table, columns, key = _UPDATES[prefix]
        for r in range(n):
            sets = ", ".join(
                f'"{c}" = {_value(dialect, prefix, c, f"{prefix}{r}_{c}")}' for c in columns
            )
            parts.append(
                f"UPDATE {table} SET {sets} WHERE {key} = {_param(dialect, f'{prefix}{r}_key')}"
            )
    if dialect != "postgresql" or len(parts) == 1:
        return tuple(parts)
    *ctes, last = parts
    return ("WITH " + ", ".join(f"w{i} AS ({sql})" for i, sql in enumerate(ctes)) + f" {last}",)


def write(
    conn: Connection,
    writes: Writes,
    datasets: Sequence[DatasetRow],
    org: OrgRow | None,
    grants: Sequence[GrantRow],
) -> None:
    """Write ``writes`` and the levels' new states (of one dataset or several): one statement
    on PostgreSQL."""
    params: dict[str, Any] = {}
    shape: list[tuple[str, int]] = []

    def rows(prefix: str, items: Sequence[dict[str, Any]], key: str | None = None) -> None:
        if not items:
            return
        json_columns = _JSON[prefix]
        for r, item in enumerate(items):
            for column, value in item.items():
                params[f"{prefix}{r}_{column}"] = _dump(value) if column in json_columns else value
        shape.append((prefix, len(items)))

    rows("l", writes.ledger)
    rows("i", writes.invocations)
    rows("k", writes.idempotency)
    rows("c", writes.checkpoints)
    rows(
        "f",
        [
            {
                "key": inv.id,
                "status": inv.status,
                "cell": inv.cell,
                "charge": inv.charge,
                "refund": inv.refund,
                "updated_at": inv.updated_at,
            }
            for inv in writes.finished
        ],
    )
    if org is not None and org.dirty:
        rows("o", [{"key": org.id, "cap_state_json": org.cap_state_json}])
    rows("g", [{"key": g.id, "quota_state_json": g.quota_state_json} for g in grants if g.dirty])
    rows(
        "d",
        [
            {
                "key": d.id,
                "state_json": d.state_json,
                "last_seq": d.last_seq,
                "head_hash": d.head_hash,
                "updated_at": d.updated_at,
            }
            for d in datasets
            if d.updated_at is not None
        ],
    )
    if not shape:
        return
    dialect = conn.dialect.name
    for sql in _write_sql(dialect, tuple(shape)):
        _run(conn, sql, params, rows=False)


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
