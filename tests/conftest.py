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
    """A migrated database per backend for the whole session (tests use their own datasets).
    pytest sets a parametrised session fixture up again whenever the parameter changes, and
    under `--dist loadfile` that is twice per file (a file's SQLite tests, then its PostgreSQL
    ones): each file has databases of its own, copies of a migrated template
    (:func:`tests.support.fresh_database`), so that costs a file copy and a CREATE DATABASE ...
    TEMPLATE, not a migration."""
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


# `make test` hands whole files to its processes (pytest-xdist, `--dist loadfile`) in the order
# they are collected. The slowest files are collected late (tests/reliability/), and with that
# order the run ended on one of the two processes while the other sat idle. They go first,
# slowest first, so the short files fill in around them; every other file keeps its place. Only
# the order of files changes (a file's own tests keep theirs), the same on every process, so
# xdist sees identical collections; with TEST_WORKERS=0 the slow files simply run first.
# Longest first (the greedy order that leaves the least idle time at the end when whole files
# are handed out). Seconds: a whole-suite run's per-file sums of its tests' wall times (three
# processes on a 2-core machine at a load of about 10, 25 min in all; roughly 2.5x CI's
# figures); `make test` prints the 25 slowest tests to keep it current.
SLOW_FILES_FIRST = (
    "tests/install/test_documented_installs.py",  # 200 s: wheels built, four installs
    "tests/reliability/test_kill9.py",  # 189 s: kill -9 trials on SQLite and PostgreSQL
    "tests/benchmarks/test_quote_bench.py",  # 171 s: the quote benchmark's rows
    "tests/benchmarks/test_write_path_bench.py",  # 159 s: the write path's probes
    "tests/api/test_schemathesis.py",  # 155 s: schema fuzzing
    "tests/accounting/test_capacity.py",  # 137 s: loops of about 10⁶ admissions
    "tests/client/test_cli_errors.py",  # 128 s: runs of the odometer command
    "tests/reliability/test_patroni.py",  # 125 s: one Patroni cluster, four failovers
    "tests/reliability/test_restore.py",  # 110 s: racing witness writers and restores
    "tests/benchmarks/test_compare_bench.py",  # 106 s: probe processes of two builds
    "tests/benchmarks/test_write_path_count_bench.py",  # 97 s: a probe under callgrind
    "tests/db/test_pgbouncer.py",  # 90 s: two runs of 2,000 registrations
    "tests/api/test_organisation_cap_properties.py",  # 83 s
    "tests/reliability/test_tampering.py",  # 74 s: a 10⁵-entry export made and replayed
    "tests/api/test_rdp_workload.py",  # 70 s
    "tests/api/test_instead_held.py",  # 69 s
    "tests/concurrency/test_spend_race.py",  # 62 s
    "tests/concurrency/test_bounded_requests.py",  # 60 s
    "tests/api/test_authz_matrix.py",  # 58 s
    "tests/client/test_blocks.py",  # 56 s
    "tests/browser/test_dashboard_homes.py",  # 55 s
    "tests/api/test_hostile_table.py",  # 54 s
    "tests/concurrency/test_org_cap_race.py",  # 54 s
    "tests/client/test_distribution.py",  # 50 s
    "tests/api/test_ledger_proofs_stored.py",  # 44 s
    "tests/api/test_partitioned_properties.py",  # 41 s
    "tests/reliability/test_export_end.py",  # 40 s
    "tests/concurrency/test_pgbouncer_suites.py",
    "tests/accounting/test_shaped_placement.py",
    "tests/ledger/test_merkle.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands out files (``--dist loadfile``) sorted by their number of tests, most
    first, unless told ``--no-loadscope-reorder``: that undid SLOW_FILES_FIRST, whose files have
    few tests each (2 in the Patroni and kill -9 files), so they started last and the run ended
    on one process while the other idled (in a run of the whole suite the capacity file, third
    in the list, started 20 minutes in). The order below is the order files are handed out."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Moves SLOW_FILES_FIRST to the front (after pytest's own grouping by fixture parameter,
    hence trylast; the sort is stable, so everything else keeps its order)."""
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    root = config.rootpath

    def key(item: pytest.Item) -> int:
        try:
            name = item.path.relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=key)
