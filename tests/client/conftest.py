"""A live server for the client and CLI tests (one per session, tests use their own datasets),
and, for the tests that run on both databases, ``live``: that server or one on a fresh
PostgreSQL database (per module), with ``api``, a client of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odometer_client import OdometerClient, RetryPolicy
from tests.client.live import ADMIN_KEY, Server, live_server
from tests.concurrency.server import running_server
from tests.support import PG_SKIP_REASON, fresh_database, postgres_url

FAST_RETRY = RetryPolicy(retries=3, backoff=0.001, max_backoff=0.01)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("client-server")) as s:
        yield s


@pytest.fixture
def client(server: Server) -> Iterator[OdometerClient]:
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
        yield c


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The session's SQLite server, or one on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield request.getfixturevalue("server")
        return
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    tmp = tmp_path_factory.mktemp("live-postgres")
    with (
        fresh_database("postgresql", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
    ):
        yield server


@pytest.fixture
def api(live: Server) -> Iterator[OdometerClient]:
    with OdometerClient(live.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
        yield c
