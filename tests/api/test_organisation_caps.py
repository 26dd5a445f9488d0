"""Organisation caps in every currency: a cap is one filter in the curator's mode over every
dataset of the organisation (docs/accounting.md, *Organisation caps*).

What is checked: a curve cap admits what one dataset of the same budget and mode admits
(the core's own count, not a number written here); a refusal at the cap names the
organisation level; a declaration the cap cannot account is a 422 that changes nothing; ODP
under a curve cap keeps the worst cell on settle and releases it on cancel; the mode is fixed
once the cap counted something and a change never goes below the certified reading; every
decision at the cap replays, in its order across the datasets' ledgers, and a missing ledger
or an edited charge is found."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import capacity, initial_state, make_config, parse_declaration
from odometer_core.ledger.organisation import replay_organisation
from odometer_core.ledger.replay import replay
from tests.api.caps import DPSGD, GAUSSIAN, ODP, cap_dataset, organisation, register, set_cap
from tests.support import AUTH, ledger, new_organisation, new_principal, rehashed


def _one_dataset_admits(mode: str, mechanism: dict[str, Any]) -> int:
    """What one dataset of (10, 1e-5) in ``mode`` admits of ``mechanism``, by the core."""
    config = make_config("10", "0.00001", "add_remove", {"mode": mode})
    return capacity(config, initial_state(config), parse_declaration(mechanism)).count


def test_a_zcdp_cap_admits_what_one_zcdp_dataset_admits(client: TestClient) -> None:
    """Today's basic cap refused the 11th Gaussian; a zcdp cap of the same (10, 1e-5) over
    three datasets admits at least what one zcdp dataset admits, then refuses at the cap."""
    org = new_organisation(client)
    datasets = [cap_dataset(client, org, m) for m in ("zcdp", "zcdp", "rdp")]
    r = set_cap(client, org, {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}})
    assert r.status_code == 200, r.text
    assert r.json()["cap"] == {"epsilon": "10", "delta": "0.00001", "mode": "zcdp"}
    assert r.json()["status"]["final_conversion_delta"] == "0.0000099"  # 1 % kept for δ_i
    admitted, i = 0, 0
    while True:
        r = register(client, datasets[i % 3], GAUSSIAN)
        i += 1
        if r.status_code != 201:
            break
        admitted += 1
    assert r.status_code == 409 and r.json()["level"] == "organisation", r.text
    assert admitted >= _one_dataset_admits("zcdp", GAUSSIAN) > 300, admitted
    view = organisation(client, org)
    # the refusal names the datasets that used the cap, most first
    share = {d: (admitted - k + 2) // 3 for k, d in enumerate(datasets)}
    assert view["usage"] == share
    named = ", ".join(
        f"{d} ({share[d]} invocations)" for d in sorted(share, key=lambda d: (-share[d], d))
    )
    assert r.json()["detail"].endswith(f"(the cap is used by {named})"), r.json()["detail"]
    assert Decimal(view["spent"]["rho"]) == Decimal("0.005") * admitted
    reading = view["status"]["odometer"]
    assert Decimal(reading["epsilon"]) <= Decimal("10")
    assert view["cap_seq"] == admitted + 1  # every decision at the cap, the refusal included
    verdict = replay_organisation([ledger(client, d) for d in datasets])
    assert verdict.ok, verdict.problems
    assert verdict.decisions == admitted + 1
    assert verdict.state is not None
    state = dict(verdict.state)
    first = state.pop("first")  # the cap's first counted declaration chose its ladder (1.9.0)
    assert first["rho"] == "0.005" and first["ladder"] is not None
    assert state == {"rho": view["spent"]["rho"], "delta": "0"}
    assert verdict.odometer == reading


def test_a_declaration_the_cap_cannot_account_is_refused_with_the_reason(
    client: TestClient,
) -> None:
    org = new_organisation(client)
    rdp = cap_dataset(client, org, "rdp")
    assert set_cap(
        client, org, {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    )
    r = register(client, rdp, DPSGD)
    assert r.status_code == 422, r.text
    assert "organisation cap (mode 'zcdp')" in r.json()["detail"]
    assert len(ledger(client, rdp)) == 1 and organisation(client, org)["cap_seq"] == 0
    gdp = set_cap(client, org, {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "gdp"}})
    assert gdp.status_code == 200, gdp.text  # nothing counted yet: any mode
    r = register(client, rdp, {"type": "pure_dp", "epsilon": "0.1"})
    assert r.status_code == 422 and "mode 'gdp'" in r.json()["detail"], r.text


def test_odp_under_a_curve_cap_keeps_the_worst_cell_on_settle_and_releases_it_on_cancel(
    client: TestClient,
) -> None:
    org = new_organisation(client)
    basic = cap_dataset(client, org, "basic")
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, cap).status_code == 200
    first = register(client, basic, ODP).json()
    assert first["status"] == "reserved"
    worst_rho = organisation(client, org)["spent"]["rho"]
    assert Decimal(worst_rho) > 0
    url = f"/v1/datasets/{basic}/invocations"
    settled = client.post(f"{url}/{first['id']}/settle", json={"cell": "low"}, headers=AUTH)
    assert settled.status_code == 200, settled.text
    assert organisation(client, org)["spent"]["rho"] == worst_rho  # no output-dependent ρ refund
    second = register(client, basic, ODP).json()
    assert Decimal(organisation(client, org)["spent"]["rho"]) == 2 * Decimal(worst_rho)
    cancelled = client.post(f"{url}/{second['id']}/cancel", headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    assert organisation(client, org)["spent"]["rho"] == worst_rho  # nothing ran: released
    verdict = replay_organisation([ledger(client, basic)])
    assert verdict.ok and verdict.decisions == 4, verdict.problems
    assert replay(ledger(client, basic)).ok


def test_the_mode_is_fixed_once_counted_and_a_change_keeps_the_reading(
    client: TestClient,
) -> None:
    org = new_organisation(client)
    ds = cap_dataset(client, org, "zcdp")
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, cap).status_code == 200
    for _ in range(40):
        assert register(client, ds, GAUSSIAN).status_code == 201
    before = organisation(client, org)
    r = set_cap(client, org, {**cap, "accounting": {"mode": "rdp"}})
    assert r.status_code == 409 and r.json()["error"] == "ModeFixed", r.text
    reading = Decimal(before["status"]["odometer"]["epsilon"])
    low = set_cap(client, org, {**cap, "epsilon": str(reading / 2)})
    assert low.status_code == 409 and low.json()["error"] == "BudgetBelowSpent", low.text
    lowered = set_cap(client, org, {**cap, "epsilon": "5"})
    assert lowered.status_code == 200, lowered.text
    assert lowered.json()["status"]["odometer"] == before["status"]["odometer"]
    assert organisation(client, org)["spent"] == before["spent"]
    admitted = 0
    while register(client, ds, GAUSSIAN).status_code == 201:
        admitted += 1
    final = organisation(client, org)["status"]["odometer"]
    assert Decimal(final["epsilon"]) <= Decimal("5")
    # the basic (ε, δ) rule after the change as well: removing and setting it again continues
    assert set_cap(client, org, None).json()["cap"] is None
    again = set_cap(client, org, {**cap, "epsilon": "6"})
    assert again.status_code == 200 and again.json()["spent"] == organisation(client, org)["spent"]
    assert register(client, ds, GAUSSIAN).status_code == 201
    # without a mode the cap keeps its own
    kept = set_cap(client, org, {"epsilon": "6.5", "delta": "0.00001"})
    assert kept.status_code == 200 and kept.json()["cap"]["mode"] == "zcdp", kept.text
    verdict = replay_organisation([ledger(client, ds)])
    assert verdict.ok, verdict.problems
    assert verdict.decisions == 40 + admitted + 1 + 1


def test_the_cap_replay_finds_a_missing_ledger_and_an_edited_charge(client: TestClient) -> None:
    org = new_organisation(client)
    a, b = cap_dataset(client, org, "zcdp"), cap_dataset(client, org, "rdp", relation="replace_one")
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    assert set_cap(client, org, cap).status_code == 200
    for i in range(6):
        assert register(client, (a, b)[i % 2], GAUSSIAN).status_code == 201
    ledgers = [ledger(client, a), ledger(client, b)]
    assert replay_organisation(ledgers).ok
    missing = replay_organisation(ledgers[:1])
    assert not missing.ok and "seq 2 is missing" in missing.problems[0]
    edited = copy.deepcopy(ledgers)
    part = edited[1][1]["org"]
    part["charge"]["rdp"][0] = repr(float(part["charge"]["rdp"][0]) / 2)
    edited[1] = rehashed(edited[1])
    found = replay_organisation(edited)
    assert not found.ok and "charge" in found.problems[0], found.problems


def test_an_existing_basic_cap_keeps_working(client: TestClient) -> None:
    """A cap set as before (no mode) is the basic (ε, δ) filter: the 11th Gaussian is refused
    at δ_cap/10 a conversion, as it always was."""
    org = new_organisation(client)
    ds = cap_dataset(client, org, "zcdp")
    r = set_cap(client, org, {"epsilon": "10", "delta": "0.00001"})
    assert r.status_code == 200 and r.json()["cap"]["mode"] == "basic", r.text
    admitted = 0
    while register(client, ds, GAUSSIAN).status_code == 201:
        admitted += 1
    assert admitted == 10
    assert replay_organisation([ledger(client, ds)]).ok


def test_capacity_says_exactly_how_many_more_the_cap_admits(client: TestClient) -> None:
    org = new_organisation(client)
    datasets = [cap_dataset(client, org, "zcdp"), cap_dataset(client, org, "rdp")]
    url = f"/v1/organisations/{org}/cap/capacity"
    query = {"mechanism": GAUSSIAN, "dataset_id": datasets[0]}
    none = client.post(url, json=query, headers=AUTH)
    assert none.status_code == 409 and none.json()["error"] == "NoCap", none.text
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, cap).status_code == 200
    first = client.post(url, json=query, headers=AUTH).json()
    assert first["count"] == _one_dataset_admits("zcdp", GAUSSIAN) and not first["at_least"]
    assert first["mode"] == "zcdp" and first["relation"] == "add_remove"
    for i in range(30):
        assert register(client, datasets[i % 2], GAUSSIAN).status_code == 201
    left = client.post(url, json=query, headers=AUTH).json()
    assert left["count"] == first["count"] - 30 and left["reason"] == "rho budget exceeded"
    for i in range(left["count"]):
        assert register(client, datasets[i % 2], GAUSSIAN).status_code == 201
    assert register(client, datasets[0], GAUSSIAN).status_code == 409
    assert client.post(url, json=query, headers=AUTH).json()["count"] == 0
    sgd = client.post(url, json={"mechanism": DPSGD}, headers=AUTH)
    assert sgd.status_code == 422 and "zCDP" in sgd.json()["detail"], sgd.text
    other = new_organisation(client)
    elsewhere = client.post(
        url,
        json={"mechanism": GAUSSIAN, "dataset_id": cap_dataset(client, other, "zcdp")},
        headers=AUTH,
    )
    assert elsewhere.status_code == 404, elsewhere.text


def test_the_report_replays_the_cap_and_says_what_each_dataset_drew(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = new_organisation(client)
    a, b, c = (cap_dataset(client, org, m) for m in ("zcdp", "basic", "rdp"))
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, cap).status_code == 200
    for _ in range(3):
        assert register(client, a, GAUSSIAN).status_code == 201
    odp = register(client, b, ODP).json()
    url = f"/v1/datasets/{b}/invocations/{odp['id']}/cancel"
    assert client.post(url, headers=AUTH).status_code == 200
    assert register(client, b, {"type": "pure_dp", "epsilon": "0.5"}).status_code == 201
    report = client.get(f"/v1/organisations/{org}/report", headers=AUTH)
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["verified"] and body["problems"] == [] and body["decisions"] == 6
    drawn = {d["id"]: d for d in body["datasets"]}
    assert drawn[a]["drawn"] == {"rho": "0.015", "delta": "0"} and drawn[a]["admitted"] == 3
    assert drawn[b]["decisions"] == 3 and drawn[b]["admitted"] == 2
    assert drawn[c] == {**drawn[c], "decisions": 0, "admitted": 0, "drawn": {}}
    total = sum(Decimal(d["drawn"].get("rho", "0")) for d in body["datasets"])
    assert total == Decimal(body["organisation"]["spent"]["rho"])
    assert body["odometer"] == body["organisation"]["status"]["odometer"]
    _, headers = new_principal(client, org, "analyst")
    denied = client.get(f"/v1/organisations/{org}/report", headers=headers)
    assert denied.status_code == 403, denied.text
    # read in batches of two entries, each ledger streamed: the same report
    monkeypatch.setattr("app.services.organisations.BATCH_SIZE", 2)
    assert client.get(f"/v1/organisations/{org}/report", headers=AUTH).json() == body


def test_bad_caps_are_refused_and_change_nothing(client: TestClient) -> None:
    org = new_organisation(client)
    ds = cap_dataset(client, org, "zcdp")
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    assert set_cap(client, org, cap).status_code == 200
    for _ in range(3):
        assert register(client, ds, GAUSSIAN).status_code == 201
    before = organisation(client, org)
    split = {"mode": "split", "sub_budgets": [{"name": "a", "budget": {"epsilon": "1"}}]}
    bad: list[tuple[dict[str, Any], int]] = [
        ({**cap, "accounting": split}, 422),  # a cap is one filter
        ({**cap, "accounting": {"mode": "rdp", "workload": [{"mechanism": DPSGD, "count": 5}]}},
         422),  # the grid is fixed once counted
        ({**cap, "accounting": {"mode": "rdp", "final_conversion_delta": "0.00002"}}, 422),
        ({**cap, "accounting": {"mode": "zcdp"}}, 409),  # ModeFixed
        ({**cap, "epsilon": "-1"}, 422),
        ({**cap, "accounting": {"mode": "rdp", "orders": ["0.5"]}}, 422),
        ({"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "rdp"}, "x": 1}, 422),
    ]  # fmt: skip
    for body, status in bad:
        r = set_cap(client, org, body)
        assert r.status_code == status, (body, r.text)
        assert r.json()["detail"], r.text
        assert organisation(client, org) == before
