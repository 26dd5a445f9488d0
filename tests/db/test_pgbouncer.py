"""The service behind PgBouncer in transaction pooling (Debian's 1.18, started by the test:
``tests/concurrency/pgbouncer.py``), with fewer server connections than clients: 3 server
connections, 16 clients, 2,000 registrations (half the clients polling the dataset's status
between two), against a two-worker server.

PgBouncer before 1.21 does not carry prepared statements between the server sessions it
shares, and psycopg prepares a statement once it has run five times on a connection. With
server sessions shared between client connections, a statement psycopg prepared on one session
is missing on the next (``InvalidSqlStatementName``, SQLSTATE 26000) or a name it prepares is
already there (``DuplicatePreparedStatement "_pg3_5"``, 42P05).

- Prepared statements left on, it fails, and the test asserts that it does: some registrations
  are answered 5xx. Each is a 503 with ``Retry-After`` (the connection is discarded,
  :func:`app.db.engine.prepared_statement_lost`), never a 500, and nothing of a refused request
  was recorded: the ledger holds exactly the 201s.
- With ``?prepare_threshold=none`` on the database URL (:func:`app.db.engine._prepare_threshold`)
  nothing is prepared: 2,000 of 2,000 answered 201, each recorded once.

Shown able to fail: before a lost prepared statement was taken for a lost connection, the
prepared run answered ``{201: 790, 500: 1006, 503: 204}`` (``InvalidSqlStatementName``: the
connection stayed in the pool and failed again), and the first test failed on its "never a
500"; since, five runs answered 7, 114, 13, 12 and 21 of the 2,000 with 503
(``DuplicatePreparedStatement``, ``InvalidSqlStatementName``, and ``ProtocolViolation``: a name
another connection prepared as another statement, whose parameters did not match). The race, the
idempotency storm and the mixed lifecycle behind the same bouncer:
``tests/concurrency/test_pgbouncer_suites.py``. What it costs: 142 s on a 2-core machine at
load 13-20 (each run of 2,000 registrations and 1,000 polls 67-74 s there, a server's start
included), one run of each setting unless the prepared one must run again.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.db.engine import _prepare_threshold, make_engine
from app.db.uow import Database, UnitOfWork
from app.main import create_app
from app.settings import Settings
from tests.concurrency.pgbouncer import SERVER_CONNECTIONS, Bouncer, running_bouncer
from tests.concurrency.server import running_server
from tests.support import ADMIN_KEY, AUTH, PG_SKIP_REASON, fresh_database, postgres_url

pytestmark = pytest.mark.postgres

CLIENTS, EACH = 16, 125  # 2,000 registrations
EPSILON = "0.001"


@pytest.fixture(scope="module")
def bouncer() -> Iterator[Bouncer]:
    with running_bouncer(SERVER_CONNECTIONS) as running:
        yield running


@dataclass
class Run:
    statuses: Counter[int] = field(default_factory=Counter)
    #: the answers to the status polls
    polls: Counter[int] = field(default_factory=Counter)
    without_retry_after: int = 0
    transport_errors: int = 0
    log: str = ""
    ledger_accepted: int = 0
    spent: Decimal = Decimal(0)


def _register_through(
    bouncer: Bouncer, tmp_path: Path, *, prepare: bool, threshold: int | None = None
) -> Run:
    """2,000 registrations by 16 clients (one keep-alive connection each) to a two-worker
    server whose database URL goes through ``bouncer``; the answers, and the ledger read
    directly."""
    run = Run()
    tmp_path.mkdir(parents=True, exist_ok=True)
    with fresh_database("postgresql", tmp_path) as backend:
        url = bouncer.url(backend.url, prepare=prepare, threshold=threshold)
        with running_server(url, tmp_path / "server.log", workers=2) as server:
            created = httpx.post(
                f"{server.base_url}/v1/datasets",
                json={"name": "bounced", "budget": {"epsilon": "1000", "delta": "0"}},
                headers=AUTH,
                timeout=30,
            )
            assert created.status_code == 201, created.text
            dataset_id = created.json()["id"]
            _drive(server.base_url, dataset_id, run)
            run.log = server.log()
        database = Database.from_settings(Settings(database_url=backend.url))
        try:
            uow = UnitOfWork(database)
            with uow.read_only():
                rows = uow.ledger.page(dataset_id, after_seq=0, limit=10**6, up_to_seq=10**9)
                run.ledger_accepted = sum(r.kind == "invocation_accepted" for r in rows)
                run.spent = Decimal(rows[-1].state["spent_epsilon"])
        finally:
            database.dispose()
    print(f"\n[prepare={prepare}] registrations {dict(run.statuses)}, polls {dict(run.polls)}")
    return run


def _drive(base_url: str, dataset_id: str, run: Run) -> None:
    body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": EPSILON}})
    headers = {**AUTH, "content-type": "application/json"}
    port = int(base_url.rsplit(":", 1)[1])
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(polls: bool) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        sent: list[tuple[str, str, str | None]] = [
            ("POST", f"/v1/datasets/{dataset_id}/invocations", body)
        ]
        if polls:  # the dashboard's poll: other statements, prepared under the same names
            sent.append(("GET", f"/v1/datasets/{dataset_id}", None))
        try:
            for _ in range(EACH):
                for method, path, payload in sent:
                    try:
                        conn.request(method, path, payload, headers)
                        answer = conn.getresponse()
                        answer.read()
                    except (OSError, http.client.HTTPException):
                        conn.close()
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                        with lock:
                            run.transport_errors += 1
                        continue
                    with lock:
                        (run.statuses if method == "POST" else run.polls)[answer.status] += 1
                        if answer.status >= 500 and answer.getheader("Retry-After") is None:
                            run.without_retry_after += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(n % 2 == 1,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_prepared_statements_fail_behind_transaction_pooling_never_with_a_500(
    bouncer: Bouncer, tmp_path: Path
) -> None:
    """psycopg's prepared statements left on by the operator (``?prepare_threshold=5``, which
    the service does not probe): the run fails (some 5xx), as the issue says it must be shown
    to; each 5xx is a 503 with Retry-After. How many fail depends on which connection prepared
    what first (1 to 114 of 2,000 seen): a run without a failure is run again, at most 3 runs,
    each checked.

    The ledger is not held to the 201s here: with server sessions shared, a name psycopg
    prepared can be another connection's name for *another* statement, which then runs with
    this one's parameters when their types agree (one run answered 1,967 registrations 201 and
    the ledger held 1,964). That is why a URL that does not choose is probed for a transaction
    pooler and its prepared statements turned off
    (:func:`test_prepared_statements_are_turned_off_behind_transaction_pooling`)."""
    for attempt in range(3):
        began = time.monotonic()
        run = _register_through(bouncer, tmp_path / str(attempt), prepare=True, threshold=5)
        print(f"{time.monotonic() - began:.1f} s")
        assert run.transport_errors == 0
        assert sum(run.statuses.values()) == CLIENTS * EACH
        # never a 500: what fails is a 503 with Retry-After
        assert set(run.statuses) | set(run.polls) <= {200, 201, 503}, (run.statuses, run.polls)
        assert run.without_retry_after == 0
        if run.statuses[503] + run.polls[503] > 0:
            break
    assert run.statuses[503] + run.polls[503] > 0, "prepared statements behind PgBouncer held"
    lost = ("DuplicatePreparedStatement", "InvalidSqlStatementName", "ProtocolViolation")
    assert any(sign in run.log for sign in lost), run.log[-3000:]


def test_prepared_statements_are_turned_off_behind_transaction_pooling(
    bouncer: Bouncer, tmp_path: Path
) -> None:
    """A database URL that does not set ``prepare_threshold`` (the default) through PgBouncer in
    transaction pooling: the service's first connection finds two open connections served by
    one server process (``app.db.engine._install_pooler_check``), turns psycopg's prepared
    statements off and says so; 2,000 of 2,000 registrations answered 201, each recorded once.
    Without the probe the same run answered 503s (and may lose acknowledged writes: above)."""
    run = _register_through(bouncer, tmp_path, prepare=True)
    assert "transaction pooling" in run.log and "prepared statements are turned off" in run.log
    assert run.transport_errors == 0
    assert run.statuses == {201: CLIENTS * EACH}
    assert run.polls == {200: CLIENTS // 2 * EACH}
    assert run.ledger_accepted == CLIENTS * EACH
    assert run.spent == Decimal("2")


def test_the_pooler_probe(bouncer: Bouncer, direct: str) -> None:
    """Through PgBouncer the engine's connections never prepare; straight to PostgreSQL they
    keep psycopg's default (prepare on the fifth run), and a URL that chooses is not probed."""

    def threshold(url: str) -> object:
        engine = make_engine(url, pool_size=2, max_overflow=0)
        try:
            with engine.connect() as conn:
                return conn.connection.dbapi_connection.prepare_threshold  # type: ignore[union-attr]
        finally:
            engine.dispose()

    assert threshold(bouncer.url(direct, prepare=True)) is None
    assert threshold(direct) == 5
    assert threshold(bouncer.url(direct, prepare=True, threshold=5)) == 5
    assert threshold(bouncer.url(direct)) is None


