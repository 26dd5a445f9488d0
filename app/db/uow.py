"""The unit of work (Percival & Gregory, *Architecture Patterns with Python*, ch. 6).

A service opens it, works through the repositories, and calls :meth:`UnitOfWork.commit`
explicitly; leaving the block without a commit rolls everything back. Nothing commits in a
FastAPI dependency teardown, so a response is only built after its transaction is durable.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Final, TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.db.driver import PipelinedTransaction
from app.db.engine import make_engine, read_only
from app.db.repositories import (
    ApiKeyRepository,
    CheckpointRepository,
    DatasetRepository,
    GrantRepository,
    InvocationRepository,
    LedgerRepository,
    OrganisationRepository,
    PrincipalRepository,
)
from app.settings import Settings
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.witness import Head

T = TypeVar("T")


class WriteGate:
    """Where the writers of an SQLite database wait for their turn.

    SQLite admits one writer at a time, and a writer that finds the database locked polls it
    from SQLite's busy handler, sleeping longer after each try (up to 100 ms): under a stream
    of writes from several server processes a writer can lose round after round, and the p99
    ends up far above the p50 (``benchmarks/RESULTS.md``, *Measurements once quoted in the
    code*). Writers here first take
    a lock of their process's, then an exclusive ``flock`` on a file beside the database
    (``<database>-writer.lock``), where the kernel wakes a waiter the moment the holder
    leaves. ``BEGIN IMMEDIATE`` remains the lock that counts; the gate only decides who asks
    for it first. Without a file (an in-memory database) only the process's lock is used.
    Not ``filelock``: its waiters poll, and a hand-off took 25 times as long (``RESULTS.md``).
    """

    def __init__(self, path: str | None) -> None:
        self._threads = threading.Lock()
        self._path = path
        self._fd: int | None = None

    @classmethod
    def for_database(cls, database: str | None) -> WriteGate:
        if not database or database == ":memory:" or database.startswith("file:"):
            return cls(None)
        return cls(f"{database}-writer.lock")

    def acquire(self) -> None:
        self._threads.acquire()
        if self._path is None:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Database:
    """An engine and its two session factories (writers, readers), the checkpoint signer that
    ledger appends made through it sign with (``None``: no checkpoints; the app factory sets it
    from its settings), and what the ledger heads a commit moved are handed to.

    Persistence only: the write path's turns, caches and witness are its own
    (:class:`app.writepath.WritePath`, one per database, looked up by identity: two databases
    are never equal)."""

    engine: Engine
    writer: sessionmaker[Session]
    reader: sessionmaker[Session]
    #: SQLite admits one writer at a time; writers of every process queue here instead of
    #: polling SQLite's busy handler (whose back-off sleeps waste the lock under load).
    #: BEGIN IMMEDIATE remains the lock that counts.
    write_gate: WriteGate | None = None
    signer: Signer | None = None
    #: called with the ledger heads a transaction moved once it committed, before
    #: :meth:`UnitOfWork.commit` returns (``None``: nowhere; the app factory hands them to the
    #: write path's witness, :meth:`app.writepath.witness.WitnessGuard.record`, which may raise
    #: once the commit stands)
    after_commit: Callable[[Iterable[Head]], None] | None = None

    @classmethod
    def from_engine(cls, engine: Engine) -> Database:
        gate = (
            WriteGate.for_database(engine.url.database) if engine.dialect.name == "sqlite" else None
        )
        return cls(
            engine,
            sessionmaker(engine, expire_on_commit=False, autoflush=True),
            sessionmaker(read_only(engine), expire_on_commit=False, autoflush=False),
            gate,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        return cls.from_engine(
            make_engine(
                settings.database_url,
                busy_timeout_ms=settings.sqlite_busy_timeout_ms,
                pool_size=settings.db_pool_size,
                max_overflow=settings.db_max_overflow,
            )
        )

    def ping(self) -> None:
        """Round-trip to the database (raises when it is unreachable)."""
        with self.reader() as session:
            session.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()


class UnitOfWork:
    """One transaction and the repositories bound to it; reusable for consecutive blocks."""

    datasets: DatasetRepository
    ledger: LedgerRepository
    invocations: InvocationRepository
    api_keys: ApiKeyRepository
    organisations: OrganisationRepository
    principals: PrincipalRepository
    grants: GrantRepository
    checkpoints: CheckpointRepository
    session: Session

    def __init__(self, database: Database) -> None:
        self._database = database
        #: the database this unit of work opens its transactions on (an attribute, not a
        #: property: the write path reads it several times a registration)
        self.database: Final = database
        self._open = False
        self._gate: WriteGate | None = None
        #: the transaction's connection in a Core unit of work (:meth:`core`), else ``None``
        self._core: Connection | None = None
        #: a Core unit of work's open transaction on PostgreSQL (:meth:`connection`)
        self._pipelined: PipelinedTransaction | None = None
        #: the ledger heads this transaction moved, handed to ``after_commit`` once it commits
        self.heads: dict[str, Head] = {}
        #: what the layers above keep for this transaction only, by owner (the write path's
        #: stored responses, :func:`app.writepath.stored.stored`); emptied when the transaction
        #: rolls back or ends
        self.scratch: dict[object, object] = {}
        #: an operator's recovery (import of a tail, acknowledged loss) writes to a dataset
        #: the witness froze; set by :mod:`app.services.witness` only
        self.recovering = False

    def _behind_gate(self, opening: Callable[[], T], *, write: bool) -> T:
        """``opening()`` once this writer's turn at the write gate came (writers only), the
        turn given back if it fails; the unit of work is open from then on."""
        if self._open:
            raise RuntimeError("unit of work already open")
        gate = self._database.write_gate if write else None
        if gate is not None:
            gate.acquire()
        try:
            opened = opening()
        except BaseException:
            if gate is not None:
                gate.release()
            raise
        self._gate = gate
        self._open = True
        return opened

    def _start(self, factory: sessionmaker[Session], *, write: bool) -> UnitOfWork:
        self.session = self._behind_gate(factory, write=write)
        self.datasets = DatasetRepository(self.session)
        self.ledger = LedgerRepository(self.session)
        self.invocations = InvocationRepository(self.session)
        self.api_keys = ApiKeyRepository(self.session)
        self.organisations = OrganisationRepository(self.session)
        self.principals = PrincipalRepository(self.session)
        self.grants = GrantRepository(self.session)
        self.checkpoints = CheckpointRepository(self.session)
        return self

    def connection(self) -> Connection:
        """The connection of this unit of work's transaction (begun if it was not yet), for
        the write path's Core statements (:mod:`app.writepath.admission`)."""
        core = self._core
        if core is None:
            return self.session.connection()
        if core.dialect.name == "postgresql":
            if self._pipelined is None:  # BEGIN goes out with the first statement
                self._pipelined = PipelinedTransaction(core)
        elif not core.in_transaction():
            core.begin()  # after a rollback: BEGIN IMMEDIATE again on SQLite (the begin hook)
        return core

    @property
    def signer(self) -> Signer | None:
        """The checkpoint signer of this unit of work's database (``None``: no checkpoints)."""
        return self._database.signer

    def _finish(self) -> None:
        # close() rolls back whatever was not committed and detaches the objects (without
        # expiring them, so views built from them stay readable).
        try:
            self.session.close()
        finally:
            self._release()

    def _release(self) -> None:
        """Closed: the write gate's turn goes to the next writer."""
        self._open = False
        self.heads.clear()
        self.scratch.clear()
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.release()

    def __enter__(self) -> UnitOfWork:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite)."""
        return self._start(self._database.writer, write=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._finish()

    def core(self, *, read: bool = False) -> AbstractContextManager[UnitOfWork]:
        """A write transaction on a pooled Core connection, without an ORM ``Session``: the
        write path of register, settle and cancel, whose statements are
        :mod:`app.writepath.admission`'s and which only needs :meth:`connection`, :meth:`commit` and
        :meth:`rollback` (the repositories are the ``Session``'s and are not set here). The
        ``Session`` only carried the connection there, and its transaction bookkeeping (begin,
        commit's flush check, close) was a sizeable share of a registration's CPU
        (``benchmarks/RESULTS.md``, *Server CPU at one client*, where what dropping it bought is
        measured too). On PostgreSQL the transaction is pipelined
        (:class:`app.db.driver.PipelinedTransaction`: ``BEGIN`` sent with the lock statement, the
        write with ``COMMIT``, two round trips in all). Leaving the block without a commit rolls
        back, as for ``with uow``.

        ``read=True``: a read transaction on the same statements instead (``BEGIN DEFERRED``
        on SQLite, not behind the write gate: it never takes the write lock), which the write
        path decides in before it writes (:mod:`app.services.batching`, on SQLite)."""
        return _Core(self, read)

    @contextmanager
    def read_only(self) -> Iterator[UnitOfWork]:
        """A read transaction: never commits, never takes SQLite's write lock."""
        self._start(self._database.reader, write=False)
        try:
            yield self
        finally:
            self._finish()

    def commit(self) -> None:
        """Commit; then hand the ledger heads the transaction moved to the database's
        ``after_commit`` (the one commit point of every ledger append: the app's write path
        witnesses them there and returns once the answer may be sent,
        :meth:`app.writepath.witness.WitnessGuard.record`)."""
        if self._pipelined is not None:
            pipelined, self._pipelined = self._pipelined, None
            pipelined.commit()
        elif self._core is not None:
            self._core.commit()
        else:
            self.session.commit()
        heads, self.heads = self.heads, {}
        after = self._database.after_commit
        if heads and after is not None:
            after(heads.values())

    def rollback(self) -> None:
        self.heads.clear()
        self.scratch.clear()  # what was read or kept for it belonged to the rolled-back work
        if self._pipelined is not None:
            pipelined, self._pipelined = self._pipelined, None
            pipelined.rollback()
        elif self._core is not None:
            self._core.rollback()
        else:
            self.session.rollback()


class _Core:
    """:meth:`UnitOfWork.core`'s block: a class rather than a generator's context manager, on
    every registration's path (a generator's frames and its context manager's bookkeeping
    cost more than the block's own work)."""

    __slots__ = ("_read", "_uow")

    def __init__(self, uow: UnitOfWork, read: bool) -> None:
        self._uow = uow
        self._read = read

    def __enter__(self) -> UnitOfWork:
        uow = self._uow
        engine = uow._database.engine
        uow._core = uow._behind_gate(
            (read_only(engine) if self._read else engine).connect, write=not self._read
        )
        # begun by the first connection() (BEGIN IMMEDIATE on SQLite, by the begin hook; a
        # pipelined BEGIN on PostgreSQL), as a Session begins lazily
        return uow

    def __exit__(self, *exc: object) -> None:
        uow = self._uow
        current, uow._core = uow._core, None
        pipelined, uow._pipelined = uow._pipelined, None
        try:
            if pipelined is not None:
                pipelined.rollback()  # what was not committed
            if current is not None:
                current.close()  # rolls back what was not committed, returns the connection
        finally:
            uow._release()
