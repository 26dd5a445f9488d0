"""A throw-away Patroni cluster for failover tests: one etcd, two PostgreSQL nodes each run by
its own Patroni, and HAProxy routing to whichever node Patroni's REST API calls the primary.

Everything comes from Debian's packages (``.ci/run`` installs ``patroni`` and ``etcd-server``;
HAProxy is already there for the replicas tests) and runs on free ports of 127.0.0.1 (below
the ephemeral range: :func:`port`), in one temporary directory, removed at the end unless
``ODOMETER_KEEP_PATRONI=1`` (every process's log is there):

- **etcd** 3.4, one member, with ``--enable-v2``: Debian's Patroni 3.0.2 reaches it through
  the v2 API (its ``etcd:`` section; etcd 3.4 as Debian builds it has no v3 JSON gateway
  for ``etcd3:``).
- **Patroni**, one per node, as the ``postgres`` OS user when the tests run as root (Patroni,
  like PostgreSQL, refuses to run as root), with no ``PGPASSWORD`` in its environment (libpq
  would send it on the rewind's and the replicas' connections). Its dynamic configuration
  (:data:`DCS`): ``ttl`` 6 s, ``loop_wait`` 1 s, ``retry_timeout`` 2 s, ``synchronous_mode``
  on (Patroni names the standby in ``synchronous_standby_names`` and promotes only a
  synchronous standby), ``primary_start_timeout`` 0 (a PostgreSQL crash on the leader fails
  over at once instead of restarting in place), ``use_pg_rewind`` (the old leader comes back
  as a standby). The node's Unix socket is beside its data directory, not in it (``pg_rewind``
  would try to copy it); ``fsync`` is off (:data:`DCS` says why).
- **HAProxy** in TCP mode with two listeners to the same nodes. Both check Patroni's
  ``GET /primary`` (200 only on the leader that holds the lock) every 500 ms, a node down
  after 2 failed checks and up after 1; ``primary`` also has ``on-marked-down
  shutdown-sessions`` (the sessions through a node marked down are cut at once: the
  deployment ``docs/operations.md`` recommends), ``uncut`` has not (a configuration shown to
  lose writes). HAProxy counts every server UP before its first check: :meth:`wait_routed`
  waits until its statistics show exactly one node UP, checked.

The test decides nothing about roles: it kills, stops and restarts processes, and reads who
leads from Patroni's REST API (``GET /primary``, ``GET /sync``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.concurrency.proxy import haproxy, stop_process_group
from tests.reliability.private_postgres import binaries

#: Set by ``.ci/run``, which installs Patroni and etcd: there a missing binary fails the test
#: instead of skipping it.
REQUIRED = "ODOMETER_REQUIRE_PATRONI"

#: Patroni's dynamic configuration (written to etcd when the cluster is bootstrapped).
#: ``ttl`` ≥ ``loop_wait`` + 2 × ``retry_timeout``, as Patroni requires.
DCS: dict[str, Any] = {
    "ttl": 6,
    "loop_wait": 1,
    "retry_timeout": 2,
    "synchronous_mode": True,
    "primary_start_timeout": 0,
    "maximum_lag_on_failover": 1048576,
    "postgresql": {
        "use_pg_rewind": True,
        "use_slots": True,
        "parameters": {
            "wal_level": "replica",
            "hot_standby": "on",
            "wal_log_hints": "on",
            "max_wal_senders": 5,
            "max_replication_slots": 5,
            # pg_rewind (PostgreSQL 15) copies the new leader's whole pg_wal: keep it small
            # (1 MB segments, from initdb; a checkpoint every 30 s or 64 MB at most), yet
            # longer than from the last checkpoint the timelines share to the rewind
            "wal_keep_size": "64MB",
            "min_wal_size": "8MB",
            "max_wal_size": "64MB",
            "checkpoint_timeout": "30s",
            "max_connections": 100,
            # every scenario kills or stops processes, never the machine: what PostgreSQL
            # wrote is in the kernel's page cache whether or not it was flushed, and a flush
            # only matters to a power cut, which no test here can make. Off, the nodes'
            # crash recoveries and restarts took about half as long on a loaded machine.
            "fsync": "off",
            # a standby that lost its primary looks for WAL again after 200 ms, not 5 s
            "wal_retrieve_retry_interval": "200ms",
        },
    },
}

#: HAProxy's health check of a node (Patroni's REST API), and the sessions cut on ``primary``
CHECK = "inter 500ms fall 2 rise 1"


#: where :func:`port` looks: below Linux's default range of ephemeral ports (32768-60999),
#: from which the system gives every outgoing connection and every ``bind(0)`` of the other
#: tests their port. The cluster's ports are chosen when it is made and bound up to a minute
#: later (a node's PostgreSQL after its base backup): one taken from the ephemeral range was
#: taken by someone else meanwhile.
PORTS = range(20000, 32000)


_GIVEN: set[int] = set()


def port() -> int:
    """A port of :data:`PORTS` that nothing on 127.0.0.1 has bound (nor been given)."""
    for candidate in random.sample(PORTS, 200):
        if candidate in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        _GIVEN.add(candidate)
        return candidate
    raise RuntimeError(f"no free port in {PORTS}")


def etcd() -> str | None:
    return shutil.which("etcd")


def patroni() -> str | None:
    return shutil.which("patroni")


def unavailable_reason() -> str | None:
    """Why the cluster cannot be started here (None when it can)."""
    missing = [
        name
        for name, found in (
            ("patroni", patroni()),
            ("etcd", etcd()),
            ("haproxy", haproxy()),
            ("PostgreSQL server binaries", binaries()),
        )
        if found is None
    ]
    if not missing and os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing.append("a 'postgres' OS user to run Patroni as")
    if not missing:
        return None
    return (
        f"not installed: {', '.join(missing)} "
        "(Debian: apt-get install patroni etcd-server haproxy; .ci/run installs them)"
    )


def _owner() -> str | None:
    return "postgres" if os.geteuid() == 0 else None


def _chown(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _environment() -> dict[str, str]:
    """Patroni's environment: the machine's, without libpq's variables (a ``PGPASSWORD`` breaks
    the rewind and the replicas' connections) and without the test's Python path."""
    keep = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8"}
    return {
        **{k: v for k, v in os.environ.items() if k in {"TZ", "LC_ALL"}},
        **keep,
        "HOME": str(Path(pwd.getpwnam("postgres").pw_dir)) if _owner() else os.environ["HOME"],
    }


@dataclass
class Node:
    """One Patroni and the PostgreSQL it runs."""

    name: str
    root: Path
    pg_port: int
    rest_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config_path(self) -> Path:
        return self.root / "patroni.yml"

    def conninfo(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={database}"

    def rest(self, path: str, timeout: float = 1.0) -> tuple[int, dict[str, Any]]:
        """Patroni's answer to ``GET path`` (status, JSON body); (0, {}) when it does not
        answer (stopped, killed or too slow)."""
        url = f"http://127.0.0.1:{self.rest_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            with contextlib.suppress(ValueError):
                return error.code, json.loads(error.read() or b"{}")
            return error.code, {}
        except (OSError, ValueError):
            return 0, {}

    # ------------------------------------------------------------------ processes
    def start_patroni(self) -> None:
        log = (self.root / "patroni.log").open("ab")
        binary = patroni()
        assert binary is not None
        self.process = subprocess.Popen(
            [binary, str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            env=_environment(),
            start_new_session=True,
            user=_owner(),
            group=_owner(),
            extra_groups=[] if _owner() else None,
        )
        log.close()

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid (from ``postmaster.pid``), or None."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def _signal_postgres(self, sig: signal.Signals) -> None:
        """``sig`` to the postmaster and every process of its process group: the backends,
        the walsenders, the background processes. (Patroni starts the postmaster through a
        short-lived process that calls ``setsid``: the group is that process's, not the
        postmaster's pid.)"""
        pid = self.postmaster_pid()
        assert pid is not None, f"{self.name}: PostgreSQL is not running"
        group = os.getpgid(pid)
        assert group != os.getpgid(0), "PostgreSQL shares the test's process group"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)

    def _signal_patroni(self, sig: signal.Signals) -> None:
        assert self.process is not None and self.process.poll() is None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def kill_postgres(self) -> None:
        """SIGKILL of PostgreSQL alone (Patroni goes on)."""
        self._signal_postgres(signal.SIGKILL)

    def kill_patroni(self) -> None:
        """SIGKILL of Patroni alone (its PostgreSQL goes on, as the primary it was)."""
        self._signal_patroni(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(10)

    def kill_all(self) -> None:
        """SIGKILL of Patroni and PostgreSQL: the node is gone."""
        pid = self.postmaster_pid()
        self._signal_patroni(signal.SIGKILL)
        if pid is not None:
            self._signal_postgres(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(10)
        _wait_gone(pid)

    def stop_all(self) -> None:
        """SIGSTOP of Patroni and PostgreSQL: the node stops answering, keeping every
        connection open."""
        self._signal_patroni(signal.SIGSTOP)
        self._signal_postgres(signal.SIGSTOP)

    def continue_all(self) -> None:
        self._signal_postgres(signal.SIGCONT)
        self._signal_patroni(signal.SIGCONT)

    def shutdown(self) -> None:
        """The end of the test: Patroni and PostgreSQL SIGKILLed (the cluster is thrown
        away; a clean stop took seconds)."""
        pid = self.postmaster_pid()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, AssertionError):
                self._signal_postgres(signal.SIGKILL)
            _wait_gone(pid)

    def tail(self, chars: int = 3000) -> str:
        path = self.root / "patroni.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: a killed postmaster is nobody's child once
    Patroni's starter has exited, and waits for the system's init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pid: int | None, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while pid is not None and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _patroni_config(node: Node, etcd_port: int, bin_dir: Path) -> dict[str, Any]:
    return {
        "scope": "odometer",
        "name": node.name,
        "restapi": {
            "listen": f"127.0.0.1:{node.rest_port}",
            "connect_address": f"127.0.0.1:{node.rest_port}",
        },
        "etcd": {"host": f"127.0.0.1:{etcd_port}"},
        "bootstrap": {
            "dcs": DCS,
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, {"wal-segsize": "1"}, "no-sync"],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.data),
            "bin_dir": str(bin_dir),
            "pgpass": str(node.root / "pgpass"),
            # the base backup starts at once (a spread checkpoint took 26 s under load)
            "basebackup": [{"checkpoint": "fast"}],
            "authentication": {
                "superuser": {"username": "postgres"},
                "replication": {"username": "postgres"},
                "rewind": {"username": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(node.root)},
            "pg_hba": [
                "local all all trust",
                "host all all 127.0.0.1/32 trust",
                "host replication all 127.0.0.1/32 trust",
            ],
        },
    }


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    stats_socket: Path
    log_path: Path

    def stats(self, listener: str) -> dict[str, tuple[str, str]]:
        """Each node's (status, last check) as the listener's statistics show them."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(str(self.stats_socket))
            s.sendall(b"show stat\n")
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
        lines = raw.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]
        return {
            row["svname"]: (row["status"], row["check_status"])
            for row in rows
            if row.get("pxname") == listener and row["svname"] not in {"FRONTEND", "BACKEND"}
        }

    def stop(self) -> None:
        stop_process_group(self.process)


def haproxy_config(ports: dict[str, int], nodes: list[Node], stats_socket: Path) -> str:
    """Two TCP listeners to the nodes, routed by Patroni's ``/primary``: ``primary`` cuts the
    sessions of a node marked down, ``uncut`` does not."""

    def listener(name: str, cut: bool) -> str:
        servers = "\n".join(
            f"    server {n.name} 127.0.0.1:{n.pg_port} check port {n.rest_port}" for n in nodes
        )
        marked_down = " on-marked-down shutdown-sessions" if cut else ""
        return (
            f"listen {name}\n"
            f"    bind 127.0.0.1:{ports[name]}\n"
            "    option httpchk GET /primary\n"
            "    http-check expect status 200\n"
            f"    default-server {CHECK}{marked_down}\n"
            f"{servers}\n"
        )

    return (
        "global\n"
        "    maxconn 2000\n"
        f"    stats socket {stats_socket} mode 600 level admin\n"
        "\n"
        "defaults\n"
        "    mode tcp\n"
        "    timeout connect 1s\n"
        "    timeout check 1s\n"
        "    timeout client 30m\n"
        "    timeout server 30m\n"
        "\n" + listener("primary", True) + "\n" + listener("uncut", False)
    )


@dataclass
class PatroniCluster:
    root: Path
    nodes: list[Node]
    etcd_port: int
    #: HAProxy's listeners: ``primary`` (sessions cut), ``uncut``
    proxy_ports: dict[str, int]
    etcd_process: subprocess.Popen[bytes] | None = None
    proxy: Proxy | None = None
    #: the instants of the set-up's phases (``time.monotonic()``), for the report
    phases: dict[str, float] = field(default_factory=dict)

    def url(self, database: str, listener: str = "primary") -> str:
        """The service's URL through one of HAProxy's listeners."""
        port = self.proxy_ports[listener]
        return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}?connect_timeout=2"

    def multi_host_url(self, database: str) -> str:
        """The libpq multi-host URL the docs warn against with Patroni: both nodes, the first
        that accepts writes at each connect."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(n.pg_port) for n in self.nodes)
        return (
            f"postgresql+psycopg://postgres@/{database}?host={hosts}&port={ports}"
            "&target_session_attrs=read-write&connect_timeout=2"
        )

    # ------------------------------------------------------------------ roles
    def leader(self) -> Node | None:
        """The node whose Patroni answers ``/primary`` with 200."""
        for node in self.nodes:
            if node.rest("/primary", timeout=0.5)[0] == 200:
                return node
        return None

    def wait_leader(
        self, timeout: float, not_: Node | None = None, restarted_after: float | None = None
    ) -> tuple[Node, float]:
        """Until a node leads (its Patroni answers ``/primary`` with 200) and its PostgreSQL
        accepts writes: any node but ``not_``, or ``not_`` too if its PostgreSQL was started
        after ``restarted_after`` (``time.time()``: Patroni restarted it in place). The node
        and the instant (``time.monotonic()``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node is not_ and restarted_after is None:
                    continue
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(f"{node.name}'s Patroni exited:\n{node.tail()}")
                if node.rest("/primary", timeout=0.5)[0] != 200:
                    continue
                with (
                    contextlib.suppress(psycopg.Error),
                    psycopg.connect(node.conninfo() + " connect_timeout=1") as conn,
                ):
                    row = conn.execute(
                        "SELECT pg_is_in_recovery(), "
                        "extract(epoch FROM pg_postmaster_start_time())::float8"
                    ).fetchone()
                    assert row is not None
                    if row[0] is False and (
                        node is not not_ or (restarted_after or 0) < float(row[1])
                    ):
                        return node, time.monotonic()
            time.sleep(0.02)
        raise RuntimeError(f"no leader in {timeout} s:\n{self.logs()}")

    def wait_synchronous(self, leader: Node, standby: Node, timeout: float) -> float:
        """Until ``leader`` streams to ``standby`` synchronously (its ``pg_stat_replication``
        says ``sync``) and Patroni has published ``standby`` as the synchronous standby (the
        ``/sync`` key in etcd, which Patroni writes up to two loops after it set
        ``synchronous_standby_names``: only then may it promote ``standby``); the instant."""
        deadline = time.monotonic() + timeout
        rows: list[Any] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                with psycopg.connect(leader.conninfo() + " connect_timeout=1") as conn:
                    rows = conn.execute(
                        "SELECT state, sync_state FROM pg_stat_replication "
                        "WHERE application_name = %s",
                        (standby.name,),
                    ).fetchall()
                if rows == [("streaming", "sync")] and standby.rest("/sync")[0] == 200:
                    return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError(
            f"{standby.name} is not a synchronous standby of {leader.name} after {timeout} s "
            f"({rows}):\n{self.logs()}"
        )

    def wait_routed(self, leader: Node, timeout: float = 20) -> None:
        """Until both of HAProxy's listeners send connections to ``leader`` alone (every
        node checked at least once, ``leader`` UP, the others DOWN)."""
        assert self.proxy is not None
        deadline = time.monotonic() + timeout
        seen: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            ready = True
            for listener in self.proxy.ports:
                seen = self.proxy.stats(listener)
                ups = [name for name, (status, _) in seen.items() if status == "UP"]
                checked = all(check and not check.startswith("INI") for _, check in seen.values())
                ready = ready and checked and ups == [leader.name]
            if ready:
                return
            time.sleep(0.05)
        raise RuntimeError(f"HAProxy does not route to {leader.name} alone: {seen}")

    def query(
        self, node: Node, sql: str, params: tuple[Any, ...] = (), database: str = "postgres"
    ) -> list[Any]:
        """Rows of one statement on ``node`` (outside a transaction)."""
        with psycopg.connect(node.conninfo(database) + " connect_timeout=5", autocommit=True) as c:
            cursor = c.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    def logs(self) -> str:
        return "\n".join(f"--- {n.name}\n{n.tail(2000)}" for n in self.nodes)


def _start_etcd(cluster: PatroniCluster) -> None:
    binary = etcd()
    assert binary is not None
    peer = port()
    client = f"http://127.0.0.1:{cluster.etcd_port}"
    log = (cluster.root / "etcd.log").open("ab")
    cluster.etcd_process = subprocess.Popen(
        [
            binary,
            "--name",
            "etcd0",
            "--data-dir",
            str(cluster.root / "etcd"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            f"etcd0=http://127.0.0.1:{peer}",
            "--enable-v2=true",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{client}/health", timeout=1) as answer,
        ):
            if json.loads(answer.read()).get("health") == "true":
                return
        time.sleep(0.05)
    raise RuntimeError(f"etcd did not start:\n{(cluster.root / 'etcd.log').read_text()[-2000:]}")


def _start_proxy(cluster: PatroniCluster) -> None:
    binary = haproxy()
    assert binary is not None
    stats_socket = cluster.root / "haproxy.sock"
    config = cluster.root / "haproxy.cfg"
    config.write_text(
        haproxy_config(cluster.proxy_ports, cluster.nodes, stats_socket), encoding="utf-8"
    )
    checked = subprocess.run(
        [binary, "-c", "-q", "-f", str(config)], capture_output=True, text=True, check=False
    )
    if checked.returncode != 0:
        raise RuntimeError(f"haproxy refuses its configuration:\n{checked.stderr}")
    log_path = cluster.root / "haproxy.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [binary, "-db", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster.proxy = Proxy(process, cluster.proxy_ports, stats_socket, log_path)
    deadline = time.monotonic() + 10
    while not stats_socket.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def new_cluster() -> PatroniCluster:
    """A cluster's directory, ports and configuration files; nothing started yet (its URLs
    are known from here on)."""
    bin_dir = binaries()
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="odometer-patroni-"))
    root.chmod(0o755)
    nodes = [Node(f"node{i}", root / f"node{i}", port(), port()) for i in range(2)]
    cluster = PatroniCluster(root, nodes, port(), {"primary": port(), "uncut": port()})
    for node in nodes:
        node.root.mkdir()
        _chown(node.root)
        node.config_path.write_text(
            json.dumps(_patroni_config(node, cluster.etcd_port, bin_dir), indent=1)
        )
    return cluster


def start_cluster(
    cluster: PatroniCluster, while_the_standby_starts: Callable[[Node], None] | None = None
) -> None:
    """etcd; node0 bootstrapped, the leader; HAProxy; node1 started (``pg_basebackup`` from
    node0) while ``while_the_standby_starts(node0)`` runs; then node1 a synchronous standby
    and HAProxy routing to node0. Each phase's end is in ``cluster.phases`` (seconds from the
    start)."""
    began = time.monotonic()

    def phase(name: str) -> None:
        cluster.phases[name] = time.monotonic() - began

    try:
        _start_etcd(cluster)
        phase("etcd")
        first, second = cluster.nodes
        first.start_patroni()
        cluster.wait_leader(60)
        phase("leader bootstrapped")
        _start_proxy(cluster)
        second.start_patroni()
        if while_the_standby_starts is not None:
            while_the_standby_starts(first)
            phase("database ready")
        cluster.wait_synchronous(first, second, 60)
        phase("standby synchronous")
        cluster.wait_routed(first)
        phase("proxy routing")
    except BaseException:
        remove_cluster(cluster)
        raise


def remove_cluster(cluster: PatroniCluster) -> None:
    if cluster.proxy is not None:
        cluster.proxy.stop()
    for node in cluster.nodes:
        node.shutdown()
    if cluster.etcd_process is not None and cluster.etcd_process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.etcd_process.pid, signal.SIGKILL)
        cluster.etcd_process.wait(10)
    if os.environ.get("ODOMETER_KEEP_PATRONI") != "1":
        # removed in the background: a few hundred MB of data and WAL took seconds to delete
        # on a loaded machine, and nothing waits for them
        subprocess.run(
            ["sh", "-c", 'rm -rf -- "$0" >/dev/null 2>&1 &', str(cluster.root)],
            check=True,
            timeout=10,
        )
