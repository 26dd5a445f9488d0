"""One way to show things (issue 48): the per-analyst chart is the server's in every mode, and
the amounts the dashboard prints come from the API as text, rounded by the core's one rule
(``odometer_core.accounting.summary.shown``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.caps import cap_dataset, organisation, register, set_cap
from tests.api.test_readings import SPLIT, _dataset, _register
from tests.support import AUTH, grant, new_organisation, new_principal

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("mode", ["zcdp", "gdp"])
def test_the_analysts_chart_draws_attribution_outside_basic_mode(
    client: TestClient, mode: str
) -> None:
    """In zcdp and gdp the per-analyst chart draws each analyst's ε attribution, as in rdp and
    split (and as the report's tables and the command line give it), not the net ρ or μ²: the
    dashboard shows this chart instead of drawing its own. Failed before (the chart's title was
    'Spend per analyst (rho) …' and its bars 'net …, refunded …')."""
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": mode})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    r = _register(client, ds, headers, {"type": "gaussian", "sigma": 10})
    assert r.status_code == 201, r.text
    report: dict[str, Any] = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    (row,) = report["analysts"]
    svg = client.get(f"/v1/datasets/{ds}/report/analysts.svg", headers=AUTH).text
    root = ET.fromstring(svg)
    assert root.get("class") == "attribution-chart"
    assert root.findtext(f"{SVG}title") == (
        f"Attribution per analyst (ε, not certified) of dataset readings-{mode}"
    )
    (bar,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "analyst"]
    epsilon = row["attribution"]["epsilon"]
    assert f"ε {epsilon}, δ {row['attribution']['delta']} attributed" in (
        bar.findtext(f"{SVG}title") or ""
    )
    assert "net" not in svg


def test_the_basic_analysts_chart_is_the_net_charge(client: TestClient) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": "basic"})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    assert _register(client, ds, headers, {"type": "pure_dp", "epsilon": "0.3"}).status_code == 201
    root = ET.fromstring(client.get(f"/v1/datasets/{ds}/report/analysts.svg", headers=AUTH).text)
    assert root.get("class") is None
    assert [t.text for t in root.iter(f"{SVG}text")][-1] == "net 0.3, refunded 0"


def test_a_status_carries_its_figures_as_the_dashboard_prints_them(client: TestClient) -> None:
    """``status.shown`` and the summary's percentages: spent rounded up, what remains rounded
    down (6 digits), the reading up (8 digits), fractions as percentages rounded down, the
    core's one rule. Failed before (no ``shown``: KeyError)."""
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": "basic"})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    r = _register(client, ds, headers, {"type": "pure_dp", "epsilon": "0.1234567891"})
    assert r.status_code == 201, r.text
    status = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    assert status["budget"]["epsilon"] == "2"
    assert status["shown"] == {
        "reading": {"epsilon": "0.12345679", "delta": "0"},
        "counted": {
            "unit": "epsilon",
            "spent": "0.123457",
            "reserved": "0",
            "remaining": "1.87654",
            "budget": "2",
            "remaining_exact": "1.8765432109",
        },
        "estimate_above": False,
        "fraction_spent": "6.18 %",
        "fraction_spent_exact": "0.0618",
        "sub_budgets": None,
    }
    summary = status["summary"]
    assert summary["shown"] == {
        "fraction_spent": "6.18 %",
        "fraction_left": "93.82 %",
        "left": ["93.82 %", "100 %"],
    }
    listed = client.get("/v1/datasets", headers=AUTH).json()["datasets"]
    assert [d["status"]["shown"] for d in listed if d["id"] == ds] == [status["shown"]]


def test_a_split_status_shows_each_sub_budget(client: TestClient) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, SPLIT)
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    body = {"type": "pure_dp", "epsilon": "0.3333333333"}
    assert _register(client, ds, headers, body, sub_budget="stats").status_code == 201
    shown = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]["shown"]
    assert shown["counted"] is None
    stats, train = shown["sub_budgets"]["stats"], shown["sub_budgets"]["train"]
    assert stats["counted"] == {
        "unit": "epsilon",
        "spent": "0.333334",
        "reserved": "0",
        "remaining": "0.666666",
        "budget": "1",
        "remaining_exact": "0.6666666667",
    }
    assert stats["reading"] == {"epsilon": "0.33333334", "delta": "0"}
    assert stats["fraction_spent"] == "33.34 %"
    assert train["counted"]["unit"] == "epsilon" and train["counted"]["spent"] == "0"
    assert train["fraction_spent"] == "0 %"


def test_an_organisation_shows_its_cap_and_statement_rounded_up(client: TestClient) -> None:
    """A basic cap's status, its closed phase and the organisation's statement carry their
    readings rounded up to 8 digits (``shown``), as the dashboard prints them. Failed before
    (KeyError 'shown')."""
    org = new_organisation(client)
    ds = cap_dataset(client, org, "basic")
    assert set_cap(client, org, {"epsilon": "10", "delta": "0.00001"}).status_code == 200
    body = {"type": "pure_dp", "epsilon": "0.1234567891"}
    assert register(client, ds, body).status_code == 201, "registered"
    view = organisation(client, org)
    assert view["status"]["shown"]["reading"] == {"epsilon": "0.12345679", "delta": "0"}
    assert view["status"]["shown"]["counted"]["spent"] == "0.123457"
    assert view["status"]["shown"]["counted"]["remaining"] == "9.87654"
    replaced = {"epsilon": "5", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    assert set_cap(client, org, {**replaced, "replace": True}).status_code == 200
    view = organisation(client, org)
    assert view["closed"][0]["epsilon"] == "0.1234567891"
    assert view["shown"] == {
        "statement": {"epsilon": "0.12345679", "delta": "0"},
        "closed": [{"epsilon": "0.12345679", "delta": "0"}],
    }
