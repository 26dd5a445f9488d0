"""kill -9 under load: no acknowledged write is lost; retries with the same Idempotency-Key
have exactly one effect; the ledger replays; SQLite's file is intact (SERVICE.md §5).

Each trial drives keyed registrations from several threads, SIGKILLs the server's whole
process group at a random moment, restarts it, and re-sends every request whose response was
not received. The restart of one trial is the server of the next.
"""

from __future__ import annotations

import http.client
import json
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.db.uow import Database, UnitOfWork
from app.services.ledger import verify_ledger
from app.services.principals import Principal, Role
from app.settings import Settings
from tests.concurrency.server import Server, free_port, start_server
from tests.support import AUTH, Backend

TRIALS = 3
THREADS = 8
ADMIN = Principal("admin", Role.ADMIN, None)


@dataclass
class Outcome:
    """What a client knows about one keyed request."""

    key: str
    body: str
    status: int | None = None  # None: no response received (sent or not, unknown)
    response: dict[str, Any] = field(default_factory=dict)
    replayed: bool = False


def _post(conn: http.client.HTTPConnection, path: str, outcome: Outcome) -> None:
    headers = {**AUTH, "content-type": "application/json", "Idempotency-Key": outcome.key}
    conn.request("POST", path, body=outcome.body, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    outcome.status = response.status
    outcome.response = json.loads(payload)
    outcome.replayed = response.getheader("Idempotent-Replayed") == "true"


def _drive(server: Server, dataset_id: str, trial: int, stop: threading.Event) -> list[Outcome]:
    url = urlsplit(server.base_url)
    path = f"/v1/datasets/{dataset_id}/invocations"
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
        try:
            i = 0
            while not stop.is_set():
                epsilon = ("0.001", "0.002", "0.003")[i % 3]
                body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": epsilon}})
                outcome = Outcome(f"t{trial}-c{n}-{i}", body)
                with lock:
                    outcomes.append(outcome)
                try:
                    _post(conn, path, outcome)
                except (OSError, http.client.HTTPException):
                    return  # the server is gone: this request's fate is unknown
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


def _retry(server: Server, dataset_id: str, unknown: list[Outcome]) -> None:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
    try:
        for outcome in unknown:
            _post(conn, f"/v1/datasets/{dataset_id}/invocations", outcome)
    finally:
        conn.close()


def _create_dataset(server: Server) -> str:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
    conn.request(
        "POST",
        "/v1/datasets",
        body=json.dumps({"name": "kill-9", "budget": {"epsilon": "1000", "delta": "0"}}),
        headers={**AUTH, "content-type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 201
    dataset_id: str = json.loads(response.read())["id"]
    conn.close()
    return dataset_id


def test_kill_9_loses_no_acknowledged_write(fresh_backend: Backend, tmp_path: Path) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    port = free_port()
    log = tmp_path / "server.log"
    server = start_server(fresh_backend.url, log, port=port)
    dataset_id = _create_dataset(server)
    everything: list[Outcome] = []
    acknowledged_ids: list[str] = []  # 201s received before a kill: none may be lost
    try:
        for trial in range(TRIALS):
            stop = threading.Event()
            result: list[list[Outcome]] = []
            driver = threading.Thread(
                target=lambda r=result, s=server, t=trial, e=stop: r.append(
                    _drive(s, dataset_id, t, e)
                )
            )
            driver.start()
            time.sleep(rng.uniform(0.3, 1.5))
            server.kill_hard()  # SIGKILL to the whole process group, mid-flight
            stop.set()
            driver.join(60)
            outcomes = result[0]
            unknown = [o for o in outcomes if o.status is None]
            acknowledged = [o for o in outcomes if o.status == 201]
            acknowledged_ids.extend(o.response["id"] for o in acknowledged)
            print(
                f"\n[{fresh_backend.name} trial {trial} seed {seed}] sent {len(outcomes)}, "
                f"acknowledged {len(acknowledged)}, unknown {len(unknown)}"
            )
            server = start_server(fresh_backend.url, log, port=port)
            _retry(server, dataset_id, unknown)
            assert all(o.status == 201 for o in unknown), [
                o.response for o in unknown if o.status != 201
            ]
            committed_unanswered = sum(o.replayed for o in unknown)
            print(
                f"  retried {len(unknown)}: {committed_unanswered} had committed before the kill "
                f"(stored response replayed), {len(unknown) - committed_unanswered} ran now"
            )
            everything.extend(outcomes)
    finally:
        server.stop()

    # every request now has a 201 and an invocation id; ids are unique per key
    assert acknowledged_ids, "no trial got a response before the kill"
    ids = {o.key: o.response["id"] for o in everything}
    assert all(o.status == 201 for o in everything)
    assert len(set(ids.values())) == len(everything)
    database = Database.from_settings(Settings(database_url=fresh_backend.url))
    try:
        uow = UnitOfWork(database)
        with uow.read_only():
            rows = uow.ledger.page(dataset_id, after_seq=0, limit=10**7, up_to_seq=10**9)
            in_ledger = [str(r.invocation_id) for r in rows if r.kind == "invocation_accepted"]
            spent = Decimal(rows[-1].state["spent_epsilon"])
        # exactly one effect per key: the ledger holds each acknowledged id once, and nothing else
        assert set(acknowledged_ids) <= set(in_ledger)
        assert sorted(in_ledger) == sorted(ids.values())
        assert spent == sum(
            (Decimal(json.loads(o.body)["mechanism"]["epsilon"]) for o in everything), Decimal(0)
        )
        verdict = verify_ledger(uow, ADMIN, dataset_id)
        assert verdict.ok, verdict.problems
    finally:
        database.dispose()
    if fresh_backend.name == "sqlite":
        path = fresh_backend.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
