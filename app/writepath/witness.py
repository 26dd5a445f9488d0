"""The witness of ledger heads, as the units of work use it: handed in at the commit point,
written by one writer per process, consulted before an entry is staged, and the datasets found
behind it (frozen for writes).

The bound, by construction (:meth:`WitnessGuard.acknowledge`): the answer to a write committed
at ``t`` is sent only once every head handed to the writer before ``t - lag`` is in the
witness; otherwise the request's thread writes everything pending itself when no write is under
way (group commit: requests arriving meanwhile wait for that write or lead the next one), or
waits for the write under way, at most ``wait`` seconds, and then answers 503, the commit
standing. Every head acknowledged is therefore in the witness, or was handed in within ``lag``
seconds after the oldest head the witness still lacks. ``lag = 0`` is the synchronous witness:
an answer waits for its own heads, written in its own thread (no hand-off). With ``lag > 0`` a
background thread writes what is pending ``lag / 2`` after the oldest head was handed in, so
that answers do not wait while it keeps up; it also retries a failed write. Both write through
the one path, the write path's group commit (:class:`app.writepath.groups.Leader`: one write
under way at a time, taking every head pending).

What is witnessed, the format and the guarantees: :mod:`odometer_core.ledger.witness` and
``docs/witness.md``. The checks against the database (at start, periodically) and the recovery
are :mod:`app.services.witness`; this module is what the write path needs, and keeps, per
process, which datasets are frozen and why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from app.writepath.groups import Leader
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.witness import Head, Witnessed, WitnessStore

log = logging.getLogger("odometer.witness")

#: how long an answer waits for the witness writer at most before it is answered 503
WAIT_SECONDS = 5.0
#: the least pause before a failed witness write is retried
RETRY_SECONDS = 0.5


def now() -> str:
    """The time a head is witnessed, in the ledger's form (fixed-width ISO 8601, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class WitnessUnavailable(RuntimeError):
    """The transaction committed but the witness is behind the bound (its directory is
    unwritable, or its writer late): the request is answered 503 with Retry-After; the commit
    stands, and a retry with the same Idempotency-Key gets the recorded answer once the witness
    has caught up."""


@dataclass(frozen=True, slots=True)
class Behind:
    """Why a dataset refuses writes: its database head against the witness's."""

    dataset_id: str
    witnessed_seq: int
    witnessed_hash: str
    database_seq: int
    database_hash: str | None
    #: ``behind`` (the database has fewer entries), ``forked`` (another hash at the witnessed
    #: seq), ``unwitnessed`` (its last heads could not be written to the witness),
    #: ``organisation`` (another dataset of its capped organisation is behind)
    reason: str
    #: for ``organisation``: the dataset that is behind
    sibling: str | None = None


