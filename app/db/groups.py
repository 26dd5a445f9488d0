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

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from contextlib import suppress
from typing import Any, Generic, TypeVar

P = TypeVar("P")
R = TypeVar("R")

#: Runs ``fn(*args)`` in a thread of the caller's choosing (an async caller's group runner).
Spawn = Callable[..., object]


class _Waiter(Generic[P, R]):
    """One request in line: a thread blocked on ``done`` (:meth:`GroupCommit.run`), or a
    coroutine awaiting ``future`` on ``loop`` (:meth:`GroupCommit.run_async`), which then also
    says how to run the line's groups (``run``, in a thread ``spawn`` starts)."""

    __slots__ = ("done", "error", "future", "lead", "loop", "payload", "result", "run", "spawn")

    def __init__(
        self,
        payload: P,
        future: asyncio.Future[R] | None = None,
        run: Callable[[Sequence[P]], Sequence[R | BaseException]] | None = None,
        spawn: Spawn | None = None,
    ) -> None:
        self.payload = payload
        self.done = threading.Event()
        self.lead = False
        self.result: R | None = None
        self.error: BaseException | None = None
        self.future = future
        self.loop = future.get_loop() if future is not None else None
        self.run = run
        self.spawn = spawn

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


def _settle(waiters: list[_Waiter[Any, Any]]) -> None:
    """On the waiters' event loop: each future gets its outcome (unless its request was
    cancelled meanwhile: its client left; its transaction ran as it would have)."""
    for waiter in waiters:
        future = waiter.future
        assert future is not None
        if future.done():
            continue
        if waiter.error is not None:
            future.set_exception(waiter.error)
        else:
            future.set_result(waiter.result)


class GroupCommit(Generic[P, R]):
    """Per-key lines of waiting requests; the head of a line runs the next group.

    Two kinds of request share a line. A thread (:meth:`run`) waits on an event and, when it
    reaches the head of the line, runs the next group itself. A coroutine (:meth:`run_async`)
    awaits a future: a thread started once for the line (``spawn``) runs group after group
    while coroutines head the line, and hands each group's outcomes to the event loop at once.
    One thread and one wake-up of the event loop per group, instead of a hand-off to a thread,
    an event and a wake-up per request, cost less CPU per admission and answered more requests
    with several clients, on one hot dataset and over many (``benchmarks/RESULTS.md``, *Server
    CPU at one client*, *Levers, measured side by side*)."""

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
        self._run_group(group, run)
        self._hand_over(key, line)
        return me.outcome()

    async def run_async(
        self,
        key: Hashable,
        payload: P,
        run: Callable[[Sequence[P]], Sequence[R | BaseException]],
        spawn: Spawn,
    ) -> R:
        """``payload``'s outcome, computed by ``run`` in a group of ``key``'s waiting requests,
        awaited on the running event loop. When the line is idle, ``spawn(fn, *args)`` is asked
        to run its groups in a thread (:meth:`_drain`). A cancelled caller's request stays in
        its group: what its transaction does is done, only the answer is dropped."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        me: _Waiter[P, R] = _Waiter(payload, future, run, spawn)
        with self._lock:
            line = self._lines.setdefault(key, deque())
            line.append(me)
            lead = key not in self._busy
            self._busy.add(key)
        if lead:
            try:
                spawn(self._drain, key, line)
            except BaseException as exc:  # no thread: nobody runs the line; answer it
                self._fail_line(key, line, exc)
        return await future

    def _run_group(
        self,
        group: list[_Waiter[P, R]],
        run: Callable[[Sequence[P]], Sequence[R | BaseException]],
    ) -> None:
        """Run ``group`` and give each member its outcome (threads woken, futures settled on
        their loops, one call per loop)."""
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
            self._deliver(group)

    @staticmethod
    def _deliver(group: list[_Waiter[P, R]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Waiter[P, R]]] = {}
        for waiter in group:
            if waiter.loop is None:
                waiter.done.set()  # (the thread running this group reads its own outcome)
            else:
                by_loop.setdefault(waiter.loop, []).append(waiter)
        for loop, waiters in by_loop.items():
            with suppress(RuntimeError):  # a closed loop: nobody awaits these any more
                loop.call_soon_threadsafe(_settle, waiters)

    def _coroutine_head(self, key: Hashable, line: deque[_Waiter[P, R]]) -> _Waiter[P, R] | None:
        """With the lock held, after a group: the line's head when a coroutine waits there (a
        thread must run its group); else ``None``, once a thread at the head was handed the
        line (it runs the next group itself) or the empty line was retired."""
        if not line:
            self._busy.discard(key)
            del self._lines[key]
            return None
        head = line[0]
        if head.loop is None:
            head.lead = True
            head.done.set()
            return None
        return head

    def _hand_over(self, key: Hashable, line: deque[_Waiter[P, R]]) -> None:
        """After a thread's group: the line's next group is run by its head (a thread waiting),
        or by a thread spawned for it (a coroutine waiting); an empty line is retired."""
        with self._lock:
            head = self._coroutine_head(key, line)
        if head is None:
            return
        assert head.spawn is not None
        try:
            head.spawn(self._drain, key, line)
        except BaseException as exc:
            self._fail_line(key, line, exc)

    def _drain(self, key: Hashable, line: deque[_Waiter[P, R]]) -> None:
        """In a spawned thread: run the line's groups one after another while a coroutine
        heads it; hand the line to a waiting thread, or retire it when empty."""
        while True:
            with self._lock:
                head = self._coroutine_head(key, line)
                if head is None:
                    return
                group = [line.popleft() for _ in range(min(self.limit, len(line)))]
            assert head.run is not None
            self._run_group(group, head.run)
            # let the event loop take the interpreter: it sends this group's answers and
            # queues the requests that arrived meanwhile into the next group
            time.sleep(0)

    def _fail_line(self, key: Hashable, line: deque[_Waiter[P, R]], exc: BaseException) -> None:
        """Nobody can run the line (no thread to run it in): every request in it gets
        ``exc``."""
        with self._lock:
            waiters = list(line)
            line.clear()
            self._busy.discard(key)
            self._lines.pop(key, None)
        for waiter in waiters:
            waiter.error = exc
        self._deliver(waiters)
