from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.live import Server, live_server


@pytest.fixture(scope="session")
def example_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("examples-server")) as s:
        yield s
