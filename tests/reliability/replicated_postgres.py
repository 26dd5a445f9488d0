"""A throw-away PostgreSQL primary with a synchronous streaming standby, which a test may fail
over (SIGKILL the primary, promote the standby) and fail back (``pg_rewind`` the old primary
into the new standby), as often as it likes.

Two :class:`~tests.reliability.private_postgres.PrivateCluster` nodes on free ports, each in a
fresh directory, run as the ``postgres`` OS user when the tests run as root. The primary is
made by ``initdb``, the standby by ``pg_basebackup -R`` from it. :data:`NODE_SETTINGS`
(``wal_log_hints`` for ``pg_rewind``) are written into the primary's ``postgresql.conf``, which
the base backup and every rewind copy to the other node: not given on the command line, which
the crash recovery ``pg_rewind`` runs in single-user mode would not see (it would then record
``wal_log_hints`` off, and refuse to rewind). Each node's ``cluster_name`` (on its command
line) is the name its walreceiver gives the primary, which ``synchronous_standby_names``
lists.

Replication is synchronous (:meth:`ReplicatedPair.make_synchronous`): the primary lists the
standby in ``synchronous_standby_names`` and ``synchronous_commit`` is ``on``, so a commit
returns only once the standby has flushed its WAL to disk: an answer the service gave after
its commit survives losing the primary (docs/operations.md, *Surviving the loss of the
primary*, says why ``on`` rather than ``remote_apply`` or ``remote_write``). Only ever chosen
by hand, to show the failover test can fail: ``replication="async"`` leaves the standby
asynchronous; ``"off"`` also turns ``synchronous_commit`` off (a commit returns before its WAL
is on the primary's disk).

A failover (:meth:`ReplicatedPair.fail_over`) is what an HA manager (Patroni, a managed
service) does when the primary's machine dies: SIGKILL the primary's whole process group (the
fence), ``pg_ctl promote`` the standby, then clear ``synchronous_standby_names`` on it (there
is no standby to wait for: left set, every commit would wait for one). :meth:`reattach`
rewinds the old primary onto the new one's timeline with ``pg_rewind -R`` (which first runs its
crash recovery), starts it as the new standby and, once it streams, makes it synchronous again.
The service reaches whichever node is the primary through :meth:`ReplicatedPair.url`, a
multi-host URL with ``target_session_attrs=read-write``.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psycopg

from tests.concurrency.server import free_port
from tests.reliability.private_postgres import PrivateCluster, binaries
from tests.reliability.private_postgres import unavailable_reason as cluster_unavailable

Replication = Literal["sync", "async", "off"]
REPLICATIONS: tuple[Replication, ...] = ("sync", "async", "off")

#: ``postgresql.conf`` of both nodes. ``wal_log_hints``: ``pg_rewind`` needs it (or data
#: checksums) to rewind a node whose hint-bit-only page changes are otherwise not in the WAL.
#: ``wal_keep_size``: the WAL back to where the timelines forked stays on the new primary long
#: enough for ``pg_rewind`` and for the rewound node to catch up by streaming.
NODE_SETTINGS = {
    "wal_level": "replica",
    "max_wal_senders": "5",
    "hot_standby": "on",
    "wal_log_hints": "on",
    "wal_keep_size": "256MB",
    # how long a standby that lost its primary waits before it looks for WAL again: with the
    # default 5 s, some promotions took 5 s instead of 0.1 s (none in 15 tries with 200 ms)
    "wal_retrieve_retry_interval": "200ms",
}
TOOLS = ("pg_ctl", "pg_basebackup", "pg_rewind")


def unavailable_reason() -> str | None:
    """Why a replicated pair cannot be started here (None when it can)."""
    reason = cluster_unavailable()
    if reason is not None:
        return reason
    bin_dir = binaries()
    assert bin_dir is not None
    missing = [tool for tool in TOOLS if not (bin_dir / tool).exists()]
    return f"PostgreSQL tools missing: {', '.join(missing)}" if missing else None


@dataclass
class Failover:
    """One failover: its instants (``time.monotonic()``) and its nodes."""

    killed: float
    promoted: float
    #: the node promoted and the one killed
    new_primary: str
    old_primary: str
    rewound: float = 0.0
    #: when the old primary was streaming again as a synchronous standby
    synchronous_again: float = 0.0


@dataclass
class ReplicatedPair:
    """Two nodes, one the primary and the other its standby (which is which changes with every
    failover; the ports do not)."""

    nodes: list[PrivateCluster]
    replication: Replication = "sync"
    primary_index: int = 0
    failovers: list[Failover] = field(default_factory=list)

    @property
    def primary(self) -> PrivateCluster:
        return self.nodes[self.primary_index]

    @property
    def standby(self) -> PrivateCluster:
        return self.nodes[1 - self.primary_index]

    def url(self, database: str) -> str:
        """The service's URL: both nodes, the one that accepts writes chosen at each connect."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(node.port) for node in self.nodes)
        return (
            f"postgresql+psycopg://postgres@/{database}?host={hosts}&port={ports}"
            "&target_session_attrs=read-write&connect_timeout=5"
        )

    def create_database(self, name: str) -> None:
        self.primary.query(f'CREATE DATABASE "{name}"')

    # ------------------------------------------------------------------ replication
    def wait_streaming(self, timeout: float = 60) -> None:
        """Until the primary sees the standby streaming."""
        name = self.standby.settings["cluster_name"]
        deadline = time.monotonic() + timeout
        while True:
            rows = self.primary.query(
                "SELECT state FROM pg_stat_replication WHERE application_name = %s", (name,)
            )
            if rows and rows[0][0] == "streaming":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{name} is not streaming from the primary: {rows}\n{self.standby.tail()}"
                )
            time.sleep(0.05)

    def make_synchronous(self, timeout: float = 60) -> None:
        """List the standby in the primary's ``synchronous_standby_names`` and wait until the
        primary reports it ``sync``: from then on a commit returns once the standby has it on
        disk. (``async``, ``off``: nothing to do, the standby stays asynchronous.)"""
        if self.replication != "sync":
            return
        name = self.standby.settings["cluster_name"]
        self.primary.query(f"ALTER SYSTEM SET synchronous_standby_names = '\"{name}\"'")
        self.primary.query("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout
        while True:
            rows = self.primary.query(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s", (name,)
            )
            if rows and rows[0][0] == "sync":
                return
            # a standby that has not flushed anything since it connected stays "potential":
            # write a commit record (committed locally, not waiting for the standby)
            with psycopg.connect(
                self.primary.conninfo() + " options='-c synchronous_commit=local'",
                autocommit=True,
            ) as conn:
                conn.execute("SELECT txid_current()")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not become synchronous: {rows}")
            time.sleep(0.05)

    # ------------------------------------------------------------------ failover
    def fail_over(self) -> Failover:
        """SIGKILL the primary (postmaster and every backend: the machine is gone), promote the
        standby and let it commit alone (``synchronous_standby_names`` cleared): the standby is
        the primary from then on."""
        old, new = self.primary, self.standby
        with connect(new, "postgres") as watch:  # a session survives the promotion
            killed = time.monotonic()
            old.kill_9()
            new.tool("pg_ctl", "promote", "-D", str(new.data), "-W")
            # the instant it accepts writes, to a few ms (pg_ctl -w looks every 100 ms)
            deadline = killed + 60
            while watch.execute("SELECT pg_is_in_recovery()").fetchone() != (False,):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the standby was not promoted:\n{new.tail()}")
                time.sleep(0.005)
            promoted = time.monotonic()
        # it may have inherited the setting from its base backup or its rewind
        new.query("ALTER SYSTEM RESET synchronous_standby_names")
        new.query("SELECT pg_reload_conf()")
        self.primary_index = 1 - self.primary_index
        failover = Failover(
            killed, promoted, new.settings["cluster_name"], old.settings["cluster_name"]
        )
        self.failovers.append(failover)
        return failover

    def reattach(self) -> None:
        """Bring the old primary back as the standby of the new one: ``pg_rewind`` (after the
        crash recovery it runs itself) discards what it wrote after the timelines forked -
        nothing it acknowledged, since every acknowledged commit was on the standby first -
        and ``-R`` points it at the new primary; then it streams and is made synchronous."""
        old = self.standby
        # a node promoted moments ago may not have its new timeline in its control file until
        # its first checkpoint; pg_rewind reads it there, and would find "no rewind required"
        # and leave the old primary's writes after the fork in place (pg_rewind's manual)
        self.primary.query("CHECKPOINT")
        old.tool(
            "pg_rewind",
            "--target-pgdata",
            str(old.data),
            "--source-server",
            self.primary.conninfo(),
            "--write-recovery-conf",
        )
        rewound = time.monotonic()
        old.start()
        self.wait_streaming()
        self.make_synchronous()
        if self.failovers:
            self.failovers[-1].rewound = rewound
            self.failovers[-1].synchronous_again = time.monotonic()


def _node(bin_dir: Path, name: str, replication: Replication) -> PrivateCluster:
    root = Path(tempfile.mkdtemp(prefix="odometer-pg-"))
    settings = {"cluster_name": name}
    if replication == "off":
        settings["synchronous_commit"] = "off"
    return PrivateCluster(root, free_port(), bin_dir, settings=settings)


def start_replicated_pair(replication: Replication = "sync") -> ReplicatedPair:
    """A primary (``initdb``) and its standby (``pg_basebackup -R``), streaming, synchronous
    unless ``replication`` says otherwise."""
    bin_dir = binaries()
    assert bin_dir is not None
    primary = _node(bin_dir, "node0", replication)
    standby = _node(bin_dir, "node1", replication)
    pair = ReplicatedPair([primary, standby], replication)
    try:
        primary.init()
        with (primary.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("".join(f"{name} = '{value}'\n" for name, value in NODE_SETTINGS.items()))
        primary.start()
        standby.own_root()
        standby.tool(
            "pg_basebackup",
            "--pgdata",
            str(standby.data),
            "--dbname",
            primary.conninfo(),
            "--write-recovery-conf",
            "--wal-method=stream",
            "--checkpoint=fast",
            "--no-sync",  # as initdb's (PrivateCluster.init): processes are killed, not the machine
        )
        standby.start()
        pair.wait_streaming()
        pair.make_synchronous()
    except BaseException:
        remove_pair(pair)
        raise
    return pair


def remove_pair(pair: ReplicatedPair) -> None:
    for node in pair.nodes:
        with contextlib.suppress(Exception):
            node.stop()
        shutil.rmtree(node.root, ignore_errors=True)


def connect(node: PrivateCluster, database: str) -> psycopg.Connection[tuple[object, ...]]:
    """A direct connection to one node (the tests' own reads of what it holds)."""
    return psycopg.connect(node.conninfo(database) + " connect_timeout=5", autocommit=True)
