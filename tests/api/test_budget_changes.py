"""Budget changes over HTTP keep the certified reading (docs/accounting.md, *Budget changes*).

The history an audit used to show the old rule's broken promise: three Gaussians (σ = 30) on a
(1, 1e-6) dataset, then the budget lowered as far as the service allows. Under the rule before
accounting 1.4.0 the certified reading fell (0.324 → 0.240 in zcdp, 0.397 → 0.297 in rdp,
0.302 → 0.221 in gdp); now it stays, the budget cannot go below it, and what is admitted
afterwards keeps the reading within the lowered budget.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.db.models import Dataset
from app.db.uow import Database
from odometer_core.accounting import config_to_json
from odometer_core.accounting.modes import zcdp
from odometer_core.ledger import replay
from tests.support import AUTH, basic_dataset, ledger, status

GAUSSIAN = {"type": "gaussian", "sigma": "30", "sensitivity": 1}


def _invoke(client: TestClient, ds: str, mechanism: dict[str, Any]) -> int:
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=AUTH)
    assert r.status_code in (201, 409), r.text
    return int(r.status_code)


def _patch(client: TestClient, ds: str, **body: Any) -> Any:
    return client.patch(f"/v1/datasets/{ds}/budget", json=body, headers=AUTH)


@pytest.mark.parametrize("mode", ["zcdp", "rdp", "gdp"])
def test_the_lowest_lowering_keeps_the_reading(client: TestClient, mode: str) -> None:
    ds = basic_dataset(client, accounting={"mode": mode})["id"]
    for _ in range(3):
        assert _invoke(client, ds, GAUSSIAN) == 201
    reading = status(client, ds)["odometer"]
    eps = Decimal(reading["epsilon"])
    assert Decimal("0.25") < eps < Decimal("0.45")  # 0.3 < … before accounting 1.7.0
    # below the certified reading: refused, nothing changes
    entries = len(ledger(client, ds))
    below = _patch(client, ds, epsilon=str(eps - Decimal("0.0001")), delta="1e-6")
    assert below.status_code == 409, below.text
    assert below.json()["error"] == "BudgetBelowSpent"
    assert "certified reading" in below.json()["detail"]
    assert len(ledger(client, ds)) == entries
    # exactly at it: accepted, and the reading does not move
    at = _patch(client, ds, epsilon=str(eps), delta="1e-6")
    assert at.status_code == 200, at.text
    assert at.json()["status"]["odometer"] == reading
    assert "caps the certified reading" in at.json()["effect"]
    assert at.json()["status"]["budget"]["epsilon"] == str(eps)
    # a further Gaussian would raise the reading above the lowered budget: refused
    assert _invoke(client, ds, GAUSSIAN) == 409
    assert status(client, ds)["odometer"] == reading
    # a raise climbs the ladder: more is admitted, every reading within the budget in force
    raised = _patch(client, ds, epsilon="2", delta="1e-6")
    assert raised.status_code == 200 and raised.json()["status"]["odometer"] == reading
    assert "admits less than a dataset created with this budget" in raised.json()["effect"]
    admitted = 0
    while _invoke(client, ds, GAUSSIAN) == 201:
        admitted += 1
        now = status(client, ds)["odometer"]
        assert Decimal(now["epsilon"]) <= 2 and Decimal(now["delta"]) <= Decimal("1e-6")
    assert admitted > 40  # the creation budget held 40 more
    assert Decimal(status(client, ds)["odometer"]["epsilon"]) > 1
    verdict = replay(ledger(client, ds))
    assert verdict.ok, verdict.problems
    # the offline verifier reads the same certified reading as the service shows
    assert verdict.odometer == status(client, ds)["odometer"]


def test_delta_and_the_conversion_share_after_the_first_charge(client: TestClient) -> None:
    ds = basic_dataset(client, accounting={"mode": "zcdp"})["id"]
    assert _invoke(client, ds, GAUSSIAN) == 201
    reading = status(client, ds)["odometer"]
    # the ladder's readings hold at δ_c = 1e-6: δ cannot go below it
    low = _patch(client, ds, epsilon="1", delta="5e-7")
    assert low.status_code == 409 and "delta" in low.json()["detail"]
    # the conversion δ is fixed once something was charged
    share = _patch(client, ds, epsilon="1", delta="1e-6", final_conversion_delta="5e-7")
    assert share.status_code == 422 and "fixed" in share.json()["detail"]
    # a δ raise is accepted and funds nothing
    before = status(client, ds)["remaining"]
    up = _patch(client, ds, epsilon="1", delta="2e-6")
    assert up.status_code == 200 and "funds nothing" in up.json()["effect"]
    assert up.json()["status"]["remaining"] == before
    assert up.json()["status"]["odometer"] == reading


def test_a_filter_stored_before_1_4_keeps_its_rule(client: TestClient, database: Database) -> None:
    """A zcdp dataset whose stored configuration has no anchor (as 1.3.0 stored it): its
    readings show the δ that holds jointly, ladder plus filter (2·δ_B); after a charge its
    budget can no longer change; before one it can, and is anchored then."""
    one = Decimal("1e-6")
    legacy = config_to_json(zcdp.make(Decimal(1), one, "add_remove", one, anchored=False))
    assert "anchor" not in legacy
    charged, fresh = (basic_dataset(client, accounting={"mode": "zcdp"})["id"] for _ in range(2))
    with database.engine.begin() as conn:
        for ds in (charged, fresh):
            conn.execute(update(Dataset).where(Dataset.id == ds).values(config_json=legacy))
    assert _invoke(client, charged, GAUSSIAN) == 201
    reading = status(client, charged)["odometer"]
    assert reading["delta"] == "0.000002" and reading["source"] == "ladder"
    # (the verifier, fed the ledger, reads the configuration the ledger holds: the anchored one
    # this test replaced in the row, so only the service's view is checked here)
    refused = _patch(client, charged, epsilon="2", delta="1e-6")
    assert refused.status_code == 409 and refused.json()["error"] == "BudgetFixed"
    assert "before accounting 1.4.0" in refused.json()["detail"]
    made = _patch(client, fresh, epsilon="2", delta="1e-6")
    assert made.status_code == 200 and "made anew" in made.json()["effect"]
    assert made.json()["config"]["anchor"]["epsilon"] == "2"
