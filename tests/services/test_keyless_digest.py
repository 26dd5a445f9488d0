"""A request's fingerprint is computed only when it carries an Idempotency-Key (the only use of
it: a key reused with another request is refused). Counted on the core's ``fingerprint`` over
HTTP: none for keyless registrations, one per keyed one, and a key reused with another
declaration is still refused (422).

Shown able to fail: before ``prepare(keyed=False)`` every registration digested its request
(``assert [1, 1] == [0, 0]``)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.ledger import admission
from tests.support import AUTH


def test_only_a_keyed_request_is_digested(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = client.post(
        "/v1/datasets",
        json={"name": "keyless", "budget": {"epsilon": "10", "delta": "0.00001"}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    path = f"/v1/datasets/{r.json()['id']}/invocations"
    calls: list[str] = []
    real = admission.fingerprint

    def counted(operation: str, **request: Any) -> str:
        calls.append(operation)
        return real(operation, **request)

    monkeypatch.setattr(admission, "fingerprint", counted)
    counts = []
    for _ in range(2):
        before = len(calls)
        r = client.post(
            path, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}, headers=AUTH
        )
        assert r.status_code == 201, r.text
        counts.append(len(calls) - before)
    assert counts == [0, 0]

    keyed = {**AUTH, "Idempotency-Key": "keyless-digest-1"}
    first = client.post(
        path, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}, headers=keyed
    )
    assert first.status_code == 201, first.text
    again = client.post(
        path, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}, headers=keyed
    )
    assert again.status_code == 201 and again.text == first.text
    assert again.headers.get("Idempotent-Replayed") == "true"
    other = client.post(
        path, json={"mechanism": {"type": "pure_dp", "epsilon": "0.2"}}, headers=keyed
    )
    assert other.status_code == 422, other.text
    assert len(calls) == 3
