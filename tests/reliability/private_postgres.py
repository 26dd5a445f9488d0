"""A private, throw-away PostgreSQL cluster that a test may SIGKILL (the shared server of
the suite must never be killed: other tests use it).

``initdb`` into a fresh directory owned by the ``postgres`` OS user, then ``postgres`` on a
free port listening on 127.0.0.1 only, with its socket beside the data directory (in it,
``pg_rewind`` would try to copy the socket) and ``fsync`` on (the default; a crash test with
fsync off would prove nothing). The server is started as the ``postgres`` user when the tests
run as root (PostgreSQL refuses to run as root), and so are the cluster's tools
(:meth:`PrivateCluster.tool`: ``pg_ctl``, ``pg_basebackup``, ``pg_rewind``). ``settings`` are
more ``-c`` options of the server (a replicated pair's:
``tests/reliability/replicated_postgres.py``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.concurrency.server import free_port


def binaries() -> Path | None:
    """The newest installed PostgreSQL ``bin`` directory with initdb and postgres."""
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        path = Path(directory)
        if (path / "initdb").exists() and (path / "postgres").exists():
            return path
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("postgres") else None


def unavailable_reason() -> str | None:
    """Why a private cluster cannot be started here (None when it can)."""
    if binaries() is None:
        return "PostgreSQL server binaries (initdb, postgres) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' OS user to run the server as"
    return None


@dataclass
class PrivateCluster:
    root: Path
    port: int
    bin: Path
    process: subprocess.Popen[bytes] | None = None
    #: more ``-c name=value`` options of the server (fixed for the cluster's life: a setting
    #: given on the command line cannot be changed by ``ALTER SYSTEM``)
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        """The libpq connection string of ``database`` on this cluster."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    @property
    def _owner(self) -> str | None:
        """The OS user to run PostgreSQL as (it refuses to run as root)."""
        return "postgres" if os.geteuid() == 0 else None

    def own_root(self) -> None:
        """Hand the cluster's directory to the OS user that runs PostgreSQL."""
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    def tool(self, name: str, *args: str, timeout: float = 120) -> str:
        """Run the cluster's ``name`` (``pg_ctl``, ``pg_basebackup``, ``pg_rewind`` ...) as the
        OS user that runs the server; its output, or ``RuntimeError`` with it when it fails."""
        done = subprocess.run(
            [str(self.bin / name), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            user=self._owner,
            group=self._owner,
            extra_groups=[] if self._owner else None,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done.stdout + done.stderr

    def query(
        self, sql: str, params: tuple[Any, ...] = (), database: str = "postgres"
    ) -> list[Any]:
        """Rows of one statement, run outside a transaction (``ALTER SYSTEM`` may be)."""
        with psycopg.connect(
            self.conninfo(database) + " connect_timeout=5", autocommit=True
        ) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    def init(self) -> None:
        """``initdb`` without its final fsync of the new directory (``--no-sync``, as
        PostgreSQL's own test suites and the Patroni cluster's bootstrap run it): what the tests
        kill are processes, never the machine, so the page cache keeps what initdb wrote, and
        the commits they count are made with ``fsync=on``. The sync was 5 s of an initdb's 7.5
        on a loaded 2-core machine."""
        self.own_root()
        self.tool(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-instructions",
            "--no-sync",
            "-E",
            "UTF8",
        )

    def start(self) -> None:
        """Start the postmaster (after a crash this is PostgreSQL's crash recovery) and wait
        until it accepts connections. Right after a kill -9 the old backends may not all have
        exited yet, and PostgreSQL refuses to start while one still holds the old shared memory
        ("pre-existing shared memory block ... is still in use", seen once in a full-suite
        run): that start is retried for a few seconds."""
        deadline = time.monotonic() + 15
        while True:
            try:
                self._start_once()
                return
            except RuntimeError as exc:
                if "pre-existing shared memory block" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _start_once(self) -> None:
        log = open(self.root / "postgres.log", "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=on",
                "-c",
                "max_connections=100",
                *(option for item in self.settings.items() for option in ("-c", "=".join(item))),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=self._owner,
            group=self._owner,
            extra_groups=[] if self._owner else None,
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited:\n{self.tail()}")
            try:
                with psycopg.connect(
                    f"host=127.0.0.1 port={self.port} user=postgres "
                    "dbname=postgres connect_timeout=2"
                ):
                    return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not start:\n{self.tail()}")

    def kill_9(self) -> None:
        """SIGKILL the postmaster and every process it started: a power cut, as far as
        PostgreSQL knows. Its children are found before it dies (they are then re-parented):
        each backend and auxiliary process calls ``setsid()``, so none is in the postmaster's
        process group, and a backend left alive goes on answering its connection until it
        notices the postmaster's death, which it may do only after serving the next query
        (an export from a replica "killed" before its fourth batch read all nine)."""
        assert self.process is not None
        children = _children(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        self.process.wait(10)
        # a signal is delivered when its target next runs: on a loaded machine a child can
        # still be running for a moment after the kill; wait until none is
        deadline = time.monotonic() + 10
        while any(alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.005)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill_9()

    def tail(self) -> str:
        path = self.root / "postgres.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def create_database(self, name: str) -> str:
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid …: comm may hold spaces and parentheses, so split after it
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_private_cluster() -> PrivateCluster:
    """A new cluster in a fresh directory (world-traversable parent, owned by postgres)."""
    bin_dir = binaries()
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="odometer-pg-"))
    cluster = PrivateCluster(root, free_port(), bin_dir)
    try:
        cluster.init()
        cluster.start()
    except BaseException:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


def remove_cluster(cluster: PrivateCluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.root, ignore_errors=True)
