"""The rdp PLD branch (accounting 1.6.0) decides an analyst's quota and a partitioned dataset's
block, over HTTP on both databases.

The MNIST tutorial's DP-SGD job (σ = 1.12, q = 256/60,000, 14,100 steps) on a budget of
(2.45, 10⁻⁵): its RDP conversion at the whole δ is ε 2.525, so no statement of the ladder can
admit it (every order of the filter is dead after it), while the branch's ε_1 — the job's PLD at
its slot δ_1 = 0.6 · 0.9 · 10⁻⁵ — is 2.4081583. So the job is admitted *because of the branch*,
at the quota and on a block, and the reading of the quota and of the block is Σε_i = ε_1. What
is then said to be left is ε_B − Σε_i (rounded down); a pure ε of exactly that is admitted, one
digit more is refused. Retiring the blocks the job ran on leaves the dataset's reading (every
block ever opened) where it was and the other blocks as they were: a fresh block admits the same
job by its own branch.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import parse_declaration, pld
from odometer_core.accounting.exact import fmt, rounded
from odometer_core.accounting.modes.statements import DEFAULT_BRANCH, own_epsilon, slot
from tests.support import AUTH, grant, new_organisation, new_principal, status

JOB: dict[str, Any] = {
    "type": "dp_sgd",
    "noise_multiplier": "1.12",
    "sample_rate": "0.0042666666666666667",
    "steps": 14100,
}
BUDGET = {"epsilon": "2.45", "delta": "0.00001"}
RDP = {"mode": "rdp"}
DAYS = {"kind": "day", "unit": "record", "timezone": "UTC"}


def _first_epsilon() -> Decimal:
    """ε_1: the job's PLD at the branch's first slot, as the core states it; at or just above
    dp_accounting's PLD of the job at that δ, by less than 10⁻⁸ (the last digits of an FFT in
    floats differ between machines, so the reading is held to the core's own value here)."""
    delta_1 = slot(DEFAULT_BRANCH, Decimal(BUDGET["delta"]), 1)
    assert delta_1 == Decimal("0.0000054")
    eps = own_epsilon(parse_declaration(JOB), delta_1)
    assert eps is not None
    direct = pld.pld_epsilon_dp_sgd(1.12, 256 / 60000, 14100, float(delta_1))
    assert direct <= float(eps) <= direct * (1 + 1e-8)  # the core's is rounded up
    assert fmt(rounded(eps, up=True)) == "2.4081583"
    return eps


def _left(reading: Decimal) -> str:
    """What the summary says is left: ε_B − Σε_i, rounded down to 8 digits."""
    return fmt(rounded(Decimal(BUDGET["epsilon"]) - reading, up=False))


def _pure(epsilon: str) -> dict[str, str]:
    return {"type": "pure_dp", "epsilon": epsilon}


def _one_digit_more(text: str) -> str:
    """The next value up at ``text``'s last digit (0.041841726 → 0.041841727)."""
    value = Decimal(text)
    return fmt(value + Decimal(1).scaleb(value.as_tuple().exponent))  # type: ignore[arg-type]


def _ladder_dead(state: dict[str, Any]) -> None:
    """Every order of the ladder crossed its threshold: only the branch can read, or admit."""
    assert all(state["dead"]), state["dead"]


def test_the_branch_admits_a_quota_first_job_and_refuses_past_what_it_says_is_left(
    client: TestClient,
) -> None:
    eps_1 = _first_epsilon()
    org = new_organisation(client)
    body = {
        "name": "quota",
        "budget": {"epsilon": "10", "delta": "0.00001"},
        "accounting": RDP,
        "organisation_id": org,
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst, BUDGET)

    def register(mechanism: dict[str, Any]) -> Any:
        url = f"/v1/datasets/{ds}/invocations"
        return client.post(url, json={"mechanism": mechanism}, headers=headers)

    def quota() -> Any:
        grants = client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"]
        return next(g for g in grants if g["principal_id"] == analyst)

    admitted = register(JOB)
    assert admitted.status_code == 201, admitted.text
    held = quota()
    _ladder_dead(held["quota_state"])
    assert held["quota_state"]["pld"] == {"count": 1, "epsilon": fmt(eps_1)}
    assert held["quota_summary"]["guarantee"] == {"epsilon": "2.4081583", "delta": "0.00001"}
    left = _left(eps_1)
    # 0.041841726 on one machine, 0.041841716 on another: the PLD's FFT differs in its last
    # float digits between machines (see _first_epsilon), and ``left`` is taken from it
    assert abs(Decimal(left) - Decimal("0.041841726")) <= Decimal("0.00000002")
    (item,) = held["quota_summary"]["left"]
    assert (item["unit"], item["amount"], item["budget"]) == ("epsilon", left, "2.45")

    # past what is said to be left: refused by the quota, which says the same left
    refused = register(_pure(_one_digit_more(left)))
    assert refused.status_code == 409, refused.text
    summary = refused.json()["summary"]
    assert summary["level"] == "quota"
    assert [(i["unit"], i["amount"]) for i in summary["left"]] == [("epsilon", left)]
    assert quota()["quota_state"] == held["quota_state"]  # a refusal changes nothing
    # exactly what is said to be left: admitted, by the branch alone
    assert register(_pure(left)).status_code == 201
    after = quota()
    _ladder_dead(after["quota_state"])
    assert after["quota_state"]["pld"] == {"count": 2, "epsilon": fmt(eps_1 + Decimal(left))}
    assert Decimal(after["quota_summary"]["guarantee"]["epsilon"]) >= eps_1 + Decimal(left)
    assert register(_pure("0.000000001")).status_code == 409


