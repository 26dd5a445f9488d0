"""Idempotency keys with Stripe semantics."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support import AUTH, basic_dataset, ledger, status


def test_same_key_same_body_replays_the_stored_response(client: TestClient) -> None:
    ds = basic_dataset(client)
    url = f"/v1/datasets/{ds['id']}/invocations"
    headers = {**AUTH, "Idempotency-Key": "key-1"}
    body = {"mechanism": {"type": "pure_dp", "epsilon": "0.25"}}
    first = client.post(url, json=body, headers=headers)
    second = client.post(url, json=body, headers=headers)
    # the same request written differently (number instead of string) is the same request
    third = client.post(
        url, json={"mechanism": {"type": "pure_dp", "epsilon": 0.25}}, headers=headers
    )
    assert first.status_code == second.status_code == third.status_code == 201
    assert second.content == first.content
    assert third.content == first.content
    assert "idempotent-replayed" not in first.headers
    assert second.headers["idempotent-replayed"] == "true"
    assert [e["kind"] for e in ledger(client, ds["id"])] == [
        "dataset_created",
        "invocation_accepted",
    ]
    assert status(client, ds["id"])["spent"]["epsilon"] == "0.25"


def test_same_key_different_body_is_422_and_changes_nothing(client: TestClient) -> None:
    ds = basic_dataset(client)
    url = f"/v1/datasets/{ds['id']}/invocations"
    headers = {**AUTH, "Idempotency-Key": "key-2"}
    assert (
        client.post(
            url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.25"}}, headers=headers
        ).status_code
        == 201
    )
    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.3"}}, headers=headers)
    assert r.status_code == 422
    assert r.json()["error"] == "IdempotencyKeyReused"
    # another dataset, same key and body: a different request too
    other = basic_dataset(client)
    r = client.post(
        f"/v1/datasets/{other['id']}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": "0.25"}},
        headers=headers,
    )
    assert r.status_code == 422
    assert len(ledger(client, ds["id"])) == 2
    assert len(ledger(client, other["id"])) == 1


def test_a_rejection_is_replayed_byte_for_byte(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon="0.1")
    url = f"/v1/datasets/{ds['id']}/invocations"
    headers = {**AUTH, "Idempotency-Key": "key-3"}
    body = {"mechanism": {"type": "pure_dp", "epsilon": "0.2"}}
    first = client.post(url, json=body, headers=headers)
    # the budget grows in between: the retry still gets the stored 409, not a new decision
    client.patch(
        f"/v1/datasets/{ds['id']}/budget", json={"epsilon": 1, "delta": "0.000001"}, headers=AUTH
    )
    second = client.post(url, json=body, headers=headers)
    assert first.status_code == second.status_code == 409
    assert second.content == first.content
    assert [e["kind"] for e in ledger(client, ds["id"])] == [
        "dataset_created",
        "invocation_rejected",
        "budget_changed",
    ]


def test_settle_with_a_key_is_retry_safe(client: TestClient) -> None:
    ds = basic_dataset(client)
    url = f"/v1/datasets/{ds['id']}/invocations"
    odp = {
        "type": "odp",
        "cells": [{"name": "lo", "epsilon": "0.1"}, {"name": "hi", "epsilon": "0.4"}],
    }
    inv = client.post(url, json={"mechanism": odp}, headers=AUTH).json()
    headers = {**AUTH, "Idempotency-Key": "settle-1"}
    first = client.post(f"{url}/{inv['id']}/settle", json={"cell": "lo"}, headers=headers)
    second = client.post(f"{url}/{inv['id']}/settle", json={"cell": "lo"}, headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert first.json()["refund"] == {"epsilon": "0.3", "delta": "0"}
    # without the key a second settle is a conflict
    third = client.post(f"{url}/{inv['id']}/settle", json={"cell": "lo"}, headers=AUTH)
    assert third.status_code == 409
    kinds = [e["kind"] for e in ledger(client, ds["id"])]
    assert kinds.count("invocation_settled") == 1


def test_keys_are_scoped_to_the_principal_and_validated(client: TestClient) -> None:
    ds = basic_dataset(client)
    url = f"/v1/datasets/{ds['id']}/invocations"
    body = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}
    r = client.post(url, json=body, headers={**AUTH, "Idempotency-Key": "x" * 256})
    assert r.status_code == 422
    r = client.post(url, json=body, headers={**AUTH, "Idempotency-Key": "has space"})
    assert r.status_code == 422
    assert len(ledger(client, ds["id"])) == 1
