"""A reservation ends at the levels that made it, whatever happened to the grant since.

The red team's scenario (seen on SQLite): a curator grants an analyst a quota (ε 0.5) on a
``basic`` dataset, the analyst reserves an ``odp`` invocation (cells 0.01 / 0.5), the curator
revokes the grant and grants it again with the same quota. Settle and cancel then answered 409
``NoOpenReservation`` for the analyst and the admin alike (they looked up the *current* grant's
quota, which never reserved anything), and the dataset kept ε 0.5 reserved for ever.

Now the invocation records the grant instance that reserved it (``levels.quota_grant``, the
``seq`` of the ``grant_changed`` entry that made the grant): when that grant is gone, the
quota's share is dropped and the reservation is finished at the dataset and the organisation
only; the new grant's quota is never refunded for a reservation it did not make. The settle's
ledger entry says so (``quota.outcome == "dropped"``), and the replay checks it.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting.legacy import VERSION_1_3
from odometer_core.ledger import replay
from tests.support import (
    AUTH,
    grant,
    ledger,
    new_organisation,
    new_principal,
    rehashed,
    status,
)

QUOTA = {"epsilon": "0.5", "delta": "0"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.5"}],
}


def _dataset(client: TestClient, org: str, epsilon: str = "2") -> str:
    body = {
        "name": "regrant",
        "budget": {"epsilon": epsilon, "delta": "0.00001"},
        "accounting": {"mode": "basic"},
        "organisation_id": org,
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _grants(client: TestClient, ds: str) -> dict[str, dict[str, Any]]:
    r = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH)
    assert r.status_code == 200, r.text
    return {g["principal_id"]: g for g in r.json()["grants"]}


def _org(client: TestClient, org: str) -> dict[str, Any]:
    r = client.get("/v1/organisations", headers=AUTH)
    found: dict[str, Any] = next(o for o in r.json()["organisations"] if o["id"] == org)
    return found


def _revoke(client: TestClient, ds: str, analyst: str) -> None:
    r = client.delete(f"/v1/datasets/{ds}/grants/{analyst}", headers=AUTH)
    assert r.status_code == 200, r.text


def _reserve_then_regrant(client: TestClient, *, capped: bool) -> tuple[str, str, str, Any, str]:
    """The scenario up to the re-grant: (organisation, dataset, analyst, its headers, the
    reserved invocation)."""
    org, ds, analyst, headers, inv = _reserve_then_revoke(client, capped=capped)
    grant(client, ds, analyst, QUOTA)
    return org, ds, analyst, headers, inv


def _reserve_then_revoke(
    client: TestClient, *, capped: bool = False
) -> tuple[str, str, str, Any, str]:
    """:func:`_reserve`, then the grant is revoked."""
    org, ds, analyst, headers, inv = _reserve(client, capped=capped)
    _revoke(client, ds, analyst)
    return org, ds, analyst, headers, inv


def _reserve(client: TestClient, *, capped: bool = False) -> tuple[str, str, str, Any, str]:
    """An analyst's grant with a quota reserves an ODP invocation: (organisation, dataset,
    analyst, its headers, the reserved invocation)."""
    org = new_organisation(client)
    if capped:
        cap = {"epsilon": "10", "delta": "0.0001"}
        r = client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH)
        assert r.status_code == 200, r.text
    ds = _dataset(client, org)
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, QUOTA)
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": ODP}, headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "reserved"
    inv = str(r.json()["id"])
    assert status(client, ds)["reserved"]["epsilon"] == "0.5"
    return org, ds, analyst, headers, inv


@pytest.mark.parametrize(
    ("finish", "by"), [("settle", "analyst"), ("cancel", "admin"), ("settle", "admin")]
)
@pytest.mark.parametrize("capped", [False, True], ids=["no-cap", "capped"])
def test_a_reservation_outlives_the_revoked_grant(
    client: TestClient, finish: str, by: str, capped: bool
) -> None:
    org, ds, analyst, headers, inv = _reserve_then_regrant(client, capped=capped)
    fresh = _grants(client, ds)[analyst]["quota_state"]
    assert fresh["reserved_epsilon"] == "0" and fresh["open_reservations"] == 0

    url = f"/v1/datasets/{ds}/invocations/{inv}/{finish}"
    body = {"cell": "low"} if finish == "settle" else None
    r = client.post(url, json=body, headers=headers if by == "analyst" else AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == ("settled" if finish == "settle" else "cancelled")
    # the quota that reserved is gone: its share is dropped, not refunded to the new grant
    assert "quota" not in (r.json().get("levels") or {})

    after = status(client, ds)
    assert after["reserved"]["epsilon"] == "0" and after["reserved"]["open"] == 0
    assert Decimal(after["spent"]["epsilon"]) == (
        Decimal("0.01") if finish == "settle" else Decimal(0)
    )
    # the new grant's quota is untouched
    assert _grants(client, ds)[analyst]["quota_state"] == fresh
    if capped:
        cap = _org(client, org)
        assert Decimal(cap["reserved"]["epsilon"]) == 0
        assert Decimal(cap["spent"]["epsilon"]) == (
            Decimal("0.01") if finish == "settle" else Decimal(0)
        )

    # the ledger says which grant reserved and that its share was dropped; it replays
    entries = ledger(client, ds)
    reserved = next(e for e in entries if e["kind"] == "invocation_reserved")
    regranted = [e for e in entries if e["kind"] == "grant_changed"][-1]
    finished = entries[-1]
    assert finished["invocation_id"] == inv
    assert finished["quota"]["outcome"] == "dropped" and not finished["quota"]["applied"]
    assert finished["quota"]["grant"] == reserved["quota"]["grant"] != regranted["seq"]
    assert (finished["org"] is not None) == capped
    verdict = replay(entries)
    assert verdict.ok, verdict.problems

    # no second finish, and the analyst's new quota spends in full
    again = client.post(url, json=body, headers=AUTH)
    assert again.status_code == 409, again.text
    pure = {"type": "pure_dp", "epsilon": "0.5"}
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": pure}, headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["levels"]["quota"]["remaining"]["epsilon"] == "0"


def test_a_revoked_grant_without_a_new_one_is_finished_by_the_admin(client: TestClient) -> None:
    """Revoked and not granted again: the analyst no longer sees the dataset (404), and the
    admin cancels; the reservation ends at the dataset, the dropped quota is recorded."""
    _, ds, _, headers, inv = _reserve_then_revoke(client)
    url = f"/v1/datasets/{ds}/invocations/{inv}/cancel"
    assert client.post(url, headers=headers).status_code == 404
    r = client.post(url, headers=AUTH)
    assert r.status_code == 200, r.text
    assert status(client, ds)["reserved"]["epsilon"] == "0"
    entries = ledger(client, ds)
    assert entries[-1]["quota"]["outcome"] == "dropped"
    verdict = replay(entries)
    assert verdict.ok, verdict.problems


def test_a_reservation_under_the_same_grant_is_finished_at_its_quota(client: TestClient) -> None:
    """Nothing changed on the grant: the quota that reserved gets the refund (as before), and
    the entry names the grant."""
    _, ds, analyst, headers, inv = _reserve(client)
    r = client.post(
        f"/v1/datasets/{ds}/invocations/{inv}/settle", json={"cell": "low"}, headers=headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["levels"]["quota"]["refund"]["epsilon"] == "0.49"
    quota = _grants(client, ds)[analyst]["quota_state"]
    assert (quota["spent_epsilon"], quota["reserved_epsilon"]) == ("0.01", "0")
    entries = ledger(client, ds)
    granted = next(e for e in entries if e["kind"] == "grant_changed")
    assert entries[-1]["quota"]["applied"] and entries[-1]["quota"]["grant"] == granted["seq"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems


def test_the_replay_refuses_a_settle_that_refunds_a_quota_that_did_not_reserve(
    client: TestClient,
) -> None:
    """The settle after the re-grant, forged (and the chain re-hashed, so it holds) to refund
    the new grant's quota, which reserved nothing (the new grant reserved too, so the refund
    is computable there): the replay refuses it, whether the forged part names the new grant
    or no grant at all."""
    _, ds, _analyst, headers, inv = _reserve_then_regrant(client, capped=False)
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": ODP}, headers=headers)
    assert r.status_code == 201, r.text
    r = client.post(
        f"/v1/datasets/{ds}/invocations/{inv}/settle", json={"cell": "low"}, headers=headers
    )
    assert r.status_code == 200, r.text
    entries = ledger(client, ds)
    assert replay(entries).ok
    assert entries[-1]["quota"]["outcome"] == "dropped"

    refund = copy.deepcopy(entries[-2]["quota"]) | {
        "outcome": "accepted",
        "charge": {"epsilon": "0.01", "delta": "0"},
        "requested": {"epsilon": "0.5", "delta": "0"},
        "refund": {"epsilon": "0.49", "delta": "0"},
        "reservation": None,
        "state": {
            "spent_epsilon": "0.01",
            "reserved_epsilon": "0",
            "spent_delta": "0",
            "open_reservations": 0,
        },
    }
    named = copy.deepcopy(entries)
    named[-1]["quota"] = refund
    verdict = replay(rehashed(named))
    assert not verdict.ok
    assert "quota grant" in verdict.problems[0], verdict.problems

    unnamed = copy.deepcopy(entries)
    unnamed[-1]["quota"] = {k: v for k, v in refund.items() if k != "grant"}
    verdict = replay(rehashed(unnamed))
    assert not verdict.ok
    assert "which did not reserve this invocation" in verdict.problems[0], verdict.problems


def test_the_replay_refuses_to_drop_the_share_of_a_quota_in_force(client: TestClient) -> None:
    """A settle under the grant that reserved, forged to drop the quota's share (the quota
    would keep the reservation open for ever): refused."""
    _, ds, _, headers, inv = _reserve(client)
    r = client.post(f"/v1/datasets/{ds}/invocations/{inv}/cancel", headers=headers)
    assert r.status_code == 200, r.text
    entries = ledger(client, ds)
    part = entries[-1]["quota"]
    entries[-1]["quota"] = (
        {"id": part["id"], "grant": part["grant"]}
        | {k: None for k in ("charge", "requested", "refund", "reservation", "state")}
        | {"outcome": "dropped", "applied": False}
    )
    verdict = replay(rehashed(entries))
    assert not verdict.ok
    assert "still in force" in verdict.problems[0], verdict.problems

    # and a settle entry without the quota part the reservation needs
    entries[-1]["quota"] = None
    verdict = replay(rehashed(entries))
    assert not verdict.ok
    assert "does not say how its share ended" in verdict.problems[0], verdict.problems


def test_a_1_3_ledger_replays_as_it_was_written(client: TestClient) -> None:
    """Accounting 1.3.0 knew no grant instances: a cancel after the grant was revoked had no
    quota part, and entries named no grant. Such a ledger replays unchanged; the same history
    recorded under 1.4.0 is refused (the quota that reserved must say how its share ended)."""
    _, ds, _, _, inv = _reserve_then_revoke(client)
    assert client.post(f"/v1/datasets/{ds}/invocations/{inv}/cancel", headers=AUTH).is_success
    entries = ledger(client, ds)
    assert entries[-1]["quota"]["outcome"] == "dropped"

    as_written = copy.deepcopy(entries)
    as_written[-1]["quota"] = None
    for entry in as_written:
        if entry["quota"] is not None:
            entry["quota"].pop("grant", None)
    verdict = replay(rehashed(as_written))
    assert not verdict.ok and "does not say how its share ended" in verdict.problems[0]
    for entry in as_written:
        entry["accounting_version"] = VERSION_1_3
    verdict = replay(rehashed(as_written))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
