"""Keyed write load for the failover tests, and what they check of it.

Clients of the Python client (``odometer_client.OdometerClient``, which resends a write with the
same ``Idempotency-Key`` on connection errors, timeouts and 5xx) register pure-DP invocations on
one dataset without pause. Every HTTP exchange each one has is recorded by its transport
(:class:`Recording`), every acknowledged write (a 201 the client returned) in :class:`Log`.

The checks (:func:`check_answers`, :func:`check_ledger`, :func:`check_export`): no client gave
up; no 5xx but 503, each with ``Retry-After``, and no 4xx; every acknowledged write is in the
ledger once, and nothing else is (no key charged twice); the dataset's ``spent`` equals the sum
of the ledger's charges and of the acknowledged charges; the ledger's export verifies
(``odometer verify``).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from odometer_client import OdometerClient, RetryPolicy
from tests.support import ADMIN_KEY, ROOT

EPSILONS = ("0.001", "0.002", "0.003")
#: the client's retries: many, close together (a failover takes seconds), bounded
RETRY = RetryPolicy(retries=400, backoff=0.05, max_backoff=0.5)


@dataclass
class Attempt:
    """One HTTP exchange of a keyed request, as the client's transport saw it."""

    key: str
    sent: float
    answered: float
    status: int | None  # None: no answer (a transport error)
    error: str | None = None  # the error code of a 4xx/5xx, or the transport error
    retry_after: str | None = None
    replayed: bool = False


@dataclass
class Acknowledged:
    key: str
    epsilon: str
    invocation_id: str
    charge: Decimal
    at: float


@dataclass
class Log:
    """What every client was told, shared by the client threads."""

    attempts: list[Attempt] = field(default_factory=list)
    acknowledged: list[Acknowledged] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked_before(self, instant: float) -> list[Acknowledged]:
        with self.lock:
            return [a for a in self.acknowledged if a.at < instant]

    def first_201(self, sent_after: float, answered_after: float = 0.0) -> float | None:
        """When the first 201 to a request sent after ``sent_after`` was answered, of those
        answered after ``answered_after``."""
        with self.lock:
            answered = [
                a.answered
                for a in self.attempts
                if a.status == 201 and a.sent > sent_after and a.answered > answered_after
            ]
        return min(answered) if answered else None

    def wait_first_201(
        self, sent_after: float, answered_after: float, deadline: float
    ) -> float | None:
        """:meth:`first_201`, waited for until ``deadline`` (``time.monotonic()``)."""
        while True:
            first = self.first_201(sent_after, answered_after)
            if first is not None or time.monotonic() > deadline:
                return first
            time.sleep(0.02)

    def count(self, status: int, since: float, until: float) -> int:
        with self.lock:
            return sum(
                1 for a in self.attempts if a.status == status and since < a.answered < until
            )


class Recording(httpx.BaseTransport):
    """The client's HTTP transport, recording every exchange of a keyed request (the client's
    own retries included)."""

    def __init__(self, log: Log) -> None:
        self._inner = httpx.HTTPTransport()
        self._log = log

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = request.headers.get("idempotency-key", "")
        sent = time.monotonic()
        try:
            response = self._inner.handle_request(request)
            response.read()
        except httpx.TransportError as exc:
            with self._log.lock:
                self._log.attempts.append(Attempt(key, sent, time.monotonic(), None, repr(exc)))
            raise
        error = None
        if response.status_code >= 400:
            with contextlib.suppress(ValueError):
                error = str(json.loads(response.content).get("error"))
        attempt = Attempt(
            key,
            sent,
            time.monotonic(),
            response.status_code,
            error,
            response.headers.get("retry-after"),
            response.headers.get("idempotent-replayed") == "true",
        )
        with self._log.lock:
            self._log.attempts.append(attempt)
        return response

    def close(self) -> None:
        self._inner.close()


def client(base_url: str, log: Log) -> OdometerClient:
    return OdometerClient(base_url, ADMIN_KEY, timeout=30, retry=RETRY, transport=Recording(log))


def run_client(
    n: int,
    base_url: str,
    dataset_id: str,
    log: Log,
    stop: threading.Event,
    seed: int,
    prefix: str = "c",
) -> None:
    """Register until ``stop``, each key (``{prefix}{n}-{i}``) until it is answered (the
    client's retries)."""
    rng = random.Random(seed * 100 + n)
    with client(base_url, log) as odometer:
        i = 0
        while not stop.is_set():
            key, epsilon = f"{prefix}{n}-{i}", rng.choice(EPSILONS)
            try:
                invocation = odometer.register(
                    dataset_id,
                    {"type": "pure_dp", "epsilon": epsilon},
                    idempotency_key=key,
                )
            except Exception as exc:  # the retries ran out, or a 4xx: the test fails
                with log.lock:
                    log.failures.append(f"{key}: {exc!r}")
                return
            acknowledged = Acknowledged(
                key,
                epsilon,
                invocation.id,
                Decimal(invocation.charge["epsilon"]),
                time.monotonic(),
            )
            with log.lock:
                log.acknowledged.append(acknowledged)
            i += 1