class WitnessGuard:
    """The witness store, the signer of its records and this process's frozen datasets."""

    def __init__(
        self,
        store: WitnessStore,
        signer: Signer | None,
        *,
        lag: float = 0.0,
        wait: float = WAIT_SECONDS,
    ) -> None:
        self.store = store
        self.signer = signer
        #: no answer about a write committed at ``t`` is sent unless every head handed to the
        #: writer before ``t - lag`` is in the witness (0: its own heads)
        self.lag = lag
        #: how long an answer waits for the writer before it is a 503
        self.wait = wait
        self._lock = threading.Lock()
        self._frozen: dict[str, Behind] = {}
        # the writer's state, under ``_cond``: heads handed in and not yet written (the largest
        # seq per dataset), the oldest hand-off time among them and among those being written
        self._cond = threading.Condition()
        self._pending: dict[str, Head] = {}
        self._writing: dict[str, Head] = {}
        self._pending_since: float | None = None
        self._writing_since: float | None = None
        #: who writes what is pending: an answer's thread or the background one, one at a time
        self._leader: Leader[dict[str, Head], str | None] = Leader(
            self._cond, self._take, self._write, self._written
        )
        self._closed = False
        self._failures = 0
        self._error: str | None = None
        self._failures_pending = False  # the last write failed: its heads are retried
        self._retry_at = 0.0
        self._thread: threading.Thread | None = None
        #: the largest head of each dataset this process committed (the write path compares
        #: the locked database head with it, in memory)
        self._known: dict[str, Head] = {}

    # ------------------------------------------------------------------ frozen datasets
    def frozen(self, dataset_id: str) -> Behind | None:
        with self._lock:
            return self._frozen.get(dataset_id)

    def freeze(self, behind: Behind) -> None:
        with self._lock:
            known = self._frozen.get(behind.dataset_id)
            self._frozen[behind.dataset_id] = behind
        if known != behind:
            log.error(
                "dataset %s frozen for writes: %s (witness seq %d, database seq %d)",
                behind.dataset_id,
                behind.reason,
                behind.witnessed_seq,
                behind.database_seq,
            )

    def thaw(self, dataset_id: str) -> None:
        with self._lock:
            gone = self._frozen.pop(dataset_id, None)
        if gone is not None:
            log.warning("dataset %s serves writes again", dataset_id)

    def replace_frozen(self, frozen: dict[str, Behind]) -> None:
        """A full check's verdict (:func:`app.services.witness.check`)."""
        with self._lock:
            before = self._frozen
            self._frozen = dict(frozen)
        for dataset_id, behind in frozen.items():
            if before.get(dataset_id) != behind:
                log.error(
                    "dataset %s frozen for writes: %s (witness seq %d, database seq %d)",
                    dataset_id,
                    behind.reason,
                    behind.witnessed_seq,
                    behind.database_seq,
                )
        for dataset_id in before.keys() - frozen.keys():
            log.warning("dataset %s serves writes again", dataset_id)

    def all_frozen(self) -> dict[str, Behind]:
        with self._lock:
            return dict(self._frozen)

    # ------------------------------------------------------------------ the write path
    def behind(self, dataset_id: str, seq: int, head_hash: str) -> Behind | None:
        """Whether the dataset, whose locked database head is ``(seq, head_hash)``, must refuse
        writes: frozen by a check, or behind a head this process committed (kept in memory:
        no file is read on the write path). Only when the database is behind what this process
        saw is the dataset's witness record read, and that record decides (another process
        may have acknowledged a loss meanwhile)."""
        known = self.frozen(dataset_id)
        if known is not None:
            return known
        mine = self._known.get(dataset_id)
        if mine is None or mine.seq < seq or (mine.seq == seq and mine.head_hash == head_hash):
            return None
        record = self.store.get(dataset_id)
        with self._cond:
            unwritten = dataset_id in self._pending or dataset_id in self._writing
        if unwritten and (record is None or record.seq < mine.seq):
            record = Witnessed(dataset_id, mine.seq, mine.head_hash)  # not in the file yet
        elif (
            record is None
            or record.seq < seq
            or (record.seq == seq and record.head_hash == head_hash)
        ):  # the witness moved back: a loss acknowledged through another process
            with self._cond:
                self._known[dataset_id] = Head(dataset_id, seq, head_hash)
            return None
        found = Behind(
            dataset_id,
            record.seq,
            record.head_hash,
            seq,
            head_hash,
            "behind" if record.seq > seq else "forked",
        )
        self.freeze(found)
        return found

    def record(self, heads: Iterable[Head]) -> None:
        """Hand the heads a transaction just committed to this process's witness writer, then
        wait until the answer may be sent (:meth:`acknowledge`); :class:`WitnessUnavailable`
        when it may not (the commit stands)."""
        at = time.monotonic()
        with self._cond:
            idle = not self._pending
            for head in heads:
                pending = self._pending.get(head.dataset_id)
                if pending is None or head.seq > pending.seq:
                    self._pending[head.dataset_id] = head
                mine = self._known.get(head.dataset_id)
                if mine is None or head.seq >= mine.seq:
                    self._known[head.dataset_id] = head
            if self._pending_since is None:
                self._pending_since = at
            if self.lag > 0 and idle:  # a new deadline for the background writer (lag 0: none)
                self._start()
                self._cond.notify_all()
        self.acknowledge(at)

    def acknowledge(self, at: float) -> None:
        """Return once every head handed to the writer before ``at - lag`` (``time.monotonic``)
        is in the witness: the answer to a write committed at ``at`` may then be sent. When it
        is not and no write is under way, the calling thread writes everything pending itself
        (group commit: requests arriving meanwhile wait for that write, or lead the next);
        otherwise it waits for the write under way. Waits at most :attr:`wait` seconds, and not
        past a failed write: :class:`WitnessUnavailable` then. A replayed answer passes here
        with ``at`` = now."""
        deadline = time.monotonic() + self.wait
        with self._cond:
            failures = self._failures
            while True:
                since = self._unwitnessed_since()
                if since is None or since > at - self.lag:
                    return
                left = deadline - time.monotonic()
                if self._failures != failures or left <= 0:
                    raise WitnessUnavailable(
                        "the write was committed, but the witness has not recorded the ledger "
                        f"heads of the last {self.lag:g} s ({self._error or 'it is late'}); "
                        "retry with the same Idempotency-Key for the recorded answer"
                    )
                if not self._leader.busy and self._pending:
                    self._leader.lead()
                else:
                    self._cond.wait(left)

    def forget(self, dataset_id: str) -> None:
        """Drop what this process holds of ``dataset_id``'s head (its witness moves back on
        purpose: an acknowledged loss)."""
        with self._cond:
            self._pending.pop(dataset_id, None)
            self._known.pop(dataset_id, None)

    def close(self) -> None:
        """Write what is pending and stop the writer (a clean shutdown leaves nothing behind)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self.wait + 5)
        with self._cond:
            deadline = time.monotonic() + self.wait
            while self._leader.busy and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            if not self._leader.busy and self._pending:
                self._leader.lead()

    # ------------------------------------------------------------------ the writer
    def _unwitnessed_since(self) -> float | None:
        times = [t for t in (self._pending_since, self._writing_since) if t is not None]
        return min(times) if times else None

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="witness-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """The background writer, for what no answer waits for yet: with ``lag`` > 0, what is
        pending ``lag / 2`` seconds after the oldest head was handed in, so that answers never
        wait while the witness keeps up; and a failed write's heads, retried every
        ``max(lag, RETRY_SECONDS)``. It writes as an answer's thread does (:attr:`_leader`)."""
        with self._cond:
            while True:
                if self._closed:
                    return
                due = self._due()
                left = None if due is None else due - time.monotonic()
                if left is not None and left <= 0 and not self._leader.busy:
                    self._leader.lead()
                else:
                    self._cond.wait(left)

    def _due(self) -> float | None:
        """When the background writer writes what is pending (``None``: not before told)."""
        if not self._pending:
            return None
        if self._failures_pending:
            return self._retry_at
        if self.lag > 0 and self._pending_since is not None:
            return self._pending_since + self.lag / 2
        return None

    def _take(self) -> dict[str, Head] | None:
        """Everything pending, now being written (under ``_cond``; the leader's ``take``): the
        one path by which heads reach the store, whether from an answer's thread or the
        background writer's."""
        if not self._pending:
            return None
        batch, self._pending = self._pending, {}
        self._writing = batch
        self._writing_since, self._pending_since = self._pending_since, None
        return batch

    def _written(self, batch: dict[str, Head], error: str | None) -> None:
        """What a write left (under ``_cond`` again; the leader's ``done``): a failed write's
        heads pending again, to be retried."""
        if error is not None:
            for dataset_id, head in batch.items():
                pending = self._pending.get(dataset_id)
                if pending is None or head.seq > pending.seq:
                    self._pending[dataset_id] = head
            since = [t for t in (self._pending_since, self._writing_since) if t is not None]
            self._pending_since = min(since) if since else None
            self._failures += 1
            self._error = error
            self._failures_pending = True
            self._retry_at = time.monotonic() + max(self.lag, RETRY_SECONDS)
            self._start()  # the failed heads are retried even when no answer waits for them
        else:
            self._error = None
            self._failures_pending = False
        self._writing_since = None
        self._writing = {}

    def _write(self, batch: dict[str, Head]) -> str | None:
        """Write ``batch`` (outside ``_cond``); on failure freeze its datasets
        (``unwitnessed``; :meth:`_written` puts the heads back for the next write); the failure,
        or ``None``."""
        try:
            forks = self.store.advance(batch.values(), now(), self.signer)
        except OSError as exc:
            log.error("the witness could not record %d head(s): %s", len(batch), exc)
            for head in batch.values():
                self.freeze(
                    Behind(head.dataset_id, -1, "", head.seq, head.head_hash, "unwitnessed")
                )
            return str(exc)
        for dataset_id in batch:
            frozen = self.frozen(dataset_id)
            if frozen is not None and frozen.reason == "unwitnessed":
                self.thaw(dataset_id)
        for record in forks:
            head = batch[record.dataset_id]
            self.freeze(
                Behind(
                    record.dataset_id,
                    record.seq,
                    record.head_hash,
                    head.seq,
                    head.head_hash,
                    "forked",
                )
            )
        return None

    def get(self, dataset_id: str) -> Witnessed | None:
        return self.store.get(dataset_id)
