"""The assertions a declaration states, from the client (sync and async) and the command line,
against a real server on SQLite and on PostgreSQL: ``contribution="person"`` on a dataset
whose blocks protect persons, ``neighbours="zero_out"`` for a tree aggregation on an
``add_remove`` dataset (docs/accounting.md, *Blocks that protect persons*, *Tree aggregation's
neighbours*)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest

from app.cli import main
from odometer_client import AsyncOdometerClient, InvalidRequest, OdometerClient
from odometer_client import declarations as d
from odometer_client.models import BlockRange
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server

PERSONS = {"kind": "bucket", "unit": "person", "buckets": 16}
EPS = d.pure_dp("0.25")
TREE = d.tree_aggregation("10", [15])  # d = 4 levels: ρ = 4/(2·10²) = 0.02


def _persons(api: OdometerClient, name: str) -> str:
    ds = api.create_dataset(name, "1", "0.000001", partition=PERSONS).id
    api.open_blocks(ds, 0, 15)
    return ds


def test_register_preview_and_reserve_state_a_persons_contribution(api: OdometerClient) -> None:
    ds = _persons(api, "persons-client")
    before = api.get_dataset(ds).last_seq
    for call in (api.register, api.preview):
        with pytest.raises(InvalidRequest) as refused:
            call(ds, EPS, blocks={"from": 0, "to": 3})
        assert (refused.value.status_code, refused.value.error) == (422, "InvalidDeclaration")
        assert refused.value.detail.startswith("this dataset's blocks protect persons")
    assert api.get_dataset(ds).last_seq == before  # nothing recorded

    found = api.preview(ds, EPS, blocks={"from": 0, "to": 3}, contribution="person")
    assert found.status == "accepted"
    inv = api.register(ds, EPS, blocks={"from": 0, "to": 3}, contribution="person")
    assert inv.raw["contribution"] == "person"
    assert inv.charge == {"epsilon": Decimal("0.25"), "delta": 0}
    assert inv.blocks == [BlockRange("0", "3", 4)]
    odp = d.odp({"none": "0.1", "some": "0.3"}, delta="0")
    with api.reserve(ds, odp, blocks={"keys": [4]}, contribution="person") as r:
        assert r.status == "reserved"
        r.settle("none")
    entries = list(api.ledger(ds))
    accepted = [e for e in entries if e.kind in ("invocation_accepted", "invocation_reserved")]
    assert [(e.request or {})["contribution"] for e in accepted] == ["person", "person"]
    requires = api.get_dataset(ds).blocks["requires"]
    assert requires is not None
    assert requires.startswith('declarations marked "contribution": "person"')


def test_the_async_client_states_both_assertions(live: Server, api: OdometerClient) -> None:
    ds = _persons(api, "persons-async")
    whole = api.create_dataset("tree-async", "1", "0.000001", accounting={"mode": "zcdp"})

    async def run() -> tuple[str, str]:
        async with AsyncOdometerClient(live.base_url, ADMIN_KEY, retry=FAST_RETRY) as a:
            with pytest.raises(InvalidRequest) as refused:
                await a.register(whole, TREE)
            assert refused.value.detail.startswith(
                "tree_aggregation on an add_remove dataset is charged for zero-out neighbours"
            )
            person = await a.register(ds, EPS, blocks="all", contribution="person")
            tree = await a.register(whole, TREE, neighbours="zero_out")
            assert tree.charge == {"rho": Decimal("0.02"), "delta": 0}
            return person.raw["contribution"], tree.raw["neighbours"]

    assert asyncio.run(run()) == ("person", "zero_out")


def _cli(live: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", live.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_cli_flags(
    live: Server, api: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _persons(api, "persons-cli")
    mechanism = '{"type": "pure_dp", "epsilon": "0.25"}'
    code, _, err = _cli(live, capsys, "register", ds, "--mechanism", mechanism, "--blocks", "0..3")
    assert code != 0
    assert err.startswith("error: 422 InvalidDeclaration: this dataset's blocks protect persons"), (
        err
    )
    code, out, err = _cli(
        live,
        capsys,
        *("register", ds, "--mechanism", mechanism, "--blocks", "0..3"),
        *("--contribution", "person", "--json"),
    )
    assert (code, err) == (0, "")
    registered = json.loads(out)
    assert (registered["status"], registered["contribution"]) == ("accepted", "person")
    whole = api.create_dataset("tree-cli", "1", "0.000001", accounting={"mode": "zcdp"}).id
    tree = json.dumps(TREE.to_json())
    code, out, err = _cli(
        live, capsys, "preview", whole, "--mechanism", tree, "--neighbours", "zero_out"
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "would be accepted: charge ρ=0.02 δ=0"
    code, _, err = _cli(live, capsys, "preview", whole, "--mechanism", tree)
    assert code != 0 and "'neighbours'" not in err and '"neighbours": "zero_out"' in err
