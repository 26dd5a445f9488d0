"""A live server for the client and CLI tests (one per session, tests use their own datasets)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odometer_client import OdometerClient, RetryPolicy
from tests.client.live import ADMIN_KEY, Server, live_server

FAST_RETRY = RetryPolicy(retries=3, backoff=0.001, max_backoff=0.01)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("client-server")) as s:
        yield s


@pytest.fixture
def client(server: Server) -> Iterator[OdometerClient]:
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
        yield c
