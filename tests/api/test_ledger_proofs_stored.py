"""Proofs served from stored subtree roots (``merkle_nodes``, revision 0013).

A ledger of 700 entries (two full blocks of 256 and a partial third) is written through the
API. The first proof catches the stored roots up: exactly the roots of ``[0, 256)``,
``[256, 512)`` (level 8) and ``[0, 512)`` (level 9), each equal to the reference MTH of its
leaves (``tests/ledger/test_merkle.py``'s second implementation). Proofs around the block
boundaries then verify with both implementations against roots computed from the export;
100 more entries make the next proof store the third block's root. Revision 0013 builds the
same rows from an existing ledger; a stored root changed in place makes a proof at the head
that uses it refuse (500: the proof does not lead to the root served with it, or that root
is not the frontier's), and one whose root rests on it too fail against the true root.
"""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.uow import Database
from odometer_core.ledger.merkle import entry_leaf_hash, verify_consistency, verify_inclusion
from tests.ledger.test_merkle import ref_mth, ref_verify_consistency, ref_verify_inclusion
from tests.support import AUTH, ROOT, basic_dataset


def _write(client: TestClient, ds: str, count: int) -> None:
    url = f"/v1/datasets/{ds}/invocations"
    for _ in range(count):
        r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.0001"}})
        assert r.status_code == 201, r.text


def _hashes(client: TestClient, ds: str) -> list[str]:
    r = client.get(f"/v1/datasets/{ds}/ledger", params={"limit": 100_000})
    assert r.status_code == 200, r.text
    return [e["hash"] for e in r.json()["entries"]]


def _rows(database: Database, ds: str) -> dict[tuple[int, int], bytes]:
    with database.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT level, idx, hash FROM merkle_nodes WHERE dataset_id = :d"), {"d": ds}
        ).all()
    return {(int(lv), int(ix)): bytes(h) for lv, ix, h in rows}


