"""Plumbing for ``benchmarks/service.py``: databases, the uvicorn server, API calls, loads.

Kept apart from the measurement plan so that the plan reads as a list of experiments.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks.results import checkout_path

ROOT = Path(__file__).resolve().parent.parent
#: The key the benchmark's server accepts as its operator admin key (checked in memory).
ADMIN_KEY = "odo_admin_benchmark_service_key_0123456789"
BASELINE_SCHEMA = "bench_baseline"


# ---------------------------------------------------------------------------- databases
def pg_recreate(url: str) -> str:
    """Drop and create the benchmark's own PostgreSQL database; return its psycopg URL.

    Why a database of its own: the runs write millions of rows and must not disturb (or be
    disturbed by) anything else in the cluster's other databases.
    """
    import psycopg

    parts = urlsplit(url.replace("postgresql+psycopg://", "postgresql://"))
    name = parts.path.lstrip("/")
    if not name.replace("_", "").isalnum():
        raise ValueError(f"unexpected database name {name!r}")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts)


def pg_drop(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(database_url: str, root: Path = ROOT) -> None:
    """``alembic upgrade head`` on a fresh database, as ``make run`` does (with the
    migrations of the checkout at ``root``)."""
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": checkout_path(root)}
    env.pop("ODOMETER_DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )


_BASELINE_DDL = (
    "CREATE TABLE bench_budget (id VARCHAR(40) PRIMARY KEY, last_seq INTEGER NOT NULL, "
    "head_hash VARCHAR(64) NOT NULL, spent BIGINT NOT NULL, state {json} NOT NULL)",
    "CREATE TABLE bench_ledger (id {serial} PRIMARY KEY, "
    "dataset_id VARCHAR(40) NOT NULL REFERENCES bench_budget(id), seq INTEGER NOT NULL, "
    "kind VARCHAR(32) NOT NULL, invocation_id VARCHAR(40), actor VARCHAR(128) NOT NULL, "
    "at VARCHAR(32) NOT NULL, accounting_version VARCHAR(32) NOT NULL, declaration {json}, "
    "request {json}, charge {json}, requested {json}, refund {json}, reservation {json}, "
    "reason TEXT, config {json}, state {json} NOT NULL, org {json}, quota {json}, "
    "prev_hash VARCHAR(64) NOT NULL, hash VARCHAR(64) NOT NULL, UNIQUE (dataset_id, seq))",
    "CREATE INDEX ix_bench_ledger_invocation_id ON bench_ledger (invocation_id)",
)
_GENESIS = "0" * 64


def _budget_rows(count: int) -> list[tuple[str, int, str, int, str]]:
    state = json.dumps({"spent_epsilon": "0", "reserved_epsilon": "0", "spent_delta": "0"})
    return [(f"b{i:05d}", 0, _GENESIS, 0, state) for i in range(count)]


def pg_baseline_setup(url: str, budgets: int) -> str:
    """The baseline's tables (the service's ledger columns and constraints) in a scratch
    schema of the benchmark database; returns the DSN that selects that schema."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {BASELINE_SCHEMA} CASCADE")
        conn.execute(f"CREATE SCHEMA {BASELINE_SCHEMA}")
        conn.execute(f"SET search_path = {BASELINE_SCHEMA}")
        for ddl in _BASELINE_DDL:
            conn.execute(ddl.format(json="JSON", serial="BIGSERIAL"))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_budget VALUES (%s, %s, %s, %s, %s)", _budget_rows(budgets)
            )
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{BASELINE_SCHEMA}"


def sqlite_baseline_setup(path: Path, budgets: int) -> None:
    """The baseline's tables in a SQLite file of their own (same directory as the service's)."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        for ddl in _BASELINE_DDL:
            conn.execute(ddl.format(json="JSON", serial="INTEGER"))
        conn.executemany("INSERT INTO bench_budget VALUES (?, ?, ?, ?, ?)", _budget_rows(budgets))
    finally:
        conn.close()


# ---------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    return children


def _spawned(pid: int) -> bool:
    """A process started by multiprocessing's ``spawn`` (not its resource tracker)."""
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def cpu_of(pids: list[int]) -> float:
    """CPU time (user + system, seconds) used so far by ``pids`` (the gone count 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def _established_inodes(port: int) -> set[str]:
    """The socket inodes of established TCP connections whose local port is ``port``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


