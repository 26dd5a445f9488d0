"""Signed checkpoints let an auditor tell a truncated or rewritten history from the real one.

The hash chain alone cannot: dropping the last entries of an export, or editing an entry that
replay does not recompute (``actor``, ``at``) and re-hashing every entry after it, leaves an
export that verifies. With the operator's checkpoints (Ed25519 signatures over ``(dataset,
seq, head hash)``, written in the transaction of every N-th append or on demand) and the
operator's public key, ``odometer verify`` names the truncation and the first checkpoint the
rewritten chain no longer matches. Each test below asserts both halves where that is the
point: detected *with* checkpoints, and not detected without them.

How these were shown to fail (2026-11-22, each by a deliberately broken build, then reverted):

- ``CheckpointAudit.finish`` with its truncation check removed:
  ``test_truncation_is_detected_only_with_checkpoints`` failed with ``assert (0, True) ==
  (1, False)``: the truncated export verified with checkpoints too.
- ``signature_problem`` returning ``None`` unconditionally: ``test_wrong_public_key_is_rejected``
  failed (``assert (0, True) == (1, False)``: checkpoints under another key accepted) and all
  four ``test_tampered_checkpoint_is_rejected`` cases failed (the forged checkpoint was taken
  at its word: "entry 10: hash differs …" instead of "the signature does not verify").
- Revision 0003 without its triggers (the ``for statement in triggers`` loop skipped):
  the three ``test_checkpoints_are_append_only`` cases failed with ``DID NOT RAISE
  DBAPIError``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app import cli
from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_core.ledger import checkpoints
from odometer_core.ledger.chain import entry_hash
from odometer_core.ledger.formats import write_export
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset, ledger, new_principal

EVERY = 5
N_INVOCATIONS = 23  # + dataset_created = 24 entries: checkpoints at 5, 10, 15, 20 (+ 24 on demand)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """An operator key made the operator's way (``odometer checkpoint-keygen``)."""
    path = tmp_path / "checkpoint-key.pem"
    assert cli.main(["checkpoint-keygen", "-o", str(path)]) == 0
    return path


@pytest.fixture
def public_key_file(key_file: Path, tmp_path: Path) -> Path:
    key = checkpoints.load_private_key(key_file.read_bytes())
    path = tmp_path / "checkpoint-key.pub.pem"
    path.write_text(checkpoints.public_pem(key.public_key()), "ascii")
    return path


@pytest.fixture
def signing_client(backend: Backend, database: Database, key_file: Path) -> Iterator[TestClient]:
    """An app configured with ``ODOMETER_CHECKPOINT_KEY`` / ``ODOMETER_CHECKPOINT_EVERY``."""
    settings = Settings(
        database_url=backend.url,
        admin_key=ADMIN_KEY,
        checkpoint_key=str(key_file),
        checkpoint_every=EVERY,
    )
    with TestClient(create_app(settings, database)) as c:
        yield c


def _history(client: TestClient) -> str:
    ds = str(basic_dataset(client, epsilon=100)["id"])
    for i in range(N_INVOCATIONS):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": f"0.0{i % 9 + 1}"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    return ds


