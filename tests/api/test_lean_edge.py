"""The register route's lean edge (``FastRegister``): the common request is served without
FastAPI's dependency resolution, every other request by the FastAPI route itself, so that the
answers are the route's in both cases.

Shown able to fail: with ``_parse`` not checking the caller's role, the curator's request was
passed to the service through the fast path and answered 404 (the service's visibility check)
instead of the route's 403."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.routers.invocations import FastRegister
from tests.support import AUTH, basic_dataset, grant, new_organisation, new_principal

PURE = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


class Spy:
    """Counts the requests the fast path handed to the FastAPI route."""

    def __init__(self, fast: FastRegister) -> None:
        self.fast = fast
        self.handed = 0
        self.real = fast.route

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        self.handed += 1
        await self.real.handle(scope, receive, send)


@pytest.fixture
def spy(client: TestClient) -> Iterator[Spy]:
    fast = next(
        app
        for r in client.app.router.routes  # type: ignore[attr-defined]
        if isinstance(app := getattr(r, "app", None), FastRegister)
    )
    spy = Spy(fast)
    fast.route = spy  # type: ignore[assignment]
    yield spy
    fast.route = spy.real


def _path(client: TestClient) -> str:
    return f"/v1/datasets/{basic_dataset(client, epsilon=10)['id']}/invocations"


def test_the_common_request_is_served_by_the_fast_path(client: TestClient, spy: Spy) -> None:
    path = _path(client)
    r = client.post(path, json=PURE, headers={**AUTH, "Idempotency-Key": "fast-1"})
    assert r.status_code == 201, r.text
    assert r.json()["charge"]["epsilon"] == "0.1" and r.json()["ledger_seq"] == 2
    again = client.post(path, json=PURE, headers={**AUTH, "Idempotency-Key": "fast-1"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.text == r.text
    assert spy.handed == 0


def test_an_analyst_key_is_served_by_the_fast_path(client: TestClient, spy: Spy) -> None:
    org = new_organisation(client)
    r = client.post(
        "/v1/datasets",
        json={"name": "d", "budget": {"epsilon": "1", "delta": "0"}, "organisation_id": org},
        headers=AUTH,
    )
    ds = r.json()["id"]
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    r = client.post(f"/v1/datasets/{ds}/invocations", json=PURE, headers=headers)
    assert r.status_code == 201, r.text
    assert spy.handed == 0
    # a dataset the analyst is not granted: the route answers (404, as for a missing one)
    other = basic_dataset(client)["id"]
    r = client.post(f"/v1/datasets/{other}/invocations", json=PURE, headers=headers)
    assert r.status_code == 404 and r.json()["error"] == "NotFound"


@pytest.mark.parametrize(
    ("headers", "body", "status", "error"),
    [
        ({}, PURE, 401, "Unauthorized"),
        ({"Authorization": "Basic abc"}, PURE, 401, "Unauthorized"),
        ({"Authorization": "Bearer wrong"}, PURE, 401, "Unauthorized"),
        ({**AUTH, "Idempotency-Key": "has space"}, PURE, 422, "ValidationError"),
        (AUTH, {"mechanism": {"type": "pure_dp", "epsilon": "-1"}}, 422, "InvalidDeclaration"),
        (AUTH, {"mechanism": {"type": "nope"}}, 422, "ValidationError"),
        (AUTH, {"mechanism": PURE["mechanism"], "extra": 1}, 422, "ValidationError"),
    ],
)
def test_every_other_request_is_answered_by_the_route(
    client: TestClient,
    spy: Spy,
    headers: dict[str, str],
    body: dict[str, Any],
    status: int,
    error: str,
) -> None:
    r = client.post(_path(client), json=body, headers=headers)
    assert (r.status_code, r.json()["error"]) == (status, error), r.text
    assert spy.handed == 1


def test_a_body_that_is_not_json_is_answered_by_the_route(client: TestClient, spy: Spy) -> None:
    path = _path(client)
    json_type = {**AUTH, "content-type": "application/json"}
    r = client.post(path, content=b"{not json", headers=json_type)
    assert r.status_code == 422 and r.json()["error"] == "ValidationError"
    r = client.post(path, content=b"x=1", headers={**AUTH, "content-type": "text/plain"})
    assert r.status_code == 422
    assert spy.handed == 2


def test_a_curator_is_refused_by_the_route(client: TestClient, spy: Spy) -> None:
    org = new_organisation(client)
    _, headers = new_principal(client, org, "curator")
    r = client.post(_path(client), json=PURE, headers=headers)
    assert r.status_code == 403 and r.json()["error"] == "Forbidden"
    assert spy.handed == 1
