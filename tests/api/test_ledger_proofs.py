"""The Merkle tree kept beside each dataset's head, and the proofs served from it.

Every write path moves the stored frontier (``datasets.merkle_json``) with the head: the
registrations' and settlements' write statement (:func:`app.db.writes.write`) and the ORM's
units of work (creation, budget changes, grants). After each write, the stored frontier's root
is the root of the RFC 9162 tree over the exported entries' hashes, computed here from the
export alone by the recursive definition (``tests/ledger/test_merkle.py``'s second
implementation), at every size the ledger passed through. The proofs served by
``…/ledger/proof`` and ``…/ledger/consistency`` verify with the core's verifiers and with that
second implementation's, against roots computed from the export; a one-bit change in a proof
or a root fails; bad sizes are 422.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.uow import Database
from odometer_core.ledger.merkle import (
    Frontier,
    entry_leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from tests.ledger.test_merkle import ref_mth, ref_verify_consistency, ref_verify_inclusion
from tests.support import AUTH, basic_dataset

ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.2"}],
}


def _stored(database: Database, dataset_id: str) -> tuple[int, Frontier]:
    with database.engine.connect() as conn:
        seq, doc = conn.execute(
            text("SELECT last_seq, merkle_json FROM datasets WHERE id = :id"), {"id": dataset_id}
        ).one()
    frontier = Frontier.from_json(doc if isinstance(doc, dict) else json.loads(doc))
    return int(seq), frontier


def _hashes(client: TestClient, dataset_id: str) -> list[str]:
    r = client.get(f"/v1/datasets/{dataset_id}/ledger", params={"limit": 1000}, headers=AUTH)
    assert r.status_code == 200, r.text
    return [e["hash"] for e in r.json()["entries"]]


def _leaves(hashes: list[str]) -> list[bytes]:
    """The tree's leaves (the entry hashes as bytes; the reference hashes them as leaves)."""
    return [bytes.fromhex(h) for h in hashes]


def _history(client: TestClient, database: Database) -> tuple[str, list[str]]:
    """A dataset written through every path, the stored frontier checked after each write."""
    ds = str(basic_dataset(client, epsilon="1")["id"])
    url = f"/v1/datasets/{ds}/invocations"
    writes: list[Any] = [
        lambda: client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}),
        lambda: client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "5"}}),
        lambda: client.post(url, json={"mechanism": ODP}),
        lambda: client.patch(f"/v1/datasets/{ds}/budget", json={"epsilon": "2", "delta": "1e-6"}),
        lambda: client.post(url, json={"mechanism": ODP}),
        lambda: client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.05"}}),
    ]
    client.headers.update(AUTH)
    try:
        sizes = [1]
        for step, write in enumerate(writes):
            r = write()
            assert r.status_code in (200, 201, 409), r.text
            if step in (2, 4):  # settle the reservation just made (the settle path)
                inv = r.json()["id"]
                r = client.post(f"{url}/{inv}/settle", json={"cell": "low"})
                assert r.status_code == 200, r.text
            seq, frontier = _stored(database, ds)
            sizes.append(seq)
            hashes = _hashes(client, ds)
            assert len(hashes) == seq == frontier.size
            assert frontier.root() == ref_mth(_leaves(hashes))
            assert frontier == Frontier.of_leaf_hashes(entry_leaf_hash(h) for h in hashes)
    finally:
        for key in AUTH:
            del client.headers[key]
    assert sizes == [1, 2, 3, 5, 6, 8, 9]  # creation, accepted, rejected, reserved+settled, ...
    return ds, hashes


def test_the_stored_frontier_follows_every_write(client: TestClient, database: Database) -> None:
    _history(client, database)


