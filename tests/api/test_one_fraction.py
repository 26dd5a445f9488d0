"""One fraction per budget (docs/accounting.md, *One fraction per budget*): wherever the API
says how much of a budget is spent and how much is left, the two are one fraction, in the
currency the mode's filter certifies, and add up to exactly 1.

Over HTTP on SQLite and PostgreSQL. The case that started it: a block of a partitioned ``zcdp``
dataset spent to its limit (four Gaussians of σ = 9 on a block of (1, 10⁻⁵); a fifth is
refused). Its certified reading is at the top of its ladder, ε = 1, and the block page used to
say it had spent 100 % (the reading's ε over ε_B) beside the status's 18.26 % of ρ left. It has
spent 0.8696 of its ρ: 4 · 1/(2 · 9²) = 0.024691… of the ρ_B of the ladder its first Gaussian
shaped (Bun–Steinke 2016, Prop. 1.6; accounting 1.9.0; 0.8225 of ρ_B = 0.030022… under
1.7.0–1.8.0, whose level 1 held 0.85 of δ_c, 0.8174 of ρ_B = 0.030208… before, 0.9).
The same holds of a whole dataset, an analyst's quota, an organisation
cap and a refusal."""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Any

from fastapi.testclient import TestClient

from tests.support import AUTH, grant, new_organisation, new_principal, status

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
GAUSSIAN = {"type": "gaussian", "sigma": "9", "sensitivity": "1"}
BUDGET = {"epsilon": "1", "delta": "0.00001"}
ZCDP = {"mode": "zcdp"}
#: ρ spent over ρ_B after four Gaussians of σ = 9, rounded up to four places (and what is left).
SPENT, LEFT = "0.8696", "0.1304"


def _ok(r: Any, code: int = 200) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body: dict[str, Any] = r.json()
    return body


def _spend_to_the_limit(client: TestClient, ds: str, body: dict[str, Any], headers: Any) -> None:
    for _ in range(4):
        _ok(client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=headers), 201)
    refused = client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=headers)
    assert refused.status_code == 409, refused.text


def _rho_spent(view: dict[str, Any]) -> str:
    """The exact ρ spent over ρ_B of a zcdp status, rounded up to four places."""
    spent = Decimal(view["spent"]["rho"]) / Decimal(view["rho_budget"])
    return str(spent.quantize(Decimal("0.0001"), rounding=ROUND_CEILING))


def _agrees(summary: dict[str, Any]) -> None:
    """A summary's fraction spent and left are one: they add up to 1, and what is left is the
    least left of its bounds (each item's ``fraction``)."""
    spent, left = Decimal(summary["fraction_spent"]), Decimal(summary["fraction_left"])
    assert spent + left == 1
    assert left == min(Decimal(item["fraction"]) for item in summary["left"])


def test_a_block_spent_to_its_limit_says_one_fraction(client: TestClient) -> None:
    body = {"name": "events", "budget": BUDGET, "accounting": ZCDP, "partition": DAYS}
    ds = str(_ok(client.post("/v1/datasets", json=body, headers=AUTH), 201)["id"])
    opened = {"open": {"from": "2026-11-24", "to": "2026-11-24"}}
    _ok(client.post(f"/v1/datasets/{ds}/blocks", json=opened, headers=AUTH))
    invocation = {"mechanism": GAUSSIAN, "blocks": {"from": "2026-11-24", "to": "2026-11-24"}}
    _spend_to_the_limit(client, ds, invocation, AUTH)

    (run,) = _ok(client.get(f"/v1/datasets/{ds}/blocks", headers=AUTH))["runs"]
    now = status(client, ds)
    (rho,) = now["summary"]["left"]
    assert run["status"]["odometer"]["epsilon"] == now["odometer"]["epsilon"] == "1"
    # the block page's fraction spent and the status's fraction left are one fraction
    assert Decimal(run["fraction_spent"]) + Decimal(rho["fraction"]) == 1, (
        f"spent {run['fraction_spent']} beside {rho['fraction']} left"
    )
    assert run["fraction_spent"] == _rho_spent(run["status"]) == SPENT
    assert now["blocks"]["highest_fraction_spent"] == SPENT
    assert (now["summary"]["fraction_spent"], now["summary"]["fraction_left"]) == (SPENT, LEFT)
    assert rho["unit"] == "rho" and rho["fraction"] == LEFT
    _agrees(now["summary"])


def test_every_level_says_one_fraction(client: TestClient) -> None:
    org = new_organisation(client)
    cap = {**BUDGET, "epsilon": "1", "accounting": ZCDP}
    _ok(client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH))
    body = {"name": "whole", "budget": BUDGET, "accounting": ZCDP, "organisation_id": org}
    ds = str(_ok(client.post("/v1/datasets", json=body, headers=AUTH), 201)["id"])
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, BUDGET)  # a quota counts in its dataset's mode
    _spend_to_the_limit(client, ds, {"mechanism": GAUSSIAN}, headers)

    dataset = status(client, ds)
    assert dataset["odometer"]["epsilon"] == "1"
    assert dataset["summary"]["fraction_spent"] == _rho_spent(dataset) == SPENT
    _agrees(dataset["summary"])
    me = _ok(client.get("/v1/me", headers=headers))
    (quota,) = [g["quota"] for g in me["grants"] if g["dataset_id"] == ds]
    assert quota["summary"]["fraction_spent"] == SPENT
    _agrees(quota["summary"])
    orgs = _ok(client.get("/v1/organisations", headers=AUTH))["organisations"]
    (mine,) = [o for o in orgs if o["id"] == org]
    # the cap counts the same ρ against its own ρ budget (the cap's relation, its δ shares)
    assert mine["summary"]["fraction_spent"] == _rho_spent(mine["status"])
    _agrees(mine["summary"])
    refused = client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": GAUSSIAN}, headers=headers
    )
    assert refused.status_code == 409, refused.text
    summary = refused.json()["summary"]
    assert summary["fraction_spent"] == SPENT
    _agrees(summary)


def test_basic_spends_the_more_spent_of_epsilon_and_delta(client: TestClient) -> None:
    body = {"name": "basic", "budget": BUDGET, "accounting": {"mode": "basic"}}
    ds = str(_ok(client.post("/v1/datasets", json=body, headers=AUTH), 201)["id"])
    mechanism = {"type": "approx_dp", "epsilon": "0.1", "delta": "0.000006"}
    invocation = {"mechanism": mechanism}
    _ok(client.post(f"/v1/datasets/{ds}/invocations", json=invocation, headers=AUTH), 201)
    summary = status(client, ds)["summary"]
    # ε 0.1 of 1 spent, δ 0.000006 of 0.00001: the δ bound is the nearer, 0.6 of it spent
    assert [(i["unit"], i["fraction"]) for i in summary["left"]] == [
        ("epsilon", "0.9"),
        ("delta", "0.4"),
    ]
    assert (summary["fraction_spent"], summary["fraction_left"]) == ("0.6", "0.4")
