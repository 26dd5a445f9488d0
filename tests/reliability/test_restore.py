"""A restored backup never re-opens spent budget: the witness of ledger heads catches it.

Each test takes a backup of the database (a copy of the SQLite file; ``CREATE DATABASE …
TEMPLATE`` on PostgreSQL), keeps registering on some datasets (others stay untouched), restores
the backup and starts the service again (a new app on a new engine: the start-up check runs
before the first request). Every dataset whose tail was lost then refuses writes with 409
``LedgerBehindWitness`` naming both heads, the untouched ones serve, reads are served; the lost
tail imported from an export taken before the restore brings the state back exactly (replay
equal, status equal); a forged tail (an entry altered, another dataset's tail) is refused and
changes nothing; an acknowledged loss is a ledger entry, the ledger still replays, and the
dataset serves again. Two processes writing the same witness concurrently never let a smaller
head win (real processes, :func:`test_racing_writers_never_let_a_smaller_head_win`).

Shown to fail without the witness (``ODOMETER_WITNESS_DIR`` unset: the test's
``witness=False`` switch, run once by hand with ``ODOMETER_TEST_NO_WITNESS=1``):
``test_restore_freezes_lost_datasets[sqlite]`` failed with ``assert 201 == 409`` at the first
write to a restored dataset: its spent budget was rolled back and the registration was
accepted again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_client import cli
from odometer_core.ledger import checkpoints, replay
from odometer_core.ledger.checkpoints import load_private_key
from odometer_core.ledger.witness import DirectoryWitness, Head, read_directory
from tests.support import (
    ADMIN_KEY,
    AUTH,
    Backend,
    _libpq,
    basic_dataset,
    ledger,
    postgres_url,
    status,
)

NO_WITNESS = os.environ.get("ODOMETER_TEST_NO_WITNESS") == "1"


class Service:
    """The service on one database, started and stopped as an operator would."""

    def __init__(
        self, backend: Backend, witness: Path, lag: float = 0.0, checkpoint_key: str | None = None
    ) -> None:
        self.backend = backend
        self.witness = witness
        self.lag = lag
        self.checkpoint_key = checkpoint_key
        self.client: TestClient | None = None
        self.database: Database | None = None

    def start(self) -> TestClient:
        settings = Settings(
            database_url=self.backend.url,
            admin_key=ADMIN_KEY,
            witness_dir=None if NO_WITNESS else str(self.witness),
            witness_check_seconds=0,
            witness_lag_seconds=self.lag,
            checkpoint_key=self.checkpoint_key,
        )
        self.database = Database.from_settings(settings)
        self.client = TestClient(create_app(settings, self.database))
        self.client.__enter__()
        return self.client

    def stop(self) -> None:
        if self.client is not None:
            self.client.__exit__(None, None, None)
        if self.database is not None:
            self.database.dispose()
        self.client = self.database = None


class Backup:
    """A backup of the database and its restore."""

    def __init__(self, backend: Backend, tmp: Path) -> None:
        self.backend = backend
        self.tmp = tmp
        url = make_url(backend.url)
        self.name = url.database or ""
        self.copy = f"{self.name}_backup"

    def take(self) -> None:
        if self.backend.name == "sqlite":
            with sqlite3.connect(self.name) as src, sqlite3.connect(self.tmp / "backup.db") as dst:
                src.backup(dst)
            return
        with psycopg.connect(_libpq(postgres_url() or ""), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.copy}" TEMPLATE "{self.name}"')

    def restore(self) -> None:
        if self.backend.name == "sqlite":  # SQLite's online backup: safe under open connections
            with (
                sqlite3.connect(self.tmp / "backup.db") as src,
                sqlite3.connect(self.name) as dst,
            ):
                src.backup(dst)
            return
        with psycopg.connect(_libpq(postgres_url() or ""), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{self.name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.name}" TEMPLATE "{self.copy}"')
            conn.execute(f'DROP DATABASE "{self.copy}"')


@pytest.fixture(params=[0.0, 1.0], ids=["lag0", "lag1"])
def service(fresh_backend: Backend, tmp_path: Path, request: Any) -> Iterator[Service]:
    """The service at lag 0 (each answer waits for its heads: the synchronous guarantee) and at
    a lag of 1 s (a clean stop writes what is pending)."""
    s = Service(fresh_backend, tmp_path / "witness", request.param)
    yield s
    s.stop()


def _register(client: TestClient, ds: str, epsilon: str = "0.01") -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": epsilon}},
        headers=AUTH,
    )


def _export(client: TestClient, ds: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{ds}/ledger", params={"export": "true"}, headers=AUTH)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _import(client: TestClient, ds: str, entries: list[dict[str, Any]]) -> Any:
    return client.post(f"/v1/datasets/{ds}/witness/import", json={"entries": entries}, headers=AUTH)


def test_restore_freezes_lost_datasets(
    service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = service.start()
    lost, acked, untouched = (basic_dataset(client)["id"] for _ in range(3))
    for ds in (lost, acked, untouched):
        for _ in range(3):
            assert _register(client, ds).status_code == 201
    service.stop()
    backup = Backup(service.backend, tmp_path)
    backup.take()

    client = service.start()
    for ds in (lost, acked):
        for i in range(5):
            assert _register(client, ds, f"0.0{i + 2}").status_code == 201
    before = {ds: status(client, ds) for ds in (lost, acked, untouched)}
    export = _export(client, lost)  # what an operator (or an auditor) kept
    other_export = _export(client, acked)
    heads = {ds: ledger(client, ds)[-1] for ds in (lost, acked)}
    service.stop()

    backup.restore()
    client = service.start()

    # the lost tails refuse writes, say why, and keep serving reads
    for ds in (lost, acked):
        r = _register(client, ds)
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["error"] == "LedgerBehindWitness"
        assert (body["witnessed_seq"], body["database_seq"], body["reason"]) == (9, 4, "behind")
        assert "entries 5..9 were lost" in body["detail"]
        assert "odometer witness import" in body["detail"]
        read = client.get(f"/v1/datasets/{ds}", headers=AUTH)
        assert read.status_code == 200
        # the read says it is frozen, with the refusal a write gets (tests/browser/
        # test_dashboard_frozen_phone.py: the CLI and the dashboard show it)
        frozen_status = read.json()["status"]["frozen"]
        assert frozen_status["detail"] == body["detail"]
        assert {k: frozen_status[k] for k in ("reason", "witnessed_seq", "database_seq")} == {
            "reason": "behind",
            "witnessed_seq": 9,
            "database_seq": 4,
        }
        r = client.patch(
            f"/v1/datasets/{ds}/budget", json={"epsilon": "2", "delta": "0.000001"}, headers=AUTH
        )
        assert r.status_code == 409 and r.json()["error"] == "LedgerBehindWitness", r.text
    assert _register(client, untouched).status_code == 201
    assert client.get(f"/v1/datasets/{untouched}", headers=AUTH).json()["status"]["frozen"] is None
    frozen = client.get("/v1/witness", headers=AUTH).json()["frozen"]
    assert {f["dataset_id"] for f in frozen} == {lost, acked}

    # an auditor's check of an export against the witness: the restored one is behind
    (tmp_path / "before.json").write_text(json.dumps(export), "utf-8")
    (tmp_path / "restored.json").write_text(json.dumps(_export(client, lost)), "utf-8")
    witness_dir = str(service.witness)
    check = ("--witness", witness_dir, "--unpinned")  # this service signs no heads
    assert cli.main(["verify", str(tmp_path / "before.json"), *check]) == 0
    assert cli.main(["verify", str(tmp_path / "restored.json"), *check]) == 1
    assert "is behind the witness" in capsys.readouterr().err

    # forged tails are refused and change nothing
    altered = json.loads(json.dumps(export["entries"]))
    altered[6]["actor"] = "someone-else"  # an entry of the lost tail, not re-hashed
    r = _import(client, lost, altered)
    assert r.status_code == 422 and r.json()["error"] == "TailRefused", r.text
    r = _import(client, lost, other_export["entries"])
    assert r.status_code == 422 and r.json()["error"] == "TailRefused", r.text
    r = _import(client, lost, export["entries"][:-1])  # short of the witnessed head
    assert r.status_code == 422, r.text
    assert _register(client, lost).status_code == 409
    assert len(ledger(client, lost)) == 4

    # the tail from the export brings the state back exactly
    r = _import(client, lost, export["entries"])
    assert r.status_code == 200, r.text
    assert r.json()["imported"] == 5
    assert status(client, lost) == before[lost]
    entries = ledger(client, lost)
    assert entries == export["entries"]
    verdict = replay(entries)
    assert verdict.ok and verdict.head_hash == heads[lost]["hash"]
    assert _register(client, lost).status_code == 201

    # an acknowledged loss is an entry of its own, and the dataset serves again
    r = client.post(
        f"/v1/datasets/{acked}/witness/acknowledge",
        json={"reason": "restored the 02:00 backup; tail not recoverable"},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    entries = ledger(client, acked)
    assert entries[-1]["kind"] == "loss_acknowledged" and entries[-1]["seq"] == 5
    assert entries[-1]["request"] == {
        "witnessed_seq": 9,
        "witnessed_hash": heads[acked]["hash"],
        "database_seq": 4,
    }
    assert _register(client, acked).status_code == 201
    verdict = replay(ledger(client, acked))
    assert verdict.ok, verdict.problems
    assert client.get("/v1/witness", headers=AUTH).json()["frozen"] == []
    service.stop()  # a clean stop: what is pending is written
    record = read_directory(service.witness)[acked]
    assert (record.epoch, record.seq) == (1, 6)


def test_restore_under_a_running_service_is_caught_at_the_next_write(
    service: Service, tmp_path: Path
) -> None:
    """No restart: the per-write comparison (with the head this process committed, held in
    memory) refuses the first write after the restore."""
    if service.backend.name != "sqlite":
        pytest.skip("a PostgreSQL database cannot be dropped under a running service's pool")
    client = service.start()
    ds = basic_dataset(client)["id"]
    assert _register(client, ds).status_code == 201
    backup = Backup(service.backend, tmp_path)
    backup.take()
    assert _register(client, ds).status_code == 201
    backup.restore()
    r = _register(client, ds)
    assert r.status_code == 409 and r.json()["reason"] == "behind", r.text


def test_lost_witness_is_rebuilt_from_the_database(service: Service) -> None:
    """A lost witness directory: the service starts, witnesses the database's heads anew."""
    client = service.start()
    ds = basic_dataset(client)["id"]
    assert _register(client, ds).status_code == 201
    service.stop()
    shutil.rmtree(service.witness)
    client = service.start()
    assert _register(client, ds).status_code == 201
    service.stop()
    assert read_directory(service.witness)[ds].seq == 3


