"""Replicas as a deployment: three server processes on one PostgreSQL database behind HAProxy
(round robin, ``/readyz`` checked: ``tests/concurrency/proxy.py``, as ``deploy/haproxy.cfg``
for ``docker-compose.yml``'s ``replicas`` profile), and the existing races run through the
proxy. Nothing is shared between the replicas but the database: each has its own pool (4 + 4
connections here), its own fair queue and group commit lines, so these are the tests of "the
app servers are stateless" (docs/operations.md, *Replicas behind a proxy*).

- the spend race (``tests/concurrency/race.py``): 64 clients, exactly the budget admitted
  (250 of ε = 0.01 in 2.5), every other answer ``409 BudgetExceeded``, the ledger replays;
- the idempotency storm (``test_idempotency_storm.run_storm``): one ledger entry per key, every
  answer to a key byte-identical, a changed body 422, whichever replica each copy reached;
- the mixed lifecycle (``tests/concurrency/lifecycle.py``): every accounting mode, an auditor
  comparing each polled status with the replayed ledger, replays byte-identical.

Then one replica is SIGKILLed under keyed load from the Python client: every key is answered
and charged exactly once; with no replica left, the proxy answers the service's 503.

Each race also checks that every replica decided some of the requests (its own
``odometer_decisions_total``): the proxy did spread them. Sizes as the single-server tests':
``ODOMETER_RACE_REQUESTS`` (default 50 a client), ``ODOMETER_STORM_KEYS`` (300),
``ODOMETER_LIFECYCLE_OPS`` (50 a client); ``ODOMETER_LONG_TESTS=1`` runs their full sizes.

Without HAProxy the tests are skipped, saying so, except where ``ODOMETER_REQUIRE_HAPROXY=1``
(``.ci/run``, which installs it): there they fail.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from app.db.uow import Database, UnitOfWork
from app.settings import Settings
from odometer_client import OdometerClient, RetryPolicy
from tests.concurrency.broken_builds import server_factory
from tests.concurrency.lifecycle import run_lifecycle
from tests.concurrency.proxy import Replicas, replicas_behind_proxy, unavailable_reason
from tests.concurrency.race import run_race
from tests.concurrency.server import Server
from tests.concurrency.test_idempotency_storm import run_storm
from tests.support import ADMIN_KEY, AUTH, PG_SKIP_REASON, fresh_database, postgres_url

pytestmark = pytest.mark.postgres

REPLICAS = 3
LONG = os.environ.get("ODOMETER_LONG_TESTS") == "1"
RACE_CLIENTS = 64
RACE_PER_CLIENT = 200 if LONG else int(os.environ.get("ODOMETER_RACE_REQUESTS", "50"))
BUDGET, EPSILON = "2.5", "0.01"  # admits exactly 250 requests
LIFECYCLE_CLIENTS = 32
LIFECYCLE_OPS = 500 if LONG else int(os.environ.get("ODOMETER_LIFECYCLE_OPS", "50"))
#: each replica's pool: 3 replicas stay within 24 connections of the shared server
POOL = {"ODOMETER_DB_POOL_SIZE": "4", "ODOMETER_DB_MAX_OVERFLOW": "4"}


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database("postgresql", tmp_path_factory.mktemp("replicas-db")) as backend:
        yield backend.url


@pytest.fixture(scope="module")
def replicas(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    directory = tmp_path_factory.mktemp("replicas")
    with replicas_behind_proxy(
        database_url, directory, replicas=REPLICAS, factory=server_factory(), env=POOL
    ) as running:
        yield running


def _decisions(server: Server) -> float:
    """The replica's own ``odometer_decisions_total`` (its worker's, read directly)."""
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("odometer_decisions_total{")
    )


class _Spread:
    """Every replica decided some of what a test sent through the proxy."""

    def __init__(self, replicas: Replicas) -> None:
        self._servers = replicas.servers
        self._before = [_decisions(s) for s in self._servers]

    def check(self) -> list[float]:
        decided = [_decisions(s) - b for s, b in zip(self._servers, self._before, strict=True)]
        assert all(d > 0 for d in decided), f"decisions per replica: {decided}"
        return decided


def test_spend_race_through_the_proxy(replicas: Replicas, database_url: str) -> None:
    spread = _Spread(replicas)
    result = run_race(
        replicas.base_url,
        database_url,
        budget=BUDGET,
        epsilon=EPSILON,
        clients=RACE_CLIENTS,
        per_client=RACE_PER_CLIENT,
    )
    decided = spread.check()
    print(
        f"\n[{REPLICAS} replicas behind haproxy] {result.sent} requests in {result.seconds:.1f}s: "
        f"{dict(result.statuses)}; accepted {result.accepted_total} of {BUDGET}; decisions per "
        f"replica {decided}"
    )
    assert result.problems() == []
    assert result.accepted_total == Decimal(BUDGET)
    assert result.statuses == {"201": 250, "409 BudgetExceeded": result.sent - 250}


def test_idempotency_storm_through_the_proxy(replicas: Replicas, database_url: str) -> None:
    spread = _Spread(replicas)
    run_storm(replicas.base_url, database_url, f"{REPLICAS} replicas behind haproxy")
    spread.check()


def test_mixed_lifecycle_through_the_proxy(replicas: Replicas) -> None:
    seed = int(os.environ.get("ODOMETER_LIFECYCLE_SEED", random.randrange(2**32)))
    spread = _Spread(replicas)
    result = run_lifecycle(
        replicas.base_url, clients=LIFECYCLE_CLIENTS, per_client=LIFECYCLE_OPS, seed=seed
    )
    decided = spread.check()
    print(f"\n[{REPLICAS} replicas behind haproxy] {result.summary()}; per replica {decided}")
    assert result.problems() == [], result.problems()[:20]
    for kind in ("invocation_accepted", "invocation_reserved", "invocation_settled"):
        assert result.kinds[kind] > 0, (kind, result.kinds)
    assert result.tally.ops["total"] == LIFECYCLE_CLIENTS * LIFECYCLE_OPS
    assert result.entries_checked == sum(result.kinds.values())
    assert result.statuses_matched > 0


def test_a_replica_killed_under_load_costs_no_write(replicas: Replicas, database_url: str) -> None:
    """Last (it kills the replicas): SIGKILL one replica under keyed load from the Python
    client. A request it was serving is answered 502 by the proxy (which never resends a
    request that reached a replica), the client resends it with its key to another replica:
    every key is answered, and charged, exactly once. With every replica gone the proxy's own
    answer is the service's 503 shape, with ``Retry-After``."""
    stop = threading.Event()
    acknowledged: list[tuple[str, str]] = []
    failures: list[str] = []
    lock = threading.Lock()
    retry = RetryPolicy(retries=50, backoff=0.05, max_backoff=0.5)
    with OdometerClient(replicas.base_url, ADMIN_KEY, retry=retry) as admin:
        dataset_id = admin.create_dataset("replica-killed", "1000000", "0").id

    def client(n: int) -> None:
        with OdometerClient(replicas.base_url, ADMIN_KEY, retry=retry) as odometer:
            i = 0
            while not stop.is_set():
                key = f"k{n}-{i}"
                try:
                    invocation = odometer.register(
                        dataset_id, {"type": "pure_dp", "epsilon": "0.001"}, idempotency_key=key
                    )
                except Exception as exc:
                    with lock:
                        failures.append(f"{key}: {exc!r}")
                    return
                with lock:
                    acknowledged.append((key, invocation.id))
                i += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    with lock:
        before = len(acknowledged)
    replicas.servers[0].kill_hard()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join(60)
    assert failures == [], failures[:5]
    assert len(acknowledged) > before > 0  # the load went on without the replica
    database = Database.from_settings(Settings(database_url=database_url))
    try:
        uow = UnitOfWork(database)
        with uow.read_only():
            rows = uow.ledger.page(dataset_id, after_seq=0, limit=10**6, up_to_seq=10**9)
        charged = sorted(str(r.invocation_id) for r in rows if r.invocation_id)
    finally:
        database.dispose()
    assert charged == sorted(inv for _, inv in acknowledged)  # once each, nothing else
    print(
        f"\n[{REPLICAS} replicas behind haproxy, one killed] {len(acknowledged)} keys answered "
        f"and charged once each ({len(acknowledged) - before} after the kill)"
    )

    for server in replicas.servers[1:]:
        server.stop()
    conn = http.client.HTTPConnection("127.0.0.1", replicas.proxy.port, timeout=10)
    try:
        conn.request("GET", "/v1/datasets", headers=AUTH)
        response = conn.getresponse()
        body = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 503
    assert response.getheader("Retry-After") == "1"
    assert body["error"] == "ServiceUnavailable"
