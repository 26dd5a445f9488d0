"""Preview's ``fit`` above 10⁴ at every level, on SQLite and PostgreSQL: an organisation cap
and an analyst's quota are counted by the core's :func:`~odometer_core.accounting.capacity`
exactly, far past the old limit of 10⁴, and past 10⁶ it says "at least 1000000"
(docs/accounting.md, *How many more fit*). The oracle is a loop of the public ``admit`` on a
filter built as the service builds the level's (counts over HTTP, up to 1000, are
``test_readings.py``'s)."""

from __future__ import annotations

import functools
import json
from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient

from app.services.grants import quota_config
from odometer_core.accounting import (
    AccountingConfig,
    admit,
    initial_state,
    make_config,
    memo,
    parse_declaration,
)
from odometer_core.accounting.levels import cap_config
from tests.support import AUTH, grant, new_organisation, new_principal

GAUSSIAN = {"type": "gaussian", "sigma": "1000"}
PURE = {"type": "pure_dp", "epsilon": "0.0001"}


def _loop(config: AccountingConfig, mechanism: dict[str, Any]) -> tuple[int, str | None]:
    """The loop of the core's admission from a new filter: the count and the refusal (the same
    for either database: computed once per process, the cap's 45,836 admissions were 35 s of
    CPU at load 15, and the SQLite and the PostgreSQL test compare with the same loop)."""
    return _admissions(config, json.dumps(mechanism, sort_keys=True))


@functools.cache
def _admissions(config: AccountingConfig, mechanism: str) -> tuple[int, str | None]:
    declaration, state, count = parse_declaration(json.loads(mechanism)), initial_state(config), 0
    with memo.charges():
        while True:
            decision = admit(config, state, declaration)
            if not decision.admitted:
                return count, decision.reason
            state, count = decision.state, count + 1


def _dataset(client: TestClient, org: str, mode: str, epsilon: str, delta: str) -> str:
    body = {
        "organisation_id": org,
        "name": f"fit-{mode}",
        "budget": {"epsilon": epsilon, "delta": delta},
        "accounting": {"mode": mode},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _preview(client: TestClient, ds: str, headers: dict[str, str], mechanism: Any) -> Any:
    r = client.post(
        f"/v1/datasets/{ds}/invocations/preview", json={"mechanism": mechanism}, headers=headers
    )
    assert r.status_code == 200, r.text
    return r.json()["fit"]


def test_a_cap_and_a_quota_are_counted_exactly_above_ten_thousand(client: TestClient) -> None:
    org = new_organisation(client)
    cap = {"epsilon": "1", "delta": "0.000001", "accounting": {"mode": "zcdp"}}
    assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).status_code == 200
    ds = _dataset(client, org, "zcdp", "100", "0.00001")
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    # the cap binds: its own count, far above 10⁴, by the loop of the cap's filter
    at_cap = _loop(cap_config("1", "0.000001", {"mode": "zcdp"}), GAUSSIAN)
    assert at_cap[0] > 10_000
    fit = _preview(client, ds, headers, GAUSSIAN)
    assert fit == {
        "count": at_cap[0],
        "at_least": False,
        "reason": at_cap[1],
        "level": "organisation",
    }
    counted = client.post(
        f"/v1/organisations/{org}/cap/capacity", json={"mechanism": GAUSSIAN}, headers=AUTH
    ).json()
    assert (counted["count"], counted["limit"]) == (at_cap[0], 1_000_000)
    # three registrations later, three fewer fit
    for _ in range(3):
        r = client.post(
            f"/v1/datasets/{ds}/invocations", json={"mechanism": GAUSSIAN}, headers=headers
        )
        assert r.status_code == 201, r.text
    assert _preview(client, ds, headers, GAUSSIAN)["count"] == at_cap[0] - 3

    # a quota binds on a basic dataset: the quota's filter, as the grant makes it
    basic = _dataset(client, org, "basic", "1000", "0")
    other, other_headers = new_principal(client, org, "analyst")
    grant(client, basic, other, {"epsilon": "2", "delta": "0"})
    quota = quota_config(make_config("1000", "0", "add_remove", {"mode": "basic"}), "2", "0")
    at_quota = _loop(quota, PURE)
    assert at_quota == (20_000, "epsilon budget exceeded")
    fit = _preview(client, basic, other_headers, PURE)
    assert fit == {"count": 20_000, "at_least": False, "reason": at_quota[1], "level": "quota"}


def test_past_a_million_the_count_says_at_least(client: TestClient) -> None:
    org = new_organisation(client)
    ds = _dataset(client, org, "basic", "1000", "0")
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    tiny = {"type": "pure_dp", "epsilon": str(Decimal("0.0001"))}
    assert _preview(client, ds, headers, tiny) == {
        "count": 1_000_000,
        "at_least": True,
        "reason": None,
        "level": "dataset",
    }
