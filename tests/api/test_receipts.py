"""Signed tree heads served (``GET …/ledger/checkpoint``) and the receipts the write path's
answers carry, checked offline with the public key the operator hands out
(:mod:`odometer_core.ledger.receipts`), against roots computed from the export by
``tests/ledger/test_merkle.py``'s second implementation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_core.ledger.checkpoints import generate_key_pem
from odometer_core.ledger.merkle import entry_leaf_hash, verify_inclusion
from odometer_core.ledger.receipts import (
    Receipt,
    ReceiptError,
    check_receipt,
    decode_proof,
    open_head,
    open_receipt,
)
from tests.ledger.test_merkle import ref_mth, ref_verify_inclusion
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset, grant, new_principal


@pytest.fixture
def keyed(fresh_backend: Backend, tmp_path: Path) -> Iterator[TestClient]:
    key = tmp_path / "checkpoint.pem"
    key.write_bytes(generate_key_pem()[0])
    settings = Settings(
        database_url=fresh_backend.url, admin_key=ADMIN_KEY, checkpoint_key=str(key)
    )
    database = Database.from_settings(settings)
    with TestClient(create_app(settings, database)) as client:
        yield client
    database.dispose()


def _public_key(client: TestClient) -> Ed25519PublicKey:
    r = client.get("/v1/checkpoint-key", headers=AUTH)
    assert r.status_code == 200, r.text
    key = load_pem_public_key(r.json()["public_key"].encode())
    assert isinstance(key, Ed25519PublicKey)
    return key


def _register(client: TestClient, ds: str, headers: dict[str, str], eps: str = "0.01") -> Any:
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": eps}},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    return r.json()


def _hashes(client: TestClient, ds: str) -> list[str]:
    r = client.get(f"/v1/datasets/{ds}/ledger", params={"limit": 1000}, headers=AUTH)
    assert r.status_code == 200, r.text
    return [e["hash"] for e in r.json()["entries"]]


def test_the_signed_head_verifies_offline_with_its_inclusion_proofs(keyed: TestClient) -> None:
    ds = str(basic_dataset(keyed, epsilon="1")["id"])
    for _ in range(4):
        _register(keyed, ds, AUTH)
    hashes = _hashes(keyed, ds)
    assert len(hashes) == 5
    public = _public_key(keyed)
    leaves = [bytes.fromhex(h) for h in hashes]
    for seq in (None, 1, 3, 5):
        params = {} if seq is None else {"seq": seq}
        r = keyed.get(f"/v1/datasets/{ds}/ledger/checkpoint", params=params, headers=AUTH)
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["dataset_id"], body["size"]) == (ds, 5)
        assert body["root"] == ref_mth(leaves).hex()
        assert body["origin"] == f"odometer/ledger/{ds}" == body["key_name"]
        head = open_head(body["note"], public)
        assert (head.dataset_id, head.size, head.root.hex()) == (ds, 5, body["root"])
        if seq is None:
            assert body["inclusion"] is None
            continue
        inclusion = body["inclusion"]
        assert (inclusion["seq"], inclusion["entry_hash"]) == (seq, hashes[seq - 1])
        proof = decode_proof(inclusion["proof"])
        leaf = entry_leaf_hash(hashes[seq - 1])
        assert verify_inclusion(leaf, seq - 1, 5, proof, head.root)
        assert ref_verify_inclusion(leaves[seq - 1], seq - 1, 5, proof, head.root)


def test_who_may_read_signed_heads(keyed: TestClient, fresh_backend: Backend) -> None:
    ds = str(basic_dataset(keyed, epsilon="1")["id"])
    r = keyed.get(f"/v1/datasets/{ds}/ledger/checkpoint", params={"seq": 2}, headers=AUTH)
    assert r.status_code == 422 and "seq" in r.text  # past the head (1)
    org = str(keyed.get(f"/v1/datasets/{ds}", headers=AUTH).json()["organisation"])
    analyst, headers = new_principal(keyed, org, "analyst")
    r = keyed.get(f"/v1/datasets/{ds}/ledger/checkpoint", headers=headers)
    assert r.status_code == 404, r.text  # no grant: not visible
    grant(keyed, ds, analyst)
    r = keyed.get(f"/v1/datasets/{ds}/ledger/checkpoint", params={"seq": 1}, headers=headers)
    assert r.status_code == 200, r.text
    # a server without a checkpoint key signs no heads
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    database = Database.from_settings(settings)
    with TestClient(create_app(settings, database)) as plain:
        r = plain.get(f"/v1/datasets/{ds}/ledger/checkpoint", headers=AUTH)
        assert r.status_code == 409 and "CheckpointsDisabled" in r.text
        r = plain.get("/v1/datasets/ds_nope/ledger/checkpoint", headers=AUTH)
        assert r.status_code == 404
    database.dispose()


def test_registration_and_settle_answers_carry_receipts(keyed: TestClient) -> None:
    """Each 201 and each settle or cancel answer carries the receipt of the entry it wrote,
    which verifies with the public key and, with the signed head's inclusion proof, shows the
    entry in the ledger at its seq."""
    ds = str(basic_dataset(keyed, epsilon="1")["id"])
    public = _public_key(keyed)
    held: list[Receipt] = []
    for _ in range(3):
        body = _register(keyed, ds, AUTH)
        held.append(open_receipt(body["receipt"], public))
        assert held[-1].seq == body["ledger_seq"]
    odp = {
        "type": "odp",
        "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.2"}],
    }
    for action, extra in (("settle", {"cell": "low"}), ("cancel", {})):
        r = keyed.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": odp}, headers=AUTH)
        assert r.status_code == 201, r.text
        held.append(open_receipt(r.json()["receipt"], public))
        inv = r.json()["id"]
        r = keyed.post(f"/v1/datasets/{ds}/invocations/{inv}/{action}", json=extra, headers=AUTH)
        assert r.status_code == 200, r.text
        held.append(open_receipt(r.json()["receipt"], public))
        assert held[-1].seq == r.json()["ledger_seq"]
    hashes = _hashes(keyed, ds)
    assert [r.entry_hash for r in held] == [hashes[r.seq - 1] for r in held]
    for receipt in held:
        r = keyed.get(
            f"/v1/datasets/{ds}/ledger/checkpoint", params={"seq": receipt.seq}, headers=AUTH
        )
        body = r.json()
        head = open_head(body["note"], public)
        check_receipt(receipt, head, decode_proof(body["inclusion"]["proof"]), public)
    # a receipt is not transferable to another entry
    other = Receipt.from_json(held[0].to_json())
    with pytest.raises(ReceiptError):
        check_receipt(
            Receipt(other.dataset_id, 2, other.entry_hash, other.at, other.note),
            head,
            decode_proof(body["inclusion"]["proof"]),
            public,
        )