@dataclass
class Load:
    """``clients`` threads registering on one dataset until :meth:`stop` (their keys begin
    with ``prefix``: keys are the caller's, whatever the dataset)."""

    base_url: str
    dataset_id: str
    prefix: str = "c"
    log: Log = field(default_factory=Log)
    threads: list[threading.Thread] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self, clients: int, seed: int) -> None:
        self.threads = [
            threading.Thread(
                target=run_client,
                args=(
                    n,
                    self.base_url,
                    self.dataset_id,
                    self.log,
                    self.stopping,
                    seed,
                    self.prefix,
                ),
                daemon=True,
            )
            for n in range(clients)
        ]
        for t in self.threads:
            t.start()

    def stop(self, timeout: float = 120) -> None:
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))


def lost(acknowledged: list[Acknowledged], stored: set[str]) -> list[str]:
    """The keys of acknowledged writes whose invocation is not in ``stored``."""
    return [a.key for a in acknowledged if a.invocation_id not in stored]


def check_answers(log: Log, server_log: str = "") -> Counter[int | None]:
    """No client gave up; no 5xx but 503, each with ``Retry-After``; no 4xx. The statuses."""
    assert log.failures == [], log.failures[:5]
    statuses = Counter(a.status for a in log.attempts)
    other_5xx = [a for a in log.attempts if a.status is not None and a.status >= 500]
    other_5xx = [a for a in other_5xx if a.status != 503]
    assert other_5xx == [], (
        f"5xx other than 503: {Counter((a.status, a.error) for a in other_5xx)}\n"
        f"{server_log[-3000:]}"
    )
    client_errors = [a for a in log.attempts if a.status is not None and 400 <= a.status < 500]
    assert client_errors == [], Counter((a.status, a.error) for a in client_errors)
    assert all(a.retry_after for a in log.attempts if a.status == 503), "503 without Retry-After"
    assert statuses[201] >= len(log.acknowledged)
    return statuses


def check_ledger(entries: list[dict[str, Any]], spent: str, log: Log) -> None:
    """Every acknowledged write is in the ledger (``entries``: its invocation entries, with
    ``invocation_id``, ``kind`` and ``charge``), once; nothing else is; ``spent`` = the
    ledger's charges = the acknowledged charges."""
    acknowledged = {a.invocation_id: a for a in log.acknowledged}
    assert len(acknowledged) == len(log.acknowledged), "one invocation acknowledged to two keys"
    assert len({a.key for a in log.acknowledged}) == len(log.acknowledged)
    stored = [e["invocation_id"] for e in entries]
    missing = lost(log.acknowledged, set(stored))
    assert missing == [], f"acknowledged writes lost: {len(missing)}: {missing[:10]}"
    double = len(stored) - len(acknowledged)
    assert double == 0 and len(set(stored)) == len(stored), (
        f"double charges: {double} ledger entries no client was told about"
    )
    assert {e["kind"] for e in entries} == {"invocation_accepted"}
    ledger_sum = sum((Decimal(e["charge"]["epsilon"]) for e in entries), Decimal(0))
    acked_sum = sum((a.charge for a in log.acknowledged), Decimal(0))
    assert Decimal(spent) == ledger_sum == acked_sum


#: the invocation entries of a dataset's ledger, and its stored ``spent``
LEDGER_SQL = (
    "SELECT seq, kind, invocation_id, charge FROM ledger_entries WHERE dataset_id = %s ORDER BY seq"
)
SPENT_SQL = "SELECT state_json FROM datasets WHERE id = %s"


def ledger_entries(rows: list[Any]) -> list[dict[str, Any]]:
    """:data:`LEDGER_SQL`'s rows as entries, the invocations only (not the creation)."""
    return [
        {"seq": seq, "kind": kind, "invocation_id": inv, "charge": charge}
        for seq, kind, inv, charge in rows
        if inv is not None
    ]


def check_export(base_url: str, dataset_id: str, path: Path, entries: int) -> None:
    """The ledger's export (through the service) has ``entries`` invocations and the
    dataset's creation, and ``odometer verify`` finds its hash chain and replay sound."""
    with client(base_url, Log()) as odometer:
        exported = odometer.export(dataset_id, path)
    assert exported == entries + 1
    verified = subprocess.run(
        # the test's service signs no heads: nothing pins the export's end
        [str(Path(sys.executable).parent / "odometer"), "verify", str(path), "--unpinned"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True
