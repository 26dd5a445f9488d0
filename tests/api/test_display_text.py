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
        "budget": {"epsilon": "2", "delta": "0.000001"},
        "spent": {"epsilon": "0.123457", "delta": "0"},
        "spent_eps_delta": {"epsilon": "0.123457", "delta": "0"},
        "reserved": {"epsilon": "0"},
        "remaining": {"epsilon": "1.87654", "delta": "0.000001"},
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
        "cap": {"epsilon": "5", "delta": "0.00001"},
        "spent": {"delta": "0"},  # an rdp cap counts a curve (no text) and δ
        "reserved": None,
        "remaining": {"delta": "0.0000001"},
    }


# ---------------------------------------------------------------------------- the tables' amounts
#: One ε whose 6-digit text differs up and down: what was spent reads 0.123457, what is given
#: back or left 0.123456, so a test sees each amount's direction.
EPSILON = "0.1234567891"


def test_the_tables_amounts_are_text_rounded_the_way_that_never_flatters(
    client: TestClient,
) -> None:
    """Every amount the dashboard's tables and the command line print has its text beside it
    (``shown.<field>``, unit by unit, 6 digits): charges and spends up, quotas, caps, budgets,
    what remains and refunds down. Failed before (KeyError 'shown' on the ledger page, the
    report's rows, a grant, an invocation and a preview)."""
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": "basic"})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, {"epsilon": "1.9876543219", "delta": "0"})
    r = _register(client, ds, headers, {"type": "pure_dp", "epsilon": EPSILON})
    assert r.status_code == 201, r.text
    invocation = client.get(f"/v1/datasets/{ds}/invocations/{r.json()['id']}", headers=AUTH).json()
    assert invocation["charge"] == {"epsilon": EPSILON, "delta": "0"}  # exact, unchanged
    assert invocation["shown"]["charge"] == {"epsilon": "0.123457", "delta": "0"}
    assert invocation["shown"]["requested"] == {"epsilon": "0.123457", "delta": "0"}

    page = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()
    (entry,) = [e for e in page["entries"] if e["kind"] == "invocation_accepted"]
    assert entry["charge"]["epsilon"] == EPSILON and "shown" not in entry  # hashed as it is
    assert page["shown"][str(entry["seq"])] == {"charge": {"epsilon": "0.123457", "delta": "0"}}
    export = client.get(f"/v1/datasets/{ds}/ledger?export=true", headers=AUTH).json()
    assert "shown" not in export  # an export file is the entries alone

    report = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    (row,) = report["analysts"]
    assert row["charged"]["epsilon"] == EPSILON
    assert "shown" not in row  # the rows as the ledger adds them up; their text beside them
    assert report["shown"] == {
        "analysts": {analyst: {"charged": {"epsilon": "0.123457", "delta": "0"}}},  # no refund
        "mechanisms": {"pure_dp": {"charged": {"epsilon": "0.123457", "delta": "0"}}},
        "refunds": {},  # nothing refunded: no amount, no text
    }
    assert report["status"]["shown"]["remaining"] == {"epsilon": "1.87654", "delta": "0.000001"}

    (quota,) = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"]
    assert quota["quota"]["epsilon"] == "1.9876543219"
    assert quota["shown"] == {"quota": {"epsilon": "1.98765", "delta": "0"}}  # down
    mine = client.get("/v1/me", headers=headers).json()["grants"]
    assert [g["quota"]["shown"] for g in mine] == [{"budget": {"epsilon": "1.98765", "delta": "0"}}]

    preview = client.post(
        f"/v1/datasets/{ds}/invocations/preview",
        json={"mechanism": {"type": "pure_dp", "epsilon": EPSILON}},
        headers=headers,
    ).json()
    assert preview["shown"]["charge"] == {"epsilon": "0.123457", "delta": "0"}
    # what would be left after it, 2 - 2 × 0.1234567891 = 1.7530864218: down
    assert preview["remaining"]["epsilon"] == "1.7530864218"
    assert preview["shown"]["remaining"] == {"epsilon": "1.75308", "delta": "0.000001"}


def test_a_refund_and_what_remains_are_rounded_down(client: TestClient) -> None:
    """A cancelled reservation's refund, in the ledger page's text and the report's row,
    rounded down (0.123456, not 0.123457)."""
    org = new_organisation(client)
    ds = _dataset(client, org, {"mode": "basic"})
    odp = {
        "type": "odp",
        "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": EPSILON}],
    }
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": odp}, headers=AUTH)
    assert r.status_code == 201 and r.json()["status"] == "reserved", r.text
    cancelled = client.post(f"/v1/datasets/{ds}/invocations/{r.json()['id']}/cancel", headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    page = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()
    (entry,) = [e for e in page["entries"] if e["kind"] == "invocation_cancelled"]
    assert entry["refund"]["epsilon"] == EPSILON
    assert page["shown"][str(entry["seq"])]["refund"] == {"epsilon": "0.123456", "delta": "0"}
    report = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    assert report["shown"]["refunds"]["total"] == {"epsilon": "0.123456", "delta": "0"}
    (row,) = report["analysts"]
    assert report["shown"]["analysts"][row["actor"]]["refunded"] == {
        "epsilon": "0.123456",
        "delta": "0",
    }


def test_an_organisation_s_cap_spent_and_remaining_are_text(client: TestClient) -> None:
    """The cap rounded down, spent up, remaining down; what each dataset drew (the cap's
    replay) up."""
    org = new_organisation(client)
    ds = cap_dataset(client, org, "basic")
    assert set_cap(client, org, {"epsilon": "9.9999999999", "delta": "0.00001"}).status_code == 200
    assert register(client, ds, {"type": "pure_dp", "epsilon": EPSILON}).status_code == 201
    shown = organisation(client, org)["shown"]
    assert shown["cap"] == {"epsilon": "9.99999", "delta": "0.00001"}
    assert shown["spent"] == {"epsilon": "0.123457", "delta": "0"}
    assert shown["remaining"] == {"epsilon": "9.87654", "delta": "0.00001"}
    assert shown["reserved"] == {"epsilon": "0"}
    replay = client.get(f"/v1/organisations/{org}/report", headers=AUTH).json()
    (drawn,) = [d for d in replay["datasets"] if d["id"] == ds]
    assert drawn["shown"] == {"drawn": {"epsilon": "0.123457", "delta": "0"}}
