"""What a client sees while the database cannot take its write: 503 with ``Retry-After``
(nothing committed; the same request with the same ``Idempotency-Key`` succeeds later), never
a 500, and the connections that cannot write are discarded, so the service reconnects.

The failover itself (the primary killed, a standby promoted) is
``tests/reliability/test_failover.py``; here are the errors it may raise one at a time. A
server that no longer accepts writes (SQLSTATE 25006, "cannot execute … in a read-only
transaction": a connection still on a node demoted to standby, through a DNS name or a proxy
that moved, or a primary made read-only to fence it) is simulated on the shared PostgreSQL
server with ``default_transaction_read_only`` on a database of this test's own.

Shown to fail without the change (``connection_lost`` and the ``DBAPIError`` handler of
``app/api/errors.py`` reverted): the read-only test's registration is answered
``500 InternalError`` (psycopg's ``ReadOnlySqlTransaction`` is an ``InternalError``), and
after the database is writable again the pooled read-only connection is handed out again
and answers 500 once more: the service never reconnects on its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from app.api.errors import install_error_handlers
from app.main import create_app
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, PG_SKIP_REASON, fresh_database, postgres_url

REGISTER = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


def _failing_app(exc: Exception) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fail")
    def fail() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


class _Orig(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        # the server unreachable, or gone mid-statement
        (sa_exc.OperationalError("SELECT 1", {}, _Orig("server closed the connection")), 503),
        # an error that cost the connection (25006, a FATAL): the pool discarded it
        (sa_exc.InternalError("INSERT", {}, _Orig("read-only"), connection_invalidated=True), 503),
        # no pooled connection came free in time
        (sa_exc.TimeoutError("QueuePool limit of size 10 overflow 10 reached"), 503),
        # any other database error is a bug of the service's: 500
        (sa_exc.InternalError("INSERT", {}, _Orig("something else")), 500),
        (sa_exc.IntegrityError("INSERT", {}, _Orig("duplicate key")), 500),
    ],
)
def test_database_errors_map_to_503_when_a_retry_can_succeed(exc: Exception, status: int) -> None:
    with _failing_app(exc) as client:
        r = client.get("/fail")
    assert r.status_code == status
    if status == 503:
        assert r.json()["error"] == "ServiceUnavailable"
        assert r.headers["Retry-After"] == "1"
    else:
        assert r.json() == {"error": "InternalError", "detail": "internal error"}
        assert "Retry-After" not in r.headers


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database("postgresql", tmp_path) as backend:
        yield backend.url


def _maintenance() -> psycopg.Connection[tuple[object, ...]]:
    """A connection to the server's maintenance database (not the one made read-only)."""
    base = postgres_url()
    assert base is not None
    libpq = make_url(base).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(libpq, autocommit=True)


def _refuse_writes(url: str) -> None:
    """Make the database refuse writes in every new session, and end the sessions open on it:
    the service's pooled connections are then dead, and those it opens next are read-only."""
    name = make_url(url).database
    with _maintenance() as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        deadline = time.monotonic() + 10
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the sessions did not end"
            time.sleep(0.02)


@pytest.mark.postgres
def test_a_server_that_refuses_writes_is_503_and_its_connection_is_discarded(
    pg_url: str,
) -> None:
    settings = Settings(database_url=pg_url, admin_key=ADMIN_KEY)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        r = client.post(
            "/v1/datasets",
            json={"name": "ro", "budget": {"epsilon": "1", "delta": "0"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        dataset_id = r.json()["id"]
        register = f"/v1/datasets/{dataset_id}/invocations"
        keyed = {**AUTH, "Idempotency-Key": "ro-1"}
        assert client.post(register, json=REGISTER, headers=keyed).status_code == 201
        # pooled connections are to be discarded even when opened on a writable server: warm
        # a few, as a busy service has them
        assert client.get(f"/v1/datasets/{dataset_id}", headers=AUTH).status_code == 200

        _refuse_writes(pg_url)
        # reads still work on a server that refuses writes
        assert client.get(f"/v1/datasets/{dataset_id}", headers=AUTH).status_code == 200
        keyed = {**AUTH, "Idempotency-Key": "ro-2"}
        for _ in range(3):  # each attempt on a fresh connection, each refused
            r = client.post(register, json=REGISTER, headers=keyed)
            assert r.status_code == 503, r.text
            assert r.headers["Retry-After"] == "1"
            assert r.json()["error"] == "ServiceUnavailable"
        # the write of the ORM path (a new dataset) is refused the same way
        r = client.post(
            "/v1/datasets",
            json={"name": "ro-2", "budget": {"epsilon": "1", "delta": "0"}},
            headers=AUTH,
        )
        assert r.status_code == 503, r.text

        # writable again: the refused connection was discarded, and the pool's older ones with
        # it (the read's too), so the very next request connects anew and succeeds; the
        # retried key was never charged, so its answer is fresh. The sessions are not ended
        # this time: a read-only connection given back to the pool would refuse again.
        with _maintenance() as conn:
            name = make_url(pg_url).database
            conn.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        r = client.post(register, json=REGISTER, headers=keyed)
        assert r.status_code == 201, r.text
        assert r.headers.get("Idempotent-Replayed") != "true"
        entries = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=AUTH).json()["entries"]
        assert [e["kind"] for e in entries] == ["dataset_created", *["invocation_accepted"] * 2]
