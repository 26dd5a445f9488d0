"""The report's verification kept up with fragmented ledgers in the background.

A report re-checks every entry's hash and resumes the re-run of the entries from the last
verified position (:mod:`app.services._verified`, :mod:`app.services._positions`). A dataset
no report has read yet has no position: its first report re-ran the whole ledger, seconds on a
partitioned dataset an analyst fragmented (every decision again over ~10⁵ runs, while the same
ledger on an unfragmented dataset replays in milliseconds; as much where the same thousand
keys are selected again and again, leaving few runs). So a background thread catches the
verified positions of such datasets up with their ledgers as they grow: every
:attr:`BehindVerifier.every` seconds it reads the partitioned datasets' heads and run counts,
and for each whose head moved past its position and whose runs reach :data:`FRAGMENTED_RUNS`,
or whose entries since the position name :data:`PENDING_RANGES` block ranges in entries that
name several (each entry read once to count them), it re-runs the new entries from that
position (:func:`catch_up`), exactly as a report would, then remembers the new position (and
stores it, under the same MAC, once the re-runs since the stored one cost
:data:`app.services._positions.PERSIST_AFTER`). A report then re-runs only what came after.

It verifies too: a problem found is logged at ERROR (``ledger verification of dataset … found
a problem``) and the position is not advanced, so the next report re-runs from the genesis and
shows the problem as it always did. Whole datasets, and partitioned ones whose pending entries
name few ranges, are left to the report: their replay is cheap, and re-running each entry once
more would only add CPU to the write path's process. An entry that names one range (a period of a
daily partition, a span of keys) re-runs as cheaply as a whole dataset's and does not count: a
dataset registered on the same seven days again and again is left to the report however busy.

On PostgreSQL one verifier runs across every worker and instance (a transaction-level
advisory lock, :data:`LOCK_KEY`, in a transaction the one that got it keeps open; another
takes over when that transaction ends, which also holds behind a transaction-mode pooler).
On SQLite each process runs its own. ``ODOMETER_VERIFY_BEHIND_SECONDS=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Final

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import SQLAlchemyError

from app.db.engine import make_engine
from app.db.models import Dataset
from app.db.uow import Database, UnitOfWork
from app.services import _positions
from app.services._verified import VERIFIED, Verified, entries_after, gc_paused, weight
from odometer_core.ledger.blocks import BLOCKS
from odometer_core.ledger.replay import Replayer

log = logging.getLogger("odometer")

#: A partitioned dataset with at least this many runs is kept verified in the background …
FRAGMENTED_RUNS: Final = 10_000
#: … and so is one whose entries after its position name at least this many block ranges, in
#: entries that name several (about 0.1 s of re-runs on this machine; ``benchmarks/RESULTS.md``).
PENDING_RANGES: Final = 5_000
#: ``pg_try_advisory_xact_lock``'s key: one verifier across the processes on one database.
LOCK_KEY: Final = 0x0D0_7E21F1


def catch_up(uow: UnitOfWork, dataset_id: str, head: int) -> Replayer | None:
    """Re-run ``dataset_id``'s entries after its verified position (this process's, else the
    stored one, else the genesis) up to ``head``; remember the position reached if the re-run
    found no problem. Returns the replayer reached (``None`` when nothing was new)."""
    start = VERIFIED.get(dataset_id)
    if start is None:
        found = _positions.stored(uow, dataset_id)
        if found is not None:
            start = Verified(found.entries, found.head_hash, found, weight(found))
    if start is not None and start.entries >= head:
        return None
    replayer = Replayer() if start is None else start.replayer.snapshot()
    began = time.thread_time()
    with gc_paused():
        for entry in entries_after(uow, dataset_id, replayer.entries, head):
            replayer.feed(entry)
    unsaved = time.thread_time() - began + (0.0 if start is None else start.unsaved)
    if replayer.chain_problems or replayer.replay_problems or replayer.stopped:
        problems = [*replayer.chain_problems, *replayer.replay_problems]
        log.error(
            "ledger verification of dataset %s found a problem: %s",
            dataset_id,
            problems[0] if problems else "stopped",
        )
        return replayer
    if _positions.due(unsaved, weight(replayer)) and _positions.store(uow, dataset_id, replayer):
        unsaved = 0.0
    VERIFIED.put(dataset_id, replayer.snapshot(), unsaved)
    return replayer


class BehindVerifier:
    """The background thread of the module docstring (``every`` seconds between rounds)."""

    def __init__(self, database: Database, every: float) -> None:
        self.database = database
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock: Connection | None = None
        self._lock_engine: Engine | None = None
        #: datasets whose re-run found a problem, at the head it was found at: not re-run
        #: again (from the genesis) until their head moves
        self._failed: dict[str, int] = {}
        #: per dataset below :data:`FRAGMENTED_RUNS`: the entry read up to, and the block
        #: ranges the entries after its position name (:meth:`_costly`)
        self._pending: dict[str, tuple[int, int]] = {}
        #: rounds completed (tests wait on it)
        self.rounds = 0

    def start(self) -> None:
        if self.every <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="verify-behind", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=30)
        if self.every > 0:
            try:
                self.store_unsaved()
            except SQLAlchemyError:  # a position only saves work: the next report re-runs it
                log.exception("storing the verified positions at stop failed")
        lock, self._lock = self._lock, None
        if lock is not None:
            with contextlib.suppress(SQLAlchemyError):
                lock.close()  # the transaction ends: the advisory lock goes with it
        engine, self._lock_engine = self._lock_engine, None
        if engine is not None:
            engine.dispose()

    def _run(self) -> None:
        try:
            self.warm()
        except Exception:  # the positions are read by the reports themselves
            log.exception("reading the stored verified positions at start failed")
        while not self._stop.wait(self.every):
            try:
                self.round()
            except Exception:  # a round that failed (a database away) is tried again later
                log.exception("the background verification round failed")
                self._drop_lock()
            self.rounds += 1

    def warm(self) -> None:
        """At start, before the first round: the positions stored for the fragmented datasets
        (:data:`FRAGMENTED_RUNS` runs or more) read into this process's memory, so that the
        first report after a restart resumes from memory instead of reading back and decoding
        a position of some 10⁵ runs itself (about 0.2 s of CPU; ``benchmarks/RESULTS.md``,
        *the fragmenting attack*). A read, not a re-run: every process does it, leading or
        not, as every process serves reports."""
        uow = UnitOfWork(self.database)
        for dataset_id, _head, runs in self._behind(uow):
            if self._stop.is_set():
                return
            if runs >= FRAGMENTED_RUNS and VERIFIED.get(dataset_id) is None:
                found = _positions.stored(uow, dataset_id)
                if found is not None:
                    VERIFIED.put(dataset_id, found)

    def store_unsaved(self) -> None:
        """At a clean stop: every position of this database's datasets that this process
        re-ran past the one stored (:meth:`~app.services._verified.VerifiedPrefixes.unsaved`)
        written, whatever it saves (a running process stores one only once it saves more than
        writing it costs: ``app.services._positions.due``), so that the first report after a
        restart (a deploy) re-runs nothing. A crash leaves the last stored positions."""
        unsaved = dict(VERIFIED.unsaved())
        if not unsaved:
            return
        uow = UnitOfWork(self.database)
        with uow.read_only():
            here = set(
                uow.session.execute(
                    select(Dataset.id).where(Dataset.id.in_(sorted(unsaved)))
                ).scalars()
            )
        for dataset_id in sorted(here):
            replayer = unsaved[dataset_id].replayer
            if _positions.store(uow, dataset_id, replayer):
                VERIFIED.put(dataset_id, replayer)

    def round(self) -> None:
        """One pass over the partitioned datasets whose heads moved past their positions, if
        there are any and this process leads (:meth:`_leading`)."""
        uow = UnitOfWork(self.database)
        behind = self._behind(uow)
        if not behind or not self._leading():
            return
        for dataset_id, head, runs in behind:
            if self._stop.is_set():
                return
            if self._failed.get(dataset_id) == head:
                continue
            if runs < FRAGMENTED_RUNS and not self._costly(uow, dataset_id, head):
                continue
            self._pending.pop(dataset_id, None)
            reached = catch_up(uow, dataset_id, head)
            if reached is not None and (reached.replay_problems or reached.chain_problems):
                self._failed[dataset_id] = head
            else:
                self._failed.pop(dataset_id, None)

    def _costly(self, uow: UnitOfWork, dataset_id: str, head: int) -> bool:
        """Whether the entries after ``dataset_id``'s position name :data:`PENDING_RANGES`
        block ranges or more (what a re-run costs, whatever the runs: a thousand keys selected
        again and again leave few runs and cost as much). The entries are read once each
        (:attr:`_pending` keeps the count and where it stopped)."""
        known = VERIFIED.get(dataset_id)
        position = 0 if known is None else known.entries
        seen, ranges = self._pending.get(dataset_id, (position, 0))
        if seen < position:  # a report moved the position since: count from there
            seen, ranges = position, 0
        for entry in entries_after(uow, dataset_id, seen, head):
            named = len((entry.get("request") or {}).get("blocks") or ())
            # an entry that names one range (a period, a span of keys) re-runs as cheaply as a
            # whole dataset's: left to the report, as those are
            ranges += named if named > 1 else 0
        self._pending[dataset_id] = (head, ranges)
        return ranges >= PENDING_RANGES

    def _behind(self, uow: UnitOfWork) -> list[tuple[str, int, int]]:
        """The partitioned datasets whose heads are past their positions: id, head, runs."""
        with uow.read_only():
            rows = uow.session.execute(
                select(Dataset.id, Dataset.last_seq, Dataset.state_json).where(
                    Dataset.partition_json.is_not(None)
                )
            ).all()
        out = []
        for dataset_id, last_seq, state in rows:
            runs = int(((state or {}).get(BLOCKS) or {}).get("runs") or 0)
            known = VERIFIED.get(dataset_id)
            if known is None or known.entries < last_seq:
                out.append((str(dataset_id), int(last_seq), runs))
        return out

    def _leading(self) -> bool:
        """Whether this process runs the rounds: always on SQLite; on PostgreSQL while it
        holds the advisory lock, on a connection of its own outside the app's pool (which it
        keeps for as long as it leads, so it must not take one of the writers')."""
        engine = self.database.engine
        if engine.dialect.name != "postgresql":
            return True
        if self._lock is None:
            if self._lock_engine is None:
                url = engine.url.render_as_string(hide_password=False)
                self._lock_engine = make_engine(url, null_pool=True)
            conn = self._lock_engine.connect()
            # a transaction-level lock in a transaction left open while this process leads:
            # behind a pooler in transaction mode (PgBouncer) an open transaction keeps its
            # server session to itself, where a session-level lock stayed on a shared session
            # after the commit, and a process sharing it later took it again (advisory locks
            # are re-entrant), so several verifiers led at once. The key is written in the
            # statement, not bound: without parameters psycopg sends it by the simple query
            # protocol, whose snapshot ends with the statement. A bound statement's portal
            # kept its snapshot for as long as the transaction stayed open, which held back
            # the horizon of VACUUM and HOT pruning while this process led, and the block runs
            # that partitioned registrations rewrite piled up dead rows (0.6x the
            # registrations per second on a 7-day selection; benchmarks/RESULTS.md)
            got = conn.exec_driver_sql(f"SELECT pg_try_advisory_xact_lock({LOCK_KEY:d})").scalar()
            if not got:
                conn.close()
                return False
            self._lock = conn
        return True

    def _drop_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            with contextlib.suppress(SQLAlchemyError):
                lock.invalidate()
