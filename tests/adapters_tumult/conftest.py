"""The Tumult adapter's real-library tests run in their own venv (``make tumult-env``:
Tumult Analytics pins numpy < 2), which has the client, httpx and pytest but not the server's
packages. ``make test-tumult`` reads only this directory's conftest (``--confcutdir``), so the
service is started here from the project's venv (``ODOMETER_SERVER_PYTHON``, by default
``.venv/bin/python``): migrated SQLite in a temporary directory, one server for the session.
In the project's venv, where Tumult is absent, the tests beside this file are skipped."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from odometer_client import OdometerClient, RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "tumult-admin-key-" + "y" * 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the service did not become ready:\n{log.read_text(errors='replace')}")


@pytest.fixture(scope="session")
def tumult_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a served app on a fresh, migrated SQLite database."""
    python = os.environ.get("ODOMETER_SERVER_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    tmp = tmp_path_factory.mktemp("tumult-server")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'odometer.db'}",
        "ODOMETER_ADMIN_KEY": ADMIN_KEY,
        "PYTHONPATH": str(ROOT),
    }
    env.pop("PYSPARK_PYTHON", None)
    subprocess.run(
        [python, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    port = _free_port()
    log = tmp / "server.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [python, "-m", "app.serve", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning", "--no-access-log"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        _ready(base_url, process, log)
        yield base_url
    finally:
        process.terminate()
        process.wait(15)


@pytest.fixture
def tumult_client(tumult_server: str) -> Iterator[OdometerClient]:
    retry = RetryPolicy(retries=3, backoff=0.001, max_backoff=0.01)
    with OdometerClient(tumult_server, ADMIN_KEY, retry=retry) as c:
        yield c


@pytest.fixture
def tumult_admin_key() -> str:
    return ADMIN_KEY
