"""One real uvicorn server process on a fresh SQLite database, shared by a test session
(reuses the suite's helpers: ``fresh_database`` and the concurrency tests' ``running_server``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, fresh_database

__all__ = ["ADMIN_KEY", "Server", "live_server"]


@contextmanager
def live_server(tmp_dir: Path) -> Iterator[Server]:
    with (
        fresh_database("sqlite", tmp_dir) as backend,
        running_server(backend.url, tmp_dir / "server.log") as server,
    ):
        yield server
