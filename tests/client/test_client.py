"""The typed client against a real server process."""

from __future__ import annotations

import asyncio
import hashlib
from decimal import Decimal
from pathlib import Path

import pytest

from odometer_client import (
    AsyncOdometerClient,
    BudgetExceeded,
    Conflict,
    InvalidRequest,
    NotFound,
    OdometerClient,
    ReservationNotSettled,
    Unauthorized,
)
from odometer_client import declarations as d
from odometer_client.ledger import verify_entries
from odometer_core.ledger.formats import load_export as load_entries
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server

ODP = d.odp({"none": "0.2", "some": "0.5"}, delta="0.0000001")


def test_datasets_decimals_in_and_out(client: OdometerClient) -> None:
    ds = client.create_dataset("c-datasets", Decimal("1"), "0.000001")
    assert ds.mode == "basic" and ds.relation == "add_remove"
    assert ds.budget == {"epsilon": Decimal(1), "delta": Decimal("0.000001")}
    assert ds.remaining_epsilon == Decimal(1)
    assert ds.id in {x.id for x in client.list_datasets()}
    changed = client.change_budget(ds, Decimal("2.5"), "0.00001")
    assert client.get_dataset(ds.id).budget == {"epsilon": Decimal("2.5"), "delta": Decimal("1E-5")}
    assert changed.last_seq == 2


def test_register_preview_settle_cancel(client: OdometerClient) -> None:
    ds = client.create_dataset("c-odp", "1", "0.000001")
    preview = client.preview(ds, ODP)
    assert preview.status == "reserved" and preview.cells == {
        "none": Decimal("0.2"),
        "some": Decimal("0.5"),
    }
    assert client.get_dataset(ds).last_seq == 1  # nothing written
    inv = client.register(ds, ODP)
    assert inv.status == "reserved"
    assert inv.charge == {"epsilon": Decimal("0.5"), "delta": Decimal("1E-7")}
    done = client.settle(ds, inv, "none")
    assert done.status == "settled" and done.refund == {"epsilon": Decimal("0.3"), "delta": 0}
    inv2 = client.register(ds, ODP)
    cancelled = client.cancel(ds, inv2.id)
    assert cancelled.refund == {"epsilon": Decimal("0.5"), "delta": Decimal("1E-7")}
    read = client.get_invocation(ds, inv)
    assert read.status == "settled" and read.cell == "none"
    status = client.get_dataset(ds).status
    assert status["spent"] == {"epsilon": Decimal("0.2"), "delta": Decimal("1E-7")}


def test_settle_from_the_released_output(client: OdometerClient) -> None:
    ds = client.create_dataset("c-output", "5", "0.000001")
    svt = client.register(ds, d.svt("0.1", "0.3", 3))
    done = client.settle(ds, svt, output=[False, True, False, True])
    assert (done.status, done.cell) == ("settled", "tops=2")
    assert done.charge["epsilon"] == Decimal("0.3")
    expected = hashlib.sha256(b"[false,true,false,true]").hexdigest()
    assert done.output_digest == expected
    ptr = {"type": "ptr", "epsilon": "0.1", "delta": "0"}
    # None is an output (⊥), not "no output"; a Decimal value is sent as decimal text
    refused = client.settle(ds, client.register(ds, ptr), output=None)
    assert (refused.cell, refused.charge["epsilon"]) == ("bottom", Decimal("0.1"))
    released = client.settle(ds, client.register(ds, ptr), "value", output=Decimal("17.25"))
    assert released.output_digest == hashlib.sha256(b'"17.25"').hexdigest()
    with client.reserve(ds, d.svt("0.1", "0.3", 3)) as r:
        r.settle(output=[])
    assert (r.status, r.result and r.result.cell) == ("settled", "tops=0")
    with pytest.raises(InvalidRequest) as contradiction:
        client.settle(ds, client.register(ds, ptr), "bottom", output="1")
    assert contradiction.value.error == "InvalidOutput"
    with pytest.raises(InvalidRequest) as floats:
        client.settle(ds, client.register(ds, ptr), output=17.25)
    assert floats.value.error == "InvalidOutput"
    with pytest.raises(InvalidRequest) as neither:
        client.settle(ds, svt)
    assert neither.value.body["client_side"] is True
    entries = list(client.ledger(ds, kinds=("invocation_settled",)))
    assert entries[0].request == {"cell": "tops=2", "output_digest": expected}


def test_typed_errors(client: OdometerClient, server: Server) -> None:
    ds = client.create_dataset("c-errors", "1", "0.000001")
    with pytest.raises(BudgetExceeded) as exceeded:
        client.register(ds, d.pure_dp("1.5"))
    assert exceeded.value.status_code == 409
    assert exceeded.value.requested_epsilon == Decimal("1.5")
    assert exceeded.value.remaining == {"epsilon": Decimal(1), "delta": Decimal("0.000001")}
    assert exceeded.value.body["error"] == "BudgetExceeded"
    inv = client.register(ds, ODP)
    with pytest.raises(InvalidRequest) as unknown:
        client.settle(ds, inv, "elsewhere")
    assert unknown.value.error == "UnknownCell"
    client.settle(ds, inv, "some")
    with pytest.raises(Conflict) as again:
        client.settle(ds, inv, "some")
    assert again.value.error == "InvocationNotReserved"
    with pytest.raises(NotFound):
        client.get_dataset("ds_does_not_exist")
    with pytest.raises(InvalidRequest) as local:  # refused by the server's models
        client.register(ds, {"type": "svt", "epsilon1": 1, "epsilon2": 1, "c": 0})
    assert local.value.detail.startswith("body.mechanism.svt.c: Input should be greater than")
    with pytest.raises(InvalidRequest):  # refused by the server's accounting core
        client.register(ds, {"type": "pure_dp", "epsilon": "-1"})
    with (
        OdometerClient(server.base_url, "wrong-key", retry=FAST_RETRY) as stranger,
        pytest.raises(Unauthorized),
    ):
        stranger.list_datasets()


