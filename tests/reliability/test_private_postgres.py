"""The private cluster's ``kill_9`` is a power cut: no process of the cluster survives it.

PostgreSQL's backends each call ``setsid()``, so killing the postmaster's process group left
them alive; a backend went on answering its connection until it noticed the postmaster's
death, and under load that came late enough for an export "killed" mid-stream on a replica to
read every batch from it (``tests/db/test_read_replica.py``, seen once in a whole-suite run).
Failed with the process-group kill (the backend of an open connection still running).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.reliability.private_postgres import (
    alive,
    remove_cluster,
    start_private_cluster,
    unavailable_reason,
)

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def test_kill_9_leaves_no_backend_running() -> None:
    cluster = start_private_cluster()
    try:
        with psycopg.connect(cluster.conninfo()) as conn:
            backend = conn.info.backend_pid
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert alive(backend)
            cluster.kill_9()
            assert not alive(backend)  # gone when kill_9 returns, whatever it noticed
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
    finally:
        remove_cluster(cluster)
