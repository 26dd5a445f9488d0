"""The analyst's and the auditor's commands, offline: receipts kept from registrations and
listed (``odometer receipts``), checked against a later signed head
(``odometer verify-receipt``), and an earlier signed head extended by an export or by a
consistency proof (``odometer verify --since``). Then the operator rewrites one entry and signs
every head again with its own key: the analyst's receipt and the auditor's earlier head each
report it, with the public key alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_client.cli import main
from odometer_client.receipts import ReceiptStore
from odometer_core.ledger.checkpoints import generate_key_pem
from odometer_core.ledger.merkle import TreeReader, entry_leaf_hash
from odometer_core.ledger.receipts import LogSigner
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset


@pytest.fixture
def served(fresh_backend: Backend, tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    key = tmp_path / "checkpoint.pem"
    key.write_bytes(generate_key_pem()[0])
    settings = Settings(
        database_url=fresh_backend.url, admin_key=ADMIN_KEY, checkpoint_key=str(key)
    )
    database = Database.from_settings(settings)
    with TestClient(create_app(settings, database)) as client:
        yield client, key
    database.dispose()


def _get(client: TestClient, url: str, **params: int | str) -> str:
    r = client.get(url, params=params, headers=AUTH)
    assert r.status_code == 200, r.text
    return str(r.text)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_receipts_and_heads_catch_a_rewrite_offline(
    served: tuple[TestClient, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, key_path = served
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(tmp_path / "data"))
    ds = str(basic_dataset(client, epsilon="1")["id"])
    url = f"/v1/datasets/{ds}"
    for _ in range(3):  # as `odometer register` does: the answer's receipt kept
        r = client.post(
            f"{url}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": "0.01"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        assert ReceiptStore().keep(r.json(), "http://testserver")
    code, out = _run(capsys, "receipts", ds, "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["receipt"]["seq"] for d in lines] == [2, 3, 4]
    receipts_file = tmp_path / "receipts.jsonl"
    receipts_file.write_text(out)
    pem = tmp_path / "public.pem"
    pem.write_text(json.loads(_get(client, "/v1/checkpoint-key"))["public_key"])

    # the analyst checks entry 3's receipt against a later signed head
    head3 = tmp_path / "head-3.json"
    head3.write_text(_get(client, f"{url}/ledger/checkpoint", seq=3))
    code, out = _run(
        capsys, "verify-receipt", str(receipts_file), "--head", str(head3), "--public-key", str(pem)
    )
    assert code == 0, out
    assert "VERIFIED: entry 3" in out and "size 4" in out

    # the auditor holds the head of 4; two more entries; the later head extends it
    old = tmp_path / "old-head.json"
    old.write_text(_get(client, f"{url}/ledger/checkpoint"))
    for _ in range(2):
        r = client.post(
            f"{url}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": "0.01"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    new = tmp_path / "new-head.json"
    new.write_text(_get(client, f"{url}/ledger/checkpoint"))
    consistency = tmp_path / "consistency.json"
    consistency.write_text(_get(client, f"{url}/ledger/consistency", **{"from": 4}))
    args = ("--since", str(old), "--public-key", str(pem))
    code, out = _run(capsys, "verify", *args, "--head", str(new), "--consistency", str(consistency))
    assert code == 0 and "VERIFIED" in out, out
    export = tmp_path / "export.json"
    export.write_text(
        _get(client, f"{url}/ledger", export="true", format="json"),
    )
    code, out = _run(capsys, "verify", str(export), *args)
    assert code == 0 and '"extends": true' in out, out

    # the operator rewrites entry 3 and signs every head again with its own key
    hashes = [e["hash"] for e in json.loads(export.read_text())["entries"]]
    forged = [*hashes]
    forged[2] = "ab" * 32
    leaves = [entry_leaf_hash(h) for h in forged]
    tree = TreeReader(leaves.__getitem__)
    private = load_pem_private_key(key_path.read_bytes(), None)
    signer = LogSigner(private, ds)  # type: ignore[arg-type]
    forged_head = tmp_path / "forged-head.json"
    forged_head.write_text(
        json.dumps(
            {
                "note": signer.head(6, tree.root(6)),
                "inclusion": {
                    "seq": 3,
                    "entry_hash": forged[2],
                    "proof": [h.hex() for h in tree.inclusion_proof(2, 6)],
                },
            }
        )
    )
    code, out = _run(
        capsys,
        "verify-receipt",
        str(receipts_file),
        "--head",
        str(forged_head),
        "--public-key",
        str(pem),
    )
    assert code == 1 and "FAILED: entry 3" in out and "rewritten" in out, out
    forged_consistency = tmp_path / "forged-consistency.json"
    forged_consistency.write_text(
        json.dumps({"proof": [h.hex() for h in tree.consistency_proof(4, 6)]})
    )
    code, out = _run(
        capsys,
        "verify",
        *args,
        "--head",
        str(forged_head),
        "--consistency",
        str(forged_consistency),
    )
    assert code == 1 and "does not extend" in out, out
