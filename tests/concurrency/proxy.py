"""Replicas of the service behind HAProxy, for black-box tests: ``n`` server processes on one
database, and HAProxy (Debian's package; ``.ci/run`` installs it) in front of them, spreading
requests round robin and checking each replica's ``/readyz``, as ``deploy/haproxy.cfg`` does
for ``docker-compose.yml``'s ``replicas`` profile.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.concurrency.server import Server, free_port, start_server

#: Set by ``.ci/run``, which installs HAProxy: there a missing ``haproxy`` fails the tests
#: that need it instead of skipping them.
REQUIRED = "ODOMETER_REQUIRE_HAPROXY"


def haproxy() -> str | None:
    """The ``haproxy`` executable (Debian puts it in ``/usr/sbin``, not always on PATH)."""
    found = shutil.which("haproxy")
    if found:
        return found
    for directory in ("/usr/sbin", "/usr/local/sbin"):
        candidate = Path(directory) / "haproxy"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def unavailable_reason() -> str | None:
    """Why the proxy cannot run here (None when it can); a failure, not a reason to skip,
    where ``$REQUIRED`` says it must."""
    if haproxy() is not None:
        return None
    reason = "haproxy is not installed (Debian: apt-get install haproxy; .ci/run installs it)"
    if os.environ.get(REQUIRED) == "1":
        raise RuntimeError(f"{REQUIRED}=1 but {reason}")
    return reason


#: HAProxy's own answer when no replica is ready: the service's 503, which clients retry
NO_REPLICA = '{"error":"ServiceUnavailable","detail":"no replica of the service is ready; retry"}'
RETRY = "hdr Retry-After 1"


def _quoted(text: str) -> str:
    """``text`` as one double-quoted argument of ``haproxy.cfg``."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def haproxy_config(port: int, servers: list[tuple[str, int]]) -> str:
    """The proxy of ``deploy/haproxy.cfg`` for local replicas: round robin, ``/readyz``
    checked, a connection refused tried on another replica, never a request resent, and its
    own 503 (no replica ready) in the service's shape with ``Retry-After``."""
    lines = "\n".join(f"    server {name} 127.0.0.1:{p} check" for name, p in servers)
    return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 120s
    retries 2
    option redispatch

frontend odometer
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
    http-error status 503 content-type application/json string {_quoted(NO_REPLICA)} {RETRY}
{lines}
"""


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to a process group started in its own session, SIGKILL after 10 s."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process_group(self.process)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_proxy(servers: list[tuple[str, int]], directory: Path) -> Proxy:
    """HAProxy in the foreground (its own process group) with :func:`haproxy_config`, once it
    answers ``/readyz`` through a replica."""
    binary = haproxy()
    assert binary is not None
    port = free_port()
    config = directory / "haproxy.cfg"
    config.write_text(haproxy_config(port, servers), encoding="utf-8")
    checked = subprocess.run(
        [binary, "-c", "-q", "-f", str(config)], capture_output=True, text=True, check=False
    )
    if checked.returncode != 0:
        raise RuntimeError(f"haproxy refuses its configuration:\n{checked.stderr}")
    log_path = directory / "haproxy.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [binary, "-db", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = Proxy(process, port, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"haproxy exited:\n{proxy.log()}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return proxy
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.05)
    proxy.stop()
    raise RuntimeError(f"haproxy did not become ready:\n{proxy.log()}")


@dataclass
class Replicas:
    servers: list[Server]
    proxy: Proxy

    @property
    def base_url(self) -> str:
        return self.proxy.base_url


@contextmanager
def replicas_behind_proxy(
    database_url: str,
    directory: Path,
    *,
    replicas: int,
    workers: int = 1,
    factory: str = "app.main:create_app",
    env: dict[str, str] | None = None,
) -> Iterator[Replicas]:
    """``replicas`` servers on ``database_url`` (started side by side) behind one HAProxy."""
    started: list[Server | BaseException | None] = [None] * replicas

    def start(n: int) -> None:
        try:
            started[n] = start_server(
                database_url,
                directory / f"replica-{n + 1}.log",
                workers=workers,
                factory=factory,
                env=env,
            )
        except BaseException as exc:
            started[n] = exc

    threads = [threading.Thread(target=start, args=(n,)) for n in range(replicas)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    servers = [s for s in started if isinstance(s, Server)]
    proxy: Proxy | None = None
    try:
        failed = [s for s in started if not isinstance(s, Server)]
        if failed:
            raise RuntimeError(f"replicas failed to start: {failed}")
        ports = [int(s.base_url.rsplit(":", 1)[1]) for s in servers]
        proxy = start_proxy([(f"replica-{n + 1}", port) for n, port in enumerate(ports)], directory)
        yield Replicas(servers, proxy)
    finally:
        if proxy is not None:
            proxy.stop()
        for server in servers:
            server.stop()
