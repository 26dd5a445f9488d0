"""Charges computed in worker processes, with a hard CPU budget per request.

The accounting core bounds its own work (``docs/accounting.md``, *Bounded work*). This module
is the service's second line: the expensive part of a decision — the declaration's charge, which
does not depend on the budget's state (:mod:`odometer_core.accounting.memo`) — is computed *before*
the
request takes any lock, in one of a few worker processes, and a job that runs past its CPU budget
is stopped there without holding anything else up:

- each worker arms a CPU timer (``ITIMER_PROF``) for the job's budget; past it the job stops and
  the request is answered ``422 ChargeTooExpensive`` with what to change — nothing was written;
- the request waits at most ``2 × budget + 1 s`` of wall time; a worker that has not answered by
  then (a long C call, an overloaded machine) is killed and replaced, and the request is answered
  ``503`` (retryable) — again nothing was written;
- at most ``workers`` jobs run at once; a request that finds no free worker within
  ``wait_seconds`` is answered ``503`` with ``Retry-After``;
- :meth:`ChargeWorkers.close` kills the workers: a request still waiting for one gets its 503 at
  once, so shutting down never waits for a computation.

Workers are started with the ``spawn`` method (a fresh interpreter: no locks or threads inherited
from the server) and import only the accounting core; a worker takes jobs only once it has said
it is ready, so its start-up never counts against a job's deadline. With ``workers = 0`` the
charge is computed in the request's own thread, still before the lock, without a CPU budget
(embedded use, tests).

Hand-written, not ``pebble``: on it the same contract took as many lines and five workarounds,
and cost 4x per call and idle CPU (``benchmarks/RESULTS.md``, *Measurements once quoted*).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import queue
import signal
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

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
#: A worker's first message: it has imported the accounting core and may take jobs.
READY = ("ready", None)
#: How long a new worker may take to start before it is replaced (a spawn and the imports are
#: quick on an idle machine and take many times as long on an overloaded one).
START_SECONDS = 60.0


class _CpuBudgetSpent(BaseException):
    """Raised in a worker by its CPU timer (a BaseException: no ``except Exception`` in the
    accounting core can swallow it)."""


def _on_cpu_timer(signum: int, frame: object) -> None:
    raise _CpuBudgetSpent


def _serve(conn: Connection) -> None:  # pragma: no cover - runs in the worker processes
    """A worker's loop: receive (job, args, CPU budget), answer ("ok", result) or ("cpu", None)
    or ("error", text); exit when the server's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers stop
    signal.signal(signal.SIGPROF, _on_cpu_timer)
    _warm_up()
    try:
        conn.send(READY)  # only now may the server hand this worker a job
    except (EOFError, OSError):
        return
    while True:
        try:
            job, args, budget = conn.recv()
        except (EOFError, OSError):
            return
        try:
            signal.setitimer(signal.ITIMER_PROF, budget)
            try:
                answer: tuple[str, Any] = ("ok", job(*args))
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        except _CpuBudgetSpent:
            answer = ("cpu", None)
        except Exception as exc:  # reported, and the request computes (and raises) inline
            answer = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(answer)
        except (EOFError, OSError):
            return


def _warm_up() -> None:  # pragma: no cover - runs in the worker processes
    """Import the accounting core and dp_accounting before the first job (the slow part of a
    worker's start)."""
    from odometer_core.accounting import pld

    with contextlib.suppress(Exception):
        pld.plan_poisson_gaussian(1.0, 0.5, 1)


# ---------------------------------------------------------------------------- the server side
@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection


@dataclass(eq=False)
class ChargeWorkers:
    """A bounded pool of charge workers (see the module docstring)."""

    workers: int = 2
    cpu_seconds: float = 1.0
    wait_seconds: float = 5.0
    _idle: queue.Queue[_Worker] = field(default_factory=queue.Queue, init=False)
    _all: set[_Worker] = field(default_factory=set, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _started: bool = field(default=False, init=False)
    _closed: bool = field(default=False, init=False)

    @property
    def wall_seconds(self) -> float:
        """How long a request waits for its job's answer before the worker is replaced."""
        return 2.0 * self.cpu_seconds + 1.0

    def start(self) -> None:
        """Start the workers (idempotent; called at application start-up, or on first use)."""
        with self._lock:
            if self._started or self._closed or self.workers <= 0:
                return
            self._started = True
        try:
            for _ in range(self.workers):
                self._spawn()
        except Exception:  # e.g. no processes allowed: still serve, computing in the thread
            log.exception("charge workers could not start; charges are computed in-thread")
            self.close()
            self.workers = 0

    def _spawn(self) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=_serve, args=(theirs,), name="odometer-charge", daemon=True
        )
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        with self._lock:
            if self._closed:
                self._stop(worker)
                return
            self._all.add(worker)
        threading.Thread(
            target=self._admit_when_ready, args=(worker,), name="odometer-charge-ready", daemon=True
        ).start()

    def _admit_when_ready(self, worker: _Worker) -> None:
        """Make ``worker`` idle once it says it is ready. Its start-up (a new interpreter and the
        accounting core's imports) must not count against a job's wall deadline: on a loaded
        machine a worker handed a job before it was ready was killed as unresponsive, and so was
        its replacement, while requests were answered 503."""
        try:
            ready = worker.conn.poll(START_SECONDS) and worker.conn.recv() == READY
        except (EOFError, OSError):
            ready = False
        if ready and not self._closed:
            self._idle.put(worker)
            return
        if not self._closed:
            log.warning("a charge worker did not start in %.0f s; replacing it", START_SECONDS)
            time.sleep(1.0)  # a worker that cannot start must not be respawned in a tight loop
        self._replace(worker)

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and start another in the background (a spawn and its imports are too
        slow to wait for)."""
        with self._lock:
            self._all.discard(worker)
            closed = self._closed
        self._stop(worker)
        if not closed:
            threading.Thread(target=self._spawn, name="odometer-charge-spawn", daemon=True).start()

    @staticmethod
    def _stop(worker: _Worker) -> None:
        with contextlib.suppress(Exception):
            worker.process.kill()
        with contextlib.suppress(Exception):
            worker.conn.close()
        with contextlib.suppress(Exception):
            worker.process.join(2)

    def compute(self, job: Callable[..., Table], *args: Any) -> Table | None:
        """Run ``job(*args)`` (a memo table) within the CPU budget; ``None`` when the job
        failed (the request then computes inline and raises the real error itself)."""
        if self.workers <= 0:
            return job(*args)
        if self._closed:
            raise ChargeWorkersBusy("the service is shutting down; retry (nothing was charged)")
        self.start()
        try:
            worker = self._idle.get(timeout=self.wait_seconds)
        except queue.Empty:
            raise ChargeWorkersBusy(
                "every charge worker is busy; retry in a moment (nothing was charged)"
            ) from None
        healthy = False
        try:
            if self._closed:
                raise ChargeWorkersBusy("the service is shutting down; retry on another instance")
            worker.conn.send((job, args, self.cpu_seconds))
            started = time.monotonic()
            if not worker.conn.poll(self.wall_seconds):
                log.warning(
                    "charge worker gave no answer in %.1f s; replacing it",
                    time.monotonic() - started,
                )
                raise ChargeWorkersBusy(
                    "the charge could not be computed in time; retry (nothing was charged)"
                )
            status, payload = worker.conn.recv()
            healthy = True
        except (EOFError, OSError, BrokenPipeError):
            raise ChargeWorkersBusy(
                "the charge worker stopped (the service may be shutting down); retry"
            ) from None
        finally:
            if healthy and not self._closed:
                self._idle.put(worker)
            else:
                self._replace(worker)
        if status == "cpu":
            raise ChargeTooExpensive(self.cpu_seconds)
        if status == "error":
            log.info("charge worker: %s (the request decides inline)", payload)
            return None
        table: Table = payload
        return table

    def close(self) -> None:
        """Kill every worker; requests waiting for one are answered 503 at once."""
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
        for worker in workers:
            self._stop(worker)
