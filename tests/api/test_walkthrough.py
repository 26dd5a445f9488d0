"""The README walk-through, as a test, on both backends."""

from __future__ import annotations

from decimal import Decimal

from fastapi.testclient import TestClient

from tests.support import AUTH, basic_dataset, ledger, status


def test_basic_budget_fills_exactly_then_rejects(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=1, delta=1e-6, accounting={"mode": "basic"})
    assert ds["status"]["budget"] == {"epsilon": "1", "delta": "0.000001"}
    url = f"/v1/datasets/{ds['id']}/invocations"
    remaining = []
    for i in range(10):
        # alternate JSON numbers and decimal strings: both are exact
        epsilon = 0.1 if i % 2 == 0 else "0.1"
        r = client.post(
            url, json={"mechanism": {"type": "pure_dp", "epsilon": epsilon}}, headers=AUTH
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["status"] == "accepted"
        assert body["charge"] == {"epsilon": "0.1", "delta": "0"}
        assert body["mechanism"] == {"type": "pure_dp", "epsilon": "0.1"}
        assert body["ledger_seq"] == i + 2
        remaining.append(body["remaining"]["epsilon"])
    assert remaining == ["0.9", "0.8", "0.7", "0.6", "0.5", "0.4", "0.3", "0.2", "0.1", "0"]

    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": 0.1}}, headers=AUTH)
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "BudgetExceeded"
    assert body["requested"] == {"epsilon": "0.1", "delta": "0"}
    assert body["remaining"] == {"epsilon": "0", "delta": "0.000001"}
    assert body["ledger_seq"] == 12

    # the rejection is an audit row and an invocation with status "rejected"
    entries = ledger(client, ds["id"])
    assert [e["kind"] for e in entries] == (
        ["dataset_created"] + ["invocation_accepted"] * 10 + ["invocation_rejected"]
    )
    rejected = client.get(f"{url}/{body['id']}", headers=AUTH).json()
    assert rejected["status"] == "rejected"
    assert rejected["charge"] == {"epsilon": "0", "delta": "0"}
    assert rejected["events"][0]["kind"] == "invocation_rejected"
    assert status(client, ds["id"])["spent"] == {"epsilon": "1", "delta": "0"}


def test_odp_reservation_settles_to_the_cheaper_cell(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=1, delta=1e-6)
    url = f"/v1/datasets/{ds['id']}/invocations"
    odp = {
        "type": "odp",
        "cells": [{"name": "none", "epsilon": 0.2}, {"name": "some", "epsilon": 0.5}],
        "delta": 1e-7,
    }
    r = client.post(url, json={"mechanism": odp}, headers=AUTH)
    assert r.status_code == 201, r.text
    reserved = r.json()
    assert reserved["status"] == "reserved"
    assert reserved["charge"] == {"epsilon": "0.5", "delta": "0.0000001"}
    assert reserved["reservation"]["cells"] == [
        {"name": "none", "epsilon": "0.2"},
        {"name": "some", "epsilon": "0.5"},
    ]
    assert status(client, ds["id"])["reserved"] == {"epsilon": "0.5", "open": 1}

    # an undeclared cell is refused and changes nothing
    r = client.post(f"{url}/{reserved['id']}/settle", json={"cell": "other"}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"] == "UnknownCell"

    r = client.post(f"{url}/{reserved['id']}/settle", json={"cell": "none"}, headers=AUTH)
    assert r.status_code == 200, r.text
    settled = r.json()
    assert settled["status"] == "settled"
    assert settled["charge"] == {"epsilon": "0.2", "delta": "0"}
    assert settled["refund"] == {"epsilon": "0.3", "delta": "0"}  # δ is never refunded
    assert Decimal(settled["refund"]["epsilon"]) == Decimal("0.5") - Decimal("0.2")
    assert settled["remaining"] == {"epsilon": "0.8", "delta": "0.0000009"}
    st = status(client, ds["id"])
    assert st["spent"] == {"epsilon": "0.2", "delta": "0.0000001"}
    assert st["reserved"] == {"epsilon": "0", "open": 0}

    # settling twice is a conflict
    r = client.post(f"{url}/{reserved['id']}/settle", json={"cell": "none"}, headers=AUTH)
    assert r.status_code == 409
    assert r.json() == {
        "error": "InvocationNotReserved",
        "detail": f"invocation '{reserved['id']}' is settled, not reserved",
        "status": "settled",
    }

    inv = client.get(f"{url}/{reserved['id']}", headers=AUTH).json()
    assert inv["status"] == "settled"
    assert inv["cell"] == "none"
    assert [e["kind"] for e in inv["events"]] == ["invocation_reserved", "invocation_settled"]


def test_cancel_refunds_epsilon_and_delta(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=1, delta=1e-6)
    url = f"/v1/datasets/{ds['id']}/invocations"
    odp = {
        "type": "odp",
        "cells": [{"name": "a", "epsilon": "0.25"}, {"name": "b", "epsilon": "0.75"}],
        "delta": "2e-7",
    }
    inv = client.post(url, json={"mechanism": odp}, headers=AUTH).json()
    assert status(client, ds["id"])["remaining"] == {"epsilon": "0.25", "delta": "0.0000008"}
    r = client.post(f"{url}/{inv['id']}/cancel", headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["refund"] == {"epsilon": "0.75", "delta": "0.0000002"}
    assert r.json()["charge"] == {"epsilon": "0", "delta": "0"}
    assert status(client, ds["id"])["remaining"] == {"epsilon": "1", "delta": "0.000001"}
    r = client.post(f"{url}/{inv['id']}/cancel", headers=AUTH)
    assert r.status_code == 409
    assert r.json()["error"] == "InvocationNotReserved"


def test_preview_writes_nothing(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon="0.3")
    url = f"/v1/datasets/{ds['id']}/invocations/preview"
    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.5"}}, headers=AUTH)
    assert r.status_code == 200
    assert r.json()["status"] == "rejected"
    assert r.json()["remaining"] == {"epsilon": "0.3", "delta": "0.000001"}
    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.2"}}, headers=AUTH)
    assert r.json()["status"] == "accepted"
    assert r.json()["remaining"] == {"epsilon": "0.1", "delta": "0.000001"}
    assert len(ledger(client, ds["id"])) == 1
    assert status(client, ds["id"])["spent"] == {"epsilon": "0", "delta": "0"}


def test_budget_change_is_a_ledger_entry_and_never_below_spent(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=1)
    url = f"/v1/datasets/{ds['id']}"
    client.post(
        f"{url}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": "0.6"}},
        headers=AUTH,
    )
    r = client.patch(f"{url}/budget", json={"epsilon": "0.5", "delta": "0.000001"}, headers=AUTH)
    assert r.status_code == 409
    assert r.json()["error"] == "BudgetBelowSpent"
    r = client.patch(f"{url}/budget", json={"epsilon": 2, "delta": "0.000002"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["remaining"] == {"epsilon": "1.4", "delta": "0.000002"}
    entries = ledger(client, ds["id"])
    assert [e["kind"] for e in entries] == [
        "dataset_created",
        "invocation_accepted",
        "budget_changed",
    ]
    assert entries[-1]["config"]["epsilon"] == "2"
    assert entries[-1]["request"] == {
        "epsilon": "2",
        "delta": "0.000002",
        "sub_budget": None,
        "final_conversion_delta": None,
    }
