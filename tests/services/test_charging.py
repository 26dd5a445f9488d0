"""The charge workers (app/services/charging.py): a CPU budget per job, a wall-clock deadline, a
bounded number of jobs at once, and a shutdown that does not wait for a computation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from app.services.charging import ChargeTooExpensive, ChargeWorkers, ChargeWorkersBusy
from tests import charge_jobs


@pytest.fixture(scope="module")
def workers() -> Iterator[ChargeWorkers]:
    pool = ChargeWorkers(workers=1, cpu_seconds=0.3, wait_seconds=30)
    pool.start()
    yield pool
    pool.close()


def test_a_job_returns_its_table(workers: ChargeWorkers) -> None:
    assert workers.compute(charge_jobs.table, 21) == {("job", (21,)): 42}


def test_a_job_past_its_cpu_budget_is_stopped_and_the_worker_serves_on(
    workers: ChargeWorkers,
) -> None:
    started = time.monotonic()
    with pytest.raises(ChargeTooExpensive) as caught:
        workers.compute(charge_jobs.burn, 5.0)
    assert time.monotonic() - started < 2.0  # stopped near 0.3 s of CPU, not after 5 s
    assert caught.value.fields == {"cpu_limit_seconds": 0.3}
    assert "nothing was charged" in caught.value.detail
    # the same worker process answers the next job (the timer stopped the job, not the worker)
    assert workers.compute(charge_jobs.table, 1) == {("job", (1,)): 2}


def test_a_job_within_budget_finishes(workers: ChargeWorkers) -> None:
    result = workers.compute(charge_jobs.burn, 0.05)
    assert result is not None and result[("burn", (0.05,))] > 0


def test_a_failing_job_is_reported_as_none(workers: ChargeWorkers) -> None:
    assert workers.compute(charge_jobs.fail) is None


def _wait_until_ready(pool: ChargeWorkers) -> None:
    """Until every worker has started (a worker takes jobs only once it said it is ready)."""
    deadline = time.monotonic() + 60
    while pool._idle.qsize() < pool.workers:
        assert time.monotonic() < deadline, "the charge workers did not start"
        time.sleep(0.05)


def test_a_worker_past_the_wall_deadline_is_replaced() -> None:
    pool = ChargeWorkers(workers=1, cpu_seconds=0.2, wait_seconds=30)
    try:
        pool.start()
        _wait_until_ready(pool)  # the deadline is the job's: the worker's start-up is not in it
        started = time.monotonic()
        with pytest.raises(ChargeWorkersBusy):
            pool.compute(charge_jobs.stall, 30.0)  # no CPU used: only the deadline ends it
        assert time.monotonic() - started < pool.wall_seconds + 1.5
        # a replacement worker takes the next job
        assert pool.compute(charge_jobs.table, 3) == {("job", (3,)): 6}
    finally:
        pool.close()


def test_no_free_worker_in_time_is_a_503_and_close_does_not_wait() -> None:
    pool = ChargeWorkers(workers=1, cpu_seconds=20.0, wait_seconds=0.5)
    pool.start()
    _wait_until_ready(pool)
    outcome: list[BaseException] = []

    def hold() -> None:
        try:
            pool.compute(charge_jobs.stall, 30.0)
        except BaseException as exc:
            outcome.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        time.sleep(3.0)  # the worker has started (spawn) and took the stalling job
        with pytest.raises(ChargeWorkersBusy, match="busy"):
            pool.compute(charge_jobs.table, 1)
    finally:
        closed_at = time.monotonic()
        pool.close()
        holder.join(10)
    # the request waiting on the stalled worker was answered at once, not after 30 s
    assert time.monotonic() - closed_at < 3.0
    assert len(outcome) == 1 and isinstance(outcome[0], ChargeWorkersBusy)


def test_inline_mode_runs_the_job_in_the_callers_thread() -> None:
    pool = ChargeWorkers(workers=0)
    assert pool.compute(charge_jobs.table, 5) == {("job", (5,)): 10}


def test_after_close_a_request_is_answered_at_once() -> None:
    pool = ChargeWorkers(workers=1, cpu_seconds=1.0, wait_seconds=30)
    pool.close()
    started = time.monotonic()
    with pytest.raises(ChargeWorkersBusy, match="shutting down"):
        pool.compute(charge_jobs.table, 1)
    assert time.monotonic() - started < 1.0


def test_workers_that_cannot_start_fall_back_to_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = ChargeWorkers(workers=2)

    def cannot_spawn() -> None:
        raise OSError("no processes left")

    monkeypatch.setattr(pool, "_spawn", cannot_spawn)
    pool.start()
    assert pool.workers == 0
    assert pool.compute(charge_jobs.table, 4) == {("job", (4,)): 8}
