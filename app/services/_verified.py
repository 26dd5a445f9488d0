"""The report's replay, resumed from the last position a report verified (bounded work per read).

A report verifies the whole ledger: every entry's hash link, and every decision re-run from the
start (:class:`~odometer_core.ledger.replay.Replayer`). Re-running is what costs: on a
partitioned dataset each entry's selection is decided again block by block, so a ledger of
scattered selections took seconds to re-run however little of it was new. Re-checking the hash
chain is cheap (one SHA-256 per entry).

So each process keeps, per dataset, the replayer at the head its last clean report reached
(:class:`VerifiedPrefixes`), and the next report

1. walks the hash chain over **every** entry, from the genesis, as before — a stored entry
   changed since (by anyone with write access to the database) breaks the chain there, and
   the report says so exactly as a full replay would;
2. re-runs only the entries after the remembered head, starting from a copy of the remembered
   replayer, **if** the chain it just re-hashed reaches that head with the same hash. The hash
   of entry *n* commits to the content of entries 1…*n* (each entry hashes its predecessor's
   hash), and a replay is a deterministic function of that content, so the remembered state
   is the state a re-run from the genesis would reach: the verdict is the same, the work is
   the tail's.

Anything else — a chain problem before the remembered head, a head that no longer matches, a
ledger shorter than the remembered one — falls back to a full re-run (a second pass), so a
remembered prefix can only save work, never change a verdict. Only clean verdicts are
remembered. The memory is bounded (:data:`MAX_DATASETS`, :data:`MAX_WEIGHT`: datasets are
forgotten least recently used first) and per process. A position is also stored in the
database once the re-runs since the last stored one cost :data:`app.services._positions.
PERSIST_AFTER` of CPU, authenticated with a key derived from the checkpoint key
(:mod:`app.services._positions`), and a process that remembers nothing of a dataset resumes
from the stored one under the same chain check: the first report after a start re-runs the
tail, not the ledger. ``docs/operations.md`` states the costs.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.db.uow import UnitOfWork
from app.services import _positions
from app.services._types import JSONObject
from odometer_core.ledger import ChainWalker
from odometer_core.ledger.blocks import BlockHistory
from odometer_core.ledger.replay import Replayer

#: Entries read per short read transaction (:func:`entries_after`).
BATCH_SIZE = 500
#: At most this many datasets' positions are remembered per process.
MAX_DATASETS = 64
#: … and at most this much held by them in all (runs of partitioned datasets, open
#: reservations), about 100 bytes each.
MAX_WEIGHT = 2_000_000


@dataclass(frozen=True, slots=True)
class Verified:
    """A clean replay's position: how many entries, the last one's hash, the replayer there."""

    entries: int
    head_hash: str
    replayer: Replayer
    weight: int
    #: CPU seconds spent re-running entries after the position stored in the database
    #: (:mod:`app.services._positions`): a restart would re-run them again
    unsaved: float = 0.0


def weight(replayer: Replayer) -> int:
    """What a remembered replayer holds, counted in runs and reservations."""
    held = len(replayer.reservations) + len(replayer.selections) + len(replayer.quota_holds)
    if isinstance(replayer.state, BlockHistory):
        held += len(replayer.state.blocks.runs)
    return held + 1


class VerifiedPrefixes:
    """Per dataset, the last clean replay's position; least recently used forgotten first."""

    def __init__(self, max_datasets: int = MAX_DATASETS, max_weight: int = MAX_WEIGHT) -> None:
        self.max_datasets, self.max_weight = max_datasets, max_weight
        self._lock = threading.Lock()
        self._held: OrderedDict[str, Verified] = OrderedDict()
        self._weight = 0

    def get(self, dataset_id: str) -> Verified | None:
        with self._lock:
            found = self._held.get(dataset_id)
            if found is not None:
                self._held.move_to_end(dataset_id)
            return found

    def put(self, dataset_id: str, replayer: Replayer, unsaved: float = 0.0) -> None:
        """Remember ``replayer`` (which the caller will not feed again) if its verdict is
        clean and it fits."""
        if replayer.chain_problems or replayer.replay_problems or replayer.stopped:
            return
        held = Verified(replayer.entries, replayer.head_hash, replayer, weight(replayer), unsaved)
        if held.weight > self.max_weight:
            return
        with self._lock:
            old = self._held.pop(dataset_id, None)
            if old is not None:
                self._weight -= old.weight
            self._held[dataset_id] = held
            self._weight += held.weight
            while len(self._held) > self.max_datasets or self._weight > self.max_weight:
                _, dropped = self._held.popitem(last=False)
                self._weight -= dropped.weight

    def unsaved(self) -> list[tuple[str, Verified]]:
        """The positions re-run past the ones stored in the database (``unsaved`` > 0)."""
        with self._lock:
            return [(ds, held) for ds, held in self._held.items() if held.unsaved > 0]

    def forget(self, dataset_id: str | None = None) -> None:
        """Forget one dataset's position, or every one."""
        with self._lock:
            if dataset_id is None:
                self._held.clear()
                self._weight = 0
            else:
                old = self._held.pop(dataset_id, None)
                if old is not None:
                    self._weight -= old.weight


