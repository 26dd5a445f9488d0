"""The adapters' tests with the real libraries: one live server for the session. They run in
``.venv-adapters`` (``make adapters-env``; ``make test`` runs them there) and are skipped where
the library is not importable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odometer_client import OdometerClient
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server, live_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("adapters-server")) as s:
        yield s


@pytest.fixture
def client(server: Server) -> Iterator[OdometerClient]:
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
        yield c
