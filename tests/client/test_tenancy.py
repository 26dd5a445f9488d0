"""Organisations, principals, keys and grants from the client and the command line."""

from __future__ import annotations

import asyncio
import json
import secrets
from decimal import Decimal
from typing import Any

import pytest

from app.cli import main
from odometer_client import (
    AsyncOdometerClient,
    CapCapacity,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    OdometerClient,
    OrganisationReport,
    Unauthorized,
)
from odometer_client import declarations as d
from odometer_core.accounting import capacity, initial_state, make_config, parse_declaration
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
ZCDP_CAP = {"mode": "zcdp"}


def test_client_manages_organisations_principals_keys_and_grants(
    server: Server, client: OdometerClient
) -> None:
    org = client.create_organisation("tenancy-client")
    assert org.cap is None and org.name == "tenancy-client"
    capped = client.set_organisation_cap(org.id, "2", "1e-6")
    # no accounting: the cap as before, in basic mode (the body has no "accounting")
    assert capped.cap == {"epsilon": Decimal(2), "delta": Decimal("0.000001"), "mode": "basic"}
    assert org.id in {o.id for o in client.organisations()}
    curator = client.create_principal("t-curator", "curator", organisation_id=org.id)
    analyst = client.create_principal("t-analyst", "analyst", organisation_id=org.id)
    assert (curator.role, analyst.organisation_id) == ("curator", org.id)
    assert {curator.id, analyst.id} <= {p.id for p in client.principals()}
    curator_key = client.issue_key(curator.id)
    analyst_key = client.issue_key(analyst.id)
    assert curator_key.key != analyst_key.key and analyst_key.principal_id == analyst.id
    with OdometerClient(server.base_url, curator_key.key, retry=FAST_RETRY) as cur:
        ds = cur.create_dataset("tenancy-ds", "1", "1e-6")
        grant = cur.grant(ds, analyst.id, quota={"epsilon": "0.5", "delta": "1e-7"})
        assert grant.principal_id == analyst.id
        listed = cur.grants(ds)
        assert [g.principal_id for g in listed] == [analyst.id]
        assert listed[0].quota == {"epsilon": Decimal("0.5"), "delta": Decimal("1E-7")}
        with OdometerClient(server.base_url, analyst_key.key, retry=FAST_RETRY) as ana:
            assert ana.register(ds, d.pure_dp("0.25")).status == "accepted"
            cur.revoke_grant(ds, analyst.id)
            assert cur.grants(ds) == []
            with pytest.raises(NotFound):  # the dataset is no longer visible to the analyst
                ana.register(ds, d.pure_dp("0.1"))
    revoked = client.revoke_key(curator_key.id)
    assert revoked.id == curator_key.id and revoked.revoked_at
    with (
        OdometerClient(server.base_url, curator_key.key, retry=FAST_RETRY) as gone,
        pytest.raises(Unauthorized),
    ):
        gone.list_datasets()
    removed = client.set_organisation_cap(org.id)
    assert removed.cap is None


