"""Charges computed in worker processes, with a hard CPU budget per request.

The accounting core bounds its own work (``docs/accounting.md``, *Bounded work*). This module
is the service's second line: the expensive part of a decision — the declaration's charge, which
does not depend on the budget's state (:mod:`odometer_core.accounting.memo`) — is computed *before*
the request takes any lock, in one of a few worker processes, and a job that runs past its CPU
budget is stopped there without holding anything else up:

- each worker arms a CPU timer (``ITIMER_PROF``) for the job's budget; past it the job stops and
  the request is answered ``422 ChargeTooExpensive`` with what to change — nothing was written;
- the request waits at most ``2 × budget + 1 s`` of wall time once a worker took its job; a
  worker that has not answered by then (a long C call, an overloaded machine) is killed and
  replaced, and the request is answered ``503`` (retryable) — again nothing was written;
- at most ``workers`` jobs run at once; a request that finds no free worker within
  ``wait_seconds`` is answered ``503`` with ``Retry-After``;
- :meth:`ChargeWorkers.close` kills the workers: a request still waiting for one gets its 503 at
  once, so shutting down never waits for a computation.

The workers are a :class:`pebble.ProcessPool`, not the standard ``ProcessPoolExecutor``: the
standard pool cannot stop one running task (``cancel()`` refuses it, a timed-out wait leaves the
worker busy), while pebble's per-task ``timeout`` kills and replaces just that worker. Workers are
started with the ``spawn`` method (a fresh interpreter: no locks or threads inherited from the
server) and import only the accounting core, in pebble's ``initializer``, which runs before the
worker takes a task; pebble starts a task's ``timeout`` only when a worker takes it, so a
worker's start-up never counts against a job's deadline. Pebble's workers share one channel and
its locks: a worker that dies unexpectedly (killed from outside) may leave them held, so the pool
is then replaced as a whole (:meth:`ChargeWorkers._renew`). With ``workers = 0`` the charge is
computed in the request's own thread, still before the lock, without a CPU budget (embedded use,
tests).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from pebble import ProcessExpired, ProcessPool

from app.services.errors import ServiceError

log = logging.getLogger("odometer")

Table = dict[Hashable, Any]


class ChargeTooExpensive(ServiceError):
    """The charge needs more CPU than one request may use (→ 422; nothing was charged)."""

    code = "ChargeTooExpensive"

    def __init__(self, cpu_seconds: float) -> None:
        super().__init__(
            f"computing the charge of this declaration needs more than {cpu_seconds:g} s of CPU, "
            "the limit of one request; nothing was charged. Declare fewer steps or composed "
            "segments per invocation, merge segments that share (noise multiplier, sample rate), "
            "or use larger noise",
            cpu_limit_seconds=cpu_seconds,
        )


class ChargeWorkersBusy(ServiceError):
    """No worker could compute the charge in time (→ 503 with Retry-After; nothing was
    charged)."""

    code = "ServiceUnavailable"


# ---------------------------------------------------------------------------- the worker side
class _CpuBudgetSpent(BaseException):
    """Raised by the CPU timer (no ``except Exception`` in the accounting core swallows it)."""


class _JobFailed(Exception):
    """The job raised: the request then computes inline and raises the real error itself."""


class _TakenTooLate(Exception):
    """No worker took the job before its request stopped waiting: skipped, never computed."""


def _on_cpu_timer(signum: int, frame: object) -> None:
    raise _CpuBudgetSpent


def _prepare_worker() -> None:  # pragma: no cover - runs in the worker processes
    """pebble's initializer, run before the worker takes any job: the signals, and the imports
    of the accounting core and dp_accounting (the slow part of a worker's start)."""
    # Kept by hand: die at SIGTERM even in a long C call, unlike pebble's handler (RESULTS.md).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPROF, _on_cpu_timer)
    # A warm-up that fails must not end the worker (pebble ends one whose initializer raises).
    with contextlib.suppress(Exception):
        from odometer_core.accounting import pld

        pld.plan_poisson_gaussian(1.0, 0.5, 1)


def _within_budget(
    job: Callable[..., Table], budget: float, start_by: float, args: tuple[Any, ...]
) -> Table:  # pragma: no cover - runs in the worker processes
    # Kept by hand: skip a stale job; pebble kills a worker that takes a cancelled one (RESULTS.md)
    if time.time() > start_by:
        raise _TakenTooLate
    signal.setitimer(signal.ITIMER_PROF, budget)
    try:
        return job(*args)
    except Exception as exc:
        raise _JobFailed(f"{type(exc).__name__}: {exc}") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


# ---------------------------------------------------------------------------- the server side
#: Past a job's wall deadline, how long pebble may take to notice it (every 0.1 s) and kill.
_KILL_SECONDS = 1.0


@dataclass(eq=False)
class ChargeWorkers:
    """A bounded pool of charge workers (see the module docstring)."""

    workers: int = 2
    cpu_seconds: float = 1.0
    wait_seconds: float = 5.0
    _pool: ProcessPool | None = field(default=None, init=False)
    _slots: threading.BoundedSemaphore = field(init=False)
    #: the jobs requests wait for; kept by hand: pebble's stop() leaves them pending (RESULTS.md)
    _waiting: set[Future[Table]] = field(default_factory=set, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(max(self.workers, 1))

    @property
    def wall_seconds(self) -> float:
        """How long a request waits for its job's answer before the worker is replaced."""
        return 2.0 * self.cpu_seconds + 1.0

    def start(self) -> None:
        """Start the workers (idempotent; called at application start-up, or on first use)."""
        with self._lock:
            if self._pool is not None or self._closed or self.workers <= 0:
                return
            try:
                self._spawn()
            except Exception:  # e.g. no processes allowed: still serve, computing in the thread
                log.exception("charge workers could not start; charges are computed in-thread")
                self.workers = 0

    def _spawn(self) -> None:
        pool = ProcessPool(
            max_workers=self.workers,
            initializer=_prepare_worker,
            context=multiprocessing.get_context("spawn"),
        )
        pool.schedule(int)  # pebble starts its workers at the first task: now, while we start
        self._pool = pool

    def compute(self, job: Callable[..., Table], *args: Any) -> Table | None:
        """Run ``job(*args)`` (a memo table) within the CPU budget; ``None`` when the job
        failed (the request then computes inline and raises the real error itself)."""
        self.start()
        if self.workers <= 0:
            return job(*args)
        asked = time.monotonic()
        if not self._slots.acquire(timeout=self.wait_seconds):
            raise ChargeWorkersBusy(
                "every charge worker is busy; retry in a moment (nothing was charged)"
            )
        try:
            # the rest of wait_seconds for a worker to take the job (one may be starting), then
            # its wall deadline, which pebble counts from then
            left = max(self.wait_seconds - (time.monotonic() - asked), 0.0)
            pool, future = self._schedule(job, args, time.time() + left)
            try:
                return self._answer(pool, future, left + self.wall_seconds + _KILL_SECONDS)
            finally:
                with self._lock:
                    self._waiting.discard(future)
        finally:
            self._slots.release()

    def _schedule(
        self, job: Callable[..., Table], args: tuple[Any, ...], start_by: float
    ) -> tuple[ProcessPool, Future[Table]]:
        with self._lock:
            pool = self._pool
            if self._closed or pool is None:
                raise ChargeWorkersBusy("the service is shutting down; retry on another instance")
            task = (job, self.cpu_seconds, start_by, args)
            with contextlib.suppress(RuntimeError):  # the pool broke just now
                if pool.active:
                    future = pool.schedule(_within_budget, task, timeout=self.wall_seconds)
                    self._waiting.add(future)
                    return pool, future
        self._renew(pool)  # pebble refuses every task once an idle worker died (RESULTS.md)
        raise ChargeWorkersBusy("the charge workers are restarting; retry (nothing was charged)")

    def _answer(self, pool: ProcessPool, future: Future[Table], timeout: float) -> Table | None:
        deadline = time.monotonic() + timeout
        # Kept by hand: a request waiting on a pool that broke was never answered (RESULTS.md).
        while not future.done() and pool.active and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError, CancelledError):  # only waits (cancel wakes it)
                future.exception(timeout=min(0.5, max(deadline - time.monotonic(), 0.0)))
        if not future.done():
            if future.running() or not pool.active:  # past pebble's own kill: a wedged pool
                self._renew(pool)
            raise ChargeWorkersBusy(
                "the charge could not be computed in time; retry (nothing was charged)"
            )
        try:
            return future.result()
        except _CpuBudgetSpent:
            raise ChargeTooExpensive(self.cpu_seconds) from None
        except _JobFailed as exc:
            log.info("charge worker: %s (the request decides inline)", exc)
            return None
        except _TakenTooLate:
            raise ChargeWorkersBusy(
                "every charge worker is busy; retry in a moment (nothing was charged)"
            ) from None
        except CancelledError:
            raise ChargeWorkersBusy(
                "the charge workers were stopped (a shutdown or a restart); retry"
            ) from None
        except TimeoutError:  # pebble killed the worker at the wall deadline and replaces it
            log.warning("a charge worker gave no answer in time; it is replaced")
            raise ChargeWorkersBusy(
                "the charge could not be computed in time; retry (nothing was charged)"
            ) from None
        except (ProcessExpired, BrokenProcessPool) as exc:  # never inline: no budget there
            log.warning("charge worker: %s: %s", type(exc).__name__, exc)
            self._renew(pool)
            raise ChargeWorkersBusy(
                "the charge worker stopped (the service may be shutting down); retry"
            ) from None

    def _renew(self, pool: ProcessPool | None) -> None:
        """Stop ``pool``, answer its waiting requests 503 and, unless closed, start another."""
        # Kept by hand: a worker killed holding the channel's lock wedged the pool (RESULTS.md).
        with self._lock:
            if pool is not self._pool:
                return  # already renewed
            waiting, self._waiting, self._pool = self._waiting, set(), None
        for future in waiting:
            future.cancel()  # pebble's futures cancel even while running: the waiter is answered
        if pool is not None:
            _stop(pool)
        self.start()

    def close(self) -> None:
        """Kill every worker; requests waiting for one are answered 503 at once."""
        with self._lock:
            self._closed = True
            pool = self._pool
        self._renew(pool)


def _stop(pool: ProcessPool) -> None:
    """Kill the pool's workers; at once, as they die at SIGTERM (``_prepare_worker``)."""
    pool.stop()  # type: ignore[no-untyped-call]  # pebble leaves stop() unannotated
    pool.join()