@dataclass
class Server:
    """A uvicorn master and its workers, in a process group of their own."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    workers: int = 1

    def worker_pids(self) -> list[int]:
        """The processes serving requests: the spawned uvicorn workers, or the master itself
        when it runs a single worker (its spawned children are then its charge workers)."""
        if self.workers <= 1:
            return [self.process.pid]
        return [p for p in _children().get(self.process.pid, []) if _spawned(p)] or [
            self.process.pid
        ]

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the whole server: every role of
        :meth:`cpu_by_role` together."""
        return sum(self.cpu_by_role().values())

    def cpu_by_role(self) -> dict[str, float]:
        """CPU time (user + system, seconds) used so far by each kind of the server's
        processes: ``serving`` (the processes that run the app: the uvicorn workers, or the
        master when it runs one worker), ``supervisor`` (uvicorn's master when it only
        supervises workers), ``charge`` (the charge workers of :mod:`app.services.charging`,
        children of a serving process; they work only on declarations whose charge may be
        expensive)
        and ``other`` (multiprocessing's resource trackers). Kept apart so that idle processes
        cannot pass for per-request work, and all counted so that work a request hands to a
        child is not lost."""
        children = _children()
        master = self.process.pid
        serving = self.worker_pids()
        supervisor = [] if master in serving else [master]
        charge: list[int] = []
        other: list[int] = []
        for parent in [*supervisor, *serving]:
            for child in children.get(parent, []):
                if child in serving:
                    continue
                (charge if parent in serving and _spawned(child) else other).append(child)
        return {
            "serving": cpu_of(serving),
            "supervisor": cpu_of(supervisor),
            "charge": cpu_of(charge),
            "other": cpu_of(other),
        }

    def connections_per_worker(self) -> list[int]:
        """How many established client connections each serving process holds now, fewest
        first (from ``/proc``: the TCP sockets on the server's port among each process's open
        files). With a shared listening socket the kernel hands connections to whichever
        worker accepts first, so N clients are not split N / 2 each, and the split changes
        throughput: measuring many datasets at 8 clients on one server, 2 / 6 gave
        ≈ 1,400 req/s and 3 / 5 ≈ 1,650."""
        inodes = _established_inodes(self.port)
        counts = []
        for pid in self.worker_pids():
            held = 0
            with contextlib.suppress(OSError):
                for fd in Path(f"/proc/{pid}/fd").iterdir():
                    with contextlib.suppress(OSError):
                        link = os.readlink(fd)
                        if link.startswith("socket:[") and link[8:-1] in inodes:
                            held += 1
            counts.append(held)
        return sorted(counts)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@contextlib.contextmanager
