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
A pooled connection is checked for life when it is handed out without a round trip
(:func:`_install_liveness_check`), and an error that ends the server's session invalidates
its connection even before psycopg has seen the socket close (:func:`session_ended`), as does
a write refused because the server is not the primary (:func:`not_the_primary`). A URL may
list several servers (``?host=a,b&port=5432,5432&target_session_attrs=read-write``: libpq
tries them in turn and keeps the one that accepts writes; docs/operations.md, *Surviving the
loss of the primary*); a connection discarded so is opened anew on whichever is the primary.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Iterator
from typing import Any, Final

from psycopg import pq
from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy import exc as sa_exc
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
        # Last in, first out: the connection just given back is handed out next, so a quiet
        # worker keeps talking to one warm backend instead of cycling through every connection
        # a burst once opened (each a PostgreSQL process of its own, its caches cold, woken in
        # turn). What it buys at one client grows with the connections a burst left in the pool
        # (``benchmarks/RESULTS.md``, *Server CPU at one client*, *Levers, measured side by
        # side*).
        kwargs.update(pool_size=pool_size, max_overflow=max_overflow, pool_use_lifo=True)
    url, prepare = _prepare_threshold(url)
    if prepare is not _DEFAULT:
        kwargs["connect_args"] = {"prepare_threshold": prepare}
    engine = create_engine(url, isolation_level="READ COMMITTED", **kwargs)
    _install_liveness_check(engine)
    _install_session_end_check(engine)
    if prepare is _DEFAULT:
        _install_pooler_check(engine)
    return engine


_DEFAULT: Final = object()
#: The URL parameter that sets psycopg's ``prepare_threshold`` (``none``: never prepare).
PREPARE_THRESHOLD: Final = "prepare_threshold"


def _prepare_threshold(url: str) -> tuple[str, object]:
    """``url`` without its ``prepare_threshold`` parameter, and psycopg's setting from it:
    ``None`` for ``none`` or ``off`` (statements never prepared), an integer for a number
    (psycopg prepares a statement on that execution; ``0``: on the first), :data:`_DEFAULT`
    (psycopg's own: prepare a statement on its fifth execution) when the URL has none.

    Why it exists: psycopg prepares a statement run again and again on its connection's
    server session. Behind PgBouncer in *transaction* pooling, before 1.21 (Debian bookworm
    ships 1.18), the transactions of different client connections share server sessions, so
    a prepared statement is missing on one (``InvalidSqlStatementName``) or already there on
    another (``DuplicatePreparedStatement``): of 1,200 registrations by 8 clients to two
    workers through PgBouncer 1.18, 45 were answered 500 and 55 answered 503.
    ``?prepare_threshold=none`` turns preparing off (``docs/operations.md``, *PgBouncer*)."""
    parsed = make_url(url)
    if PREPARE_THRESHOLD not in parsed.query:
        return url, _DEFAULT
    raw = parsed.query[PREPARE_THRESHOLD]
    text = (raw if isinstance(raw, str) else raw[-1]).strip().lower()
    rest = parsed.difference_update_query([PREPARE_THRESHOLD]).render_as_string(hide_password=False)
    if text in ("none", "off"):
        return rest, None
    if not text.isdigit():
        raise ValueError(f"{PREPARE_THRESHOLD} is 'none' or a whole number, not {raw!r}")
    return rest, int(text)


#: Client connections the transaction-pooler probe opens in turn (the first the pool's own).
POOLER_PROBE_CONNECTIONS: Final = 4

_log = logging.getLogger(__name__)


def shared_server_session(connections: Iterator[Any]) -> int | None:
    """The server process two of ``connections`` (psycopg connections, taken in turn and all
    kept open) were both served by, one transaction each, or ``None``.

    PostgreSQL gives every client connection a backend process of its own for as long as it is
    open (PostgreSQL documentation, *The Statistics Collector*: ``pg_backend_pid``), so open
    connections reporting the same process are not connections to PostgreSQL but to a pooler
    that lends its server sessions by the transaction (PgBouncer's ``pool_mode =
    transaction``): each transaction here ends before the next connection's begins, which
    frees the session for it. A pooler lending sessions by the connection (session pooling)
    keeps each open connection on its own session, and prepared statements are safe there."""
    seen: set[int] = set()
    for conn in connections:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            (pid,) = cur.fetchone()
        conn.commit()
        if pid in seen:
            return int(pid)
        seen.add(pid)
    return None


