"""The per-dataset queue (app/writepath/queue.py) serves waiters in arrival order, keys
independently, and forgets idle keys."""

from __future__ import annotations

import threading
import time

from app.writepath.queue import FairQueue


def _wait_until(predicate: object, timeout: float = 5.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_waiters_are_served_in_arrival_order() -> None:
    queue = FairQueue()
    served: list[int] = []
    release = threading.Event()

    def holder() -> None:
        with queue.turn("ds"):
            release.wait(5)

    def waiter(i: int) -> None:
        with queue.turn("ds"):
            served.append(i)

    first = threading.Thread(target=holder)
    first.start()
    _wait_until(lambda: queue._lines["ds"].next_ticket == 1)
    threads = []
    for i in range(8):  # each one queued (ticket taken) before the next arrives
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        _wait_until(lambda i=i: queue._lines["ds"].next_ticket == i + 2)
        threads.append(t)
    release.set()
    for t in [first, *threads]:
        t.join(5)
    assert served == list(range(8))
    assert queue._lines == {}  # idle keys are forgotten


def test_keys_do_not_wait_for_each_other() -> None:
    queue = FairQueue()
    with queue.turn("a"):
        done = threading.Event()

        def other() -> None:
            with queue.turn("b"):
                done.set()

        t = threading.Thread(target=other)
        t.start()
        assert done.wait(5)  # "b" was served while "a" is held
        t.join(5)


def test_an_exception_inside_a_turn_passes_the_turn_on() -> None:
    queue = FairQueue()
    try:
        with queue.turn("ds"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    with queue.turn("ds"):  # would wait forever if the failed turn had not been released
        pass
    assert queue._lines == {}
