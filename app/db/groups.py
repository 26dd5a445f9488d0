"""Group commit: concurrent writes on one key, inside one server process, share a transaction.

While one group of requests on a key (the invocations service uses the caller) is in its
transaction, the requests that arrive for the same key wait in line. When that group is done,
the first of them takes every waiting request (up to a limit) and runs them as the next group:
one lock statement, one decision after another in arrival order, one write, one commit; then
each is answered. A stream of requests on a hot dataset thus pays one lock and one durable
commit per group instead of one per request, requests spread over many datasets pay one
connection and two round trips per group, and nobody is served before an earlier arrival
(first come, first served, as :mod:`app.db.queue`).

This module only gathers and hands over; what a group does, and what each request of a failed
group is answered, is the caller's (``run``): it returns one outcome per request, a value or
the exception that request raises. Nothing is held across processes: correctness rests on the
database's lock and commit, as for a request alone.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

P = TypeVar("P")
R = TypeVar("R")


class _Waiter(Generic[P, R]):
    __slots__ = ("done", "error", "lead", "payload", "result")

    def __init__(self, payload: P) -> None:
        self.payload = payload
        self.done = threading.Event()
        self.lead = False
        self.result: R | None = None
        self.error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupCommit(Generic[P, R]):
    """Per-key lines of waiting requests; the head of a line runs the next group."""

    def __init__(self, limit: int = 64) -> None:
        if limit < 1:
            raise ValueError("a group holds at least one request")
        self.limit = limit
        self._lock = threading.Lock()
        self._lines: dict[Hashable, deque[_Waiter[P, R]]] = {}
        self._busy: set[Hashable] = set()

    def waiting(self, key: Hashable) -> int:
        """How many requests on ``key`` wait for a group (not counting the one running)."""
        with self._lock:
            return len(self._lines.get(key, ()))

    def run(
        self,
        key: Hashable,
        payload: P,
        run: Callable[[Sequence[P]], Sequence[R | BaseException]],
    ) -> R:
        """``payload``'s outcome, computed by ``run`` in a group of ``key``'s waiting requests
        (by this thread, or by the thread that leads the group it joined)."""
        me: _Waiter[P, R] = _Waiter(payload)
        with self._lock:
            line = self._lines.setdefault(key, deque())
            line.append(me)
            lead = key not in self._busy
            self._busy.add(key)
        if not lead:
            me.done.wait()
            if not me.lead:
                return me.outcome()
            me.done.clear()
        # the head of the line: take the group (this request is its first member)
        with self._lock:
            group = [line.popleft() for _ in range(min(self.limit, len(line)))]
        try:
            outcomes = run([w.payload for w in group])
            if len(outcomes) != len(group):
                raise RuntimeError("a group's run returned the wrong number of outcomes")
            for waiter, outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    waiter.error = outcome
                else:
                    waiter.result = outcome
        except BaseException as exc:
            for waiter in group:
                waiter.error = exc
        finally:
            with self._lock:
                if line:
                    head = line[0]
                    head.lead = True
                    head.done.set()
                else:
                    self._busy.discard(key)
                    del self._lines[key]
            for waiter in group:
                if waiter is not me:
                    waiter.done.set()
        return me.outcome()