def _expected(leaves: list[bytes]) -> dict[tuple[int, int], bytes]:
    """Every complete aligned subtree at level >= 8, by the reference's MTH."""
    out = {}
    for level in range(8, len(leaves).bit_length()):
        width = 1 << level
        for index in range(len(leaves) // width):
            out[level, index] = ref_mth(leaves[index * width : (index + 1) * width])
    return out


@pytest.fixture
def ledger(client: TestClient) -> tuple[str, list[str]]:
    client.headers.update(AUTH)
    ds = str(basic_dataset(client, epsilon="1")["id"])
    _write(client, ds, 699)
    return ds, _hashes(client, ds)


def _check_proofs(client: TestClient, ds: str, hashes: list[str], pairs: list[Any]) -> None:
    leaves = [bytes.fromhex(h) for h in hashes]
    for seq, size in pairs:
        r = client.get(f"/v1/datasets/{ds}/ledger/proof", params={"seq": seq, "size": size})
        assert r.status_code == 200, r.text
        body = r.json()
        root = ref_mth(leaves[:size])
        assert body["tree"] == {"size": size, "root": root.hex()}
        assert body["entry_hash"] == hashes[seq - 1]
        proof = [bytes.fromhex(h) for h in body["proof"]]
        assert verify_inclusion(entry_leaf_hash(hashes[seq - 1]), seq - 1, size, proof, root)
        assert ref_verify_inclusion(leaves[seq - 1], seq - 1, size, proof, root)
    for old, new in pairs:
        old -= 1
        r = client.get(f"/v1/datasets/{ds}/ledger/consistency", params={"from": old, "to": new})
        assert r.status_code == 200, r.text
        body = r.json()
        old_root, new_root = ref_mth(leaves[:old]), ref_mth(leaves[:new])
        assert body["old"]["root"] == old_root.hex() and body["new"]["root"] == new_root.hex()
        proof = [bytes.fromhex(h) for h in body["proof"]]
        assert verify_consistency(old, new, old_root, new_root, proof)
        if 0 < old < new:
            assert ref_verify_consistency(old, new, old_root, new_root, proof)


PAIRS = [
    (1, 1), (1, 256), (256, 256), (1, 257), (256, 257), (257, 257), (255, 512), (256, 512),
    (257, 513), (300, 511), (512, 700), (513, 700), (700, 700), (1, 700), (128, 640),
    (2, 3), (100, 255), (511, 512), (600, 699),
]  # fmt: skip


def test_stored_roots_are_caught_up_and_serve_proofs(
    client: TestClient, database: Database, ledger: tuple[str, list[str]]
) -> None:
    ds, hashes = ledger
    assert len(hashes) == 700
    assert _rows(database, ds) == {}  # the write path stores none
    leaves = [bytes.fromhex(h) for h in hashes]
    _check_proofs(client, ds, hashes, [(700, 700)])
    rows = _rows(database, ds)
    assert set(rows) == {(8, 0), (8, 1), (9, 0)}
    assert rows == _expected(leaves)
    _check_proofs(client, ds, hashes, PAIRS)
    _write(client, ds, 100)
    hashes = _hashes(client, ds)
    assert len(hashes) == 800
    _check_proofs(client, ds, hashes, [(799, 800), (700, 768), (769, 800)])
    rows = _rows(database, ds)
    assert set(rows) == {(8, 0), (8, 1), (8, 2), (9, 0)}
    assert rows == _expected([bytes.fromhex(h) for h in hashes])


def test_a_changed_stored_root_is_caught(
    client: TestClient, database: Database, ledger: tuple[str, list[str]]
) -> None:
    ds, hashes = ledger
    leaves = [bytes.fromhex(h) for h in hashes]
    _check_proofs(client, ds, hashes, [(700, 700)])
    with database.engine.begin() as conn:  # the root of [0, 512) changed in place
        conn.execute(
            text("UPDATE merkle_nodes SET hash = :h WHERE dataset_id = :d AND level = 9"),
            {"h": bytes(32), "d": ds},
        )
    raw = TestClient(client.app, raise_server_exceptions=False)
    # at the head, the root is not the stored frontier's; below it, the path (through the
    # intact roots of [0, 256) and [256, 512)) does not lead to the root served with it
    for params in ({"seq": 3}, {"seq": 3, "size": 600}, {"seq": 600, "size": 700}):
        r = raw.get(f"/v1/datasets/{ds}/ledger/proof", params=params, headers=AUTH)
        assert r.status_code == 500, (params, r.text)
    r = raw.get(f"/v1/datasets/{ds}/ledger/consistency", params={"from": 300}, headers=AUTH)
    assert r.status_code == 500, r.text
    # a proof that does not use it is served and verifies
    _check_proofs(client, ds, hashes, [(300, 511)])
    # a proof whose root and path both rest on it is served (nothing in the database
    # contradicts it below the head) and fails against the true root: what a client
    # holding a signed head sees
    r = client.get(f"/v1/datasets/{ds}/ledger/proof", params={"seq": 600, "size": 600})
    assert r.status_code == 200, r.text
    body = r.json()
    true_root = ref_mth(leaves[:600])
    assert body["tree"]["root"] != true_root.hex()
    proof = [bytes.fromhex(h) for h in body["proof"]]
    leaf = entry_leaf_hash(hashes[599])
    assert verify_inclusion(leaf, 599, 600, proof, bytes.fromhex(body["tree"]["root"]))
    assert not verify_inclusion(leaf, 599, 600, proof, true_root)


def test_revision_0013_builds_the_rows_of_existing_ledgers(
    client: TestClient, database: Database, ledger: tuple[str, list[str]]
) -> None:
    ds, hashes = ledger
    url = database.engine.url.render_as_string(hide_password=False)
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    command.downgrade(cfg, "0012")
    command.upgrade(cfg, "0013")
    rows = _rows(database, ds)
    assert set(rows) == {(8, 0), (8, 1), (9, 0)}
    assert rows == _expected([bytes.fromhex(h) for h in hashes])
    _check_proofs(client, ds, hashes, [(1, 700), (257, 512)])
