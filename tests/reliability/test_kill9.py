"""kill -9 under load: no acknowledged write is lost; retries with the same Idempotency-Key
have exactly one effect; the ledger replays; SQLite's file is intact.

Each trial drives keyed requests from several threads against a two-worker uvicorn server -
pure-DP registrations, ODP reservations and settlements of the reservations a client was
told about - SIGKILLs the server's whole process group at a random instant, restarts, and
re-sends every request whose answer was not received (or was not a success) with its key.
After each trial: every write acknowledged before the kill is in the database, SQLite's
``PRAGMA integrity_check`` is ``ok``; every retry succeeds. At the end: one ledger entry per
key (registrations and settlements), stored spent/reserved equal to what the answers add up
to, and the ledger replays.

On PostgreSQL the trials run on a private cluster started for this test (the shared server
must not be killed), and every third trial SIGKILLs PostgreSQL too (the postmaster, then its
process group) before the service: it restarts with crash recovery (fsync on), then the
service. Without PostgreSQL server binaries the PostgreSQL trials run on the shared server
without killing it, and say so.

Speed: a two-worker server takes seconds to start on a 2-core machine, so the next server is
started while the load runs and takes over once the old one is killed (it is a fresh process
either way; after a PostgreSQL kill the service is started only after the database has
recovered). The servers are started through ``tests/concurrency/preloaded_serve.py``: the app
is imported once by the launcher and the two workers are forked from it instead of each
importing it again (a start cost 6.7-6.9 s of CPU and 22-23 s to be ready beside a load average
of 11, and 4.5 s and 12 s so); what the workers run is the same app. A trial took about 3 s
on a quiet machine and 5-6 s beside the rest of the suite with spawned workers, so the default
run is 9 trials per backend (three of them killing PostgreSQL), which keeps the
whole suite within its 15 minutes; each run draws new seeds, so runs add up to more kill instants.
``ODOMETER_KILL9_TRIALS`` changes the count; ``ODOMETER_LONG_TESTS=1`` runs 20 (53 s on
SQLite, 59 s on PostgreSQL on a quiet machine). Each trial prints its seed
(``ODOMETER_KILL9_SEED`` repeats a run's kill instants and choices).

Shown to fail (``tests/concurrency/broken_builds.py``): with
``ODOMETER_TEST_BROKEN_BUILD=ack_before_commit`` (answer first, commit 0.2 s later) the first
trial fails on both backends with "acknowledged writes lost: [...]"; with
``ODOMETER_TEST_BROKEN_BUILD=no_idempotency`` (stored-response lookup skipped) retries of
requests that had committed before the kill run again and fail: "retry not a success" with
``409 IdempotencyConflict`` from the unique-key backstop (SQLite, trial 0) and with
``409 InvocationNotReserved`` for a settlement retried after it had committed (PostgreSQL,
trial 1). Each was run with ``ODOMETER_KILL9_TRIALS=3``.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.db.uow import Database, UnitOfWork
from app.services.ledger import verify_ledger
from app.services.principals import Principal, Role
from app.settings import Settings
from tests.concurrency.broken_builds import server_factory
from tests.concurrency.server import Server, start_server
from tests.reliability.private_postgres import (
    PrivateCluster,
    remove_cluster,
    start_private_cluster,
    unavailable_reason,
)
from tests.support import AUTH, PG_SKIP_REASON, Backend, fresh_database, migrate, postgres_url

TRIALS = int(
    os.environ.get(
        "ODOMETER_KILL9_TRIALS", "20" if os.environ.get("ODOMETER_LONG_TESTS") == "1" else "9"
    )
)
THREADS = 8
WORKERS = 2
PG_KILL_EVERY = 3  # on PostgreSQL, trials 2, 5, 8, ... kill the database as well
ADMIN = Principal("admin", Role.ADMIN, None)
ODP_CELLS = {"low": "0.001", "high": "0.004"}


@dataclass
class Outcome:
    """What a client knows about one keyed request."""

    key: str
    path: str
    body: str
    kind: str  # "register" or "settle"
    status: int | None = None  # None: no answer received (sent or not, unknown)
    response: dict[str, Any] = field(default_factory=dict)
    replayed: bool = False

    @property
    def ok(self) -> bool:
        return self.status == (201 if self.kind == "register" else 200)


def _post(conn: http.client.HTTPConnection, outcome: Outcome) -> None:
    headers = {**AUTH, "content-type": "application/json", "Idempotency-Key": outcome.key}
    conn.request("POST", outcome.path, body=outcome.body, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    outcome.status = response.status
    outcome.response = json.loads(payload)
    outcome.replayed = response.getheader("Idempotent-Replayed") == "true"


def _register(dataset_id: str, key: str, rng: random.Random) -> Outcome:
    mechanism: dict[str, Any]
    if rng.random() < 0.3:
        cells = [{"name": n, "epsilon": e} for n, e in ODP_CELLS.items()]
        mechanism = {"type": "odp", "cells": cells}
    else:
        mechanism = {"type": "pure_dp", "epsilon": rng.choice(("0.001", "0.002", "0.003"))}
    body = json.dumps({"mechanism": mechanism})
    return Outcome(key, f"/v1/datasets/{dataset_id}/invocations", body, "register")


def _settle(dataset_id: str, key: str, invocation: str, cell: str) -> Outcome:
    path = f"/v1/datasets/{dataset_id}/invocations/{invocation}/settle"
    return Outcome(key, path, json.dumps({"cell": cell}), "settle")


def _drive(
    server: Server, dataset_id: str, tag: str, rng: random.Random, stop: threading.Event
) -> list[Outcome]:
    """THREADS clients, each sending keyed requests until ``stop`` or the server is gone."""
    url = urlsplit(server.base_url)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    seeds = [rng.randrange(2**32) for _ in range(THREADS)]

    def client(n: int) -> None:
        local = random.Random(seeds[n])
        conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
        reserved: list[str] = []
        try:
            i = 0
            while not stop.is_set():
                key = f"{tag}-c{n}-{i}"
                if reserved and local.random() < 0.4:
                    invocation = reserved.pop()
                    outcome = _settle(dataset_id, key, invocation, local.choice(list(ODP_CELLS)))
                else:
                    outcome = _register(dataset_id, key, local)
                with lock:
                    outcomes.append(outcome)
                try:
                    _post(conn, outcome)
                except (OSError, http.client.HTTPException, ValueError):
                    return  # the server is gone: this request's fate is unknown
                if not outcome.ok:
                    return  # e.g. 503 while the database is down: retried later
                if outcome.kind == "register" and outcome.response["status"] == "reserved":
                    reserved.append(outcome.response["id"])
                i += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(30)
    return outcomes


def _retry(server: Server, unknown: list[Outcome]) -> None:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
    try:
        for outcome in unknown:
            _post(conn, outcome)
    finally:
        conn.close()


def _create_dataset(server: Server) -> str:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
    conn.request(
        "POST",
        "/v1/datasets",
        body=json.dumps({"name": "kill-9", "budget": {"epsilon": "100000", "delta": "0"}}),
        headers={**AUTH, "content-type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 201
    dataset_id: str = json.loads(response.read())["id"]
    conn.close()
    return dataset_id


def _stored_effects(url: str, dataset_id: str) -> list[tuple[str, str]]:
    """(kind, invocation id) of every invocation entry in the ledger."""
    database = Database.from_settings(Settings(database_url=url))
    try:
        uow = UnitOfWork(database)
        with uow.read_only():
            rows = uow.ledger.page(dataset_id, after_seq=0, limit=10**7, up_to_seq=10**9)
            return [(r.kind, str(r.invocation_id)) for r in rows if r.invocation_id]
    finally:
        database.dispose()


def _integrity_check(url: str) -> None:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


@dataclass
class Target:
    """The database under test and, on PostgreSQL, the private cluster that may be killed."""

    backend: Backend
    cluster: PrivateCluster | None
    note: str = ""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """SQLite in a temporary file; PostgreSQL in a private cluster when possible."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'kill9.db'}"
        migrate(url)
        yield Target(Backend("sqlite", url), None)
        return
    reason = unavailable_reason()
    if reason is None:
        cluster = start_private_cluster()
        try:
            url = cluster.create_database(f"odometer_kill9_{secrets.token_hex(4)}")
            migrate(url)
            yield Target(Backend("postgresql", url), cluster)
        finally:
            remove_cluster(cluster)
        return
    if postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database("postgresql", tmp_path) as backend:
        yield Target(backend, None, f"PostgreSQL kill trials skipped: {reason}")