def _install_pooler_check(engine: Engine) -> None:
    """Prepared statements off behind a transaction pooler, found on the first connection.

    psycopg prepares a statement once it has run five times on its connection. Behind a pooler
    in transaction pooling (PgBouncer before 1.21, or without ``max_prepared_statements``) the
    transactions of different client connections share server sessions, so a statement's name
    can be missing there (a 503: :func:`prepared_statement_lost`), or be another connection's
    name for *another* statement, which then runs with this one's parameters when their types
    agree: an insert answered 201 that wrote nothing (``tests/db/test_pgbouncer.py`` saw 3 of
    2,000 acknowledged registrations missing from the ledger). So when the URL does not set
    ``prepare_threshold``, the pool's first connection probes with
    :data:`POOLER_PROBE_CONNECTIONS` client connections (:func:`shared_server_session`) and,
    if two share a server process, every connection of the engine is given
    ``prepare_threshold = None`` (never prepare), with a warning. A URL that sets
    ``prepare_threshold`` is the operator's choice and is not probed (``none``; or a number,
    for PgBouncer ≥ 1.21 with ``max_prepared_statements``, which carries prepared statements
    between sessions). ``docs/operations.md``, *PgBouncer*."""
    pooled: list[int] = []

    @event.listens_for(engine, "first_connect")
    def _probe(dbapi_connection: Any, _record: Any) -> None:
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        opened: list[Any] = []

        def connections() -> Iterator[Any]:
            yield dbapi_connection
            for _ in range(POOLER_PROBE_CONNECTIONS - 1):
                opened.append(engine.dialect.connect(*cargs, **cparams))
                yield opened[-1]

        try:
            pid = shared_server_session(connections())
        except Exception as exc:  # a probe that cannot run changes nothing
            _log.warning(
                "the transaction-pooler probe did not run (%s): prepared statements stay on", exc
            )
            pid = None
        finally:
            for conn in opened:
                conn.close()
        if pid is not None:
            pooled.append(pid)
            _log.warning(
                "the database URL reaches PostgreSQL through a pooler in transaction pooling "
                "(two open connections were served by server process %d): prepared statements "
                "are turned off (prepare_threshold=none); set prepare_threshold in the URL to "
                "choose (docs/operations.md, PgBouncer)",
                pid,
            )

    @event.listens_for(engine, "connect")
    def _no_prepare(dbapi_connection: Any, _record: Any) -> None:
        if pooled:
            dbapi_connection.prepare_threshold = None


def session_ended(exc: BaseException) -> bool:
    """Whether a PostgreSQL error ended its session: an error of severity ``FATAL`` (or
    ``PANIC``), which the server sends just before it closes the connection (PostgreSQL
    documentation, *Message Severity Levels*: FATAL "caused the current session to abort").

    psycopg marks its connection broken only once it reads the end of file that follows. When
    it raises on the goodbye itself (``AdminShutdown`` from ``pg_terminate_backend``, an idle
    session timeout, a server shutting down) before that, SQLAlchemy's psycopg dialect, which
    looks only at ``closed`` and ``broken``, would call the error an ordinary one, and the dead
    connection would go back to the pool and fail its next checkout or statement instead.
    """
    diag = getattr(exc, "diag", None)
    return getattr(diag, "severity_nonlocalized", None) in ("FATAL", "PANIC")


#: SQLSTATE ``read_only_sql_transaction``: "cannot execute … in a read-only transaction"
READ_ONLY_SQL_TRANSACTION: Final = "25006"


def not_the_primary(exc: BaseException) -> bool:
    """Whether a statement was refused because its connection's server does not accept writes
    (SQLSTATE 25006; the service itself never opens a read-only transaction): the connection
    reached the primary once and that server is a standby now, or it never was the primary.
    So a managed service's failover looks to a connection opened through a DNS name that
    moved to the new primary, or through a proxy that still routes to the old one; and so
    does a primary made read-only (``default_transaction_read_only``) to fence it. The
    connection is of no more use for writes: it is discarded as a lost one (and the pool's
    older connections with it), the request is answered 503 with ``Retry-After``, and the
    next connection is opened anew, on whichever server accepts writes then."""
    return getattr(exc, "sqlstate", None) == READ_ONLY_SQL_TRANSACTION


