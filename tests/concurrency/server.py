"""Run the service as a real uvicorn subprocess (its own process group) for black-box tests."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import ADMIN_KEY, ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def kill_hard(self) -> None:
        """SIGKILL the whole process group (the server and its workers): a crash."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill_hard()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_server(
    database_url: str,
    log_path: Path,
    *,
    workers: int = 1,
    factory: str = "app.main:create_app",
    port: int | None = None,
    env: dict[str, str] | None = None,
    preload: bool = False,
) -> Server:
    """The service on ``database_url`` in its own process group, ready (``/readyz`` 200).
    ``preload``: through :mod:`tests.concurrency.preloaded_serve`, whose workers are forked from
    a launcher that imported the app once (about 3 s of CPU less per worker), for tests that
    start many servers; otherwise ``python -m app.serve``, the launcher ``make run`` uses."""
    port = port or free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ODOMETER_ADMIN_KEY": ADMIN_KEY,
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        # uvicorn with TCP_NODELAY on the listener (see app/serve.py)
        "tests.concurrency.preloaded_serve" if preload else "app.serve",
        "--app",
        factory,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    log = log_path.open("ab")
    process = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    log.close()
    server = Server(process, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.log()}")
        # the launcher listens before its workers are up: a connection can be accepted and
        # then time out, so it is closed whatever happens
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not become ready:\n{server.log()}")


@contextmanager
def running_server(database_url: str, log_path: Path, **kwargs: object) -> Iterator[Server]:
    server = start_server(database_url, log_path, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
