"""Group commit's line (:mod:`app.db.groups`): who runs which group, in which order, and what
each waiting caller is answered."""

from __future__ import annotations

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