def _cli(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_refers_to_organisations_by_name_or_id_and_never_creates_one(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(server, capsys, "orgs", "create", "tenancy-cli", "-q")
    assert code == 0
    org_id = out.strip()
    code, out, _ = _cli(
        server, capsys, "orgs", "cap", "tenancy-cli", "--epsilon", "3", "--delta", "1e-6"
    )
    assert code == 0 and org_id in out and "ε=3 δ=0.000001 basic" in out
    before = len(client.organisations())
    code, out, err = _cli(
        server, capsys, "orgs", "cap", "tenancy-typo", "--epsilon", "3", "--delta", "0"
    )
    assert (code, out) == (1, "")
    assert err == "error: no organisation 'tenancy-typo' (by id or name) is visible to this key\n"
    code, out, err = _cli(
        server,
        capsys,
        "principals",
        "create",
        "t-bob",
        "--role",
        "analyst",
        "--organisation",
        "nope",
    )
    assert code == 1 and err.count("\n") == 1 and "no organisation 'nope'" in err
    assert len(client.organisations()) == before  # a typo never creates an organisation
    code, out, _ = _cli(
        server,
        capsys,
        "principals",
        "create",
        "t-carol",
        "--role",
        "analyst",
        "--organisation",
        org_id,
        "--json",
    )
    carol = json.loads(out)
    assert code == 0 and carol["organisation_id"] == org_id and carol["role"] == "analyst"
    code, out, err = _cli(server, capsys, "keys", "issue", carol["id"])
    assert code == 0 and out.startswith("odo_") and "shown once" in err
    with OdometerClient(server.base_url, out.strip(), retry=FAST_RETRY) as carol_client:
        assert carol_client.list_datasets() == []
    code, out, _ = _cli(server, capsys, "principals", "list")
    assert code == 0 and carol["id"] in out
    code, out, _ = _cli(server, capsys, "orgs", "cap", org_id, "--remove", "--json")
    assert code == 0 and json.loads(out)["cap"] is None
    code, _, err = _cli(server, capsys, "orgs", "cap", org_id)
    assert code == 1 and err == "error: give --epsilon and --delta, or --remove\n"


def _one_zcdp_dataset_admits(mechanism: dict[str, Any]) -> int:
    """What a fresh zcdp filter of (10, 1e-5) admits of ``mechanism``, by the core."""
    config = make_config("10", "0.00001", "add_remove", ZCDP_CAP)
    return capacity(config, initial_state(config), parse_declaration(mechanism)).count


def test_client_sets_a_zcdp_cap_asks_its_capacity_and_reads_its_report(
    server: Server, client: OdometerClient
) -> None:
    org = client.create_organisation("tenancy-zcdp").id
    with pytest.raises(Conflict) as no_cap:
        client.organisation_cap_capacity(org, GAUSSIAN)
    assert no_cap.value.error == "NoCap"
    capped = client.set_organisation_cap(org, "10", "0.00001", ZCDP_CAP)
    assert capped.cap == {"epsilon": Decimal(10), "delta": Decimal("0.00001"), "mode": "zcdp"}
    assert capped.status["final_conversion_delta"] == Decimal("0.0000099")  # 1 % for δ_i
    curator = client.create_principal("tz-curator", "curator", organisation_id=org)
    analyst = client.create_principal("tz-analyst", "analyst", organisation_id=org)
    with (
        OdometerClient(server.base_url, client.issue_key(curator.id).key) as cur,
        OdometerClient(server.base_url, client.issue_key(analyst.id).key) as ana,
    ):
        ds = cur.create_dataset("tenancy-zcdp-ds", "1000", "0.001", accounting=ZCDP_CAP)
        cur.grant(ds, analyst.id)
        first = cur.organisation_cap_capacity(org, GAUSSIAN, dataset_id=ds)
        for _ in range(3):
            assert ana.register(ds, d.gaussian("10", "1")).status == "accepted"
        # any role of the organisation may ask the capacity; the report is not for analysts
        left = ana.organisation_cap_capacity(org, d.gaussian("10", "1"), ds.id)
        with pytest.raises(Forbidden):
            ana.organisation_report(org)
        report = cur.organisation_report(org)
    # 340 under accounting 1.9.0 (the first Gaussian shapes level 1 at 0.5 of δ_c), 352 under
    # 1.7.0-1.8.0 (level 1 at 0.85 of δ_c), 353 before (0.9)
    assert first.count == _one_zcdp_dataset_admits(GAUSSIAN) == 340
    assert (first.mode, first.relation, first.at_least) == ("zcdp", "add_remove", False)
    assert left.count == first.count - 3 and left.reason == "rho budget exceeded"
    (view,) = [o for o in client.organisations() if o.id == org]
    assert view.spent == {"rho": Decimal("0.015"), "delta": Decimal(0)}  # 3 × 1/(2·10²)
    assert view.reserved is None and view.cap_seq == 3 and view.usage == {ds.id: 3}
    reading = view.status["odometer"]
    assert reading["certified"] is True and 0 < reading["epsilon"] < 10
    assert report.verified is True and report.problems == [] and report.decisions == 3
    assert report.odometer == reading  # the replayed reading is the stored one
    (drawn,) = report.datasets
    assert drawn.id == ds.id and (drawn.decisions, drawn.admitted) == (3, 3)
    assert drawn.drawn == {"rho": Decimal("0.015"), "delta": Decimal(0)}
    with pytest.raises(Conflict) as fixed:  # the cap counted something: its mode is fixed
        client.set_organisation_cap(org, "10", "0.00001", {"mode": "rdp"})
    assert fixed.value.status_code == 409 and fixed.value.error == "ModeFixed"
    with pytest.raises(Conflict) as below:
        client.set_organisation_cap(org, "0.5", "0.00001", ZCDP_CAP)
    assert below.value.error == "BudgetBelowSpent"

    async def from_async() -> tuple[CapCapacity, OrganisationReport]:
        async with AsyncOdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as c:
            found = await c.organisation_cap_capacity(org, GAUSSIAN)
            return found, await c.organisation_report(org)

    assert asyncio.run(from_async()) == (left, report)


@pytest.mark.parametrize(
    "accounting,problem",
    [
        (
            {"mode": "split"},
            "body.accounting: Input tag 'split' found using 'mode' does not match any of the "
            "expected tags: 'basic', 'zcdp', 'rdp', 'gdp'",
        ),
        (
            {"final_conversion_delta": "1e-7"},
            "body.accounting: Unable to extract tag using discriminator 'mode'",
        ),
        (
            {"mode": "gdp", "final_conversion_delta": "1e-7"},
            "body.accounting.gdp.final_conversion_delta: Extra inputs are not permitted",
        ),
        ({"mode": "rdp", "orders": []}, "body.accounting.rdp.orders: List should have at least 1"),
    ],
)
def test_a_cap_the_server_refuses_changes_nothing(
    client: OdometerClient, accounting: dict[str, Any], problem: str
) -> None:
    org = client.create_organisation(f"tenancy-refused-{secrets.token_hex(4)}").id
    with pytest.raises(InvalidRequest) as refused:
        client.set_organisation_cap(org, "10", "0.00001", accounting)
    assert refused.value.error == "ValidationError" and problem in refused.value.detail
    with pytest.raises(ValueError, match="needs the cap's epsilon and delta"):
        client.set_organisation_cap(org, accounting=ZCDP_CAP)
    (view,) = [o for o in client.organisations() if o.id == org]
    assert view.cap is None  # nothing was changed
