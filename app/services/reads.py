"""Which database serves a read: the replica when it has what the client has shown, else the
primary (``docs/operations.md``, *Read replicas*).

**The rule.** A client sends the highest ledger ``seq`` it has shown of each dataset
(``Odometer-Min-Seq: <dataset>:<seq>, …``). A read is served by the replica only once the
replica's head of every dataset that read is about (the dataset in its path; for a read of
several datasets, every dataset listed) is at least the seq listed: the replica is asked again
every few milliseconds for at most ``ODOMETER_READ_REPLICA_WAIT_SECONDS`` (0.25 s unless set),
after which the primary serves the read. So a client that wrote an entry and sends its seq sees
its write (read-your-writes), and a client that sends what it has shown never sees a reading
older than one it showed (monotonic reads), whichever database answers: a replica's head of a
dataset only moves forward, and the primary is never behind it.

Every answer says where it came from (``Odometer-Read-Source: replica`` or ``primary``); a
replica's answer carries its staleness (``Odometer-Replica-Lag``, seconds) and a dataset's read
the head of the database that served it, read after the answer was (``Odometer-Seq``), which a
client adds to what it has shown: a head read after the answer is at least what the answer
showed, so the next read never asks for less.

A refusal (any :class:`~app.services.errors.ServiceError`: a dataset or invocation not found,
a grant not yet replicated, a block key unknown) is never the replica's to give: the primary
reads again and decides. A replica that cannot be reached costs its read nothing but the
attempt: the primary serves it; one lost while a ledger page or export streams costs it one
batch, read again on the primary from the last entry sent (:meth:`Reads.moved`). Preview,
capacity, authentication and every write never come here: they read the primary.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, Generic, Literal, TypeVar

from sqlalchemy.exc import OperationalError

from app.db import replica
from app.db.uow import Database, UnitOfWork
from app.services.errors import ServiceError

T = TypeVar("T")
log = logging.getLogger("odometer")

#: What the client has shown (request), per dataset.
MIN_SEQ_HEADER: Final = "Odometer-Min-Seq"
#: Where the answer came from: ``replica`` or ``primary``.
SOURCE_HEADER: Final = "Odometer-Read-Source"
#: A replica's staleness in seconds (``0.000``: it had replayed all it received).
LAG_HEADER: Final = "Odometer-Replica-Lag"
#: The head of the dataset read, by the database that answered, read after the answer.
SEQ_HEADER: Final = "Odometer-Seq"
#: The most datasets one ``Odometer-Min-Seq`` lists.
MAX_LISTED: Final = 64
MAX_SEQ: Final = 2**62
#: The first pause between two looks at a replica that is behind; each pause doubles, up to
#: :data:`MAX_POLL` (so a replica that catches up in a few ms is seen at once, and a paused
#: one is asked a dozen times in 0.25 s, not a hundred).
FIRST_POLL: Final = 0.002
MAX_POLL: Final = 0.025

Source = Literal["replica", "primary"]


def min_seqs(header: str | None) -> dict[str, int]:
    """The seqs a ``Odometer-Min-Seq`` header lists (its grammar is the route's to check:
    :data:`app.api.reads.MIN_SEQ_PATTERN`); a dataset listed twice keeps its highest seq.
    ``ValueError`` for a seq past :data:`MAX_SEQ` or more than :data:`MAX_LISTED` datasets."""
    shown: dict[str, int] = {}
    if header is None or not header.strip():
        return shown
    items = [item.strip() for item in header.split(",")]
    if len(items) > MAX_LISTED:
        raise ValueError(f"lists {len(items)} datasets; at most {MAX_LISTED}")
    for item in items:
        dataset, _, seq = item.rpartition(":")
        value = int(seq)
        if value > MAX_SEQ:
            raise ValueError(f"seq {seq} of {dataset} is past {MAX_SEQ}")
        shown[dataset.strip()] = max(value, shown.get(dataset.strip(), 0))
    return shown


@dataclass(slots=True)
class Served(Generic[T]):
    """A read's answer and where it came from: the headers it is sent with."""

    value: T
    source: Source
    lag: Decimal | None = None
    seqs: dict[str, int] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {SOURCE_HEADER: self.source}
        if self.source == "replica":
            out[LAG_HEADER] = f"{self.lag or Decimal(0):.3f}"
        if self.seqs:
            out[SEQ_HEADER] = ", ".join(f"{d}:{s}" for d, s in sorted(self.seqs.items()))
        return out


