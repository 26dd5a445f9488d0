"""No setting that can never admit anything, over HTTP on SQLite and PostgreSQL
(docs/accounting.md, *Budgets that can admit something*).

A curve-mode budget whose conversion δ is 0 (δ_B = 0, or ``final_conversion_delta`` = 0), or an
``rdp`` budget whose every order's threshold is ≤ 0, has a threshold of 0: it could never admit
anything. Every way of setting one — a dataset, a budget change, a split's sub-budget, a
partitioned dataset's block budget, an analyst's quota, an organisation cap — is a 422 that says
what to set and changes nothing; the budget it suggests is accepted as given. One stored before
this rule (made here with the rule switched off) is flagged in its status with the fix, and the
fix works.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import filters, modes
from tests.support import AUTH, grant, ledger, new_organisation, new_principal

GAUSSIAN = {"type": "gaussian", "sigma": "1000", "sensitivity": "1"}


def _create(
    client: TestClient, org: str, budget: dict[str, Any], accounting: Any, **extra: Any
) -> Any:
    body = {
        "organisation_id": org,
        "name": "unusable",
        "budget": budget,
        "accounting": accounting,
        **extra,
    }
    return client.post("/v1/datasets", json=body, headers=AUTH)


def _register(client: TestClient, ds: str, headers: dict[str, str], **body: Any) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": GAUSSIAN, **body}, headers=headers
    )


def _rule_off(m: pytest.MonkeyPatch) -> None:
    """The version before the rule: such budgets were stored as given."""
    for module in (modes, filters):
        m.setattr(module, "refuse_unusable", lambda *args, **kwargs: None, raising=False)


def _organisation(client: TestClient, org: str) -> dict[str, Any]:
    listed = client.get("/v1/organisations", headers=AUTH).json()["organisations"]
    (found,) = [o for o in listed if o["id"] == org]
    return dict(found)


# ---------------------------------------------------------------------------- refused
@pytest.mark.parametrize(
    ("budget", "accounting", "words", "suggested"),
    [
        (
            {"epsilon": "2", "delta": "0"},
            {"mode": "zcdp"},
            "a zcdp budget converts to (ε, δ) and needs δ > 0",
            {"epsilon": "2", "delta": "0.000001", "final_conversion_delta": "0.000001"},
        ),
        (
            {"epsilon": "2", "delta": "0"},
            {"mode": "gdp"},
            "a gdp budget converts to (ε, δ) and needs δ > 0",
            {"epsilon": "2", "delta": "0.000001"},
        ),
        (
            {"epsilon": "2", "delta": "0"},
            {"mode": "rdp"},
            "an rdp budget converts to (ε, δ) and needs δ > 0",
            {"epsilon": "2", "delta": "0.000001", "final_conversion_delta": "0.000001"},
        ),
        (
            {"epsilon": "2", "delta": "0.000001"},
            {"mode": "zcdp", "final_conversion_delta": "0"},
            "final_conversion_delta = 0 leaves no δ to convert",
            {"epsilon": "2", "delta": "0.000001", "final_conversion_delta": "0.000001"},
        ),
        (
            {"epsilon": "0.1", "delta": "0.000001"},
            {"mode": "rdp"},
            "at ε = 0.1 and conversion δ = 0.000001 every order's threshold B(α) is at most 0",
            {"epsilon": "0.2", "delta": "0.000001", "final_conversion_delta": "0.000001"},
        ),
    ],
)
def test_a_dataset_that_could_never_admit_anything_is_refused(
    client: TestClient,
    budget: dict[str, str],
    accounting: dict[str, Any],
    words: str,
    suggested: dict[str, str],
) -> None:
    org = new_organisation(client)
    r = _create(client, org, budget, accounting)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidConfig"
    detail = r.json()["detail"]
    assert detail.startswith(words), detail
    assert "could never admit anything" in detail
    example = ", ".join(f"{k} = {v}" for k, v in suggested.items())
    assert f"set a budget that converts, e.g. {example}" in detail
    assert ("use mode 'basic' for pure ε" in detail) == (budget["delta"] == "0")
    assert client.get("/v1/datasets", headers=AUTH).json()["datasets"] == [] or all(
        d["organisation"] != org
        for d in client.get("/v1/datasets", headers=AUTH).json()["datasets"]
    )
    # the suggestion, sent as given, makes a dataset that admits
    fcd = suggested.get("final_conversion_delta")
    fixed_accounting = {**accounting, **({"final_conversion_delta": fcd} if fcd else {})}
    made = _create(
        client,
        org,
        {"epsilon": suggested["epsilon"], "delta": suggested["delta"]},
        fixed_accounting,
    )
    assert made.status_code == 201, made.text
    assert "unusable" not in made.json()["status"]
    assert _register(client, made.json()["id"], AUTH).status_code == 201


def test_a_budget_change_to_a_budget_that_admits_nothing_is_refused(client: TestClient) -> None:
    org = new_organisation(client)
    made = _create(client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "zcdp"})
    ds = made.json()["id"]
    before = ledger(client, ds)
    r = client.patch(f"/v1/datasets/{ds}/budget", json={"epsilon": "2", "delta": "0"}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("a zcdp budget converts to (ε, δ) and needs δ > 0")
    assert ledger(client, ds) == before
    status = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    assert status["budget"] == {"epsilon": "2", "delta": "0.000001"}


def test_a_sub_budget_that_admits_nothing_is_refused_by_name(client: TestClient) -> None:
    org = new_organisation(client)
    sub = [
        {"name": "train", "budget": {"epsilon": "1", "delta": "0"}, "accounting": {"mode": "rdp"}},
        {
            "name": "stats",
            "budget": {"epsilon": "1", "delta": "0"},
            "accounting": {"mode": "basic"},
        },
    ]
    r = _create(
        client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "split", "sub_budgets": sub}
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("sub-budget 'train': an rdp budget converts to (ε, δ)")
    sub[0]["budget"] = {"epsilon": "1", "delta": "0.000001"}
    made = _create(
        client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "split", "sub_budgets": sub}
    )
    assert made.status_code == 201, made.text
    ds = made.json()["id"]
    before = ledger(client, ds)
    change = {"epsilon": "1", "delta": "0", "sub_budget": "train"}
    r = client.patch(f"/v1/datasets/{ds}/budget", json=change, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("sub-budget 'train': an rdp budget converts")
    assert ledger(client, ds) == before


def test_a_block_budget_that_admits_nothing_is_refused(client: TestClient) -> None:
    org = new_organisation(client)
    days = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
    r = _create(client, org, {"epsilon": "1", "delta": "0"}, {"mode": "gdp"}, partition=days)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("a gdp budget converts to (ε, δ) and needs δ > 0")
    made = _create(
        client, org, {"epsilon": "1", "delta": "0.000001"}, {"mode": "gdp"}, partition=days
    )
    assert made.status_code == 201, made.text
    ds = made.json()["id"]
    before = ledger(client, ds)
    r = client.patch(f"/v1/datasets/{ds}/budget", json={"epsilon": "1", "delta": "0"}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "needs δ > 0" in r.json()["detail"]
    assert ledger(client, ds) == before


def test_a_quota_that_admits_nothing_is_refused(client: TestClient) -> None:
    org = new_organisation(client)
    ds = _create(client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "zcdp"}).json()["id"]
    analyst, headers = new_principal(client, org, "analyst")
    body = {"principal_id": analyst, "quota": {"epsilon": "0.5", "delta": "0"}}
    r = client.post(f"/v1/datasets/{ds}/grants", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("the quota: a zcdp budget converts to (ε, δ) and needs δ > 0")
    assert detail.endswith("grant a quota that converts, e.g. epsilon = 0.5, delta = 0.000001")
    assert client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"] == []
    grant(client, ds, analyst, {"epsilon": "0.5", "delta": "0.000001"})
    assert _register(client, ds, headers).status_code == 201


def test_a_cap_that_admits_nothing_is_refused(client: TestClient) -> None:
    org = new_organisation(client)
    cap = {"epsilon": "1", "delta": "0", "accounting": {"mode": "rdp"}}
    r = client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("an rdp budget converts to (ε, δ) and needs δ > 0")
    assert _organisation(client, org)["cap"] is None
    cap["delta"] = "0.000001"
    assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).status_code == 200


# ---------------------------------------------------------------------------- stored before
def test_a_stored_dataset_that_admits_nothing_is_flagged_with_a_fix_that_works(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = new_organisation(client)
    made = _create(client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "zcdp"})
    assert made.status_code == 201, made.text
    ds = made.json()["id"]
    with monkeypatch.context() as m:  # a budget change to δ = 0, recorded before the rule
        _rule_off(m)
        change = {"epsilon": "2", "delta": "0"}
        changed = client.patch(f"/v1/datasets/{ds}/budget", json=change, headers=AUTH)
    assert changed.status_code == 200, changed.text
    got = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    flag = got["unusable"]
    assert flag["reason"].startswith("a zcdp budget converts to (ε, δ) and needs δ > 0")
    assert flag["budget"] == {
        "epsilon": "2",
        "delta": "0.000001",
        "final_conversion_delta": "0.000001",
    }
    assert "; unusable: a zcdp budget converts" in got["summary"]["text"]
    refused = _register(client, ds, AUTH)
    assert refused.status_code == 409  # what it did before: nothing fits
    # the fix, sent as the budget change it names, makes the filter anew and it admits
    r = client.patch(f"/v1/datasets/{ds}/budget", json=flag["budget"], headers=AUTH)
    assert r.status_code == 200, r.text
    assert "unusable" not in r.json()["status"]
    assert _register(client, ds, AUTH).status_code == 201
    # a partitioned dataset's status says it too
    with monkeypatch.context() as m:
        _rule_off(m)
        days = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
        blocks = _create(
            client, org, {"epsilon": "1", "delta": "0"}, {"mode": "gdp"}, partition=days
        )
    assert blocks.status_code == 201, blocks.text
    on_blocks = client.get(f"/v1/datasets/{blocks.json()['id']}", headers=AUTH).json()["status"]
    assert on_blocks["unusable"]["reason"].startswith("a gdp budget converts to (ε, δ)")
    assert on_blocks["unusable"]["budget"] == {"epsilon": "1", "delta": "0.000001"}
    # the ledger, with the change to δ = 0 recorded before the rule, still replays
    from odometer_core.ledger.replay import replay

    verdict = replay(ledger(client, ds))
    assert verdict.ok, verdict.problems


def test_a_stored_quota_and_cap_that_admit_nothing_are_flagged(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = new_organisation(client)
    ds = _create(client, org, {"epsilon": "2", "delta": "0.000001"}, {"mode": "gdp"}).json()["id"]
    analyst, headers = new_principal(client, org, "analyst")
    with monkeypatch.context() as m:
        _rule_off(m)
        grant(client, ds, analyst, {"epsilon": "1", "delta": "0"})
        cap = {"epsilon": "3", "delta": "0", "accounting": {"mode": "zcdp"}}
        assert (
            client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).status_code == 200
        )
    (listed,) = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"]
    flag = listed["quota"]["unusable"]
    assert flag["reason"].startswith("a gdp budget converts to (ε, δ) and needs δ > 0")
    assert flag["fix"] == (
        "revoke the grant and grant it again with a quota that converts, e.g. epsilon = 1, "
        "delta = 0.000001"
    )
    assert "; unusable: a gdp budget" in listed["quota_summary"]["text"]
    organisation = _organisation(client, org)
    cap_flag = organisation["status"]["unusable"]
    assert cap_flag["reason"].startswith("a zcdp budget converts to (ε, δ) and needs δ > 0")
    assert cap_flag["budget"]["delta"] == "0.000001"
    # both fixes work
    assert client.delete(f"/v1/datasets/{ds}/grants/{analyst}", headers=AUTH).status_code == 200
    grant(client, ds, analyst, flag["budget"])
    fixed = {
        "epsilon": cap_flag["budget"]["epsilon"],
        "delta": cap_flag["budget"]["delta"],
        "accounting": {"mode": "zcdp"},
    }
    r = client.patch(f"/v1/organisations/{org}/cap", json=fixed, headers=AUTH)
    assert r.status_code == 200, r.text
    assert "unusable" not in r.json()["status"]
    assert _register(client, ds, headers).status_code == 201
