"""Group commit: concurrent writes on one key, inside one server process, share a transaction;
and the one leader-and-batch core (:class:`Leader`) the witness writer uses too.

While one group of requests on a key (the register use case uses the caller) is in its
transaction, the requests that arrive for the same key wait in line, each awaiting a future on
the event loop. When that group is done, the next group takes every waiting request (up to a
limit): one lock statement, one decision after another in arrival order, one write, one commit;
then each is answered. A stream of requests on a hot dataset thus pays one lock and one durable
commit per group instead of one per request, and nobody is served before an earlier arrival.

One thread (from anyio's pool, the one FastAPI's own blocking calls use) runs a line's groups
one after another while requests wait in it, and hands each group's answers back to the event
loop in one call; a line nobody waits in is retired. When the caller says that nothing else is
in flight in the process (``inline``), an idle line's group runs on the event loop itself: the
hand-off to a thread and back would be the request's largest fixed cost, and there is nothing
else for the loop to do meanwhile (``benchmarks/RESULTS.md``, *Server CPU at one client*).

Both group commits of the write path go through :class:`Leader`: whoever finds no write under
way takes everything waiting and writes it in one go, the lock released meanwhile, and those who
arrive in the meantime wait for the next batch. Here a line's thread leads its groups one after
another; in the witness (:class:`app.writepath.witness.WitnessGuard`) an answer's thread or the
background writer leads, and waiters wait on the lock's condition.

This module only gathers and hands over; what a group does, and what each request of a failed
group is answered, is the caller's (``run``): it returns one outcome per request, a value or the
exception that request raises. Nothing is held across processes: correctness rests on the
database's lock and commit, as for a request alone.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from contextlib import suppress
from functools import partial
from typing import Any, Generic, TypeVar

from anyio import to_thread

P = TypeVar("P")
R = TypeVar("R")
B = TypeVar("B")
W = TypeVar("W")


class Leader(Generic[B, W]):
    """One batch written at a time, by whoever leads: the write path's group commit, written
    once. ``take`` (called with ``lock`` held) hands over everything waiting, or ``None``;
    ``write`` writes it with ``lock`` released (the others keep handing in meanwhile); ``done``
    (with ``lock`` held again) books what the write returned; then the waiters on ``lock`` are
    woken. :attr:`busy` says a write is under way (nobody else may lead then)."""

    __slots__ = ("_done", "_lock", "_take", "_write", "busy")

    def __init__(
        self,
        lock: threading.Condition,
        take: Callable[[], B | None],
        write: Callable[[B], W],
        done: Callable[[B, W], None] | None = None,
    ) -> None:
        self._lock = lock
        self._take = take
        self._write = write
        self._done = done
        self.busy = False

    def lead(self) -> bool:
        """Take what waits and write it; ``False`` when nothing waited. Called with the lock
        held and no write under way (:attr:`busy` false); returns with the lock held. A write
        that raises leaves :attr:`busy` set and the exception to the caller."""
        batch = self._take()
        if batch is None:
            return False
        self.busy = True
        self._lock.release()
        try:
            written = self._write(batch)
        finally:
            self._lock.acquire()
        if self._done is not None:
            self._done(batch, written)
        self.busy = False
        self._lock.notify_all()
        return True


Run = Callable[[Sequence[P]], Sequence[R | BaseException]]


class _Waiter(Generic[P, R]):
    """One request in line: its payload, and the future its coroutine awaits."""

    __slots__ = ("future", "loop", "payload", "run")

    def __init__(self, payload: P, future: asyncio.Future[R], run: Run[P, R]) -> None:
        self.payload = payload
        self.future = future
        self.loop = future.get_loop()
        self.run = run


def _settle(answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """On the waiters' event loop: each future gets its outcome (unless its request was
    cancelled meanwhile: its client left; its transaction ran as it would have)."""
    for future, result, error in answers:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class GroupCommit(Generic[P, R]):
    """Per-key lines of waiting requests, each line's groups run one after another."""

    def __init__(self, limit: int = 64) -> None:
        if limit < 1:
            raise ValueError("a group holds at least one request")
        self.limit = limit
        self._lock = threading.Condition(threading.Lock())
        self._lines: dict[Hashable, deque[_Waiter[P, R]]] = {}
        #: the tasks that run lines in threads (kept referenced until they finish)
        self._runners: set[asyncio.Task[None]] = set()

    def waiting(self, key: Hashable) -> int:
        """How many requests on ``key`` wait for a group (not counting the group running)."""
        with self._lock:
            return len(self._lines.get(key, ()))

    def busy(self) -> bool:
        """Whether any line has a group running or requests waiting."""
        with self._lock:
            return bool(self._lines)

    async def run(self, key: Hashable, payload: P, run: Run[P, R], *, inline: bool = False) -> R:
        """``payload``'s outcome, computed by ``run`` in a group of ``key``'s waiting requests.
        An idle line is started: on the event loop when ``inline`` (the caller knows nothing
        else is in flight), else in a thread. A cancelled caller's request stays in its group:
        what its transaction does is done, only the answer is dropped."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        me = _Waiter(payload, future, run)
        with self._lock:
            line = self._lines.get(key)
            start = line is None
            if line is None:
                line = self._lines[key] = deque()
            line.append(me)
        if start:
            if inline:
                self._drain(key, line, pause=False)
            else:
                self._start(key, line)
        return await future

    def _start(self, key: Hashable, line: deque[_Waiter[P, R]]) -> None:
        runner = asyncio.get_running_loop().create_task(to_thread.run_sync(self._drain, key, line))
        self._runners.add(runner)
        runner.add_done_callback(lambda task: self._finished(task, key, line))

    def _finished(
        self, task: asyncio.Task[None], key: Hashable, line: deque[_Waiter[P, R]]
    ) -> None:
        self._runners.discard(task)
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:  # no thread ran the line: answer it
            self._fail_line(key, line, error or RuntimeError("the line's runner was cancelled"))

    def _drain(self, key: Hashable, line: deque[_Waiter[P, R]], pause: bool = True) -> None:
        """Lead the line's groups one after another while requests wait in it (:class:`Leader`);
        retire it when empty. ``pause``: in a thread, give the event loop the interpreter
        between groups."""
        leader: Leader[list[_Waiter[P, R]], None] = Leader(
            self._lock, partial(self._group, key, line), partial(self._write, pause)
        )
        with self._lock:
            while leader.lead():
                pass

    def _group(self, key: Hashable, line: deque[_Waiter[P, R]]) -> list[_Waiter[P, R]] | None:
        """The line's next group (lock held), or ``None``: the line is empty and retired."""
        if not line:
            del self._lines[key]
            return None
        return [line.popleft() for _ in range(min(self.limit, len(line)))]

    def _write(self, pause: bool, group: list[_Waiter[P, R]]) -> None:
        self._run_group(group)
        if pause:
            # let the event loop take the interpreter: it sends this group's answers and
            # queues the requests that arrived meanwhile into the next group
            time.sleep(0)

    @staticmethod
    def _run_group(group: list[_Waiter[P, R]]) -> None:
        """Run ``group`` (with its head's runner) and hand each member its outcome."""
        answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]]
        try:
            outcomes = group[0].run([w.payload for w in group])
            if len(outcomes) != len(group):
                raise RuntimeError("a group's run returned the wrong number of outcomes")
            answers = [
                (w.future, None, o) if isinstance(o, BaseException) else (w.future, o, None)
                for w, o in zip(group, outcomes, strict=True)
            ]
        except BaseException as exc:
            answers = [(w.future, None, exc) for w in group]
        GroupCommit._deliver(group, answers)

    @staticmethod
    def _deliver(
        group: list[_Waiter[P, R]],
        answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]],
    ) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, Any]]] = {}
        for waiter, answer in zip(group, answers, strict=True):
            by_loop.setdefault(waiter.loop, []).append(answer)
        try:  # a line run inline: on its loop's own thread
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # in a thread of its own
            here = None
        for loop, settled in by_loop.items():
            with suppress(RuntimeError):  # a closed loop: nobody awaits these any more
                if loop is here:
                    # the same queue of callbacks, without waking the loop through its
                    # self-pipe (a send and two receives, the last one raising): it is
                    # running this very code and takes its next callbacks when it returns
                    loop.call_soon(_settle, settled)
                else:
                    loop.call_soon_threadsafe(_settle, settled)

    def _fail_line(self, key: Hashable, line: deque[_Waiter[P, R]], exc: BaseException) -> None:
        """Nobody can run the line: every request in it gets ``exc``."""
        with self._lock:
            waiters = list(line)
            line.clear()
            if self._lines.get(key) is line:
                del self._lines[key]
        self._deliver(waiters, [(w.future, None, exc) for w in waiters])