def test_prepare_threshold_none_answers_every_registration(
    bouncer: Bouncer, tmp_path: Path
) -> None:
    run = _register_through(bouncer, tmp_path, prepare=False)
    assert run.transport_errors == 0
    assert run.statuses == {201: CLIENTS * EACH}
    assert run.polls == {200: CLIENTS // 2 * EACH}
    assert run.ledger_accepted == CLIENTS * EACH
    assert run.spent == Decimal("2")


@pytest.fixture
def direct(tmp_path: Path) -> Iterator[str]:
    """A fresh database of the test server, reached directly (no bouncer)."""
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database("postgresql", tmp_path) as backend:
        yield backend.url


@pytest.mark.parametrize("lost", ["missing", "taken"])
def test_a_lost_prepared_statement_is_a_503_never_a_500(direct: str, lost: str) -> None:
    """What a pooler does to a connection's prepared statements, done to every connection the
    service checks out, deterministically: the server session's prepared statements dropped
    behind psycopg's back (``missing``: ``InvalidSqlStatementName`` when psycopg runs one it
    prepared), or its names taken by other statements (``taken``: ``DuplicatePreparedStatement``
    when psycopg prepares one, ``ProtocolViolation`` when it runs one). The registration is
    answered 503 with ``Retry-After``, nothing is recorded, and once the sessions are left alone
    the next registration is a 201. Shown failing with :func:`prepared_statement_lost`
    answering ``False``: ``missing``'s registration was answered 500
    (``InvalidSqlStatementName``), ``taken``'s read after it 500
    (``DuplicatePreparedStatement``)."""
    url = f"{direct}?prepare_threshold=0"  # psycopg prepares every statement on its first run
    settings = Settings(database_url=url, admin_key=ADMIN_KEY)
    database = Database.from_settings(settings)
    armed = [False]

    def pooler(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not armed[0]:
            return
        pgconn = dbapi_connection.pgconn  # libpq itself: psycopg's bookkeeping never sees it
        pgconn.exec_(b"DEALLOCATE ALL")
        if lost == "taken":
            for n in range(200):
                pgconn.exec_(f"PREPARE _pg3_{n} AS SELECT 1".encode())

    event.listen(database.engine, "checkout", pooler)
    try:
        with TestClient(create_app(settings, database), raise_server_exceptions=False) as client:
            r = client.post(
                "/v1/datasets",
                json={"name": "lost", "budget": {"epsilon": "10", "delta": "0"}},
                headers=AUTH,
            )
            assert r.status_code == 201, r.text
            ds = r.json()["id"]
            body = {"mechanism": {"type": "pure_dp", "epsilon": EPSILON}}
            for _ in range(3):  # every statement of a registration prepared on its connection
                assert client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
            armed[0] = True
            r = client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
            armed[0] = False
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "ServiceUnavailable"
            assert r.headers["Retry-After"] == "1"
            # the other connections checked out meanwhile keep what was done to them until
            # each fails once and is discarded: 503s, then the answers
            shown = _answered(lambda: client.get(f"/v1/datasets/{ds}", headers=AUTH))
            assert shown.status_code == 200, shown.text
            assert shown.json()["ledger"]["last_seq"] == 4  # the creation, three registrations
            r = _answered(
                lambda: client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
            )
            assert r.status_code == 201, r.text
            assert r.json()["ledger_seq"] == 5
    finally:
        event.remove(database.engine, "checkout", pooler)
        database.dispose()


def _answered(send: Callable[[], httpx.Response]) -> httpx.Response:
    """``send``'s answer once it is not a 503 with Retry-After (at most 10 tries)."""
    for _ in range(10):
        answer = send()
        if answer.status_code != 503:
            return answer
        assert answer.headers["Retry-After"] == "1"
    return answer


@pytest.mark.parametrize(
    ("query", "threshold"),
    [
        ("?prepare_threshold=none", None),
        ("?prepare_threshold=OFF", None),
        ("?prepare_threshold=0", 0),
        ("?sslmode=disable&prepare_threshold=3", 3),
    ],
)
def test_the_url_parameter(query: str, threshold: int | None) -> None:
    rest, read = _prepare_threshold(f"postgresql+psycopg://u@h:5432/db{query}")
    assert read == threshold
    assert "prepare_threshold" not in rest
    assert rest.startswith("postgresql+psycopg://u@h:5432/db")


def test_a_wrong_value_is_refused() -> None:
    with pytest.raises(ValueError, match="prepare_threshold is 'none' or a whole number"):
        _prepare_threshold("postgresql+psycopg://u@h/db?prepare_threshold=never")
