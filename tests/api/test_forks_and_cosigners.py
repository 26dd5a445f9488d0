"""Heads that others keep, and a restore's fork made explicit: end to end, checked offline, on
SQLite and PostgreSQL.

The service runs with a checkpoint key and a witness that has a key of its own. Its checks
cosign each dataset's signed tree head; ``GET /v1/ledger-heads`` publishes them; ``odometer
verify --cosigner`` names the witness that saw a head, and reports a forged cosignature as not
verified (never counted).

Then the database is restored from a backup taken at entry 3 while entries 4..6 had receipts
and a cosigned head of 6 was held. The operator acknowledges the loss (a ``loss_acknowledged``
entry naming the lost range and the last head the witness cosigned), and new entries take
seqs 5.. again. Offline, with the operator's public key:

- a receipt of a lost entry reports FORKED, naming the acknowledgement (exit 3), and FAILED
  without it (exit 1): a fork without an acknowledgement fails hard; a receipt of a kept entry
  and of a new one verify;
- the auditor's head of 6 reports FORKED against the new export and against a newer head with a
  consistency proof; the head of 3 (before the fork) still extends;
- the export, acknowledgement included, replays in the core's verifier; a tampered
  acknowledgement does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_client.cli import main
from odometer_core.ledger import replay
from odometer_core.ledger.chain import entry_hash
from odometer_core.ledger.checkpoints import generate_key_pem, load_public_key
from odometer_core.ledger.receipts import open_head
from tests.reliability.test_restore import Backup
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset


class Service:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.checkpoint_key = tmp / "checkpoint.pem"
        self.checkpoint_key.write_bytes(generate_key_pem()[0])
        self.witness_key = tmp / "witness.key"
        self.client: TestClient | None = None
        self.database: Database | None = None

    def start(self) -> TestClient:
        settings = Settings(
            database_url=self.url,
            admin_key=ADMIN_KEY,
            checkpoint_key=str(self.checkpoint_key),
            witness_dir=str(self.tmp / "witness"),
            witness_key=str(self.witness_key),
            witness_check_seconds=0,
            witness_lag_seconds=0,
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


@pytest.fixture
def service(fresh_backend: Backend, tmp_path: Path) -> Iterator[Service]:
    s = Service(fresh_backend.url, tmp_path)
    yield s
    s.stop()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
        said = ""
    except SystemExit as exc:  # a message: the process exits 1 with it on stderr
        code, said = 1, str(exc.code)
    captured = capsys.readouterr()
    return code, captured.out + captured.err + said


def _get(client: TestClient, url: str, **params: int | str) -> Any:
    r = client.get(url, params=params, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


def _register(client: TestClient, ds: str) -> dict[str, Any]:
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": "0.01"}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    receipt: dict[str, Any] = r.json()["receipt"]
    return receipt


def _check(client: TestClient) -> None:
    r = client.post("/v1/witness/check", headers=AUTH)
    assert r.status_code == 200, r.text


def _write(path: Path, doc: Any) -> str:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _lines(path: Path, docs: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return str(path)


def test_cosigned_heads_then_an_acknowledged_fork_reported_offline(
    service: Service,
    fresh_backend: Backend,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, vkey = _run(
        capsys, "witness-keygen", "witness.example/ledger", "-o", str(service.witness_key)
    )
    assert code == 0
    vkey = vkey.strip()
    client = service.start()
    ds = str(basic_dataset(client, epsilon="1")["id"])
    url = f"/v1/datasets/{ds}"
    pem = tmp_path / "public.pem"
    pem.write_text(_get(client, "/v1/checkpoint-key")["public_key"])
    key = ("--public-key", str(pem))
    kept = [_register(client, ds) for _ in range(2)]  # seqs 2, 3
    _check(client)

    # published: the head signed now, and the head the witness cosigned, with its key
    page = _get(client, "/v1/ledger-heads")
    assert page["witness_vkey"] == vkey
    [published] = [h for h in page["heads"] if h["dataset_id"] == ds]
    assert published["size"] == 3 and published["cosigned"]["size"] == 3
    head3 = published["cosigned"]["note"]
    assert head3.startswith(published["note"].split("\n\n")[0] + "\n\n")
    held3 = _write(tmp_path / "head-3.note", head3)

    # a second key cosigned it, and verify names it; a forged cosignature is reported, not
    # counted
    export0 = _write(
        tmp_path / "export0.json",
        client.get(f"{url}/ledger", params={"export": "true", "format": "json"}, headers=AUTH).text,
    )
    code, out = _run(capsys, "verify", export0, *key, "--since", held3, "--cosigner", vkey)
    assert code == 0, out
    assert "SEEN: the head of size 3" in out and "witness.example/ledger+" in out
    assert '"status": "verified"' in out
    text, _, block = head3.partition("\n\n")
    operator_line, witness_line = block.splitlines()
    name, blob = witness_line.rsplit(" ", 1)
    flipped = blob[:-6] + ("A" if blob[-6] != "A" else "B") + blob[-5:]
    forged3 = _write(tmp_path / "forged-3.note", f"{text}\n\n{operator_line}\n{name} {flipped}\n")
    code, out = _run(capsys, "verify", export0, *key, "--since", forged3, "--cosigner", vkey)
    assert "NOT VERIFIED: the cosignature of witness witness.example/ledger+" in out, out
    assert '"status": "invalid"' in out and "SEEN:" not in out
    # a quorum of one witness: met by the true cosignature, not by the forged one
    quorum = ("--cosigner", vkey, "--quorum", "1")
    code, out = _run(capsys, "verify", export0, *key, "--since", held3, *quorum)
    assert code == 0, out
    code, out = _run(capsys, "verify", export0, *key, "--since", forged3, *quorum)
    assert code == 1 and "cosigned by 0 of the witnesses given, fewer than --quorum 1" in out

    # a backup at entry 3; entries 4..6 get receipts, the witness cosigns the head of 6
    service.stop()
    backup = Backup(fresh_backend, tmp_path)
    backup.take()
    client = service.start()
    lost = [_register(client, ds) for _ in range(3)]  # seqs 4, 5, 6
    _check(client)
    [published] = [h for h in _get(client, "/v1/ledger-heads")["heads"] if h["dataset_id"] == ds]
    assert published["cosigned"]["size"] == 6
    held6 = _write(tmp_path / "head-6.note", published["cosigned"]["note"])
    root6 = published["cosigned"]["root"]

    # restore; the service starts frozen on the dataset; the operator acknowledges the loss
    service.stop()
    backup.restore()
    client = service.start()
    r = client.post(
        f"{url}/witness/acknowledge", json={"reason": "restored the 02:00 backup"}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    assert r.json()["lost"] == {
        "witnessed_seq": 6,
        "witnessed_hash": lost[-1]["entry_hash"],
        "database_seq": 3,
        "signed_head": {"size": 6, "root": root6},
    }
    new = [_register(client, ds) for _ in range(3)]  # seqs 5, 6, 7: the lost seqs again
    assert [n["seq"] for n in new] == [5, 6, 7]
    _check(client)
    [published] = [h for h in _get(client, "/v1/ledger-heads")["heads"] if h["dataset_id"] == ds]
    assert (published["cosigned"]["epoch"], published["cosigned"]["size"]) == (1, 7)

    forks = _write(tmp_path / "forks.json", _get(client, f"{url}/ledger/forks"))
    [fork] = json.loads(Path(forks).read_text())["forks"]
    assert fork["entry"]["seq"] == 4 and fork["entry"]["kind"] == "loss_acknowledged"
    head5 = _write(tmp_path / "head-5.json", _get(client, f"{url}/ledger/checkpoint", seq=5))

    # the analyst's receipt of the lost entry 5: FORKED with the acknowledgement, FAILED
    # without it
    lost5 = _lines(tmp_path / "lost5.jsonl", [lost[1]])
    code, out = _run(capsys, "verify-receipt", lost5, "--head", head5, *key, "--forks", forks)
    assert code == 3, out
    assert "FORKED: entry 5" in out and "loss of entries 4..6" in out and "by admin" in out
    assert "'restored the 02:00 backup'" in out and "size 6" in out
    code, out = _run(capsys, "verify-receipt", lost5, "--head", head5, *key)
    assert code == 1 and "FAILED: entry 5" in out and "FORKED" not in out, out
    # every receipt kept before it: the lost ones forked, none passes silently
    before = _lines(tmp_path / "before.jsonl", [*kept, *lost])
    code, out = _run(capsys, "verify-receipt", before, "--head", head5, *key, "--forks", forks)
    assert code == 3 and out.count("FORKED: entry") == 3 and "VERIFIED" not in out, out
    # a kept entry and a new one verify, the acknowledgement notwithstanding
    head3n = _write(tmp_path / "head-3n.json", _get(client, f"{url}/ledger/checkpoint", seq=3))
    code, out = _run(
        capsys,
        "verify-receipt",
        _lines(tmp_path / "k.jsonl", [kept[1]]),
        "--head",
        head3n,
        *key,
        "--forks",
        forks,
    )
    assert code == 0 and "VERIFIED: entry 3" in out, out
    code, out = _run(
        capsys,
        "verify-receipt",
        _lines(tmp_path / "n.jsonl", [new[0]]),
        "--head",
        head5,
        *key,
        "--forks",
        forks,
    )
    assert code == 0 and "VERIFIED: entry 5" in out, out
    # an acknowledgement changed in the forks document no longer proves anything
    doc = json.loads(Path(forks).read_text())
    doc["forks"][0]["entry"]["actor"] = "nobody"
    doc["forks"][0]["entry"]["hash"] = entry_hash(doc["forks"][0]["entry"])
    tampered = _write(tmp_path / "tampered.json", doc)
    code, out = _run(capsys, "verify-receipt", lost5, "--head", head5, *key, "--forks", tampered)
    assert code == 1 and "is not in the signed head" in out, out

    # the auditor's head of 6: forked, against the export and against a consistency proof
    export = _write(
        tmp_path / "export.json",
        client.get(f"{url}/ledger", params={"export": "true", "format": "json"}, headers=AUTH).text,
    )
    code, out = _run(capsys, "verify", export, *key, "--since", held6, "--cosigner", vkey)
    assert code == 3, out
    assert "FORKED: the head held in" in out and "loss of entries 4..6" in out
    assert "the last head the witness cosigned before it: size 6" in out
    assert '"ok": false' in out and "SEEN: the head of size 6" in out
    new_head = _write(tmp_path / "new.json", _get(client, f"{url}/ledger/checkpoint"))
    consistency = _write(
        tmp_path / "c.json", _get(client, f"{url}/ledger/consistency", **{"from": 6})
    )
    args = ("--since", held6, "--head", new_head, "--consistency", consistency, *key)
    code, out = _run(capsys, "verify", *args, "--forks", forks)
    assert code == 3 and "FORKED" in out and "acknowledged the loss" in out, out
    code, out = _run(capsys, "verify", *args)
    assert code == 1 and "FAILED" in out and "FORKED" not in out, out
    # the head of 3 (the kept prefix) still extends
    code, out = _run(capsys, "verify", export, *key, "--since", held3)
    assert code == 0 and '"extends": true' in out, out

    # the export replays, the acknowledgement with it; a malformed one (chain rehashed) not
    entries = json.loads(Path(export).read_text())["entries"]
    assert replay(entries).ok
    ack = entries[3]
    assert ack["request"]["signed_head"] == {"size": 6, "root": root6}
    ack["request"]["signed_head"] = {"size": 6, "root": "not hex"}
    prev = entries[2]["hash"]
    for entry in entries[3:]:
        entry["prev_hash"] = prev
        entry["hash"] = prev = entry_hash(entry)
    verdict = replay(entries)
    assert not verdict.ok and "signed_head" in verdict.problems[0], verdict.problems


def test_heads_are_published_without_a_cosigning_witness(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    """No witness key: the heads are published signed by the operator, with nothing cosigned;
    a dataset without acknowledgements has no fork."""
    key = tmp_path / "checkpoint.pem"
    key.write_bytes(generate_key_pem()[0])
    settings = Settings(
        database_url=fresh_backend.url, admin_key=ADMIN_KEY, checkpoint_key=str(key)
    )
    database = Database.from_settings(settings)
    try:
        with TestClient(create_app(settings, database)) as client:
            ds = str(basic_dataset(client, epsilon="1")["id"])
            _register(client, ds)
            page = _get(client, "/v1/ledger-heads")
            assert page["witness_vkey"] is None and page["next_offset"] is None
            [head] = [h for h in page["heads"] if h["dataset_id"] == ds]
            assert head["size"] == 2 and head["cosigned"] is None
            pem = _get(client, "/v1/checkpoint-key")["public_key"]
            opened = open_head(head["note"], load_public_key(pem.encode()))
            assert (opened.size, opened.root.hex()) == (2, head["root"])
            forks = _get(client, f"/v1/datasets/{ds}/ledger/forks")
            assert forks["forks"] == [] and forks["size"] == 2
            assert _get(client, "/v1/ledger-heads", limit=1)["next_offset"] in (None, 1)
    finally:
        database.dispose()
