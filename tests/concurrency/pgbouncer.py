"""Debian's PgBouncer (1.18), started by a test in front of the test's PostgreSQL server in
*transaction* pooling, with fewer server connections than the service has clients
(``tests/db/test_pgbouncer.py``, ``tests/concurrency/test_pgbouncer_suites.py``).

Without PgBouncer the tests are skipped, saying so, except where ``ODOMETER_REQUIRE_PGBOUNCER=1``
(``.ci/run``, which installs it): there they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from tests.concurrency.server import free_port
from tests.support import PG_SKIP_REASON, postgres_url

#: PgBouncer's server connections per database (``default_pool_size``): the issue's 3, against
#: 16 and more clients, so that every server session is shared.
SERVER_CONNECTIONS = 3
#: the URL parameter that turns psycopg's prepared statements off (``app.db.engine``)
NO_PREPARE = "prepare_threshold=none"


def pgbouncer() -> str:
    """The PgBouncer binary, or the test skipped (failed where it is required)."""
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if binary is None:
        if os.environ.get("ODOMETER_REQUIRE_PGBOUNCER") == "1":
            pytest.fail("PgBouncer is required here (ODOMETER_REQUIRE_PGBOUNCER=1)")
        pytest.skip("PgBouncer is not installed (apt-get install pgbouncer)")
    return binary


@dataclass(frozen=True)
class Bouncer:
    port: int
    home: Path

    def url(self, direct: str, *, prepare: bool = False, threshold: int | None = None) -> str:
        """``direct``'s database through the bouncer; psycopg's prepared statements off
        (``?prepare_threshold=none``) unless ``prepare``: then the URL sets ``threshold``
        (``?prepare_threshold=N``, the operator's choice, which the service does not probe), or
        with ``None`` sets nothing (the service's default: it probes for a transaction pooler,
        ``app.db.engine._install_pooler_check``)."""
        through = make_url(direct).set(port=self.port).render_as_string(hide_password=False)
        if not prepare:
            return f"{through}?{NO_PREPARE}"
        return through if threshold is None else f"{through}?prepare_threshold={threshold}"

    def log(self) -> str:
        path = self.home / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_bouncer(pool_size: int = SERVER_CONNECTIONS) -> Iterator[Bouncer]:
    """PgBouncer on a free port in transaction pooling, every database of the test server
    behind it, ``pool_size`` server connections per database and user."""
    binary = pgbouncer()
    base = postgres_url()
    assert base is not None
    direct = make_url(base)
    port = free_port()
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
                # each transaction on the server connection used least recently (PgBouncer's
                # default is the most recently used one, which can keep a busy client on the
                # same session for a whole run): every session is shared, in every run
                "server_round_robin = 1",
                f"default_pool_size = {pool_size}",
                "max_client_conn = 500",
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
    bouncer = Bouncer(port, home)
    try:
        libpq = direct.set(drivername="postgresql", port=port)
        for _ in range(100):
            try:
                psycopg.connect(
                    libpq.render_as_string(hide_password=False), connect_timeout=2
                ).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            pytest.fail(f"PgBouncer did not start: {bouncer.log()}")
        yield bouncer
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(home, ignore_errors=True)
