"""One error shape everywhere; authentication, roles and organisation boundaries."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.db.uow import UnitOfWork
from app.services.principals import Role, issue_api_key
from tests.support import AUTH, basic_dataset


def test_framework_errors_have_the_one_shape(client: TestClient) -> None:
    r = client.get("/v1/nothing-here", headers=AUTH)
    assert (r.status_code, r.json()) == (404, {"error": "NotFound", "detail": "Not Found"})
    r = client.delete("/v1/datasets", headers=AUTH)
    assert (r.status_code, r.json()) == (
        405,
        {"error": "MethodNotAllowed", "detail": "DELETE is not allowed here; allowed: GET, POST"},
    )
    assert r.headers["allow"] == "GET, POST"  # every method of the path, not the first route's
    r = client.get("/v1/datasets/ds_missing", headers=AUTH)
    assert r.status_code == 404
    assert r.json() == {"error": "NotFound", "detail": "dataset 'ds_missing' not found"}
    r = client.get("/v1/datasets", params={"limit": 0}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"] == "ValidationError"
    assert r.json()["errors"][0]["loc"] == ["query", "limit"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer "},
    ],
)
def test_missing_or_wrong_key_is_401(client: TestClient, headers: dict[str, str]) -> None:
    for method, path in [
        ("GET", "/v1/datasets"),
        ("POST", "/v1/datasets"),
        ("GET", "/v1/datasets/x/ledger"),
    ]:
        r = client.request(method, path, headers=headers, json={})
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"] == "Unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"


def test_roles_and_organisations(client: TestClient, uow: UnitOfWork) -> None:
    analyst = {"Authorization": "Bearer " + issue_api_key(uow, "ana", Role.ANALYST, "default")}
    auditor = {"Authorization": "Bearer " + issue_api_key(uow, "aud", Role.AUDITOR, "default")}
    curator = {"Authorization": "Bearer " + issue_api_key(uow, "cur", Role.CURATOR, "default")}
    outsider = {"Authorization": "Bearer " + issue_api_key(uow, "eve", Role.ANALYST, "other-org")}
    body = {"name": "roles", "budget": {"epsilon": 1, "delta": 0}}

    r = client.post("/v1/datasets", json=body, headers=analyst)
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
    r = client.post("/v1/datasets", json=body, headers=curator)
    assert r.status_code == 201
    ds = r.json()
    assert ds["created_by"] == "cur"
    url = f"/v1/datasets/{ds['id']}"

    mech = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}
    assert client.post(f"{url}/invocations", json=mech, headers=curator).status_code == 403
    # analysts spend only where they are granted; ungranted datasets do not exist for them
    r = client.post(f"{url}/invocations", json=mech, headers=analyst)
    assert (r.status_code, r.json()["error"]) == (404, "NotFound")
    r = client.post(f"{url}/grants", json={"principal_id": "ana"}, headers=curator)
    assert r.status_code == 201, r.text
    inv = client.post(f"{url}/invocations", json=mech, headers=analyst)
    assert inv.status_code == 201
    assert client.get(f"{url}/ledger", headers=analyst).status_code == 403
    entries = client.get(f"{url}/ledger", headers=auditor).json()["entries"]
    assert [e["actor"] for e in entries] == ["cur", "cur", "ana"]
    assert client.get(f"{url}/invocations/{inv.json()['id']}", headers=auditor).status_code == 200
    assert (
        client.patch(f"{url}/budget", json={"epsilon": 2, "delta": 0}, headers=auditor).status_code
        == 403
    )

    # another organisation cannot see that the dataset exists
    for method, path in [
        ("GET", url),
        ("GET", f"{url}/invocations/{inv.json()['id']}"),
        ("POST", f"{url}/invocations"),
    ]:
        r = client.request(method, path, headers=outsider, json=mech)
        assert (r.status_code, r.json()["error"]) == (404, "NotFound"), path
    listed = client.get("/v1/datasets", params={"limit": 1000}, headers=outsider).json()["datasets"]
    assert ds["id"] not in [d["id"] for d in listed]
    assert len(client.get(f"{url}/ledger", headers=auditor).json()["entries"]) == 3


def test_unsupported_kind_and_relation_mismatch_are_422(client: TestClient) -> None:
    r = client.post(
        "/v1/datasets",
        json={"name": "g", "budget": {"epsilon": 1, "delta": 1e-6}, "accounting": {"mode": "gdp"}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    url = f"/v1/datasets/{r.json()['id']}/invocations"
    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": 0.1}}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"] == "UnsupportedInMode"
    r = client.post(url, json={"mechanism": {"type": "gaussian", "sigma": 10}}, headers=AUTH)
    assert r.status_code == 201
    assert r.json()["charge"] == {"mu_squared": "0.01"}

    ds = basic_dataset(client, relation="replace_one")
    r = client.post(
        f"/v1/datasets/{ds['id']}/invocations",
        json={
            "mechanism": {
                "type": "subsampled",
                "scheme": "poisson",
                "rate": 0.01,
                "mechanism": {"type": "pure_dp", "epsilon": 1},
            }
        },
        headers=AUTH,
    )
    assert r.status_code == 422
    assert r.json()["error"] == "InvalidDeclaration"
    assert "add_remove" in r.json()["detail"]


def test_health_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    ds = basic_dataset(client, epsilon="0.1")
    url = f"/v1/datasets/{ds['id']}/invocations"
    client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}, headers=AUTH)
    client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}, headers=AUTH)
    text = client.get("/metrics").text
    assert 'odometer_decisions_total{outcome="accepted"} 1.0' in text
    assert 'odometer_decisions_total{outcome="rejected"} 1.0' in text
    assert (
        'odometer_http_requests_total{method="POST",'
        'route="/v1/datasets/{dataset_id}/invocations",status="409"} 1.0' in text
    )
