"""Group commit's lines (:mod:`app.writepath.groups`): who runs which group, in which order,
on which thread, and what each waiting request is answered."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from anyio import to_thread

from app.writepath.groups import GroupCommit

KEY = "caller_1"


class _Recorder:
    """A group runner that records its groups and the threads that ran them; the first group
    blocks until released."""

    def __init__(self, fail: Callable[[Sequence[int]], BaseException | None] | None = None):
        self.groups: list[list[int]] = []
        self.release = threading.Event()
        self.fail = fail
        self.threads: list[str] = []

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.groups.append(list(items))
        self.threads.append(threading.current_thread().name)
        if len(self.groups) == 1:
            assert self.release.wait(5)
        error = self.fail(items) if self.fail else None
        if error is not None:
            raise error
        return [ValueError(f"odd {i}") if i % 2 and i > 100 else i * 10 for i in items]


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.001)


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 10))


async def _line_up(
    groups: GroupCommit[int, int], rec: _Recorder, items: Sequence[int]
) -> list[asyncio.Future[int]]:
    """The first item's group started and held; each later item in line before the next."""
    calls: list[asyncio.Future[int]] = [asyncio.ensure_future(groups.run(KEY, items[0], rec))]
    await _until(lambda: len(rec.groups) == 1)
    for n, item in enumerate(items[1:], start=1):
        calls.append(asyncio.ensure_future(groups.run(KEY, item, rec)))
        await _until(lambda n=n: groups.waiting(KEY) == n)  # type: ignore[misc]
    return calls


def test_requests_arriving_during_a_group_run_together_next_in_one_thread() -> None:
    """Requests in line are run by one thread, group after group in arrival order; each gets
    its own outcome, an item's error only its caller's; the line is retired when empty."""
    groups: GroupCommit[int, int] = GroupCommit(limit=3)
    rec = _Recorder()

    async def main() -> list[object]:
        calls = await _line_up(groups, rec, [0, 1, 101, 3, 4, 5])
        rec.release.set()
        results: list[object] = list(await asyncio.gather(*calls, return_exceptions=True))
        await _until(lambda: not groups.busy())
        return results

    out = _run(main)
    assert rec.groups == [[0], [1, 101, 3], [4, 5]]
    assert out[0] == 0 and out[1] == 10 and out[3:] == [30, 40, 50]
    assert isinstance(out[2], ValueError) and str(out[2]) == "odd 101"
    assert len(set(rec.threads)) == 1 and rec.threads[0] != threading.current_thread().name
    assert groups.waiting(KEY) == 0 and not groups.busy()


def test_a_failed_group_answers_each_of_its_members_and_the_line_goes_on() -> None:
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder(fail=lambda items: RuntimeError("boom") if 1 in items else None)

    async def main() -> tuple[list[object], int]:
        calls = await _line_up(groups, rec, [0, 1, 2])
        rec.release.set()
        results: list[object] = list(await asyncio.gather(*calls, return_exceptions=True))
        return results, await groups.run(KEY, 7, rec)

    out, later = _run(main)
    assert out[0] == 0
    assert all(isinstance(o, RuntimeError) and str(o) == "boom" for o in out[1:])
    assert later == 70 and rec.groups == [[0], [1, 2], [7]]


def test_other_keys_do_not_wait() -> None:
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()

    async def main() -> int:
        held = await _line_up(groups, rec, [0])
        other = await groups.run("another", 3, lambda items: [i + 1 for i in items])
        rec.release.set()
        await asyncio.gather(*held)
        return other

    assert _run(main) == 4


def test_a_group_holds_at_least_one_request() -> None:
    with pytest.raises(ValueError):
        GroupCommit(limit=0)


def test_an_idle_line_runs_inline_on_the_event_loop_and_a_busy_one_in_its_thread() -> None:
    """``inline`` (nothing else in flight): an idle line's group runs on the loop's own thread;
    a request that finds its line busy waits for the line's thread even when told ``inline``."""
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()
    rec.release.set()
    loop_thread = threading.current_thread().name

    async def main() -> list[int]:
        first = await groups.run(KEY, 1, rec, inline=True)
        slow = _Recorder()
        held = asyncio.ensure_future(groups.run(KEY, 2, slow))
        await _until(lambda: len(slow.groups) == 1)
        behind = asyncio.ensure_future(groups.run(KEY, 3, slow, inline=True))
        await _until(lambda: groups.waiting(KEY) == 1)
        slow.release.set()
        rec.threads.extend(slow.threads)
        return [first, *await asyncio.gather(held, behind)]

    assert _run(main) == [10, 20, 30]
    assert rec.threads[0] == loop_thread
    assert all(name != loop_thread for name in rec.threads[1:])


def test_a_cancelled_request_still_runs_with_its_group() -> None:
    """A caller that left (its coroutine cancelled) is not taken out of the line: its request
    runs as it would have, and only its answer is dropped; the others are answered."""
    groups: GroupCommit[int, int] = GroupCommit()
    rec = _Recorder()

    async def main() -> list[object]:
        calls = await _line_up(groups, rec, [0, 1, 2])
        calls[1].cancel()
        rec.release.set()
        return list(await asyncio.gather(*calls, return_exceptions=True))

    out = _run(main)
    assert rec.groups == [[0], [1, 2]]
    assert out[0] == 0 and isinstance(out[1], asyncio.CancelledError) and out[2] == 20


def test_a_line_nobody_can_run_answers_each_request_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When no thread can be had for the line, every request in it is answered with that
    error, and the line is free again."""
    groups: GroupCommit[int, int] = GroupCommit()

    async def no_thread(*_: object) -> None:
        raise RuntimeError("cannot schedule new futures after shutdown")

    async def main() -> object:
        with monkeypatch.context() as patch:
            patch.setattr(to_thread, "run_sync", no_thread)
            try:
                return await groups.run(KEY, 1, lambda items: list(items))
            except RuntimeError as exc:
                return exc

    out = _run(main)
    assert isinstance(out, RuntimeError) and "shutdown" in str(out)
    assert not groups.busy()

    async def again() -> int:
        return await groups.run(KEY, 4, lambda items: [i * 2 for i in items])

    assert _run(again) == 8
