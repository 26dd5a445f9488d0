"""Reads served by a streaming replica (``ODOMETER_READ_DATABASE_URL``,
``app/services/reads.py``), against a real one: a primary and its asynchronous streaming
standby built from the installed PostgreSQL binaries (``tests/reliability/replicated_postgres.py``,
as the failover test builds them), the service on the primary with the standby as its read URL.
The standby is held behind the primary with ``pg_wal_replay_pause()``.

- Caught up, every read route is answered by the replica (``Odometer-Read-Source: replica``,
  its lag and the dataset's head in headers) and the primary runs no statement for them (the
  statements each engine ran are counted); the replica's engine is connected to a server in
  recovery (``pg_is_in_recovery()``).
- Paused: a read that names a seq the replica lacks waits the bounded time, then the primary
  answers it, with the write (read-your-writes); a read naming nothing gets the replica's stale
  answer, its lag above 0.
- Through the Python client (which sends what it has shown, ``Odometer-Min-Seq``): no reading a
  client has shown falls on its next read, while the replica is paused, resumed and paused again
  under writes. Shown failing without the min-seq rule (``Reads._caught_up`` answering ``True``
  at once): the writer's readings were ``[2, 1, 3, 1, 4, 4, …]`` (its registration showed seq 2,
  its next read of the dataset ``last_seq`` 1), and the read-your-writes test got the replica's
  answer where the primary's was due.

About 15 s, most of it building the pair (skipped without the PostgreSQL server binaries).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from app.db.replica import reader_engine
from app.main import create_app
from app.services import ledger as ledger_service
from app.services.reads import LAG_HEADER, SEQ_HEADER, SOURCE_HEADER, Reads
from app.settings import Settings
from odometer_client import OdometerClient
from odometer_core.ledger.formats import load_export_and_head
from odometer_core.ledger.replay import replay
from tests.reliability.replicated_postgres import (
    ReplicatedPair,
    remove_pair,
    start_replicated_pair,
    unavailable_reason,
)
from tests.support import ADMIN_KEY, AUTH, migrate

pytestmark = pytest.mark.postgres

DATABASE = "odometer_reads"
#: the bounded wait of these tests' app (the setting's default is 0.25 s)
WAIT = 0.4
PURE = {"mechanism": {"type": "pure_dp", "epsilon": "0.01"}}


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    made = start_replicated_pair("async")  # a paused standby must not hold the primary's commits
    try:
        made.create_database(DATABASE)
        migrate(made.primary.url(DATABASE))
        # the standby is asynchronous: until it has replayed the database's creation, a reader
        # connecting to it is refused (database does not exist), as the first test was in a
        # loaded suite run
        _caught_up(made)
        yield made
    finally:
        for node in made.nodes:  # throw-away nodes: no clean shutdown to wait for
            with contextlib.suppress(Exception):
                node.kill_9()
        remove_pair(made)


@pytest.fixture(scope="module")
def app_client(pair: ReplicatedPair) -> Iterator[TestClient]:
    settings = Settings(
        database_url=pair.primary.url(DATABASE),
        read_database_url=pair.standby.url(DATABASE),
        read_replica_wait_seconds=WAIT,
        admin_key=ADMIN_KEY,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _replay(pair: ReplicatedPair, *, paused: bool) -> None:
    name = "pg_wal_replay_pause" if paused else "pg_wal_replay_resume"
    pair.standby.query(f"SELECT {name}()")


def _caught_up(pair: ReplicatedPair, timeout: float = 20) -> None:
    """Until the standby has replayed everything the primary has written."""
    target = pair.primary.query("SELECT pg_current_wal_lsn()")[0][0]
    deadline = time.monotonic() + timeout
    while True:
        rows = pair.standby.query("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))
        if rows[0][0]:
            return
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.02)


def _register(client: TestClient, dataset_id: str) -> dict[str, Any]:
    r = client.post(f"/v1/datasets/{dataset_id}/invocations", json=PURE, headers=AUTH)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _dataset(client: TestClient, name: str) -> str:
    body = {"name": name, "budget": {"epsilon": "10", "delta": "0"}}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


class _Statements:
    """Statements each engine ran while the block was open."""

    def __init__(self, reads: Reads) -> None:
        assert reads.replica is not None
        self.engines = {"primary": reads.primary.engine, "replica": reader_engine(reads.replica)}
        self.counts = dict.fromkeys(self.engines, 0)
        self._listeners: list[tuple[str, Any]] = []

    def __enter__(self) -> _Statements:
        for name, engine in self.engines.items():
            event.listen(engine, "before_cursor_execute", self._counter(name))
        return self

    def _counter(self, name: str) -> Any:
        def count(*_: Any) -> None:
            self.counts[name] += 1

        self._listeners.append((name, count))
        return count

    def __exit__(self, *_: object) -> None:
        for name, count in self._listeners:
            event.remove(self.engines[name], "before_cursor_execute", count)


def test_caught_up_reads_are_the_replicas(pair: ReplicatedPair, app_client: TestClient) -> None:
    reads: Reads = app_client.app.state.reads  # type: ignore[attr-defined]
    assert reads.replica is not None
    with reader_engine(reads.replica).connect() as conn:
        assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar() is True
    with reads.primary.engine.connect() as conn:
        assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar() is False
    dataset_id = _dataset(app_client, "caught-up")
    invocation = _register(app_client, dataset_id)
    _caught_up(pair)
    base = f"/v1/datasets/{dataset_id}"
    paths = [
        base,
        "/v1/datasets",
        f"{base}/ledger",
        f"{base}/ledger?export=true&format=jsonl",
        f"{base}/ledger/proof?seq=1",
        f"{base}/ledger/consistency?from=1",
        f"{base}/report",
        f"{base}/report/spend.svg",
        f"{base}/invocations/{invocation['id']}",
    ]
    with _Statements(reads) as statements:
        for path in paths:
            r = app_client.get(path, headers=AUTH)
            assert r.status_code == 200, (path, r.text)
            assert r.headers[SOURCE_HEADER] == "replica", path
            assert Decimal(r.headers[LAG_HEADER]) >= 0, path
            if path != "/v1/datasets":
                assert r.headers[SEQ_HEADER] == f"{dataset_id}:2", path
    # the admin key is checked in memory: no read touched the primary
    assert statements.counts["primary"] == 0, statements.counts
    assert statements.counts["replica"] >= len(paths), statements.counts
    # preview stays on the primary (whose write path may answer it from its caches)
    with _Statements(reads) as statements:
        r = app_client.post(f"{base}/invocations/preview", json=PURE, headers=AUTH)
        assert r.status_code == 200, r.text
        assert SOURCE_HEADER not in r.headers
    assert statements.counts["replica"] == 0, statements.counts


def test_a_paused_replica_never_hides_a_clients_write(
    pair: ReplicatedPair, app_client: TestClient
) -> None:
    dataset_id = _dataset(app_client, "paused")
    _caught_up(pair)
    _replay(pair, paused=True)
    try:
        time.sleep(0.05)
        written = _register(app_client, dataset_id)
        assert written["ledger_seq"] == 2
        # a read naming nothing: the replica's, stale, and saying how stale
        time.sleep(0.1)
        r = app_client.get(f"/v1/datasets/{dataset_id}", headers=AUTH)
        assert r.headers[SOURCE_HEADER] == "replica"
        assert r.json()["ledger"]["last_seq"] == 1
        assert r.headers[SEQ_HEADER] == f"{dataset_id}:1"
        assert Decimal(r.headers[LAG_HEADER]) > 0
        # the writer's read names its write's seq: the bounded wait, then the primary
        shown = {**AUTH, "Odometer-Min-Seq": f"{dataset_id}:2"}
        began = time.monotonic()
        r = app_client.get(f"/v1/datasets/{dataset_id}", headers=shown)
        waited = time.monotonic() - began
        assert r.status_code == 200, r.text
        assert r.headers[SOURCE_HEADER] == "primary"
        assert LAG_HEADER not in r.headers
        assert r.json()["ledger"]["last_seq"] == 2
        assert r.headers[SEQ_HEADER] == f"{dataset_id}:2"
        assert WAIT <= waited < WAIT + 2
        # an invocation the replica does not hold yet: the primary answers, not a 404
        r = app_client.get(f"/v1/datasets/{dataset_id}/invocations/{written['id']}", headers=AUTH)
        assert r.status_code == 200 and r.headers[SOURCE_HEADER] == "primary"
        # a list is held back by every dataset listed
        r = app_client.get("/v1/datasets", headers=shown)
        assert r.status_code == 200 and r.headers[SOURCE_HEADER] == "primary"
        listed = {d["id"]: d["ledger"]["last_seq"] for d in r.json()["datasets"]}
        assert listed[dataset_id] == 2
        # another dataset's seq does not hold back a read of this one
        other = {**AUTH, "Odometer-Min-Seq": f"ds_elsewhere:99, {dataset_id}:1"}
        r = app_client.get(f"/v1/datasets/{dataset_id}", headers=other)
        assert r.headers[SOURCE_HEADER] == "replica"
    finally:
        _replay(pair, paused=False)
    _caught_up(pair)
    r = app_client.get(f"/v1/datasets/{dataset_id}", headers=shown)
    assert r.headers[SOURCE_HEADER] == "replica"
    assert r.json()["ledger"]["last_seq"] == 2


@pytest.mark.parametrize(
    "header",
    ["ds_a", "ds_a:-1", "ds_a:1:2", "ds a:1", "ds_a:99999999999999999999", "ds_a:1,"],
)
def test_a_malformed_min_seq_is_422(app_client: TestClient, header: str) -> None:
    r = app_client.get("/v1/datasets", headers={**AUTH, "Odometer-Min-Seq": header})
    assert r.status_code == 422, (header, r.text)
    assert r.json()["error"] == "ValidationError"


def test_too_many_or_too_large_seqs_are_422(app_client: TestClient) -> None:
    many = ", ".join(f"ds_{i}:1" for i in range(65))
    for header in (many, f"ds_a:{2**62 + 1}"):
        r = app_client.get("/v1/datasets", headers={**AUTH, "Odometer-Min-Seq": header})
        assert r.status_code == 422, r.text


def test_no_reading_a_client_has_shown_falls(pair: ReplicatedPair, app_client: TestClient) -> None:
    """A writer and a reader, each through the Python client, while the replica is paused,
    resumed and paused again; every reading each has shown is at least the one before."""
    sources: list[str | None] = []
    app_client.event_hooks["response"] = [lambda r: sources.append(r.headers.get(SOURCE_HEADER))]
    try:
        _monotonic(pair, app_client, sources)
    finally:
        app_client.event_hooks["response"] = []


def _monotonic(pair: ReplicatedPair, app_client: TestClient, sources: list[str | None]) -> None:
    http = TestClient(app_client.app, headers=AUTH)  # the same app, started by the fixture
    http.event_hooks = app_client.event_hooks
    writer = OdometerClient(http=http)
    reader = OdometerClient(http=http)
    dataset_id = writer.create_dataset("monotonic", "10", "0").id
    # the ledger seq each reading showed, in the order each client was shown them
    shown: dict[str, list[int]] = {"writer": [], "reader": []}
    for phase in range(3):
        paused = phase != 1
        _caught_up(pair)
        if paused:
            _replay(pair, paused=True)
        try:
            for _ in range(2):
                made = writer.register(dataset_id, {"type": "pure_dp", "epsilon": "0.01"})
                assert made.ledger_seq is not None
                shown["writer"].append(made.ledger_seq)
                shown["writer"].append(writer.get_dataset(dataset_id).last_seq)
                shown["reader"].append(reader.get_dataset(dataset_id).last_seq)
                # the reader looks at the newest invocation, which a paused replica does not
                # hold: the primary shows it, so the reader has been shown its entry
                seen = reader.get_invocation(dataset_id, made.id)
                assert seen.id == made.id
                shown["reader"].append(made.ledger_seq)
                shown["reader"].append(reader.get_dataset(dataset_id).last_seq)
        finally:
            if paused:
                _replay(pair, paused=False)
    for who, readings in shown.items():
        assert readings == sorted(readings), (who, readings)
    # the writer read its own write every time
    assert shown["writer"] == [2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7], shown
    assert shown["reader"][-1] == 7, shown
    # and the replica served some of the reads, the primary others
    assert {"replica", "primary"} <= set(sources), sources


def test_an_export_whose_replica_dies_mid_stream_ends_on_the_primary(
    pair: ReplicatedPair, app_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The standby is killed (SIGKILL, its postmaster and backends) while an export it began
    streams, just before its fourth batch: the export continues on the primary from the last
    entry sent, up to the head the replica read, and is byte for byte the primary's own export,
    which verifies. Runs last in this module: the standby is started again at its end.

    Shown failing without the move (``read_ledger`` given no ``fallback``): the export was cut
    off after its third batch, the replica's ``OperationalError`` raised out of the stream."""
    monkeypatch.setattr(ledger_service, "BATCH_SIZE", 4)  # 31 entries: 8 batches
    reads: Reads = app_client.app.state.reads  # type: ignore[attr-defined]
    assert reads.replica is not None
    dataset_id = _dataset(app_client, "cut-off")
    for _ in range(30):
        _register(app_client, dataset_id)
    _caught_up(pair)
    path = f"/v1/datasets/{dataset_id}/ledger?export=true&format=jsonl"
    primary_only = Settings(database_url=pair.primary.url(DATABASE), admin_key=ADMIN_KEY)
    with TestClient(create_app(primary_only)) as direct:
        expected = direct.get(path, headers=AUTH)
    assert expected.status_code == 200 and expected.headers[SOURCE_HEADER] == "primary"

    batches: list[str] = []

    def kill_at_the_fourth_batch(_c: Any, _k: Any, statement: str, *_: Any) -> None:
        if "FROM ledger_entries" in statement and "ORDER BY ledger_entries.seq" in statement:
            batches.append(statement)
            if len(batches) == 4:
                pair.standby.kill_9()

    engine = reader_engine(reads.replica)
    event.listen(engine, "before_cursor_execute", kill_at_the_fourth_batch)
    moved = reads.counts.get("primary:moved", 0)
    try:
        got = app_client.get(path, headers=AUTH)
    finally:
        event.remove(engine, "before_cursor_execute", kill_at_the_fourth_batch)
        assert pair.standby.process is not None
        if pair.standby.process.poll() is not None:
            pair.standby.start()
    assert len(batches) == 4  # the replica read three batches, died on the fourth
    assert got.status_code == 200, got.text
    assert got.headers[SOURCE_HEADER] == "replica"  # the headers went out before it died
    assert reads.counts.get("primary:moved", 0) == moved + 1
    assert got.content == expected.content
    entries, head = load_export_and_head(got.text)
    assert [e["seq"] for e in entries] == list(range(1, 32))
    assert head is not None and head["seq"] == 31
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.head_hash == head["head_hash"]
    _caught_up(pair, timeout=60)
