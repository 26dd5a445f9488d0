"""Group commit's line (:mod:`app.db.groups`): who runs which group, in which order, and what
each waiting caller is answered."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

import pytest

from app.db.groups import GroupCommit

KEY = "ds_1"


def _wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.001)


class _Recorder:
    """A group runner that records its groups; the first group blocks until released."""

    def __init__(self, fail: Callable[[Sequence[int]], BaseException | None] | None = None):
        self.groups: list[list[int]] = []
        self.release = threading.Event()
        self.fail = fail
        self.runners: list[str] = []

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.groups.append(list(items))
        self.runners.append(threading.current_thread().name)
        if len(self.groups) == 1:
            assert self.release.wait(5)
        error = self.fail(items) if self.fail else None
        if error is not None:
            raise error
        return [ValueError(f"odd {i}") if i % 2 and i > 100 else i * 10 for i in items]


def _waiting(groups: GroupCommit[int, int], n: int) -> bool:
    return groups.waiting(KEY) == n


def _start(
    groups: GroupCommit[int, int], rec: _Recorder, items: Sequence[int]
) -> tuple[list[threading.Thread], dict[int, object]]:
    """One thread per item, each started once the previous one is in line (arrival order)."""
    out: dict[int, object] = {}
    threads = []
    for n, item in enumerate(items):

        def call(item: int = item) -> None:
            try:
                out[item] = groups.run(KEY, item, rec)
            except BaseException as exc:
                out[item] = exc

        t = threading.Thread(target=call, name=f"caller-{item}")
        t.start()
        threads.append(t)
        if n == 0:
            _wait_until(lambda: len(rec.groups) == 1)
        else:
            _wait_until(partial(_waiting, groups, n))
    return threads, out


def test_requests_arriving_during_a_group_run_together_next_in_arrival_order() -> None:
    groups: GroupCommit[int, int] = GroupCommit(limit=64)
    rec = _Recorder()
    threads, out = _start(groups, rec, [0, 1, 2, 3, 4, 5])
    rec.release.set()
    for t in threads:
        t.join(5)
    assert rec.groups == [[0], [1, 2, 3, 4, 5]]
    assert out == {i: i * 10 for i in range(6)}
    # the second group is run by its first member, the earliest of the waiters
    assert rec.runners == ["caller-0", "caller-1"]
    assert groups.waiting(KEY) == 0 and not groups._busy


def test_the_limit_splits_the_line_into_groups_in_order() -> None:
    groups: GroupCommit[int, int] = GroupCommit(limit=2)
    rec = _Recorder()
    threads, out = _start(groups, rec, [0, 1, 2, 3, 4, 5])
    rec.release.set()
    for t in threads:
        t.join(5)
    assert rec.groups == [[0], [1, 2], [3, 4], [5]]
    assert out == {i: i * 10 for i in range(6)}


def test_an_item_s_own_error_reaches_only_its_caller() -> None:
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()
    threads, out = _start(groups, rec, [0, 101, 102, 103])
    rec.release.set()
    for t in threads:
        t.join(5)
    assert out[0] == 0 and out[102] == 1020
    assert isinstance(out[101], ValueError) and str(out[101]) == "odd 101"
    assert isinstance(out[103], ValueError) and str(out[103]) == "odd 103"


def test_a_failed_group_answers_each_of_its_members_and_the_line_goes_on() -> None:
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder(fail=lambda items: RuntimeError("database gone") if 1 in items else None)
    threads, out = _start(groups, rec, [0, 1, 2])
    rec.release.set()
    for t in threads:
        t.join(5)
    assert out[0] == 0
    assert isinstance(out[1], RuntimeError) and isinstance(out[2], RuntimeError)
    # the next request finds the line free and runs at once
    assert groups.run(KEY, 7, rec) == 70
    assert rec.groups[-1] == [7]


def test_other_keys_do_not_wait() -> None:
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()
    threads, _ = _start(groups, rec, [0])
    assert groups.run("another", 3, lambda items: [i + 1 for i in items]) == 4
    rec.release.set()
    threads[0].join(5)


def test_a_group_holds_at_least_one_request() -> None:
    with pytest.raises(ValueError, match="at least one"):
        GroupCommit(limit=0)


# ---------------------------------------------------------------------------- on an event loop
def _spawner(names: list[str]) -> Callable[..., None]:
    """A ``spawn`` that starts each runner in a thread of its own, named in order."""

    def spawn(call: Callable[..., object], *args: object) -> None:
        name = f"runner-{len(names)}"
        names.append(name)
        threading.Thread(target=call, args=args, name=name, daemon=True).start()

    return spawn


def test_coroutines_arriving_during_a_group_run_together_next_in_one_runner_thread() -> None:
    """Coroutines in line are run by one spawned thread, group after group in arrival order;
    each gets its own outcome on the loop, an item's error only its caller's."""
    groups: GroupCommit[int, int] = GroupCommit(limit=3)
    rec = _Recorder()
    spawned: list[str] = []

    async def main() -> list[object]:
        spawn = _spawner(spawned)
        calls = [asyncio.ensure_future(groups.run_async(KEY, 0, rec, spawn))]
        await _until(lambda: len(rec.groups) == 1)
        for item in (1, 101, 3, 4, 5):
            calls.append(asyncio.ensure_future(groups.run_async(KEY, item, rec, spawn)))
            await asyncio.sleep(0)  # each is in line before the next
        await _until(lambda: groups.waiting(KEY) == 5)
        rec.release.set()
        results: list[object] = list(await asyncio.gather(*calls, return_exceptions=True))
        # the runner retires the line after it handed over the last group's answers
        await _until(lambda: not groups._busy)
        return results

    out = asyncio.run(asyncio.wait_for(main(), 10))
    assert rec.groups == [[0], [1, 101, 3], [4, 5]]
    assert out[0] == 0 and out[1] == 10 and out[3:] == [30, 40, 50]
    assert isinstance(out[2], ValueError) and str(out[2]) == "odd 101"
    assert spawned == ["runner-0"] and set(rec.runners) == {"runner-0"}
    assert groups.waiting(KEY) == 0 and not groups._busy and not groups._lines


def test_a_thread_behind_coroutines_is_handed_the_line_and_a_coroutine_behind_it_a_runner() -> None:
    """Both kinds of request share one line, in arrival order: the runner thread of the
    coroutines hands the line to a thread waiting at its head, and that thread, after its group,
    has a runner spawned for the coroutine behind it."""
    groups: GroupCommit[int, int] = GroupCommit(limit=1)
    rec = _Recorder()
    spawned: list[str] = []
    out: dict[int, object] = {}

    async def main() -> list[object]:
        spawn = _spawner(spawned)
        first = asyncio.ensure_future(groups.run_async(KEY, 0, rec, spawn))
        await _until(lambda: len(rec.groups) == 1)
        waiter = threading.Thread(
            target=lambda: out.setdefault(1, groups.run(KEY, 1, rec)), name="caller-1"
        )
        waiter.start()
        await _until(lambda: groups.waiting(KEY) == 1)
        last = asyncio.ensure_future(groups.run_async(KEY, 2, rec, spawn))
        await _until(lambda: groups.waiting(KEY) == 2)
        rec.release.set()
        results: list[object] = list(await asyncio.gather(first, last))
        await asyncio.to_thread(waiter.join, 5)
        await _until(lambda: not groups._busy)  # retired by the last runner, after its answers
        return results

    assert asyncio.run(asyncio.wait_for(main(), 10)) == [0, 20]
    assert out == {1: 10}
    assert rec.groups == [[0], [1], [2]]
    assert rec.runners == ["runner-0", "caller-1", "runner-1"]
    assert not groups._busy and not groups._lines


def test_a_cancelled_coroutine_s_request_still_runs_with_its_group() -> None:
    """A caller that left (its coroutine cancelled) is not taken out of the line: its request
    runs as it would have, and only its answer is dropped; the others are answered."""
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()

    async def main() -> list[object]:
        spawn = _spawner([])
        calls = [asyncio.ensure_future(groups.run_async(KEY, 0, rec, spawn))]
        await _until(lambda: len(rec.groups) == 1)
        calls += [asyncio.ensure_future(groups.run_async(KEY, i, rec, spawn)) for i in (1, 2)]
        await _until(lambda: groups.waiting(KEY) == 2)
        calls[1].cancel()
        rec.release.set()
        return list(await asyncio.gather(*calls, return_exceptions=True))

    out = asyncio.run(asyncio.wait_for(main(), 10))
    assert rec.groups == [[0], [1, 2]]
    assert out[0] == 0 and isinstance(out[1], asyncio.CancelledError) and out[2] == 20


def test_a_line_nobody_can_run_answers_each_request_with_the_reason() -> None:
    """When no thread can be started for the line (the pool shut down), every request in it
    is answered with that error at once, and the line is free again."""
    groups: GroupCommit[int, int] = GroupCommit()

    def no_thread(*_: object) -> None:
        raise RuntimeError("cannot schedule new futures after shutdown")

    async def main() -> object:
        try:
            return await groups.run_async(KEY, 1, lambda items: list(items), no_thread)
        except RuntimeError as exc:
            return exc

    out = asyncio.run(asyncio.wait_for(main(), 10))
    assert isinstance(out, RuntimeError) and "shutdown" in str(out)
    assert not groups._busy and not groups._lines
    assert groups.run(KEY, 4, lambda items: [i * 2 for i in items]) == 8


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.001)