def test_explicit_idempotency_key_has_one_effect(client: OdometerClient) -> None:
    ds = client.create_dataset("c-idem", "1", "0.000001")
    first = client.register(ds, d.pure_dp("0.1"), idempotency_key="job-42")
    second = client.register(ds, d.pure_dp("0.1"), idempotency_key="job-42")
    assert first.id == second.id
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.1")


def test_reserve_settles(client: OdometerClient) -> None:
    ds = client.create_dataset("c-reserve", "1", "0.000001")
    with client.reserve(ds, ODP) as r:
        assert r.cells == {"none": Decimal("0.2"), "some": Decimal("0.5")}
        r.settle("some")
    assert r.status == "settled"
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.5")


def test_reserve_cancels_when_the_block_raises_before_the_mechanism_ran(
    client: OdometerClient,
) -> None:
    ds = client.create_dataset("c-reserve-raise", "1", "0.000001")
    with pytest.raises(ZeroDivisionError), client.reserve(ds, ODP) as r:
        _ = 1 / 0
    assert r.status == "cancelled"
    assert client.get_invocation(ds, r.id).status == "cancelled"
    assert client.get_dataset(ds).remaining_epsilon == Decimal(1)


def test_reserve_keeps_the_charge_once_the_mechanism_ran(client: OdometerClient) -> None:
    ds = client.create_dataset("c-reserve-ran", "1", "0.000001")
    with pytest.raises(RuntimeError), client.reserve(ds, ODP) as r:
        r.mark_ran()
        raise RuntimeError("crashed after releasing the output")
    assert client.get_invocation(ds, r.id).status == "reserved"
    assert client.get_dataset(ds).remaining_epsilon == Decimal("0.5")


def test_reserve_without_settle_is_an_error_not_a_refund(client: OdometerClient) -> None:
    ds = client.create_dataset("c-reserve-forgot", "1", "0.000001")
    with pytest.raises(ReservationNotSettled) as forgot, client.reserve(ds, ODP) as r:
        pass
    assert forgot.value.invocation_id == r.id
    assert client.get_invocation(ds, r.id).status == "reserved"
    client.settle(ds, r.id, "none")  # the documented way out
    assert client.get_dataset(ds).remaining_epsilon == Decimal("0.8")


def test_async_client(server: Server, tmp_path: Path) -> None:
    export = tmp_path / "async.jsonl"

    async def scenario() -> tuple[str, str, Decimal | None, int]:
        async with AsyncOdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
            ds = await c.create_dataset("c-async", "1", "0.000001")
            async with c.reserve(ds, ODP) as r:
                await r.settle("none")
            with pytest.raises(ValueError):
                async with c.reserve(ds, ODP) as r2:
                    raise ValueError("no data")
            entries = [e async for e in c.ledger(ds, page_size=2)]
            assert await c.export(ds, export, "jsonl", page_size=2) == len(entries)
            return r.status, r2.status, (await c.get_dataset(ds)).remaining_epsilon, len(entries)

    settled, cancelled, remaining, entries = asyncio.run(scenario())
    assert (settled, cancelled, remaining, entries) == ("settled", "cancelled", Decimal("0.8"), 5)
    assert verify_entries(load_entries(export.read_text("utf-8")))["ok"]


def test_reserve_with_a_non_odp_mechanism_is_a_plain_acceptance(client: OdometerClient) -> None:
    ds = client.create_dataset("c-reserve-plain", "1", "0.000001")
    with client.reserve(ds, d.pure_dp("0.25")) as r:
        assert r.cells == {} and not r.open
    assert r.status == "accepted"
    assert client.get_dataset(ds).remaining_epsilon == Decimal("0.75")


def test_ledger_pages_and_exports_verify(client: OdometerClient, tmp_path: Path) -> None:
    ds = client.create_dataset("c-ledger", "1", "0.000001")
    for _ in range(4):
        client.register(ds, d.pure_dp("0.1"))
    with client.reserve(ds, ODP) as r:
        r.settle("none")
    entries = list(client.ledger(ds, page_size=2))
    assert [e.seq for e in entries] == list(range(1, 8))
    assert [e.kind for e in client.ledger(ds, kinds=("invocation_settled",))] == [
        "invocation_settled"
    ]
    for fmt in ("json", "jsonl", "csv"):
        path = tmp_path / f"export.{fmt}"
        assert client.export(ds, path, fmt, page_size=3) == 7
        loaded = load_entries(path.read_text("utf-8"))
        verdict = verify_entries(loaded)
        assert verdict["ok"], (fmt, verdict["problems"])
        assert verdict["head_hash"] == client.get_dataset(ds).head_hash
