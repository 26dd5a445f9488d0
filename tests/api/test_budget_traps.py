"""Budgets that keep their word over HTTP, on SQLite and PostgreSQL (docs/accounting.md,
*Certified odometer readings*, *One reading to quote*, *Budgets that can admit something*):

- a running total exactly at the threshold (a zcdp declaration whose ρ is the ``rho_budget``
  status shows) reads the budget, not the ladder level above it;
- a refusal's ``instead`` is admitted as given, whichever level refused (dataset, organisation
  cap, analyst's quota) and whichever is tighter than the refusing one;
- a curve-mode budget, quota or cap that could never admit anything (δ = 0) is a 422 that says
  what to set, and changes nothing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import initial_state, make_config, parse_declaration
from odometer_core.accounting.summary import instead
from tests.support import AUTH, grant, new_organisation, new_principal


def _dataset(
    client: TestClient,
    org: str,
    epsilon: str,
    delta: str = "0.000001",
    accounting: dict[str, Any] | None = None,
) -> str:
    body = {
        "organisation_id": org,
        "name": "traps",
        "budget": {"epsilon": epsilon, "delta": delta},
        "accounting": accounting or {"mode": "basic"},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _register(client: TestClient, ds: str, headers: dict[str, str], mechanism: Any) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=headers
    )


def _pure(epsilon: str) -> dict[str, str]:
    return {"type": "pure_dp", "epsilon": epsilon}


# ---------------------------------------------------------------------------- readings
@pytest.mark.parametrize("epsilon", ["2", "1", "0.5"])
def test_a_total_exactly_at_the_threshold_reads_the_budget(
    client: TestClient, epsilon: str
) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, epsilon, accounting={"mode": "zcdp"})
    before = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    rho = before["rho_budget"]
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": {"type": "zcdp", "rho": rho}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    after = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    assert after["spent"]["rho"] == rho
    assert after["remaining"]["rho"] == "0"
    reading = after["odometer"]
    assert (reading["epsilon"], reading["delta"], reading["level"]) == (epsilon, "0.000001", 1)
    assert after["summary"]["guarantee"] == {"epsilon": epsilon, "delta": "0.000001"}


# ---------------------------------------------------------------------------- instead
#: Per binding level: the dataset's ε, the analyst's spend on it, the quota, the cap, what
#: another dataset of the organisation spent of the cap, the request, and what fits at every
#: level (the smallest of what the three have left).
CASES = {
    # dataset left 0.3, cap left 0.2, quota left 0.25: the dataset refuses, the cap binds
    "dataset": ("1", "0.7", "0.95", "2", "1.1", "0.5", "0.2"),
    # dataset left 0.5, cap left 0.3, quota left 0.1: the cap refuses, the quota binds
    "organisation": ("1", "0.5", "0.6", "2", "1.2", "0.4", "0.1"),
    # dataset left 0.5, cap left 0.4, quota left 0.3: the quota refuses and binds
    "quota": ("1", "0.5", "0.8", "2", "1.1", "0.35", "0.3"),
}


@pytest.mark.parametrize("level", list(CASES))
def test_what_a_refusal_suggests_is_admitted_at_every_level(client: TestClient, level: str) -> None:
    ds_eps, spent, quota, cap, elsewhere, asked, fits = CASES[level]
    org = new_organisation(client)
    r = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": cap, "delta": "0"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    ds = _dataset(client, org, ds_eps)
    other = _dataset(client, org, "10")
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, {"epsilon": quota, "delta": "0"})
    grant(client, other, analyst)
    assert _register(client, ds, headers, _pure(spent)).status_code == 201
    assert _register(client, other, headers, _pure(elsewhere)).status_code == 201
    refused = _register(client, ds, headers, _pure(asked))
    assert refused.status_code == 409, refused.text
    summary = refused.json()["summary"]
    assert summary["level"] == level
    assert summary["instead"] == _pure(fits)
    assert summary["text"].endswith(f"; pure_dp with epsilon ≤ {fits} would fit")
    # sent back as given, it is admitted: every level had at least that much left
    admitted = _register(client, ds, headers, summary["instead"])
    assert admitted.status_code == 201, admitted.text
    left = Decimal(fits)
    assert Decimal(asked) > left > 0


def test_a_curve_cap_tighter_than_a_curve_dataset_is_in_the_suggestion(client: TestClient) -> None:
    """zcdp dataset, rdp cap (its curve counted by another dataset): the dataset refuses a
    Gaussian whose noise it cannot afford; the σ suggested is larger than the dataset alone
    would take, large enough for the cap too, and admitted."""
    org = new_organisation(client)
    cap = {"epsilon": "1", "delta": "0.000001", "accounting": {"mode": "rdp"}}
    assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).status_code == 200
    ds = _dataset(client, org, "1.2", accounting={"mode": "zcdp"})
    other = _dataset(client, org, "10", accounting={"mode": "zcdp"})
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    grant(client, other, analyst)
    for _ in range(2):
        assert (
            _register(client, other, headers, {"type": "gaussian", "sigma": "10"}).status_code
            == 201
        )
    asked = {"type": "gaussian", "sigma": "3"}
    refused = _register(client, ds, headers, asked)
    assert refused.status_code == 409, refused.text
    summary = refused.json()["summary"]
    assert summary["level"] == "dataset"
    config = make_config("1.2", "0.000001", "add_remove", {"mode": "zcdp"})
    alone = instead(config, initial_state(config), parse_declaration(asked))
    assert alone is not None
    assert Decimal(summary["instead"]["sigma"]) > Decimal(alone["sigma"]) > 3
    # the dataset's own edge is refused by the cap; the suggestion is admitted
    assert _register(client, ds, headers, alone).status_code == 409
    assert _register(client, ds, headers, summary["instead"]).status_code == 201