def running_server(
    database_url: str,
    log_path: Path,
    workers: int,
    *,
    nodelay: bool = True,
    pool_connections: int = 24,
    app: str = "app.main:create_app",
    env: dict[str, str] | None = None,
    root: Path = ROOT,
) -> Iterator[Server]:
    """``uvicorn app.main:create_app --factory --workers N``, access log off (as in
    production behind a proxy), until the block ends. ``nodelay``: through :mod:`app.serve`
    (TCP_NODELAY on the listener, as ``make run`` and the Dockerfile start it); otherwise the
    plain uvicorn command line, whose multi-worker mode leaves Nagle on.
    ``pool_connections``: PostgreSQL connections of all workers together. ``app`` and ``env``:
    another application factory to serve the same way, and variables for it. ``root``: the
    checkout to serve (another one's ``app`` is compared side by side with this one's)."""
    port = free_port()
    env = {
        **(env or {}),
        **os.environ,
        "DATABASE_URL": database_url,
        "ODOMETER_ADMIN_KEY": ADMIN_KEY,
        "PYTHONPATH": checkout_path(root),
        "ODOMETER_DB_POOL_SIZE": str(max(1, pool_connections // workers)),
        "ODOMETER_DB_MAX_OVERFLOW": "0",
    }
    launcher = ["app.serve", "--app"] if nodelay else ["uvicorn", "--factory"]
    cmd = [
        sys.executable, "-m", *launcher, app,
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server(process, port, log_path, workers)
    try:
        _wait_ready(server, workers)
        yield server
    finally:
        server.stop()


def _wait_ready(server: Server, workers: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited:\n{server.log_path.read_text(errors='replace')}")
        with contextlib.suppress(OSError):
            status, _ = call(server.port, "GET", "/readyz")
            ready = workers == 1 or len(server.worker_pids()) >= workers
            if status == 200 and ready:
                time.sleep(1.0)  # let every worker finish its start-up
                _wait_charge_workers_idle(server, deadline)
                return
        time.sleep(0.2)
    raise RuntimeError("server did not become ready")


def _wait_charge_workers_idle(server: Server, deadline: float) -> None:
    """Until the charge workers have finished their warm-up (importing the accounting core
    takes ≈ 0.5 s of CPU each, more on a loaded machine): no charge-worker CPU for half a
    second. Otherwise the first cell measured would count that start-up as request work."""
    last = server.cpu_by_role()["charge"]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = server.cpu_by_role()["charge"]
        if now == last:
            return
        last = now


def call(
    port: int, method: str, path: str, body: Any = None, timeout: float = 600
) -> tuple[int, bytes]:
    """One request with the admin key; status and raw body (chunked bodies are joined)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def create_organisation(port: int, name: str) -> str:
    status, raw = call(port, "POST", "/v1/organisations", {"name": name})
    if status != 201:
        raise RuntimeError(f"create organisation: {status} {raw[:300]!r}")
    org_id: str = json.loads(raw)["id"]
    return org_id


def create_dataset(
    port: int,
    name: str,
    mode: str,
    organisation: str | None = None,
    *,
    partition: dict[str, Any] | None = None,
) -> str:
    """A dataset whose budget no benchmark run can exhaust (so nothing is rejected);
    ``partition``: partitioned so."""
    body: dict[str, Any] = {
        "name": name,
        "budget": {"epsilon": "1000000", "delta": "0.001"},
        "accounting": {"mode": mode},
    }
    if organisation is not None:
        body["organisation_id"] = organisation
    if partition is not None:
        body["partition"] = partition
    status, raw = call(port, "POST", "/v1/datasets", body)
    if status != 201:
        raise RuntimeError(f"create dataset: {status} {raw[:300]!r}")
    ds_id: str = json.loads(raw)["id"]
    return ds_id


def create_capped_organisation(port: int, name: str, cap_mode: str) -> str:
    """An organisation with a cap in ``cap_mode`` that no benchmark run can exhaust (a ``basic``
    cap is sent without ``accounting``, as builds before caps had modes take it); its id."""
    status, raw = call(port, "POST", "/v1/organisations", {"name": name})
    if status != 201:
        raise RuntimeError(f"create organisation: {status} {raw[:300]!r}")
    org: str = json.loads(raw)["id"]
    cap: dict[str, Any] = {"epsilon": "1000000", "delta": "0.001"}
    if cap_mode != "basic":
        cap["accounting"] = {"mode": cap_mode}
    status, raw = call(port, "PATCH", f"/v1/organisations/{org}/cap", cap)
    if status != 200:
        raise RuntimeError(f"set cap: {status} {raw[:300]!r}")
    return org


# ---------------------------------------------------------------------------- loads
def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in the load-generator process (``benchmarks.service_load``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.service_load", json.dumps(spec)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=spec["warmup"] + spec["duration"] + 300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def py_spy() -> str | None:
    """The ``py-spy`` executable when it is installed (optional: profiles are extra)."""
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """Sample ``pid`` with py-spy while it holds the GIL (``--gil``: where its CPU goes, not
    where it waits) for ``seconds``; None when py-spy is missing or may not attach."""
    exe = py_spy()
    if exe is None:
        return None
    cmd = [exe, "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", "250",
           "--gil", "--nonblocking", "-f", "raw", "-o", str(out)]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)
