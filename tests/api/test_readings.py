"""One reading to quote over HTTP: the status summary, the refusal summary whose suggestion
is then admitted, per-analyst attribution in the report in curve modes, ``GET /v1/me`` and
the warning on a second dataset of the same name."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting.summary import round_up
from tests.support import AUTH, grant, new_organisation, new_principal

SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {
            "name": "train",
            "budget": {"epsilon": "1", "delta": "1e-7"},
            "accounting": {"mode": "rdp"},
        },
        {
            "name": "stats",
            "budget": {"epsilon": "1", "delta": "0"},
            "accounting": {"mode": "basic"},
        },
    ],
}


def _dataset(client: TestClient, org: str, accounting: dict[str, Any]) -> str:
    body = {
        "organisation_id": org,
        "name": f"readings-{accounting['mode']}",
        "budget": {"epsilon": 2, "delta": "1e-6"},
        "accounting": accounting,
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _register(
    client: TestClient, ds: str, headers: dict[str, str], mechanism: dict[str, Any], **extra: Any
) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism, **extra}, headers=headers
    )


@pytest.mark.parametrize(
    ("accounting", "mechanism", "unit"),
    [
        ({"mode": "basic"}, {"type": "pure_dp", "epsilon": "0.3"}, "epsilon"),
        ({"mode": "zcdp"}, {"type": "gaussian", "sigma": 10}, "rho"),
        ({"mode": "rdp"}, {"type": "gaussian", "sigma": 10}, "rdp"),
        ({"mode": "gdp"}, {"type": "gaussian", "sigma": 10}, "mu_squared"),
    ],
)
def test_status_leads_with_one_reading_and_the_refusal_says_what_fits(
    client: TestClient, accounting: dict[str, Any], mechanism: dict[str, Any], unit: str
) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, accounting)
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    for _ in range(2):
        assert _register(client, ds, headers, mechanism).status_code == 201
    got = client.get(f"/v1/datasets/{ds}", headers=headers).json()["status"]
    summary, reading = got["summary"], got["odometer"]
    assert summary["guarantee"]["epsilon"] == str(round_up(Decimal(reading["epsilon"])))
    assert summary["left"][0]["unit"] == unit
    more = summary["more"]
    assert more["of"]["type"] == mechanism["type"] and more["count"] > 0
    # exactly that many more are admitted, then a refusal
    for _ in range(more["count"]):
        assert _register(client, ds, headers, mechanism).status_code == 201
    refused = _register(client, ds, headers, mechanism)
    assert refused.status_code == 409
    body = refused.json()["summary"]
    assert body["level"] == "dataset"
    assert body["text"].startswith(f"refused by the dataset budget: {body['bound']}")
    # what the refusal suggests instead is admitted as it stands
    assert body["instead"] is not None
    assert _register(client, ds, headers, body["instead"]).status_code == 201
    listed = client.get("/v1/datasets", headers=headers).json()["datasets"]
    (mine,) = [d for d in listed if d["id"] == ds]
    assert mine["status"]["summary"]["more"] is None
    assert mine["status"]["summary"]["left"][0]["unit"] == unit


def test_a_quota_refusal_is_summed_up_at_the_quota(client: TestClient) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": "basic"})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, {"epsilon": "0.5", "delta": "0"})
    assert _register(client, ds, headers, {"type": "pure_dp", "epsilon": "0.4"}).status_code == 201
    refused = _register(client, ds, headers, {"type": "pure_dp", "epsilon": "0.4"})
    assert refused.status_code == 409
    summary = refused.json()["summary"]
    assert summary["level"] == "quota"
    assert summary["instead"] == {"type": "pure_dp", "epsilon": "0.1"}
    assert summary["left"][0] == {
        "unit": "epsilon",
        "amount": "0.1",
        "budget": "0.5",
        "fraction": "0.2",
        "order": None,
        "sub_budget": None,
    }
    me = client.get("/v1/me", headers=headers).json()
    assert me["role"] == "analyst" and me["id"] == analyst
    (mine,) = [g for g in me["grants"] if g["dataset_id"] == ds]
    assert mine["quota"]["budget"] == {"epsilon": "0.5", "delta": "0"}
    assert mine["quota"]["summary"]["guarantee"] == {"epsilon": "0.4", "delta": "0"}
    assert client.get("/v1/me", headers=AUTH).json()["grants"] == []
    # the curator's list of grants shows the same quota reading
    (listed,) = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"]
    assert listed["quota_summary"] == mine["quota"]["summary"]


@pytest.mark.parametrize("accounting", [{"mode": "rdp"}, SPLIT])
def test_the_report_attributes_spend_per_analyst_in_curve_modes(
    client: TestClient, accounting: dict[str, Any]
) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, accounting)
    extra = {"sub_budget": "train"} if accounting["mode"] == "split" else {}
    spenders = []
    for n in (2, 1):
        analyst, headers = new_principal(client, org, "analyst")
        grant(client, ds, analyst)
        for _ in range(n):
            r = _register(client, ds, headers, {"type": "gaussian", "sigma": 20}, **extra)
            assert r.status_code == 201, r.text
        spenders.append(analyst)
    report = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    rows = {row["actor"]: row for row in report["analysts"]}
    two, one = (Decimal(rows[a]["attribution"]["epsilon"]) for a in spenders)
    assert Decimal(0) < one < two
    assert all(rows[a]["attribution"]["certified"] is False for a in spenders)
    if accounting["mode"] == "rdp":
        # one analyst's curve is its charges' sum: twice the other's, order by order
        a, b = (rows[x]["curve"]["rdp"] for x in spenders)
        assert all(Decimal(x) == pytest.approx(2 * Decimal(y)) for x, y in zip(a, b, strict=True))
        whole = Decimal(report["status"]["spent_eps_delta"]["epsilon"])
        assert two < whole < one + two
    assert report["status"]["summary"]["guarantee"]["epsilon"] == str(
        round_up(Decimal(report["status"]["odometer"]["epsilon"]))
    )
    # the per-analyst chart draws the attributions, never "net 0" for curve charges
    svg = client.get(f"/v1/datasets/{ds}/report/analysts.svg", headers=AUTH).text
    assert "net 0" not in svg and "not certified" in svg
    for actor in spenders:
        assert f"ε {rows[actor]['attribution']['epsilon']}, δ" in svg


def test_a_second_dataset_of_the_same_name_is_created_with_a_warning(client: TestClient) -> None:
    org = new_organisation(client)
    first = _dataset(client, org, {"mode": "basic"})
    body = {"organisation_id": org, "name": "readings-basic", "budget": {"epsilon": 1, "delta": 0}}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201
    (warning,) = r.json()["warnings"]
    assert first in warning and "'readings-basic'" in warning
    other = new_organisation(client)
    r = client.post("/v1/datasets", json={**body, "organisation_id": other}, headers=AUTH)
    assert r.json()["warnings"] == []


def test_an_organisation_cap_leads_with_its_reading(client: TestClient) -> None:
    org = new_organisation(client)
    listed = {
        o["id"]: o for o in client.get("/v1/organisations", headers=AUTH).json()["organisations"]
    }
    assert listed[org]["summary"] is None  # no cap, nothing to be left of
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    r = client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH)
    assert r.status_code == 200, r.text
    ds = _dataset(client, org, {"mode": "zcdp"})
    assert _register(client, ds, AUTH, {"type": "gaussian", "sigma": 10}).status_code == 201
    listed = {
        o["id"]: o for o in client.get("/v1/organisations", headers=AUTH).json()["organisations"]
    }
    summary, status = listed[org]["summary"], listed[org]["status"]
    assert summary["guarantee"]["epsilon"] == str(round_up(Decimal(status["odometer"]["epsilon"])))
    left = summary["left"][0]  # then the δ for approximate declarations the cap keeps
    assert left["unit"] == "rho" and [x["unit"] for x in summary["left"][1:]] == ["delta"]
    assert Decimal(left["amount"]) <= Decimal(status["remaining"]["rho"])


@pytest.mark.parametrize(
    ("accounting", "mechanism", "quota"),
    [
        ({"mode": "basic"}, {"type": "pure_dp", "epsilon": "0.1"}, {"epsilon": "0.35", "delta": 0}),
        ({"mode": "basic"}, {"type": "pure_dp", "epsilon": "0.15"}, None),
        ({"mode": "zcdp"}, {"type": "gaussian", "sigma": 6}, None),
        ({"mode": "rdp"}, {"type": "gaussian", "sigma": 6}, None),
        ({"mode": "gdp"}, {"type": "gaussian", "sigma": 6}, None),
        (SPLIT, {"type": "gaussian", "sigma": 6}, None),
    ],
)
def test_preview_says_how_many_more_fit_and_that_many_are_admitted(
    client: TestClient,
    accounting: dict[str, Any],
    mechanism: dict[str, Any],
    quota: dict[str, Any] | None,
) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, accounting)
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, quota)
    extra = {"sub_budget": "train"} if accounting["mode"] == "split" else {}
    r = client.post(
        f"/v1/datasets/{ds}/invocations/preview",
        json={"mechanism": mechanism, **extra},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    fit = r.json()["fit"]
    assert fit["at_least"] is False and fit["reason"]
    assert fit["level"] == ("quota" if quota else "dataset")
    admitted = 0
    while _register(client, ds, headers, mechanism, **extra).status_code == 201:
        admitted += 1
    assert admitted == fit["count"] > 0
