"""Organisations, principals, keys and grants from the client and the command line."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from app.cli import main
from odometer_client import NotFound, OdometerClient, Unauthorized
from odometer_client import declarations as d
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server


def test_client_manages_organisations_principals_keys_and_grants(
    server: Server, client: OdometerClient
) -> None:
    org = client.create_organisation("tenancy-client")
    assert org["cap"] is None and org["name"] == "tenancy-client"
    capped = client.set_organisation_cap(org["id"], "2", "1e-6")
    assert capped["cap"] == {"epsilon": Decimal(2), "delta": Decimal("0.000001")}
    assert org["id"] in {o["id"] for o in client.organisations()}
    curator = client.create_principal("t-curator", "curator", organisation_id=org["id"])
    analyst = client.create_principal("t-analyst", "analyst", organisation_id=org["id"])
    assert (curator["role"], analyst["organisation_id"]) == ("curator", org["id"])
    assert {curator["id"], analyst["id"]} <= {p["id"] for p in client.principals()}
    curator_key = client.issue_key(curator["id"])
    analyst_key = client.issue_key(analyst["id"])
    assert curator_key["key"] != analyst_key["key"] and analyst_key["principal_id"] == analyst["id"]
    with OdometerClient(server.base_url, curator_key["key"], retry=FAST_RETRY) as cur:
        ds = cur.create_dataset("tenancy-ds", "1", "1e-6")
        grant = cur.grant(ds, analyst["id"], quota={"epsilon": "0.5", "delta": "1e-7"})
        assert grant["principal_id"] == analyst["id"]
        listed = cur.grants(ds)
        assert [g["principal_id"] for g in listed] == [analyst["id"]]
        assert listed[0]["quota"] == {"epsilon": Decimal("0.5"), "delta": Decimal("1E-7")}
        with OdometerClient(server.base_url, analyst_key["key"], retry=FAST_RETRY) as ana:
            assert ana.register(ds, d.pure_dp("0.25")).status == "accepted"
            cur.revoke_grant(ds, analyst["id"])
            assert cur.grants(ds) == []
            with pytest.raises(NotFound):  # the dataset is no longer visible to the analyst
                ana.register(ds, d.pure_dp("0.1"))
    revoked = client.revoke_key(curator_key["id"])
    assert revoked["id"] == curator_key["id"] and revoked["revoked_at"]
    with (
        OdometerClient(server.base_url, curator_key["key"], retry=FAST_RETRY) as gone,
        pytest.raises(Unauthorized),
    ):
        gone.list_datasets()
    removed = client.set_organisation_cap(org["id"])
    assert removed["cap"] is None


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
    assert code == 0 and org_id in out and "epsilon=3, delta=0.000001" in out
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