# ---------------------------------------------------------------------------- racing writers
def test_racing_writers_never_let_a_smaller_head_win(tmp_path: Path) -> None:
    """Two processes advance the same datasets' heads at once, one the even seqs, one the odd
    ones: a reader watching the files never sees a head go back, and the largest stays."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(3)
    path = str(tmp_path / "witness")
    DirectoryWitness(path)
    datasets = [f"ds_{i}" for i in range(3)]
    procs = [
        context.Process(target=_writers, args=(path, datasets, list(range(2, 401, 2)), barrier)),
        context.Process(target=_writers, args=(path, datasets, list(range(1, 400, 2)), barrier)),
    ]
    for p in procs:
        p.start()
    barrier.wait()
    seen = dict.fromkeys(datasets, 0)
    went_back = []
    while any(p.is_alive() for p in procs):
        for d, record in read_directory(path).items():
            if record.seq < seen[d]:
                went_back.append((d, seen[d], record.seq))
            seen[d] = max(seen[d], record.seq)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert went_back == []
    records = read_directory(path)
    assert {d: (r.seq, r.head_hash) for d, r in records.items()} == {
        d: (400, f"{400:064x}") for d in datasets
    }
    assert not list((tmp_path / "witness" / "datasets").glob(".tmp-*"))


def _writers(path: str, datasets: list[str], seqs: list[int], barrier: Any) -> None:
    store = DirectoryWitness(path)
    barrier.wait()
    for seq in seqs:
        store.advance(
            [Head(d, seq, f"{seq:064x}") for d in datasets], "2026-01-01T00:00:00.000000Z", None
        )


# ---------------------------------------------------------------------------- the bound
LAG = 0.5


def _keep_registering(
    client: TestClient, ds: str, seconds: float
) -> list[tuple[float, float, int]]:
    """Registrations one after another for ``seconds``: (sent, answered, seq) of each 201."""
    acked = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent = time.monotonic()
        r = _register(client, ds, "0.000001")
        answered = time.monotonic()
        assert r.status_code == 201, r.text
        acked.append((sent, answered, int(r.json()["ledger_seq"])))
    return acked


@pytest.mark.parametrize("lag", [LAG, 30.0], ids=["lag0.5", "lag30"])
def test_a_restore_reopens_at_most_the_last_lag_seconds(
    fresh_backend: Backend, tmp_path: Path, lag: float
) -> None:
    """The stated bound: the service crashes at ``T`` (the witness as it was on disk then is
    kept: a copy taken at ``T``, the running process never writes it again), the database is
    restored from a backup taken earlier, the service starts on the restored database and the
    copy. (a) Every entry answered 201 more than ``lag`` before the last request was *sent*
    is detected (its dataset frozen, its seq at or below the witnessed one); (b) the entries
    re-opened (answered 201, above the witnessed seq) are at most those answered in the last
    ``lag`` seconds. No scheduling margin: the last 201 was sent only once every head committed
    ``lag`` before it was in the witness (the check at the commit point), and it was sent
    after its request was. With a lag of 30 s nothing is written in the test's time: every
    entry answered is re-opened, and all were answered within the lag (the window is real)."""
    service = Service(fresh_backend, tmp_path / "witness", lag)
    client = service.start()
    ds = basic_dataset(client)["id"]
    assert _register(client, ds).status_code == 201
    service.stop()
    backup = Backup(service.backend, tmp_path)
    backup.take()
    client = service.start()
    acked = _keep_registering(client, ds, 2.5 if lag < 5 else 1.0)
    shutil.copytree(service.witness, tmp_path / "at-crash")  # the crash, at T
    crash = time.monotonic()
    service.stop()
    backup.restore()
    restored = Service(fresh_backend, tmp_path / "at-crash", lag)
    client = restored.start()
    try:
        record = read_directory(tmp_path / "at-crash").get(ds)
        witnessed = 0 if record is None else record.seq
        last_sent = acked[-1][0]
        old = [seq for _sent, answered, seq in acked if answered < last_sent - lag]
        reopened = [seq for _sent, _answered, seq in acked if seq > witnessed]
        recent = [seq for _sent, answered, seq in acked if answered >= last_sent - lag]
        assert all(seq <= witnessed for seq in old), (witnessed, old[-3:])  # (a)
        assert len(reopened) <= len(recent), (reopened, recent)  # (b)
        assert set(reopened) <= set(recent)
        if old:  # the restore of what was witnessed is detected
            r = _register(client, ds)
            assert r.status_code == 409 and r.json()["reason"] == "behind", r.text
        if lag > 5:
            assert reopened == [seq for *_, seq in acked] and crash - acked[0][1] < lag
    finally:
        restored.stop()


class _Broken:
    """A witness store that fails from ``broken_at`` on (as an unwritable directory does)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.broken_at: float | None = None

    def advance(self, heads: Any, at: str, signer: Any) -> Any:
        if self.broken_at is not None:
            raise OSError(28, "No space left on device")
        return self.store.advance(heads, at, signer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_an_unwritable_witness_stops_acknowledgements_within_the_lag(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    """(c) From the moment the witness cannot be written, no 201 is sent for a request sent
    more than ``LAG`` later: the requests wait for the writer and answer 503 (Retry-After), or
    409 ``unwitnessed`` once their dataset is frozen; the commits stand, and a retry with the
    same Idempotency-Key gets the recorded 201 once the witness is writable again.

    Shown to fail against a build without the bound check (``WitnessGuard.acknowledge``
    returning at once; run once by hand on SQLite): the request to the dataset with nothing
    pending was answered ``201`` (``assert (201 == 503)``, "status": "accepted", ledger_seq 2)
    while the witness could not be written. The hot dataset's late-201 assertion held even so:
    the writer's failed write froze that dataset (409 ``unwitnessed``) within ``LAG / 2``.
    """
    service = Service(fresh_backend, tmp_path / "witness", LAG)
    client = service.start()
    guard = client.app.state.writepath.witness  # type: ignore[attr-defined]
    assert guard is not None
    broken = _Broken(guard.store)
    guard.store = broken
    try:
        ds, other = basic_dataset(client)["id"], basic_dataset(client)["id"]
        _keep_registering(client, ds, 0.5)
        broken.broken_at = time.monotonic()
        answers = []
        end = broken.broken_at + 4 * LAG
        i = 0
        while time.monotonic() < end:
            sent = time.monotonic()
            key = {"Idempotency-Key": f"k-{i}"}
            r = client.post(
                f"/v1/datasets/{ds}/invocations",
                json={"mechanism": {"type": "pure_dp", "epsilon": "0.000001"}},
                headers={**AUTH, **key},
            )
            answers.append((sent, r.status_code, r.json(), key))
            i += 1
        late = [a for a in answers if a[1] == 201 and a[0] > broken.broken_at + LAG]
        assert late == [], late[:3]
        refused = [a for a in answers if a[1] != 201]
        assert refused, "the service kept acknowledging"
        for _sent, code, body, _key in refused:
            assert code in (503, 409), body
            assert code == 503 or body["reason"] == "unwitnessed", body
        # a dataset with nothing pending: its commit waits for the writer's retry, then 503
        key = {"Idempotency-Key": "other"}
        body = {"mechanism": {"type": "pure_dp", "epsilon": "0.000001"}}
        r = client.post(f"/v1/datasets/{other}/invocations", json=body, headers={**AUTH, **key})
        assert r.status_code == 503 and r.headers["Retry-After"], r.text
        first_503 = (0.0, 503, r.json(), key)
        # the witness writable again: the retry gets the recorded answer, now witnessed
        broken.broken_at = None
        deadline = time.monotonic() + 10
        while True:
            r = client.post(
                f"/v1/datasets/{other}/invocations",
                json={"mechanism": {"type": "pure_dp", "epsilon": "0.000001"}},
                headers={**AUTH, **first_503[3]},
            )
            if r.status_code == 201 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.status_code == 201, r.text
        assert read_directory(service.witness)[other].seq >= int(r.json()["ledger_seq"])
    finally:
        guard.store = broken.store
        service.stop()


def test_signed_witness_records_verify_with_the_public_key_only(
    fresh_backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the checkpoint key set, each witnessed head is a signed checkpoint: ``verify
    --witness --public-key`` accepts the export with the operator's public key, and refuses it
    with another key or with a record whose signed head was altered."""
    key = tmp_path / "checkpoint-key.pem"
    assert cli.main(["checkpoint-keygen", "-o", str(key)]) == 0
    public = tmp_path / "checkpoint-key.pub.pem"
    public.write_text(checkpoints.public_pem(load_private_key(key.read_bytes()).public_key()))
    other = tmp_path / "other.pub.pem"
    other.write_text(checkpoints.public_pem(Ed25519PrivateKey.generate().public_key()))
    service = Service(fresh_backend, tmp_path / "witness", 0.0, checkpoint_key=str(key))
    client = service.start()
    ds = basic_dataset(client)["id"]
    for _ in range(3):
        assert _register(client, ds).status_code == 201
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_export(client, ds)), "utf-8")
    service.stop()
    capsys.readouterr()

    record = read_directory(service.witness)[ds]
    assert record.seq == 4 and record.signature and record.key_id
    witness = str(service.witness)
    assert cli.main(["verify", str(export), "--witness", witness, "--public-key", str(public)]) == 0
    assert cli.main(["verify", str(export), "--witness", witness, "--public-key", str(other)]) == 1
    capsys.readouterr()

    # a witness record edited where the export cannot tell (its time) fails its signature
    (path,) = (p for p in (service.witness / "datasets").iterdir() if p.suffix == ".json")
    doc = json.loads(path.read_text("utf-8"))
    doc["witnessed_at"] = "2020-01-01T00:00:00.000000Z"
    path.write_text(json.dumps(doc), "utf-8")
    assert cli.main(["verify", str(export), "--witness", witness, "--public-key", str(public)]) == 1
    assert "signature" in capsys.readouterr().err.lower()


def test_a_capped_organisations_other_datasets_freeze_with_the_one_behind(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    """An organisation cap's counted state lives in its datasets' entries: when one of them is
    behind the witness, its siblings under the cap freeze too (``organisation``, naming the one
    behind), a dataset outside the organisation serves, and all serve again once the loss is
    dealt with. Without the sibling freeze the test fails: the set of
    frozen datasets lacks the sibling."""
    service = Service(fresh_backend, tmp_path / "witness", 0.0)
    client = service.start()
    r = client.post("/v1/organisations", json={"name": "capped"}, headers=AUTH)
    assert r.status_code == 201, r.text
    org = r.json()["id"]
    cap = {"epsilon": "10", "delta": "0.000001"}
    r = client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH)
    assert r.status_code == 200, r.text
    behind, sibling = (basic_dataset(client, organisation_id=org)["id"] for _ in range(2))
    outside = basic_dataset(client)["id"]
    for ds in (behind, sibling, outside):
        assert _register(client, ds).status_code == 201
    service.stop()
    backup = Backup(service.backend, tmp_path)
    backup.take()
    client = service.start()
    assert _register(client, behind).status_code == 201
    service.stop()
    backup.restore()

    client = service.start()
    frozen = {f["dataset_id"]: f for f in client.get("/v1/witness", headers=AUTH).json()["frozen"]}
    assert set(frozen) == {behind, sibling}
    assert frozen[behind]["reason"] == "behind"
    assert (frozen[sibling]["reason"], frozen[sibling]["sibling"]) == ("organisation", behind)
    for ds in (behind, sibling):
        r = _register(client, ds)
        assert r.status_code == 409 and r.json()["error"] == "LedgerBehindWitness", r.text
    assert _register(client, outside).status_code == 201

    r = client.post(
        f"/v1/datasets/{behind}/witness/acknowledge", json={"reason": "test"}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    r = client.post("/v1/witness/check", json={}, headers=AUTH)
    assert r.status_code == 200 and r.json()["frozen"] == [], r.text
    for ds in (behind, sibling):
        assert _register(client, ds).status_code == 201
    service.stop()