class _Standby:
    """A server booting on a background thread, taken over when the current one is killed."""

    def __init__(self, start: Callable[[], Server]) -> None:
        self._start = start
        self._thread: threading.Thread | None = None
        self._result: list[Server | BaseException] = []

    def boot(self) -> None:
        if self._thread is None:
            self._result = []
            self._thread = threading.Thread(target=self._run)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._result.append(self._start())
        except BaseException as exc:
            self._result.append(exc)

    def take(self) -> Server:
        self.boot()
        assert self._thread is not None
        self._thread.join(120)
        self._thread = None
        got = self._result[0]
        if isinstance(got, BaseException):
            raise got
        return got

    def discard(self) -> None:
        if self._thread is not None:
            self.take().stop()


def _kill_postgres_trial(target: Target, trial: int) -> bool:
    return target.cluster is not None and trial % PG_KILL_EVERY == PG_KILL_EVERY - 1


def test_kill_9_loses_no_acknowledged_write(target: Target, tmp_path: Path) -> None:
    seed = int(os.environ.get("ODOMETER_KILL9_SEED", random.randrange(2**32)))
    url, name = target.backend.url, target.backend.name
    factory = server_factory()
    log = tmp_path / "server.log"
    if target.note:
        print(f"\n[{name}] {target.note}")

    def start() -> Server:
        return start_server(url, log, workers=WORKERS, factory=factory, preload=True)

    server = start()
    dataset_id = _create_dataset(server)
    everything: list[Outcome] = []
    postgres_kills = 0
    began = time.monotonic()
    standby = _Standby(start)
    try:
        for trial in range(TRIALS):
            rng = random.Random(seed * 1000 + trial)
            kill_db = _kill_postgres_trial(target, trial)
            if not kill_db:
                standby.boot()  # the replacement boots while the load runs (no-op if booting)
            stop = threading.Event()
            result: list[list[Outcome]] = []
            driver = threading.Thread(
                target=lambda r=result, s=server, t=trial, e=stop, g=rng: r.append(
                    _drive(s, dataset_id, f"s{seed}-t{t}", g, e)
                )
            )
            driver.start()
            time.sleep(rng.uniform(0.2, 1.5))
            if kill_db:
                assert target.cluster is not None
                target.cluster.kill_9()  # PostgreSQL dies first, mid-transaction
                postgres_kills += 1
            server.kill_hard()  # SIGKILL to the service's whole process group
            stop.set()
            driver.join(60)
            outcomes = result[0]
            unknown = [o for o in outcomes if not o.ok]
            acknowledged = [o for o in outcomes if o.ok]
            if name == "sqlite":
                _integrity_check(url)
            if kill_db:
                assert target.cluster is not None
                target.cluster.start()  # crash recovery
                server = start()
            else:
                server = standby.take()
            if not _kill_postgres_trial(target, trial + 1):
                standby.boot()  # overlaps this trial's checks and the next trial's load
            # nothing acknowledged before the kill may be missing after the restart
            stored = set(_stored_effects(url, dataset_id))
            lost = [
                o.key for o in acknowledged if (_effect_kind(o), o.response["id"]) not in stored
            ]
            assert lost == [], f"trial {trial} seed {seed}: acknowledged writes lost: {lost[:10]}"
            _retry(server, unknown)
            failed = [(o.key, o.status, o.response) for o in unknown if not o.ok]
            assert failed == [], f"trial {trial} seed {seed}: retry not a success: {failed[:5]}"
            committed = sum(o.replayed for o in unknown)
            print(
                f"\n[{name} trial {trial} seed {seed}{' +postgres -9' if kill_db else ''}] "
                f"sent {len(outcomes)}, acknowledged {len(acknowledged)}, retried "
                f"{len(unknown)} ({committed} had committed: stored answer replayed)"
            )
            everything.extend(outcomes)
    finally:
        server.stop()
        standby.discard()
    print(
        f"[{name}] {TRIALS} trials ({postgres_kills} with PostgreSQL killed) in "
        f"{time.monotonic() - began:.1f}s, {len(everything)} keyed requests"
    )
    _check_final(url, dataset_id, everything)


