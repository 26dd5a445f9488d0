"""Hierarchical budgets: organisation cap across datasets of different modes, analyst quotas,
ODP reservations at every level, replay of quota levels, org charges summed across ledgers;
keys: revoked, expired, bootstrap-admin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.uow import UnitOfWork
from app.services import ledger as ledger_service
from app.services.principals import Principal, Role
from app.settings import get_settings
from odometer_core.ledger.chain import GENESIS_HASH, entry_hash
from odometer_core.ledger.replay import replay
from tests.support import (
    AUTH,
    Backend,
    grant,
    ledger,
    new_organisation,
    new_principal,
    status,
)

ADMIN = Principal("admin", Role.ADMIN, None)
PURE = {"type": "pure_dp", "epsilon": "0.3"}


def _dataset(client: TestClient, org: str, mode: str, epsilon: str = "10") -> str:
    r = client.post(
        "/v1/datasets",
        json={
            "name": mode,
            "budget": {"epsilon": epsilon, "delta": "0.00001"},
            "accounting": {"mode": mode},
            "organisation_id": org,
        },
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _spend(
    client: TestClient, dsid: str, headers: dict[str, str], mechanism: dict[str, Any]
) -> Any:
    return client.post(
        f"/v1/datasets/{dsid}/invocations", json={"mechanism": mechanism}, headers=headers
    )


def _org(client: TestClient, org: str) -> dict[str, Any]:
    r = client.get("/v1/organisations", headers=AUTH)
    found: dict[str, Any] = next(o for o in r.json()["organisations"] if o["id"] == org)
    return found


def _org_charges(client: TestClient, dataset_ids: list[str]) -> tuple[Decimal, Decimal]:
    """Σ organisation-level ε charges minus refunds, and Σ reserved, over the datasets'
    ledgers (the organisation level spans datasets: its history is in their ledgers)."""
    spent = Decimal(0)
    reserved: dict[str, Decimal] = {}
    for dsid in dataset_ids:
        for e in ledger(client, dsid):
            part = e.get("org")
            if not part or not part["applied"]:
                continue
            if e["kind"] == "invocation_reserved":
                worst = max(Decimal(c["epsilon"]) for c in part["reservation"]["cells"])
                reserved[e["invocation_id"]] = worst
            elif e["kind"] in ("invocation_settled", "invocation_cancelled"):
                reserved.pop(e["invocation_id"])
                spent += Decimal(part["charge"]["epsilon"])
            else:
                spent += Decimal(part["charge"]["epsilon"])
    return spent, sum(reserved.values(), Decimal(0))


def _verified(uow: UnitOfWork, dsid: str) -> None:
    verdict = ledger_service.verify_ledger(uow, ADMIN, dsid)
    assert verdict.ok, verdict.problems


def test_org_cap_spans_datasets_of_different_modes(client: TestClient, uow: UnitOfWork) -> None:
    org = new_organisation(client)
    r = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": 1, "delta": "0.00001"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    basic, zcdp = _dataset(client, org, "basic"), _dataset(client, org, "zcdp")
    ana, headers = new_principal(client, org, "analyst")
    grant(client, basic, ana)
    grant(client, zcdp, ana)

    for _ in range(3):
        r = _spend(client, basic, headers, PURE)
        assert r.status_code == 201, r.text
        assert r.json()["levels"]["organisation"]["charge"]["epsilon"] == "0.3"
    before = (status(client, basic), status(client, zcdp), len(ledger(client, zcdp)))
    r = _spend(client, zcdp, headers, {"type": "pure_dp", "epsilon": "0.2"})
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "BudgetExceeded" and body["level"] == "organisation"
    assert body["remaining"]["epsilon"] == "0.1"
    assert body["requested"]["epsilon"] == "0.2"
    # nothing moved at any level, but the refusal is in the dataset's ledger
    assert (status(client, basic), status(client, zcdp)) == before[:2]
    rejected = ledger(client, zcdp)[-1]
    assert len(ledger(client, zcdp)) == before[2] + 1
    assert rejected["kind"] == "invocation_rejected" and rejected["charge"] is None
    assert rejected["org"]["outcome"] == "rejected" and not rejected["org"]["applied"]

    r = _spend(client, zcdp, headers, {"type": "pure_dp", "epsilon": "0.1"})
    assert r.status_code == 201, r.text
    assert set(r.json()["charge"]) == {"rho", "delta"}  # zCDP units at the dataset
    assert Decimal(_org(client, org)["spent"]["epsilon"]) == 1
    assert _org(client, org)["remaining"]["epsilon"] == "0"
    spent, reserved = _org_charges(client, [basic, zcdp])
    assert (spent, reserved) == (Decimal("1.0"), Decimal(0))
    r = _spend(client, basic, headers, {"type": "pure_dp", "epsilon": "0.0001"})
    assert (r.status_code, r.json()["level"]) == (409, "organisation")

    # the cap never goes below what is counted; removing it lifts the org level
    r = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": "0.5", "delta": 0}, headers=AUTH
    )
    assert (r.status_code, r.json()["error"]) == (409, "BudgetBelowSpent")
    r = client.patch(f"/v1/organisations/{org}/cap", headers=AUTH)
    assert r.status_code == 200 and r.json()["cap"] is None
    assert _spend(client, basic, headers, PURE).status_code == 201
    assert Decimal(_org(client, org)["spent"]["epsilon"]) == 1  # uncounted without a cap
    for dsid in (basic, zcdp):
        _verified(uow, dsid)


def test_quota_per_analyst_inside_a_dataset(client: TestClient, uow: UnitOfWork) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, "basic", epsilon="1")
    ana, a_headers = new_principal(client, org, "analyst")
    bob, b_headers = new_principal(client, org, "analyst")
    grant(client, ds, ana, {"epsilon": "0.25", "delta": 0})
    grant(client, ds, bob)
    one = {"type": "pure_dp", "epsilon": "0.1"}
    assert _spend(client, ds, a_headers, one).status_code == 201
    r = _spend(client, ds, a_headers, one)
    assert r.json()["levels"]["quota"]["remaining"]["epsilon"] == "0.05"
    before = status(client, ds)
    r = _spend(client, ds, a_headers, one)
    assert r.status_code == 409
    assert (r.json()["level"], r.json()["remaining"]["epsilon"]) == ("quota", "0.05")
    assert status(client, ds) == before
    # another analyst on the same dataset has no quota: only the dataset budget binds
    for _ in range(8):
        assert _spend(client, ds, b_headers, one).status_code == 201
    r = _spend(client, ds, b_headers, one)
    assert (r.status_code, r.json()["level"]) == (409, "dataset")
    grants = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"]
    by_id = {g["principal_id"]: g for g in grants}
    assert by_id[ana]["quota_state"]["spent_epsilon"] == "0.2"
    assert by_id[bob]["quota"] is None
    _verified(uow, ds)

    # revoking the grant: the analyst no longer sees the dataset; a new grant starts afresh
    r = client.delete(f"/v1/datasets/{ds}/grants/{ana}", headers=AUTH)
    assert r.status_code == 200
    assert _spend(client, ds, a_headers, one).status_code == 404
    r = client.patch(f"/v1/datasets/{ds}/budget", json={"epsilon": 2, "delta": 0}, headers=AUTH)
    assert r.status_code == 200, r.text
    grant(client, ds, ana, {"epsilon": "0.05", "delta": 0})
    r = _spend(client, ds, a_headers, {"type": "pure_dp", "epsilon": "0.06"})
    assert (r.status_code, r.json()["level"]) == (409, "quota")
    _verified(uow, ds)


def test_quota_in_the_datasets_own_mode(client: TestClient, uow: UnitOfWork) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, "zcdp")
    ana, headers = new_principal(client, org, "analyst")
    grant(client, ds, ana, {"epsilon": "1", "delta": "0.000001"})
    quota = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"][0]
    assert quota["quota_state"] == {"rho": "0", "delta": "0"}
    r = _spend(client, ds, headers, {"type": "zcdp", "rho": "0.01"})
    assert r.status_code == 201, r.text
    assert r.json()["levels"]["quota"]["charge"] == {"rho": "0.01", "delta": "0"}
    _verified(uow, ds)


def test_odp_reserves_and_refunds_at_every_level(client: TestClient, uow: UnitOfWork) -> None:
    org = new_organisation(client)
    client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": 1, "delta": "0.00001"}, headers=AUTH
    )
    ds = _dataset(client, org, "basic")
    ana, headers = new_principal(client, org, "analyst")
    grant(client, ds, ana, {"epsilon": "2", "delta": "0.000001"})
    odp = {
        "type": "odp",
        "delta": "0.0000001",
        "cells": [{"name": "none", "epsilon": "0.2"}, {"name": "some", "epsilon": "0.5"}],
    }
    first = _spend(client, ds, headers, odp)
    second = _spend(client, ds, headers, odp)
    assert first.status_code == second.status_code == 201
    assert first.json()["status"] == "reserved"
    assert Decimal(_org(client, org)["reserved"]["epsilon"]) == 1
    r = _spend(client, ds, headers, {"type": "pure_dp", "epsilon": "0.01"})
    assert (r.status_code, r.json()["level"]) == (409, "organisation")

    url = f"/v1/datasets/{ds}/invocations"
    r = client.post(f"{url}/{first.json()['id']}/settle", json={"cell": "none"}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["levels"]["organisation"]["refund"]["epsilon"] == "0.3"
    assert r.json()["levels"]["quota"]["refund"]["epsilon"] == "0.3"
    # the admin cancels the analyst's reservation: the analyst's quota gets the refund
    r = client.post(f"{url}/{second.json()['id']}/cancel", headers=AUTH)
    assert r.status_code == 200, r.text
    org_view = _org(client, org)
    assert org_view["spent"] == {"epsilon": "0.2", "delta": "0.0000001"}
    assert org_view["reserved"]["epsilon"] == "0"
    assert _org_charges(client, [ds]) == (Decimal("0.2"), Decimal(0))
    quota = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"][0]
    assert quota["quota_state"]["spent_epsilon"] == "0.2"
    assert quota["quota_state"]["reserved_epsilon"] == "0"
    _verified(uow, ds)


def test_revoked_and_expired_keys_are_401(client: TestClient) -> None:
    org = new_organisation(client)
    ana, headers = new_principal(client, org, "analyst")
    assert client.get("/v1/datasets", headers=headers).status_code == 200
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    r = client.post(f"/v1/principals/{ana}/keys", json={"expires_at": past}, headers=AUTH)
    assert r.status_code == 201
    expired = {"Authorization": f"Bearer {r.json()['key']}"}
    r = client.get("/v1/datasets", headers=expired)
    assert (r.status_code, r.json()["detail"]) == (401, "this API key has expired")

    key_id = headers["Authorization"].split("_", 1)[1].rsplit("_", 1)[0]
    assert key_id.startswith("key_")
    key_id = "key_" + headers["Authorization"].removeprefix("Bearer odo_key_")[:32]
    r = client.delete(f"/v1/keys/{key_id}", headers=headers)  # the owner revokes its own key
    assert r.status_code == 200, r.text
    r = client.get("/v1/datasets", headers=headers)
    assert (r.status_code, r.json()["detail"]) == (401, "this API key was revoked")


def test_bootstrap_admin_prints_a_working_key(
    backend: Backend,
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", backend.url)
    get_settings.cache_clear()
    try:
        # --force: the database may hold an admin already (bootstrap-admin refuses a second)
        assert cli.main(["bootstrap-admin", "--name", "first admin", "--force"]) == 0
    finally:
        get_settings.cache_clear()
    token = capsys.readouterr().out.strip()
    assert token.startswith("odo_key_")
    headers = {"Authorization": f"Bearer {token}"}
    r = client.post("/v1/organisations", json={"name": "by-bootstrap-admin"}, headers=headers)
    assert r.status_code == 201, r.text
    assert client.get("/v1/organisations", headers=headers).status_code == 200


def test_replay_catches_a_forged_quota_state(client: TestClient) -> None:
    """Quota levels are replayed: a re-hashed chain with a forged quota state is caught."""
    org = new_organisation(client)
    ds = _dataset(client, org, "basic", epsilon="1")
    ana, headers = new_principal(client, org, "analyst")
    grant(client, ds, ana, {"epsilon": "0.5", "delta": 0})
    for _ in range(2):
        assert _spend(client, ds, headers, {"type": "pure_dp", "epsilon": "0.1"}).status_code == 201
    entries = ledger(client, ds)
    assert replay(entries).ok
    entries[-1]["quota"]["state"]["spent_epsilon"] = "0.1"  # hide one charge from the quota
    prev = GENESIS_HASH
    for e in entries:  # an attacker re-hashes the whole chain
        e["prev_hash"] = prev
        e["hash"] = prev = entry_hash(e)
    verdict = replay(entries)
    assert not verdict.ok
    assert "quota state" in verdict.problems[0]
