"""The Python client keeps receipts: a registration, a settlement and a cancellation made
through :class:`odometer_client.OdometerClient` (not the command line) each leave their signed
receipt in the client's store; ``odometer receipts`` lists them, and ``odometer verify-receipt``
checks each against a later signed head and its inclusion proof, offline. A client built with
``receipts=False`` keeps nothing, one given a path keeps them there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from odometer_client import OdometerClient
from odometer_client import declarations as d
from odometer_client.cli import main
from odometer_client.receipts import KeptReceipt, ReceiptStore
from odometer_core.ledger.checkpoints import generate_key_pem
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset


@pytest.fixture
def served(fresh_backend: Backend, tmp_path: Path) -> Iterator[TestClient]:
    """A server that signs (a checkpoint key: its answers carry receipts)."""
    key = tmp_path / "checkpoint.pem"
    key.write_bytes(generate_key_pem()[0])
    settings = Settings(
        database_url=fresh_backend.url, admin_key=ADMIN_KEY, checkpoint_key=str(key)
    )
    database = Database.from_settings(settings)
    with TestClient(create_app(settings, database)) as client:
        client.headers.update(AUTH)
        yield client
    database.dispose()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_client_keeps_receipts_that_odometer_lists_and_verifies(
    served: TestClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(tmp_path / "data"))
    ds = str(basic_dataset(served, epsilon="1")["id"])
    client = OdometerClient("http://testserver", ADMIN_KEY, http=served)  # closed with served
    assert client.receipts is not None
    assert client.receipts.path == tmp_path / "data" / "receipts.jsonl"
    accepted = client.register(ds, d.pure_dp("0.01"))
    odp = d.odp({"none": "0.02", "some": "0.05"}, delta="1e-7")
    with client.reserve(ds, odp) as reservation:
        settled = reservation.settle("none")
    reserved = client.register(ds, odp)
    cancelled = client.cancel(ds, reserved)
    held = client.receipts.held(ds)
    answers = [accepted.raw, reservation.invocation.raw, settled.raw, reserved.raw, cancelled.raw]
    assert [k.seq for k in held] == [2, 3, 4, 5, 6] == [a["ledger_seq"] for a in answers]
    assert all(isinstance(k, KeptReceipt) and k.server == "http://testserver" for k in held)
    assert [k.raw for k in held] == [a["receipt"] for a in answers]
    assert {k.dataset_id for k in held} == {ds}

    code, out, _ = _run(capsys, "receipts", ds, "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["receipt"]["seq"] for line in lines] == [2, 3, 4, 5, 6]
    assert lines == [k.to_json() for k in held]
    code, out, _ = _run(capsys, "receipts")
    assert code == 0 and out.count(ds) == 5 and "http://testserver" in out
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(line) + "\n" for line in lines))

    pem = tmp_path / "public.pem"
    pem.write_text(served.get("/v1/checkpoint-key").json()["public_key"])
    for seq in (2, 4, 6):  # a later signed head with the entry's inclusion proof
        head = tmp_path / f"head-{seq}.json"
        r = served.get(f"/v1/datasets/{ds}/ledger/checkpoint", params={"seq": seq})
        assert r.status_code == 200, r.text
        head.write_text(r.text)
        code, _, err = _run(
            capsys, "verify-receipt", str(mine), "--head", str(head), "--public-key", str(pem)
        )
        assert code == 0, err
        assert f"VERIFIED: entry {seq}" in err and "size 6" in err, err


def test_a_client_keeps_receipts_where_it_is_told_or_nowhere(
    served: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(tmp_path / "default"))
    ds = str(basic_dataset(served, epsilon="1")["id"])
    client = OdometerClient("http://testserver", ADMIN_KEY, http=served, receipts=False)
    assert client.receipts is None
    assert client.register(ds, d.pure_dp("0.01")).raw["receipt"] is not None
    elsewhere = tmp_path / "elsewhere" / "kept.jsonl"
    client = OdometerClient("http://testserver", ADMIN_KEY, http=served, receipts=elsewhere)
    inv = client.register(ds, d.pure_dp("0.01"))
    assert not (tmp_path / "default").exists()
    assert [k.seq for k in ReceiptStore(elsewhere).held()] == [inv.raw["ledger_seq"]] == [3]
