"""The write path's one group commit (:class:`app.writepath.groups.Leader`), used by the callers'
lines and the witness writer: one write under way at a time, taking everything that waits, the
lock released while it writes so that others hand in meanwhile, and the next batch taken by
whoever leads next."""

from __future__ import annotations

import threading

from app.writepath.groups import Leader


class Batches:
    """Items handed in under ``cond``; each write records its batch and may be held."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: list[int] = []
        self.written: list[list[int]] = []
        self.booked: list[tuple[list[int], int]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.writing = threading.Event()
        self.leader: Leader[list[int], int] = Leader(self.cond, self.take, self.write, self.done)

    def take(self) -> list[int] | None:
        if not self.pending:
            return None
        batch, self.pending = self.pending, []
        return batch

    def write(self, batch: list[int]) -> int:
        self.writing.set()
        assert self.hold.wait(5)
        self.written.append(batch)
        return sum(batch)

    def done(self, batch: list[int], total: int) -> None:
        self.booked.append((batch, total))


def test_nothing_waiting_is_no_write() -> None:
    batches = Batches()
    with batches.cond:
        assert batches.leader.lead() is False
    assert batches.written == [] and not batches.leader.busy


def test_what_arrives_during_a_write_is_the_next_batch_whole() -> None:
    batches = Batches()
    batches.pending = [1, 2]
    batches.hold.clear()
    led: list[bool] = []

    def lead() -> None:
        with batches.cond:
            led.append(batches.leader.lead())

    first = threading.Thread(target=lead)
    first.start()
    assert batches.writing.wait(5)
    with batches.cond:  # the lock is free while the leader writes: others hand in
        assert batches.leader.busy
        batches.pending += [3, 4, 5]
    batches.hold.set()
    first.join(5)
    with batches.cond:
        assert not batches.leader.busy
        assert batches.leader.lead() is True  # the next leader takes all that waited
        assert batches.leader.lead() is False
    assert led == [True]
    assert batches.written == [[1, 2], [3, 4, 5]]
    assert batches.booked == [([1, 2], 3), ([3, 4, 5], 12)]


def test_waiters_are_woken_when_a_write_is_done() -> None:
    batches = Batches()
    batches.pending = [7]
    batches.hold.clear()
    woken = threading.Event()

    def wait_for_the_write() -> None:
        with batches.cond:
            while not batches.written:
                batches.cond.wait(5)
            woken.set()

    waiter = threading.Thread(target=wait_for_the_write)
    waiter.start()

    def lead() -> None:
        with batches.cond:
            batches.leader.lead()

    leader = threading.Thread(target=lead)
    leader.start()
    assert batches.writing.wait(5)
    assert not woken.is_set()
    batches.hold.set()
    leader.join(5)
    assert woken.wait(5)
    waiter.join(5)