def _effect_kind(outcome: Outcome) -> str:
    if outcome.kind == "settle":
        return "invocation_settled"
    return f"invocation_{outcome.response['status']}"


def _check_final(url: str, dataset_id: str, everything: list[Outcome]) -> None:
    """Exactly one ledger effect per key, stored totals equal to the answers, replay ok."""
    assert all(o.ok for o in everything)
    assert any(o.kind == "settle" for o in everything)
    expected = sorted((_effect_kind(o), o.response["id"]) for o in everything)
    assert len({o.response["id"] for o in everything if o.kind == "register"}) == sum(
        o.kind == "register" for o in everything
    )
    assert sorted(_stored_effects(url, dataset_id)) == expected
    settled = {
        o.response["id"]: o.response["charge"]["epsilon"] for o in everything if o.kind == "settle"
    }
    spent = sum(
        (
            Decimal(json.loads(o.body)["mechanism"]["epsilon"])
            for o in everything
            if o.kind == "register" and o.response["status"] == "accepted"
        ),
        Decimal(0),
    ) + sum((Decimal(e) for e in settled.values()), Decimal(0))
    open_reservations = [
        o
        for o in everything
        if o.kind == "register"
        and o.response["status"] == "reserved"
        and o.response["id"] not in settled
    ]
    database = Database.from_settings(Settings(database_url=url))
    try:
        uow = UnitOfWork(database)
        with uow.read_only():
            ds = uow.datasets.get(dataset_id)
            assert ds is not None
            state = ds.state_json
        assert Decimal(state["spent_epsilon"]) == spent
        assert Decimal(state["reserved_epsilon"]) == Decimal(ODP_CELLS["high"]) * len(
            open_reservations
        )
        assert state["open_reservations"] == len(open_reservations)
        verdict = verify_ledger(uow, ADMIN, dataset_id)
        assert verdict.ok, verdict.problems
    finally:
        database.dispose()