#: SQLSTATEs ``invalid_sql_statement_name`` and ``duplicate_prepared_statement``
PREPARED_STATEMENT_LOST: Final = frozenset({"26000", "42P05"})


def prepared_statement_lost(exc: BaseException) -> bool:
    """Whether a statement failed because the server session does not hold the prepared
    statements psycopg thinks its connection prepared (one missing, or a name already taken):
    the connection's server sessions are shared behind a pooler in transaction pooling
    (PgBouncer before 1.21, with psycopg's prepared statements left on: *PgBouncer* in
    ``docs/operations.md``). Nothing ran; the connection is discarded (alone: the pool's other
    connections are as good as they were) and the request answered 503 with ``Retry-After``,
    never 500."""
    return getattr(exc, "sqlstate", None) in PREPARED_STATEMENT_LOST


def connection_lost(exc: BaseException) -> bool:
    """Whether an error leaves its connection of no further use: the server ended the session
    (:func:`session_ended`), does not accept writes (:func:`not_the_primary`), or does not hold
    the connection's prepared statements (:func:`prepared_statement_lost`)."""
    return session_ended(exc) or not_the_primary(exc) or prepared_statement_lost(exc)


def _install_session_end_check(engine: Engine) -> None:
    """Any statement failing on a session-ending error, or refused by a server that is not the
    primary, invalidates its connection at once (and the pool's older ones); one whose prepared
    statement was lost, that connection alone."""

    @event.listens_for(engine, "handle_error")
    def _ended(context: Any) -> None:
        if prepared_statement_lost(context.original_exception):
            context.is_disconnect = True
            context.invalidate_pool_on_disconnect = False
        elif connection_lost(context.original_exception):
            context.is_disconnect = True


def _install_liveness_check(engine: Engine) -> None:
    """A pooled PostgreSQL connection is handed out only if it is alive, checked without a
    round trip.

    The pool's usual pre-ping (``pool_pre_ping``) sends an empty statement on every checkout:
    one more round trip for every request, which every request waits out at one client
    (``benchmarks/RESULTS.md``, *Server CPU at one client*). What
    it guards against is a connection whose server end went away while it sat in the pool: a
    restarted server, or a backend terminated (``pg_terminate_backend``, an idle timeout). A
    server that ends a connection says so (its last ``ErrorResponse``, then end of file), and
    an idle connection is sent nothing otherwise: the service never ``LISTEN``s, and every
    answer was read to its ``ReadyForQuery`` before the connection went back to the pool. So a
    connection that libpq already knows broken, or whose socket has something to read while it
    is idle, is given up (``DisconnectionError``: the pool discards it and hands out another,
    checked the same way). At worst a live connection that received an unrequested message is
    replaced; a dead one is never handed out for a closed server end.
    """

    @event.listens_for(engine, "checkout")
    def _alive(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not is_alive(dbapi_connection):
            raise sa_exc.DisconnectionError("the server closed the pooled connection")


def is_alive(dbapi_connection: Any) -> bool:
    """Whether an idle psycopg connection is still usable: libpq sees it open and nothing
    arrived on its socket since its last answer (a server ending it sends its goodbye and end
    of file). No round trip."""
    pgconn = dbapi_connection.pgconn
    if pgconn.status != pq.ConnStatus.OK or dbapi_connection.closed:
        return False
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    poller = select.poll()  # not select(): its descriptors must be below FD_SETSIZE
    poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


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
        # On the DBAPI cursor, a driver error raised as SQLAlchemy raises it (as
        # app.db.driver.run does): exec_driver_sql's execution context cost a registration
        # more than the BEGIN itself.
        mode = conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "IMMEDIATE")
        sql = "BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN DEFERRED"
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor()
        try:
            cursor.execute(sql)
        except conn.dialect.loaded_dbapi.Error as exc:
            disconnected = conn.dialect.is_disconnect(exc, raw, cursor)
            if disconnected:
                conn.invalidate(exc)
            raise sa_exc.DBAPIError.instance(
                sql,
                (),
                exc,
                conn.dialect.loaded_dbapi.Error,
                connection_invalidated=disconnected,
                dialect=conn.dialect,
            ) from exc
        finally:
            cursor.close()


def read_only(engine: Engine) -> Engine:
    """The same pool, for read-only units of work (deferred BEGIN on SQLite)."""
    return engine.execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})