@dataclass(frozen=True, eq=False)
class Reads:
    """The databases reads are served from: the primary, and the replica when one is set
    (a :func:`app.db.replica.split` database: its readers on the replica, its writers the
    primary's)."""

    primary: Database
    replica: Database | None = None
    #: how long a read waits for a replica behind what its client has shown
    wait_seconds: float = 0.25
    #: reads served, by source and reason (``replica``; ``primary``: ``no-replica``,
    #: ``behind``, ``refused``, ``unavailable``; ``moved``: a stream the replica began), for
    #: the operator's metrics and the tests
    counts: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def serve(
        self,
        work: Callable[[UnitOfWork], T],
        shown: Mapping[str, int],
        *,
        dataset: str | None = None,
    ) -> Served[T]:
        """``work`` run on the replica when it has reached what ``shown`` lists (for a read of
        ``dataset``, that dataset's seq alone; else every dataset listed), waiting at most
        :attr:`wait_seconds`; else, or when the replica refuses or fails, on the primary."""
        if self.replica is None:
            self._count("primary:no-replica")
            return Served(work(UnitOfWork(self.primary)), "primary")
        wanted = {d: s for d, s in shown.items() if dataset is None or d == dataset}
        try:
            reason = None if self._caught_up(self.replica, wanted) else "behind"
            if reason is None:
                value = work(UnitOfWork(self.replica))
                seqs, lag = self._after(self.replica, dataset)
                self._count("replica")
                return Served(value, "replica", lag, seqs)
        except ServiceError:
            reason = "refused"  # the primary decides every refusal
        except OperationalError as exc:
            reason = "unavailable"
            log.warning("the read replica failed a read; the primary serves it: %s", exc)
        self._count(f"primary:{reason}")
        value = work(UnitOfWork(self.primary))
        seqs, _ = self._after(self.primary, dataset, lagging=False)
        return Served(value, "primary", None, seqs)

    def _caught_up(self, database: Database, wanted: Mapping[str, int]) -> bool:
        """Whether the replica's heads reach ``wanted`` within :attr:`wait_seconds`."""
        if not wanted:
            return True
        deadline = time.monotonic() + self.wait_seconds
        pause = FIRST_POLL
        while True:
            uow = UnitOfWork(database)
            with uow.read_only():
                found = replica.heads(uow.session, wanted)
            if all(found.get(d, -1) >= s for d, s in wanted.items()):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(MAX_POLL, pause * 2)

    @staticmethod
    def _after(
        database: Database, dataset: str | None, *, lagging: bool = True
    ) -> tuple[dict[str, int], Decimal | None]:
        """The head of ``dataset`` and the replica's lag, read after the answer was."""
        if dataset is None and not lagging:
            return {}, None
        uow = UnitOfWork(database)
        with uow.read_only():
            seqs = replica.heads(uow.session, [dataset]) if dataset is not None else {}
            lag = replica.lag(uow.session) if lagging else None
        return seqs, lag

    def moved(self) -> UnitOfWork:
        """The primary's unit of work for the rest of a streamed read whose replica failed
        mid-stream (:func:`app.services.ledger.read_ledger`), counted as ``primary:moved``."""
        self._count("primary:moved")
        return UnitOfWork(self.primary)

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def dispose(self) -> None:
        """Close the replica's pool (the primary's is its owner's)."""
        if self.replica is not None:
            replica.reader_engine(self.replica).dispose()


def reads_from_settings(
    primary: Database, url: str | None, *, pool_size: int, wait_seconds: float
) -> Reads:
    """The app's reads: ``primary`` alone without ``url``, else with the replica there."""
    if url is None:
        return Reads(primary, None, wait_seconds)
    return Reads(primary, replica.split(primary, url, pool_size=pool_size), wait_seconds)
