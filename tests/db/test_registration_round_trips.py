"""What one registration sends to PostgreSQL, counted on the wire.

The service is served through a small TCP proxy in front of the PostgreSQL server (the
engine's URL names the proxy, ``sslmode=disable`` so the traffic can be read), which reads the
frontend's messages as the server receives them, whatever the layers above do (the write path
runs its statements on the DBAPI cursor, :func:`app.db.driver.run`, which SQLAlchemy's
``before_cursor_execute`` never sees, and in psycopg's pipeline mode whether a message goes out
at once or waits for a flush is psycopg's business). What is counted:

- a *statement*: an ``Execute`` message (the extended protocol: the text is the one its
  ``Parse`` named, prepared or not) or a simple ``Query``;
- a *round trip*: each time the server answers a connection after the client sent it
  something; the statements sent since the previous answer are that round trip's. The server
  answers only when asked to (a ``Flush``, a ``Sync``, a simple ``Query``: it holds its output
  until then), so each round trip is one wait of the client's. The test checks that each
  round trip's messages end with such a request.

Every byte of the registration's HTTP request is counted, not only its transaction's: the
admin's key is checked in memory, so nothing else shows up (an analyst's key is read first, in
three round trips of its own: the last test). Today, a registration with an
``Idempotency-Key`` takes two round trips on one connection (the pipelined transaction of
:class:`app.db.driver.PipelinedTransaction`):

1. ``BEGIN``, the lock statement (organisation, dataset;
   :func:`app.writepath.admission.read_levels`), on a partitioned dataset the process knows
   the runs its selection touches (:func:`app.db.blocks.queue_window`), and the caller's keys'
   stored responses (:func:`app.writepath.admission.stored_responses`), all sent before any
   answer is read: four statements, one wait (three on a whole dataset);
2. the write statement (:func:`app.db.writes.write`: the ledger entry, the invocation, the
   idempotency record, the dataset's head and, partitioned, the runs rewritten) and
   ``COMMIT``: two statements, one wait.

On a partitioned dataset the process has not locked before, the runs are read under the lock in
a round trip of their own (three in all): the process learns a partition with the lock
statement's answer (:class:`app.writepath.caches.KnownPartitions`).

Shown to fail, on a scratch copy of the service: with the idempotency prefetch made a read of
its own (left out of the lock statement's ``then=`` in :func:`app.writepath.locking.read`; the
decision then reads the keys alone), every test failed, the first two so::

    AssertionError: assert [['BEGIN', 'lock'], ['keys'], ['write', 'COMMIT']]
        == [['BEGIN', 'lock', 'keys'], ['write', 'COMMIT']]
    AssertionError: assert [['BEGIN', 'lock', 'runs'], ['keys'], ['write', 'COMMIT']]
        == [['BEGIN', 'lock', 'runs', 'keys'], ['write', 'COMMIT']]

and with no window asked for with the lock (``window = None`` in
:func:`app.services.batching._decide`: :meth:`app.services._blocks.PartitionLevel.prepare`
reads the runs under the lock), the partitioned one did::

    AssertionError: assert [['BEGIN', 'lock', 'keys'], ['runs'], ['write', 'COMMIT']]
        == [['BEGIN', 'lock', 'runs', 'keys'], ['write', 'COMMIT']]
"""

from __future__ import annotations

import re
import secrets
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, Backend, grant, new_organisation, new_principal

#: the frontend's untyped first messages that another untyped one follows (SSL, GSSAPI asks)
_NEGOTIATIONS = (80877103, 80877104)
#: the messages that ask the server to answer now
_ASKS = frozenset(b"HSQ")


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """What one connection sent before the server answered: the statements executed (their
    text), and the message types, in order."""

    connection: int
    statements: tuple[str, ...]
    messages: bytes


