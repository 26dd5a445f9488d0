"""The client's receipt store (:mod:`odometer_client.receipts`), without a server: what it keeps
and lists, that a store it cannot write or a line it cannot read is a warning and never a
failure of the call, and that both clients hand it the answers that carry a receipt (the
server's end to end: ``tests/api/test_client_receipts.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from odometer_client import AsyncOdometerClient, OdometerClient
from odometer_client import declarations as d
from odometer_client._cli import run
from odometer_client.cli import main
from odometer_client.errors import BudgetExceeded
from odometer_client.receipts import KeptReceipt, ReceiptStore, ReceiptStoreWarning, data_dir

DS = "ds_" + "1" * 32


def _receipt(seq: int, dataset: str = DS) -> dict[str, Any]:
    return {
        "type": "odometer.receipt.v1",
        "dataset_id": dataset,
        "seq": seq,
        "entry_hash": f"{seq:064x}",
        "at": "2026-11-29T16:00:00.000000Z",
        "note": f"odometer.receipt/v1\n…{seq}\n",
    }


def _invocation(seq: int) -> dict[str, Any]:
    """A 201's body, as far as the client reads it."""
    return {
        "id": f"inv_{seq}",
        "dataset_id": DS,
        "status": "accepted",
        "charge": {"epsilon": "0.1", "delta": "0"},
        "ledger_seq": seq,
        "receipt": _receipt(seq),
    }


def test_the_store_keeps_and_lists_receipts(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path / "r.jsonl")
    assert store.held() == []
    kept = [store.keep({"receipt": _receipt(seq, ds)}, "http://a") for seq, ds in
            ((2, DS), (3, "ds_other"), (4, DS))]  # fmt: skip
    assert all(isinstance(k, KeptReceipt) for k in kept)
    assert [k.seq for k in store.held()] == [2, 3, 4]
    assert [k.seq for k in store.held(DS)] == [2, 4]
    first = store.held()[0]
    assert (first.server, first.dataset_id, first.entry_hash) == ("http://a", DS, f"{2:064x}")
    assert first.raw == _receipt(2) and first.to_json() == {
        "server": "http://a",
        "receipt": first.raw,
    }
    # one JSON line each, as `odometer verify-receipt` reads them
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert [json.loads(line)["receipt"]["seq"] for line in lines] == [2, 3, 4]
    # an answer replayed under its key is kept twice and listed once
    store.keep({"receipt": _receipt(4)}, "http://a")
    assert [k.seq for k in store.held()] == [2, 3, 4]
    # an answer without one (a server without a checkpoint key) keeps nothing
    assert store.keep({"receipt": None}, "http://a") is None
    assert store.keep({"status": "accepted"}, "http://a") is None
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 4


def test_what_cannot_be_kept_or_read_is_a_warning(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    store = ReceiptStore(blocked / "r.jsonl")  # under a file: cannot be written
    with pytest.warns(ReceiptStoreWarning, match="entry 2 of .* was not kept"):
        assert store.keep({"receipt": _receipt(2)}, "http://a") is None
    store = ReceiptStore(tmp_path / "r.jsonl")
    with pytest.warns(ReceiptStoreWarning, match="receipt was not kept: a receipt names"):
        assert store.keep({"receipt": {**_receipt(2), "seq": "2"}}, "http://a") is None
    store.keep({"receipt": _receipt(2)}, "http://a")
    with (tmp_path / "r.jsonl").open("a") as f:
        f.write('not json\n{"server": "x"}\n\n')
    store.keep({"receipt": _receipt(3)}, "http://a")
    with pytest.warns(ReceiptStoreWarning) as caught:
        assert [k.seq for k in store.held()] == [2, 3]
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'r.jsonl'}:2 is not a kept receipt; skipped",
        f"{tmp_path / 'r.jsonl'}:3 is not a kept receipt; skipped",
    ]


def test_the_default_store_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ODOMETER_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "odometer"
    store = ReceiptStore()
    assert store.path == tmp_path / "xdg" / "odometer" / "receipts.jsonl"
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(tmp_path / "data"))
    assert store.path == tmp_path / "data" / "receipts.jsonl"  # read when used
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.delenv("ODOMETER_DATA_DIR")
    assert data_dir() == Path.home() / ".local" / "share" / "odometer"


def _answers(request: httpx.Request) -> httpx.Response:
    """201 with a receipt for a registration, 409 for one of ``"epsilon": "9"``, 200 with a
    receipt for a cancel."""
    if request.url.path.endswith("/cancel"):
        return httpx.Response(200, json={**_invocation(3), "status": "cancelled"})
    if b'"9"' in request.content:
        return httpx.Response(
            409, json={"error": "BudgetExceeded", "detail": "no", "requested": {}, "remaining": {}}
        )
    return httpx.Response(201, json=_invocation(2))


def test_both_clients_keep_the_receipts_of_their_answers(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    sync = OdometerClient("http://s", "k", transport=httpx.MockTransport(_answers), receipts=path)
    sync.register(DS, d.pure_dp("0.1"))
    with pytest.raises(BudgetExceeded):
        sync.register(DS, d.pure_dp("9"))  # a refusal carries no receipt
    sync.cancel(DS, "inv_3")
    sync.get_invocation(DS, "inv_2")  # a read keeps nothing, whatever it holds
    assert [(k.server, k.seq) for k in ReceiptStore(path).held()] == [
        ("http://s", 2),
        ("http://s", 3),
    ]

    async def run_async() -> None:
        client = AsyncOdometerClient(
            "http://a", "k", transport=httpx.MockTransport(_answers), receipts=ReceiptStore(path)
        )
        async with client:
            await client.register(DS, d.pure_dp("0.1"))

    asyncio.run(run_async())
    assert [(k.server, k.seq) for k in ReceiptStore(path).held()][-1] == ("http://a", 2)
    off = OdometerClient("http://o", "k", transport=httpx.MockTransport(_answers), receipts=False)
    off.register(DS, d.pure_dp("0.1"))
    assert off.receipts is None
    assert all(k.server != "http://o" for k in ReceiptStore(path).held())


@pytest.fixture
def registering(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """``odometer`` connected to a service that answers every registration 201 with a
    receipt."""

    def connect(url: str, key: str) -> OdometerClient:
        return OdometerClient(url, key, transport=httpx.MockTransport(_answers))

    monkeypatch.setattr(run, "OdometerClient", connect)
    yield lambda: None


def test_odometer_register_keeps_the_receipt_and_says_when_it_cannot(
    registering: Callable[[], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["register", DS, "--mechanism", '{"type": "pure_dp", "epsilon": "0.1"}']
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(tmp_path / "data"))
    assert main([*args, "--url", "http://canned", "--key", "k", "--json"]) == 0
    capsys.readouterr()
    assert main(["receipts", DS]) == 0
    out = capsys.readouterr().out
    assert DS in out and "http://canned" in out and f"{2:064x}"[:16] in out
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    monkeypatch.setenv("ODOMETER_DATA_DIR", str(blocked))
    assert main([*args, "--url", "http://canned", "--key", "k", "--json"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: the receipt of entry 2 of {DS} was not kept ("), err
    assert main(["receipts"]) == 0
    captured = capsys.readouterr()
    assert "no receipts kept" in captured.out
    assert captured.err.startswith(f"warning: {blocked / 'receipts.jsonl'} cannot be read (")