def test_inclusion_proofs_verify_at_every_size(client: TestClient, database: Database) -> None:
    ds, hashes = _history(client, database)
    leaves = _leaves(hashes)
    url = f"/v1/datasets/{ds}/ledger/proof"
    head = len(hashes)
    for size in range(1, head + 1):
        root = ref_mth(leaves[:size])
        for seq in range(1, size + 1):
            params = {"seq": seq} if size == head else {"seq": seq, "size": size}
            r = client.get(url, params=params, headers=AUTH)
            assert r.status_code == 200, r.text
            body = r.json()
            assert (body["dataset_id"], body["head_seq"], body["seq"]) == (ds, head, seq)
            assert body["entry_hash"] == hashes[seq - 1]
            assert body["tree"] == {"size": size, "root": root.hex()}
            proof = [bytes.fromhex(h) for h in body["proof"]]
            leaf = entry_leaf_hash(body["entry_hash"])
            assert verify_inclusion(leaf, seq - 1, size, proof, root)
            assert ref_verify_inclusion(leaves[seq - 1], seq - 1, size, proof, root)
            # a one-bit change anywhere fails: in any proof hash, the root, the leaf
            for i, h in enumerate(proof):
                for bit in (0, 255):
                    bad = [*proof]
                    bad[i] = _flip(h, bit)
                    assert not verify_inclusion(leaf, seq - 1, size, bad, root)
            assert not verify_inclusion(leaf, seq - 1, size, proof, _flip(root, 7))
            assert not verify_inclusion(_flip(leaf, 100), seq - 1, size, proof, root)


def test_consistency_proofs_verify_for_every_pair(client: TestClient, database: Database) -> None:
    ds, hashes = _history(client, database)
    leaves = _leaves(hashes)
    url = f"/v1/datasets/{ds}/ledger/consistency"
    head = len(hashes)
    for new in range(0, head + 1):
        new_root = ref_mth(leaves[:new])
        for old in range(0, new + 1):
            old_root = ref_mth(leaves[:old])
            params = {"from": old} if new == head else {"from": old, "to": new}
            r = client.get(url, params=params, headers=AUTH)
            assert r.status_code == 200, r.text
            body = r.json()
            assert (body["dataset_id"], body["head_seq"]) == (ds, head)
            assert body["old"] == {"size": old, "root": old_root.hex()}
            assert body["new"] == {"size": new, "root": new_root.hex()}
            proof = [bytes.fromhex(h) for h in body["proof"]]
            assert verify_consistency(old, new, old_root, new_root, proof)
            if 0 < old < new:
                assert ref_verify_consistency(old, new, old_root, new_root, proof)
            for i, h in enumerate(proof):
                bad = [*proof]
                bad[i] = _flip(h, 33)
                assert not verify_consistency(old, new, old_root, new_root, bad)
            assert not verify_consistency(old, new, _flip(old_root, 1), new_root, proof)
            if old:  # every tree extends the empty one, whatever its root
                assert not verify_consistency(old, new, old_root, _flip(new_root, 254), proof)


def _flip(value: bytes, bit: int) -> bytes:
    out = bytearray(value)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("proof", {"seq": 0}, "seq"),
        ("proof", {"seq": 4}, "seq"),  # past the head (3)
        ("proof", {"seq": 3, "size": 2}, "seq"),
        ("proof", {"seq": 1, "size": 4}, "size"),
        ("proof", {"seq": 1, "size": 0}, "size"),
        ("proof", {"seq": "1_0"}, "seq"),
        ("proof", {"seq": "-1"}, "seq"),
        ("proof", {}, "seq"),
        ("consistency", {"from": 2, "to": 1}, "from"),
        ("consistency", {"from": 4}, "from"),  # past the head (3)
        ("consistency", {"from": 1, "to": 4}, "to"),
        ("consistency", {"from": "x"}, "from"),
        ("consistency", {}, "from"),
    ],
)
def test_bad_sizes_are_refused(
    client: TestClient, path: str, params: dict[str, Any], field: str
) -> None:
    ds = basic_dataset(client)["id"]
    for eps in ("0.1", "0.2"):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": eps}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    r = client.get(f"/v1/datasets/{ds}/ledger/{path}", params=params, headers=AUTH)
    assert r.status_code == 422, r.text
    assert field in r.text


def test_an_unknown_dataset_has_no_proofs(client: TestClient) -> None:
    for path, params in (("proof", {"seq": 1}), ("consistency", {"from": 0})):
        r = client.get(f"/v1/datasets/ds_nope/ledger/{path}", params=params, headers=AUTH)
        assert r.status_code == 404, r.text
