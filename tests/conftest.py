"""Fixtures: every database test runs on SQLite and on PostgreSQL (when configured)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database, UnitOfWork
from app.main import create_app
from app.settings import Settings
from tests.support import ADMIN_KEY, PG_SKIP_REASON, Backend, fresh_database, postgres_url

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

# The suite builds hundreds of apps: they compute charges in the request's thread (still before
# the lock) instead of starting two worker processes each. The charge workers themselves are
# tested with real servers in tests/concurrency/test_bounded_requests.py.
os.environ.setdefault("ODOMETER_CHARGE_WORKERS", "0")
# Nor do they verify fragmented ledgers in the background (a thread re-running entries while a
# test counts the re-runs): tests/api/test_verify_behind.py turns it on where it is tested.
os.environ.setdefault("ODOMETER_VERIFY_BEHIND_SECONDS", "0")
# The client keeps the receipts of the registrations it makes (odometer_client.receipts): the
# suite's clients and `odometer register` runs keep them in a directory of the suite's own, never
# the user's (removed when the session's process ends); tests that read them set their own.
_CLIENT_DATA = tempfile.TemporaryDirectory(prefix="odometer-test-data-")
os.environ.setdefault("ODOMETER_DATA_DIR", _CLIENT_DATA.name)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated database per backend for the whole session (tests use their own datasets)."""
    if request.param == "postgresql" and postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database(request.param, tmp_path_factory.mktemp(request.param)) as b:
        yield b


@pytest.fixture(scope="session")
def database(backend: Backend) -> Iterator[Database]:
    db = Database.from_settings(Settings(database_url=backend.url))
    yield db
    db.dispose()


@pytest.fixture
def uow(database: Database) -> UnitOfWork:
    return UnitOfWork(database)


@pytest.fixture
def settings(backend: Backend) -> Settings:
    return Settings(database_url=backend.url, admin_key=ADMIN_KEY)


@pytest.fixture
def client(settings: Settings, database: Database) -> Iterator[TestClient]:
    with TestClient(create_app(settings, database)) as c:
        yield c


@pytest.fixture(params=BACKENDS)
def fresh_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A new, migrated database for this test alone (black-box server tests)."""
    if request.param == "postgresql" and postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database(request.param, tmp_path) as b:
        yield b
