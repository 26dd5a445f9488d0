"""The service behind PgBouncer in transaction pooling (Debian's 1.18, started by the test).

PgBouncer before 1.21 does not carry prepared statements between the server sessions it
shares, and psycopg prepares a statement once it has run five times on a connection: with
server sessions shared between client connections, registrations failed with
``InvalidSqlStatementName`` / ``DuplicatePreparedStatement`` (500) or were answered 503. With
``?prepare_threshold=none`` on the database URL (:func:`app.db.engine._prepare_threshold`)
nothing is prepared, and every registration is answered and recorded once.

Shown able to fail: with the parameter left off the URL, 130 registrations of 800 were answered
500, so ``test_registrations_through_transaction_pooling`` failed on
``assert Counter({201: 670, 500: 130}) == {201: 800}``.

Without PgBouncer the test is skipped, saying so, except where ``ODOMETER_REQUIRE_PGBOUNCER=1``
(``.ci/run``, which installs it): there it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from app.db.engine import _prepare_threshold
from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, PG_SKIP_REASON, Backend, fresh_database, postgres_url

CLIENTS, EACH = 8, 100


def _pgbouncer() -> str | None:
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bounced(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL database behind PgBouncer (transaction pooling, two server
    sessions): its URL through the bouncer."""
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    binary = _pgbouncer()
    if binary is None:
        if os.environ.get("ODOMETER_REQUIRE_PGBOUNCER") == "1":
            pytest.fail("PgBouncer is required here (ODOMETER_REQUIRE_PGBOUNCER=1)")
        pytest.skip("PgBouncer is not installed (apt-get install pgbouncer)")
    with fresh_database("postgresql", tmp_path) as backend:
        yield from _behind_bouncer(binary, backend)


def _behind_bouncer(binary: str, backend: Backend) -> Iterator[str]:
    direct = make_url(backend.url)
    port = _free_port()
    # its own directory, readable by the user PgBouncer runs as (pytest's are private)
    home = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    home.chmod(0o755)
    (home / "users.txt").write_text(f'"{direct.username}" ""\n')
    (home / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={direct.host} port={direct.port or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "auth_type = trust",
                f"auth_file = {home / 'users.txt'}",
                "pool_mode = transaction",
                "default_pool_size = 2",
                "max_client_conn = 100",
                "unix_socket_dir =",
                "ignore_startup_parameters = extra_float_digits,options",
                f"logfile = {home / 'pgbouncer.log'}",
                "",
            ]
        )
    )
    command = [binary, str(home / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        shutil.chown(home, "postgres")
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        bounced_url = direct.set(port=port)
        libpq = bounced_url.set(drivername="postgresql").render_as_string(hide_password=False)
        for _ in range(100):
            try:
                psycopg.connect(libpq, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            log = home / "pgbouncer.log"
            pytest.fail(f"PgBouncer did not start: {log.read_text() if log.exists() else ''}")
        yield bounced_url.render_as_string(hide_password=False)
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def test_registrations_through_transaction_pooling(bounced: str) -> None:
    """Two service instances (as two workers would be), each with its own pool, take turns
    registering: their client connections share PgBouncer's two server sessions."""
    url = f"{bounced}?prepare_threshold=none"
    databases = [Database.from_settings(Settings(database_url=url)) for _ in range(2)]
    settings = Settings(database_url=url, admin_key=ADMIN_KEY)
    codes: Counter[int] = Counter()
    with (
        TestClient(create_app(settings, databases[0])) as first,
        TestClient(create_app(settings, databases[1])) as second,
    ):
        r = first.post(
            "/v1/datasets",
            json={"name": "bounced", "budget": {"epsilon": "1000", "delta": "0.000001"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        ds = r.json()["id"]

        def analyst(client: TestClient) -> None:
            for _ in range(EACH):
                answer = client.post(
                    f"/v1/datasets/{ds}/invocations",
                    json={"mechanism": {"type": "pure_dp", "epsilon": "0.001"}},
                    headers=AUTH,
                )
                codes[answer.status_code] += 1

        threads = [
            threading.Thread(target=analyst, args=(client,))
            for client in (first, second) * (CLIENTS // 2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert codes == {201: CLIENTS * EACH}
        shown = first.get(f"/v1/datasets/{ds}", headers=AUTH).json()
        assert shown["ledger"]["last_seq"] == 1 + CLIENTS * EACH
        assert shown["status"]["spent"]["epsilon"] == "0.8"
    for database in databases:
        database.dispose()


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