@pytest.fixture
def days(client: TestClient) -> tuple[str, Any]:
    """A day-partitioned rdp dataset of (2.45, 10⁻⁵) per block, 1–5 November open."""
    body = {"name": "days", "budget": BUDGET, "accounting": RDP, "partition": DAYS}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    opened = {"open": {"from": "2026-11-01", "to": "2026-11-05"}}
    r = client.post(f"/v1/datasets/{ds}/blocks", json=opened, headers=AUTH)
    assert r.status_code == 200, r.text

    def register(mechanism: dict[str, Any], first: str, last: str) -> Any:
        body = {"mechanism": mechanism, "blocks": {"from": first, "to": last}}
        return client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)

    return ds, register


def _runs(client: TestClient, ds: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{ds}/blocks", headers=AUTH)
    assert r.status_code == 200, r.text
    return {f"{run['from']}..{run['to']}": run for run in r.json()["runs"]}


def test_the_branch_admits_a_block_first_job_and_retired_blocks_stay_consistent(
    client: TestClient, days: tuple[str, Any]
) -> None:
    eps_1 = _first_epsilon()
    ds, register = days
    admitted = register(JOB, "2026-11-01", "2026-11-02")
    assert admitted.status_code == 201, admitted.text
    runs = _runs(client, ds)
    assert set(runs) == {"2026-11-01..2026-11-02", "2026-11-03..2026-11-05"}
    used = runs["2026-11-01..2026-11-02"]["status"]
    _ladder_dead({"dead": used["spent"]["dead"]})
    assert used["pld_branch"]["count"] == 1
    assert used["pld_branch"]["epsilon"] == used["odometer"]["epsilon"] == fmt(eps_1)
    assert used["odometer"]["source"] == "pld_branch"
    assert Decimal(used["spent_eps_delta"]["epsilon"]) > Decimal(BUDGET["epsilon"])  # RDP
    reading = status(client, ds)
    assert reading["odometer"]["epsilon"] == fmt(eps_1)  # the highest block's
    left = _left(eps_1)
    assert [(i["unit"], i["amount"]) for i in reading["summary"]["left"]] == [("epsilon", left)]

    # past what is said to be left on those blocks: refused; exactly it: admitted
    refused = register(_pure(_one_digit_more(left)), "2026-11-02", "2026-11-02")
    assert refused.status_code == 409, refused.text
    assert _runs(client, ds)["2026-11-01..2026-11-02"] == runs["2026-11-01..2026-11-02"]
    assert register(_pure(left), "2026-11-01", "2026-11-02").status_code == 201
    used = _runs(client, ds)["2026-11-01..2026-11-02"]["status"]
    total = fmt(eps_1 + Decimal(left))
    assert used["pld_branch"] == {**used["pld_branch"], "count": 2, "epsilon": total}
    assert status(client, ds)["odometer"]["epsilon"] == used["odometer"]["epsilon"]

    # retire the blocks the job ran on: the dataset still reads them (every block ever
    # opened), the others are untouched and admit the same job by their own branch
    highest = status(client, ds)["odometer"]
    retire = {"retire": {"from": "2026-11-01", "to": "2026-11-02"}}
    r = client.post(f"/v1/datasets/{ds}/blocks", json=retire, headers=AUTH)
    assert r.status_code == 200, r.text
    assert status(client, ds)["odometer"] == highest
    fresh = _runs(client, ds)
    assert set(fresh) == {"2026-11-03..2026-11-05"}
    assert fresh["2026-11-03..2026-11-05"] == runs["2026-11-03..2026-11-05"]
    assert register(JOB, "2026-11-03", "2026-11-03").status_code == 201
    later = _runs(client, ds)
    assert later["2026-11-03..2026-11-03"]["status"]["odometer"]["epsilon"] == fmt(eps_1)
    assert later["2026-11-04..2026-11-05"] == {
        **runs["2026-11-03..2026-11-05"],
        "from": "2026-11-04",
        "blocks": 2,
    }
    assert status(client, ds)["odometer"] == highest  # still the retired blocks' reading
    # a refused job changes nothing, a retired block is not charged
    gone = register(_pure("0.001"), "2026-11-01", "2026-11-01")
    assert gone.status_code in (409, 422), gone.text
    assert status(client, ds)["odometer"] == highest
