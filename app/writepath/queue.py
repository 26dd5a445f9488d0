"""First come, first served per dataset, inside one server process.

Admissions on one dataset are serialised by its budget row's lock. Waiting for that lock in the
database is not first come, first served: a request that arrives just as the holder commits can
take the row before those that have waited longest (PostgreSQL's tuple locks are re-contended on
every release). Under a stream of requests on a hot dataset some waiters lose again and again,
and the p99 is several times the p50 (``benchmarks/RESULTS.md``, *Fair queueing*). Here each
server process hands out turns per dataset in arrival order before a request opens its write
transaction, so at most one request of this process waits on the row, and the others wait
here, in order. Nothing is
held across processes: correctness still rests on the database's lock; this is only the order in
which one process presents its requests to it. Used on PostgreSQL only (``create_app``): on
SQLite the file lock between processes decides the order, and the queue only cost throughput.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Line:
    """One dataset's queue: tickets handed out in order, served in order."""

    __slots__ = ("changed", "next_ticket", "serving", "users")

    def __init__(self, lock: threading.Lock) -> None:
        self.changed = threading.Condition(lock)
        self.next_ticket = 0
        self.serving = 0
        self.users = 0


class FairQueue:
    """Per-key first-come-first-served turns (one condition per busy key; idle keys are
    forgotten)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[str, _Line] = {}

    @contextmanager
    def turn(self, key: str) -> Iterator[None]:
        """Wait for this caller's turn on ``key``; the next caller's turn starts on exit."""
        with self._lock:
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = _Line(self._lock)
            ticket = line.next_ticket
            line.next_ticket += 1
            line.users += 1
            while line.serving != ticket:
                line.changed.wait()
        try:
            yield
        finally:
            with self._lock:
                line.serving += 1
                line.users -= 1
                if line.users == 0:
                    del self._lines[key]
                else:
                    line.changed.notify_all()