def _checkpoints(client: TestClient, ds: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/datasets/{ds}/checkpoints", headers=AUTH)
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["checkpoints"]
    return out


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        write_export(entries[0]["dataset_id"], entries, out, "jsonl")
    return path


def _verify(
    capsys: pytest.CaptureFixture[str], export: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    # ``--unpinned``: these exports are written without a closing head (tests/reliability/
    # test_export_end.py checks the head); what is checked here is the checkpoints' audit
    code = cli.main(["verify", str(export), "--unpinned", *extra])
    verdict: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, verdict


# ---------------------------------------------------------------------------- signing
def test_checkpoints_are_signed_every_n_entries_and_verify(signing_client: TestClient) -> None:
    client = signing_client
    ds = _history(client)
    entries = ledger(client, ds)
    assert len(entries) == N_INVOCATIONS + 1
    cps = _checkpoints(client, ds)
    assert [c["seq"] for c in cps] == [5, 10, 15, 20]
    key = client.get("/v1/checkpoint-key", headers=AUTH).json()
    assert key["enabled"] is True
    assert key["every"] == EVERY
    public = checkpoints.load_public_key(key["public_key"].encode())
    assert key["key_id"] == checkpoints.key_fingerprint(public)
    for c in cps:
        assert c["dataset_id"] == ds
        assert c["head_hash"] == entries[c["seq"] - 1]["hash"]
        assert c["signed_at"] == entries[c["seq"] - 1]["at"]  # written with the entry
        assert c["key_id"] == key["key_id"]
        assert checkpoints.signature_problem(c, public) is None


def test_on_demand_checkpoint_by_an_auditor(signing_client: TestClient) -> None:
    client = signing_client
    ds = _history(client)
    org = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["organisation"]
    _, auditor = new_principal(client, org, "auditor")
    r = client.post(f"/v1/datasets/{ds}/checkpoints", headers=auditor)
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["seq"], made["head_hash"]) == (24, ledger(client, ds)[-1]["hash"])
    again = client.post(f"/v1/datasets/{ds}/checkpoints", headers=auditor)
    assert again.status_code == 200
    assert again.json() == made  # the same head is not signed twice
    assert [c["seq"] for c in _checkpoints(client, ds)] == [5, 10, 15, 20, 24]
    # the dataset's state is untouched: signing spends nothing and appends no entry
    assert len(ledger(client, ds)) == N_INVOCATIONS + 1


def test_without_a_key_nothing_is_signed(client: TestClient) -> None:
    ds = _history(client)
    assert _checkpoints(client, ds) == []
    key = client.get("/v1/checkpoint-key", headers=AUTH).json()
    assert key == {
        "enabled": False,
        "algorithm": "Ed25519",
        "key_id": None,
        "public_key": None,
        "every": None,
    }
    r = client.post(f"/v1/datasets/{ds}/checkpoints", headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (409, "CheckpointsDisabled")
    assert _checkpoints(client, ds) == []


def test_keygen_writes_a_private_file_and_refuses_to_overwrite(
    key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    key = checkpoints.load_private_key(key_file.read_bytes())
    before = key_file.read_bytes()
    assert cli.main(["checkpoint-keygen", "-o", str(key_file)]) == 1
    assert key_file.read_bytes() == before
    capsys.readouterr()
    assert cli.main(["checkpoint-keygen", "-o", str(key_file), "--force"]) == 0
    printed = capsys.readouterr().out
    replaced = checkpoints.load_private_key(key_file.read_bytes())
    assert printed == checkpoints.public_pem(replaced.public_key())
    assert checkpoints.key_fingerprint(replaced.public_key()) != checkpoints.key_fingerprint(
        key.public_key()
    )


# ---------------------------------------------------------------------------- the audit
def test_truncation_is_detected_only_with_checkpoints(
    signing_client: TestClient,
    public_key_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = signing_client
    ds = _history(client)
    assert client.post(f"/v1/datasets/{ds}/checkpoints", headers=AUTH).status_code == 201
    cps = tmp_path / "checkpoints.json"
    cps.write_text(client.get(f"/v1/datasets/{ds}/checkpoints", headers=AUTH).text, "utf-8")
    entries = ledger(client, ds)
    signed = ("--checkpoints", str(cps), "--public-key", str(public_key_file))

    whole = _write(tmp_path / "whole.jsonl", entries)
    code, verdict = _verify(capsys, whole, *signed)
    assert (code, verdict["ok"], verdict["problems"]) == (0, True, [])
    assert verdict["checkpoints"]["matched"] == 5
    assert verdict["checkpoints"]["newest_seq"] == 24

    truncated = _write(tmp_path / "truncated.jsonl", entries[:-2])
    code, verdict = _verify(capsys, truncated)  # the chain alone: a clean, shorter history
    assert (code, verdict["ok"], verdict["entries"]) == (0, True, 22)
    code, verdict = _verify(capsys, truncated, *signed)
    assert (code, verdict["ok"]) == (1, False)
    assert verdict["problems"] == [
        "export ends at seq 22 but a signed checkpoint exists for seq 24 > 22: "
        "the export is truncated"
    ]


def _rewrite(entries: list[dict[str, Any]], position: int) -> list[dict[str, Any]]:
    """Change who acted at ``position`` (replay does not recompute ``actor``) and re-hash the
    chain from there on: a forgery the chain and the replay both accept."""
    forged = [dict(e) for e in entries]
    forged[position - 1]["actor"] = "mallory"
    prev = forged[position - 2]["hash"]
    for e in forged[position - 1 :]:
        e["prev_hash"] = prev
        e["hash"] = prev = entry_hash(e)
    return forged


def test_rewritten_history_is_detected_at_the_first_differing_checkpoint(
    signing_client: TestClient,
    public_key_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = signing_client
    ds = _history(client)
    cps = tmp_path / "checkpoints.json"
    cps.write_text(client.get(f"/v1/datasets/{ds}/checkpoints", headers=AUTH).text, "utf-8")
    entries = ledger(client, ds)
    forged = _write(tmp_path / "forged.jsonl", _rewrite(entries, 7))
    code, verdict = _verify(capsys, forged)
    assert (code, verdict["ok"]) == (0, True)  # chain + replay cannot tell
    code, verdict = _verify(
        capsys, forged, "--checkpoints", str(cps), "--public-key", str(public_key_file)
    )
    assert (code, verdict["ok"]) == (1, False)
    # 10 is the first checkpoint after the edit; 15 and 20 differ as well; 5 still matches
    assert [p.split(":")[0] for p in verdict["problems"]] == ["entry 10", "entry 15", "entry 20"]
    assert "the history was rewritten" in verdict["problems"][0]
    assert verdict["checkpoints"]["matched"] == 1


def test_wrong_public_key_is_rejected(
    signing_client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = signing_client
    ds = _history(client)
    cps = tmp_path / "checkpoints.json"
    cps.write_text(client.get(f"/v1/datasets/{ds}/checkpoints", headers=AUTH).text, "utf-8")
    other = tmp_path / "other.pub.pem"
    other.write_text(checkpoints.public_pem(Ed25519PrivateKey.generate().public_key()), "ascii")
    export = _write(tmp_path / "export.jsonl", ledger(client, ds))
    code, verdict = _verify(capsys, export, "--checkpoints", str(cps), "--public-key", str(other))
    assert (code, verdict["ok"]) == (1, False)
    assert len(verdict["problems"]) == 4
    assert all("not the given public key" in p for p in verdict["problems"])
    assert verdict["checkpoints"]["signed"] == 0
    # the signatures themselves do not verify under that key either (key_id aside)
    document = json.loads(cps.read_text("utf-8"))["checkpoints"][0]
    pem = other.read_bytes()
    document["key_id"] = checkpoints.key_fingerprint(checkpoints.load_public_key(pem))
    problem = checkpoints.signature_problem(document, checkpoints.load_public_key(pem))
    assert problem == "the signature does not verify"


@pytest.mark.parametrize(
    ("field", "value"),
    [("head_hash", "f" * 64), ("seq", 4), ("dataset_id", "ds_other"), ("signed_at", "x")],
)
def test_tampered_checkpoint_is_rejected(
    signing_client: TestClient,
    public_key_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: object,
) -> None:
    """A forger who rewrote the chain must also move the checkpoints: the signatures break."""
    client = signing_client
    ds = _history(client)
    cps = _checkpoints(client, ds)
    cps[1][field] = value
    path = tmp_path / "checkpoints.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cps), "utf-8")
    export = _write(tmp_path / "export.jsonl", ledger(client, ds))
    code, verdict = _verify(
        capsys, export, "--checkpoints", str(path), "--public-key", str(public_key_file)
    )
    assert (code, verdict["ok"]) == (1, False)
    assert verdict["problems"] == [
        f"checkpoint 2 (seq {cps[1]['seq']!r}): the signature does not verify"
    ]
    assert verdict["checkpoints"]["matched"] == 3


# ---------------------------------------------------------------------------- append-only
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger_checkpoints SET head_hash = 'x' WHERE dataset_id = :id",
        "UPDATE ledger_checkpoints SET seq = seq WHERE dataset_id = :id",
        "DELETE FROM ledger_checkpoints WHERE dataset_id = :id",
    ],
)
def test_checkpoints_are_append_only(
    signing_client: TestClient, database: Database, statement: str
) -> None:
    ds = str(basic_dataset(signing_client)["id"])
    assert signing_client.post(f"/v1/datasets/{ds}/checkpoints", headers=AUTH).status_code == 201
    with database.engine.connect() as conn:
        with pytest.raises(DBAPIError, match="append-only"):
            conn.execute(text(statement), {"id": ds})
        conn.rollback()
        if conn.dialect.name == "postgresql":
            with pytest.raises(DBAPIError, match="append-only"):
                conn.execute(text("TRUNCATE ledger_checkpoints"))
            conn.rollback()
        rows = conn.execute(
            text("SELECT seq, head_hash FROM ledger_checkpoints WHERE dataset_id = :id"),
            {"id": ds},
        ).all()
    assert [tuple(r) for r in rows] == [(1, ledger(signing_client, ds)[0]["hash"])]