#: This process's remembered positions (the report's).
VERIFIED = VerifiedPrefixes()


class Verification:
    """One report's verification, fed every entry from the first once (:meth:`feed`); then
    :meth:`replayer` gives the replayer at the head, running the fallback pass if needed."""

    def __init__(self, start: Verified | None) -> None:
        self.start = start
        # without a remembered position: the plain full replay
        self._replayer: Replayer | None = None if start is not None else Replayer()
        self._walker = ChainWalker()
        self._failed = False
        #: entries re-run (after the remembered head, or all of them)
        self.rerun = 0
        #: the CPU seconds (this thread's) those re-runs took
        self.cost = 0.0
        #: whether the pass resumed from :attr:`start`
        self.resumed = False

    def feed(self, entry: Mapping[str, Any]) -> None:
        if self._replayer is not None:
            began = time.thread_time()
            self._replayer.feed(entry)
            self.cost += time.thread_time() - began
            self.rerun += 1
            return
        if self._failed:
            return
        assert self.start is not None
        if self._walker.check(entry):
            self._failed = True  # the full pass reports it
        elif self._walker.position == self.start.entries:
            if self._walker.prev_hash == self.start.head_hash:
                self._replayer = self.start.replayer.snapshot()
                self.resumed = True
            else:
                self._failed = True

    def replayer(self, entries: Iterator[Mapping[str, Any]]) -> Replayer:
        """The replayer at the head: this pass's, or a full re-run of ``entries`` (a fresh
        pass from the first entry) when the remembered position did not hold."""
        if self._replayer is not None:
            return self._replayer
        began = time.thread_time()
        full = Replayer()
        for entry in entries:
            full.feed(entry)
            self.rerun += 1
        self.cost += time.thread_time() - began
        return full


def entries_after(
    uow: UnitOfWork, dataset_id: str, after: int, head: int, *, batch: int = BATCH_SIZE
) -> Iterator[JSONObject]:
    """Entries ``after`` < seq ≤ ``head`` in batches, each batch in a short read transaction
    (the ledger is append-only: entries at or below the head do not change between them)."""
    while after < head:
        with uow.read_only():
            rows = uow.ledger.page(dataset_id, after_seq=after, limit=batch, up_to_seq=head)
            read = [r.to_export() for r in rows]
        if not read:
            return
        yield from read
        after = int(read[-1]["seq"])


def verification_of(uow: UnitOfWork, dataset_id: str) -> Verification:
    """A report's verification of ``dataset_id``: from this process's remembered position, or
    else from the position stored in the database, or else from the genesis."""
    start = VERIFIED.get(dataset_id)
    if start is None:
        replayer = _positions.stored(uow, dataset_id)
        if replayer is not None:
            start = Verified(replayer.entries, replayer.head_hash, replayer, weight(replayer))
    return Verification(start)


def remember(uow: UnitOfWork, dataset_id: str, check: Verification, replayer: Replayer) -> None:
    """Remember where ``check`` ended (``replayer``, its head), and store it in the database
    once the re-runs since the stored position cost :data:`_positions.PERSIST_AFTER`."""
    if replayer.chain_problems or replayer.replay_problems or replayer.stopped:
        return
    unsaved = check.cost
    if check.resumed and check.start is not None:
        unsaved += check.start.unsaved
    if _positions.due(unsaved, weight(replayer)) and _positions.store(uow, dataset_id, replayer):
        unsaved = 0.0
    VERIFIED.put(dataset_id, replayer.snapshot(), unsaved)


_pause_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a replay runs (reference counting still frees
    everything a replay drops: its values hold no cycles). A replay builds hundreds of thousands
    of long-lived small objects, and the collector's passes over them were about half of a
    fragmented dataset's report (measured in ``benchmarks/RESULTS.md``). Nested and concurrent
    pauses count: the collector resumes when the last one ends, if it ran before the first."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
