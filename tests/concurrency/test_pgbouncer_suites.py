"""The races behind Debian's PgBouncer (1.18) in transaction pooling, with fewer server
connections than clients: one two-worker server whose database URL goes through PgBouncer
(``tests/concurrency/pgbouncer.py``: 3 server connections, each transaction on the one used least
recently, so every server session is shared), with ``?prepare_threshold=none`` (psycopg's
prepared statements off, as ``docs/operations.md`` says for PgBouncer before 1.21):

- the spend race (``tests/concurrency/race.py``): 64 clients, exactly the budget admitted, every
  other answer ``409 BudgetExceeded``, no 5xx, the ledger replays;
- the idempotency storm (``test_idempotency_storm.run_storm``): one ledger entry per key, every
  answer to a key byte-identical, a changed body 422, no 5xx;
- the mixed lifecycle (``tests/concurrency/lifecycle.py``): 32 clients, every accounting mode, an
  auditor comparing each polled status with the replayed ledger, no 5xx.

What they check is what the single-server tests check; the ledgers are read directly, not
through the bouncer. Sizes: the race 64 × ``ODOMETER_PGBOUNCER_RACE_REQUESTS`` (default 10: 640
requests, 250 admitted), the storm ``ODOMETER_STORM_KEYS`` (300), the lifecycle
32 × ``ODOMETER_PGBOUNCER_LIFECYCLE_OPS`` (default 25); ``ODOMETER_LONG_TESTS=1`` runs the
single-server tests' full sizes. About 40 s in all on a loaded 2-core machine.

That the same bouncer breaks the service with prepared statements left on, and that a lost
prepared statement is then a 503, never a 500: ``tests/db/test_pgbouncer.py``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from decimal import Decimal

import pytest

from tests.concurrency.lifecycle import run_lifecycle
from tests.concurrency.pgbouncer import Bouncer, running_bouncer
from tests.concurrency.race import run_race
from tests.concurrency.server import Server, running_server
from tests.concurrency.test_idempotency_storm import run_storm
from tests.support import fresh_database

pytestmark = pytest.mark.postgres

LONG = os.environ.get("ODOMETER_LONG_TESTS") == "1"
RACE_CLIENTS = 64
RACE_PER_CLIENT = 200 if LONG else int(os.environ.get("ODOMETER_PGBOUNCER_RACE_REQUESTS", "10"))
BUDGET, EPSILON = "2.5", "0.01"  # admits exactly 250 requests
LIFECYCLE_CLIENTS = 32
LIFECYCLE_OPS = 500 if LONG else int(os.environ.get("ODOMETER_PGBOUNCER_LIFECYCLE_OPS", "25"))


@pytest.fixture(scope="module")
def bouncer() -> Iterator[Bouncer]:
    with running_bouncer() as running:
        yield running


@pytest.fixture(scope="module")
def direct_url(bouncer: Bouncer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database("postgresql", tmp_path_factory.mktemp("bounced-db")) as backend:
        yield backend.url


@pytest.fixture(scope="module")
def server(
    bouncer: Bouncer, direct_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("bounced-server") / "server.log"
    with running_server(bouncer.url(direct_url), log, workers=2) as running:
        yield running


def _no_prepared_statement_trouble(server: Server) -> None:
    log = server.log()
    for sign in ("PreparedStatement", "SqlStatementName", "ProtocolViolation", "Traceback"):
        assert sign not in log, log[-3000:]


def test_spend_race_behind_pgbouncer(server: Server, direct_url: str) -> None:
    result = run_race(
        server.base_url,
        direct_url,
        budget=BUDGET,
        epsilon=EPSILON,
        clients=RACE_CLIENTS,
        per_client=RACE_PER_CLIENT,
    )
    print(f"\n[behind pgbouncer] {result.sent} in {result.seconds:.1f}s: {dict(result.statuses)}")
    assert result.problems() == []
    assert result.accepted_total == Decimal(BUDGET)
    assert result.statuses == {"201": 250, "409 BudgetExceeded": result.sent - 250}
    _no_prepared_statement_trouble(server)


def test_idempotency_storm_behind_pgbouncer(server: Server, direct_url: str) -> None:
    run_storm(server.base_url, direct_url, "behind pgbouncer")  # asserts every answer 201/409/422
    _no_prepared_statement_trouble(server)


def test_mixed_lifecycle_behind_pgbouncer(server: Server) -> None:
    seed = int(os.environ.get("ODOMETER_LIFECYCLE_SEED", random.randrange(2**32)))
    result = run_lifecycle(
        server.base_url, clients=LIFECYCLE_CLIENTS, per_client=LIFECYCLE_OPS, seed=seed
    )
    print(f"\n[behind pgbouncer] {result.summary()}")
    assert result.problems() == [], result.problems()[:20]  # a 5xx is an unexpected status
    assert result.tally.ops["total"] == LIFECYCLE_CLIENTS * LIFECYCLE_OPS
    assert result.statuses_matched > 0
    _no_prepared_statement_trouble(server)