@dataclass(slots=True)
class _Frontend:
    """One client connection's messages as read so far."""

    number: int
    buffer: bytearray = field(default_factory=bytearray)
    started: bool = False
    #: prepared statements' texts by name ("": the unnamed one), and the portals' texts
    prepared: dict[bytes, str] = field(default_factory=dict)
    portals: dict[bytes, str] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    messages: bytearray = field(default_factory=bytearray)

    def read(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.started:
                if len(self.buffer) < 8:
                    return
                (length, code) = struct.unpack("!ii", self.buffer[:8])
                if len(self.buffer) < length:
                    return
                del self.buffer[:length]
                self.started = code not in _NEGOTIATIONS
                continue
            if len(self.buffer) < 5:
                return
            kind = self.buffer[0]
            (length,) = struct.unpack("!i", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            body = bytes(self.buffer[5 : 1 + length])
            del self.buffer[: 1 + length]
            self._message(kind, body)

    def _message(self, kind: int, body: bytes) -> None:
        self.messages.append(kind)
        if kind == ord("P"):  # Parse: name, query, …
            name, query, _ = body.split(b"\0", 2)
            self.prepared[name] = query.decode()
        elif kind == ord("B"):  # Bind: portal, statement, …
            portal, statement, _ = body.split(b"\0", 2)
            self.portals[portal] = self.prepared[statement]
        elif kind == ord("E"):  # Execute: portal, row limit
            portal, _ = body.split(b"\0", 1)
            self.statements.append(self.portals[portal])
        elif kind == ord("Q"):  # Query: its text
            self.statements.append(body.rstrip(b"\0").decode())

    def answered(self) -> RoundTrip | None:
        """The round trip the server's answer closes (``None``: nothing was sent since the
        last one, as during the start-up)."""
        if not self.messages:
            return None
        trip = RoundTrip(self.number, tuple(self.statements), bytes(self.messages))
        self.statements.clear()
        self.messages.clear()
        return trip


class Wire:
    """A TCP proxy to the PostgreSQL server at ``target`` that records every round trip."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.trips: list[RoundTrip] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, server]
            number += 1
            frontend = _Frontend(number)
            threading.Thread(
                target=self._pump, args=(client, server, frontend, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, frontend, False), daemon=True
            ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, frontend: _Frontend, upstream: bool
    ) -> None:
        """Forward ``source``'s bytes to ``sink``, recording them before they go on (the
        answer to what was sent cannot come back before it is recorded)."""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                with suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            with self._lock:
                if upstream:
                    frontend.read(data)
                else:
                    trip = frontend.answered()
                    if trip is not None:
                        self.trips.append(trip)
            try:
                sink.sendall(data)
            except OSError:
                return

    def mark(self) -> int:
        with self._lock:
            return len(self.trips)

    def since(self, mark: int) -> list[RoundTrip]:
        with self._lock:
            return self.trips[mark:]

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()


@pytest.fixture
def wired(backend: Backend) -> Iterator[tuple[TestClient, Wire]]:
    """The app on a database reached through a :class:`Wire`."""
    if backend.name != "postgresql":
        pytest.skip("round trips are counted on PostgreSQL's wire (SQLite is in the process)")
    url = make_url(backend.url)
    wire = Wire((url.host or "127.0.0.1", url.port or 5432))
    proxied = url.set(
        host="127.0.0.1", port=wire.port, query={"sslmode": "disable", "gssencmode": "disable"}
    )
    settings = Settings(
        database_url=proxied.render_as_string(hide_password=False), admin_key=ADMIN_KEY
    )
    database = Database.from_settings(settings)
    try:
        with TestClient(create_app(settings, database)) as client:
            yield client, wire
    finally:
        database.dispose()
        wire.close()


def _label(sql: str) -> str:
    """What a statement of the write path is (its text, unrecognised)."""
    text = sql.strip()
    if text in ("BEGIN", "COMMIT", "ROLLBACK"):
        return text
    if "FOR UPDATE OF d" in text:
        return "lock"
    if text.startswith("SELECT") and "FROM block_runs" in text:
        return "runs"
    if text.startswith("SELECT") and "FROM idempotency_keys" in text:
        return "keys"
    if text.startswith("SELECT") and "FROM api_keys" in text:
        return "api_keys"
    if text.startswith(("WITH", "INSERT", "UPDATE", "DELETE")):
        return "write"
    return text


def _written(sql: str) -> list[str]:
    """The tables a write statement inserts into, updates or deletes from, in order (an
    upsert's ``DO UPDATE SET`` is its insert's)."""
    found = re.findall(r"\b(INSERT INTO|DELETE FROM|UPDATE) (\w+)", sql)
    return [f"{verb.split()[0]} {table}" for verb, table in found if table != "SET"]


def _registered(
    client: TestClient, wire: Wire, dataset_id: str, body: dict[str, Any], key: str | None
) -> list[RoundTrip]:
    """The round trips of one registration (201 asserted)."""
    headers = AUTH if key is None else {**AUTH, "Idempotency-Key": key}
    mark = wire.mark()
    r = client.post(f"/v1/datasets/{dataset_id}/invocations", json=body, headers=headers)
    assert r.status_code == 201, r.text
    trips = wire.since(mark)
    assert len({trip.connection for trip in trips}) == 1  # one connection, one transaction
    for trip in trips:  # each round trip is one wait: it ends with asking for the answer
        assert trip.messages[-1] in _ASKS, trip
    return trips


def _dataset(client: TestClient, **extra: Any) -> str:
    body = {
        "name": f"trips-{secrets.token_hex(3)}",
        "budget": {"epsilon": "10", "delta": "0.000001"},
        **extra,
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


CHARGE = {"type": "pure_dp", "epsilon": "0.01"}


def test_a_registration_on_a_whole_dataset_takes_two_round_trips(
    wired: tuple[TestClient, Wire],
) -> None:
    client, wire = wired
    ds = _dataset(client)
    trips = _registered(client, wire, ds, {"mechanism": CHARGE}, "whole-1")
    assert [[_label(s) for s in trip.statements] for trip in trips] == [
        ["BEGIN", "lock", "keys"],
        ["write", "COMMIT"],
    ]
    (write, _) = trips[1].statements
    assert _written(write) == [
        "INSERT ledger_entries",
        "INSERT invocations",
        "INSERT idempotency_keys",
        "UPDATE datasets",
    ]
    assert sum(len(trip.statements) for trip in trips) == 5


def test_a_replayed_key_takes_two_round_trips_and_writes_nothing(
    wired: tuple[TestClient, Wire],
) -> None:
    """A registration repeated with its Idempotency-Key is answered from the stored response
    read in the lock statement's round trip; the transaction, which wrote nothing, is rolled
    back with the pipeline's last Sync. Shown able to fail: with ``ROLLBACK`` sent after the
    pipeline was left (as before), ``[['BEGIN', 'lock', 'keys'], [], ['ROLLBACK']]``."""
    client, wire = wired
    ds = _dataset(client)
    _registered(client, wire, ds, {"mechanism": CHARGE}, "replayed-1")
    trips = _registered(client, wire, ds, {"mechanism": CHARGE}, "replayed-1")
    assert [[_label(s) for s in trip.statements] for trip in trips] == [
        ["BEGIN", "lock", "keys"],
        ["ROLLBACK"],
    ]


def test_a_selection_of_a_known_partition_reads_its_runs_in_the_lock_round_trip(
    wired: tuple[TestClient, Wire],
) -> None:
    client, wire = wired
    ds = _dataset(
        client,
        accounting={"mode": "basic"},
        partition={"kind": "bucket", "unit": "record", "buckets": 1000},
    )
    r = client.post(
        f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 999}}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    # the first registration teaches the process the dataset's partition (and splits its runs)
    first = _registered(client, wire, ds, {"mechanism": CHARGE, "blocks": {"keys": [500]}}, None)
    # (not known before it: its runs were read under the lock, in a round trip of their own)
    assert [[_label(s) for s in trip.statements] for trip in first] == [
        ["BEGIN", "lock"],
        ["runs"],
        ["write", "COMMIT"],
    ]

    selection = {"keys": [3, 250, 251, 777]}  # scattered: three ranges, the runs around each
    trips = _registered(client, wire, ds, {"mechanism": CHARGE, "blocks": selection}, "part-1")
    assert [[_label(s) for s in trip.statements] for trip in trips] == [
        ["BEGIN", "lock", "runs", "keys"],
        ["write", "COMMIT"],
    ]
    (write, _) = trips[1].statements
    assert _written(write) == [
        "INSERT block_runs",
        "INSERT ledger_entries",
        "INSERT invocations",
        "INSERT idempotency_keys",
        "UPDATE datasets",
    ]
    assert sum(len(trip.statements) for trip in trips) == 6


def test_an_analysts_registration_first_reads_its_key_in_three_more(
    wired: tuple[TestClient, Wire],
) -> None:
    """An analyst's key is read from the database before the registration (the admin's is
    checked in memory): an ORM read transaction, ``BEGIN``, the key's row and ``ROLLBACK``,
    each a round trip of its own; then the registration's two."""
    client, wire = wired
    org = new_organisation(client)
    ds = _dataset(client, organisation_id=org)
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    mark = wire.mark()
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": CHARGE},
        headers={**headers, "Idempotency-Key": "analyst-1"},
    )
    assert r.status_code == 201, r.text
    trips = wire.since(mark)
    assert [[_label(s) for s in trip.statements] for trip in trips] == [
        ["BEGIN ISOLATION LEVEL READ COMMITTED"],
        ["api_keys"],
        ["ROLLBACK"],
        ["BEGIN", "lock", "keys"],
        ["write", "COMMIT"],
    ]
    assert "FOR UPDATE OF d, g" in trips[3].statements[1]  # the analyst's grant locked too
