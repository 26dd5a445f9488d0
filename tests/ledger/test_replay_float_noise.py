"""An auditor on another machine replays a ledger whose PLD charges were computed in floats
there (``docs/ledger.md``, *Charges computed in floating point*).

dp_accounting's FFT gives the last digits of a PLD charge differently from one machine to the
next (7·10⁻¹³ relative, seen on a ``composed`` list's joint charge). Here the machine that wrote
the ledger is emulated: every PLD ε it computed is multiplied by ``1 + r`` (the service, the
state after each entry and every later entry consistent with it), and the ledger is replayed
here without that. At r = 7·10⁻¹³ the replay verifies and goes on from the recorded charges
(the states after each entry match exactly); at r = 10⁻⁶ it is a charge mismatch; an exact
charge (a Laplace mechanism's ε = Δ/b, recorded to 60 digits) changed in its last digit is
a mismatch too.

Before the rule the first case failed: ``entry 2 (invocation_accepted): charge: recomputed
{'epsilon': '2.6304121748526161362', 'delta': '0.000001'}, stored {'epsilon':
'2.6304121748544577742', …}`` (replay compared the 20 digits exactly).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import (
    admit,
    config_from_json,
    initial_state,
    parse_declaration,
    pld,
)
from odometer_core.ledger.float_noise import TOLERANCE, within
from odometer_core.ledger.replay import replay
from tests.support import AUTH, rehashed

TUTORIAL = {
    "type": "dp_sgd",
    "noise_multiplier": "1.12",
    "sample_rate": "0.0042666666666666667",
    "steps": 14100,
}
SHORTER = {**TUTORIAL, "steps": 2000}
LAPLACE = {"type": "laplace", "sensitivity": "1", "scale": "3"}


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The writing machine's PLD noise: every PLD ε multiplied by ``1 + noise[0]``."""
    noise = [0.0]
    real = pld.plan_epsilon

    def elsewhere(plan: Any, delta: float) -> float:
        return real(plan, delta) * (1.0 + noise[0])

    monkeypatch.setattr(pld, "plan_epsilon", elsewhere)
    return noise


def _ledger(client: TestClient) -> list[dict[str, Any]]:
    body = {"name": "floats", "budget": {"epsilon": "8", "delta": "0.00001"}}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    for mechanism in (TUTORIAL, LAPLACE, SHORTER):
        r = client.post(
            f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=AUTH
        )
        assert r.status_code == 201, r.text
    got = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
    entries: list[dict[str, Any]] = got
    assert [e["kind"] for e in entries] == ["dataset_created"] + ["invocation_accepted"] * 3
    return entries


def test_a_pld_charge_within_float_noise_replays_as_recorded(
    client: TestClient, machine: list[float]
) -> None:
    machine[0] = 7e-13
    entries = _ledger(client)
    machine[0] = 0.0
    recorded = Decimal(entries[1]["charge"]["epsilon"])
    config = config_from_json(entries[0]["config"])
    mine = admit(config, initial_state(config), parse_declaration(TUTORIAL))
    here = Decimal(mine.charge.to_json()["epsilon"])
    assert recorded != here and abs(recorded - here) <= Decimal("1e-12") * here
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    # the sums went on from the recorded charges: the state is the service's, exactly
    assert verdict.state == entries[-1]["state"]


def test_a_pld_charge_off_by_more_than_float_noise_is_a_mismatch(
    client: TestClient, machine: list[float]
) -> None:
    machine[0] = 1e-6
    entries = _ledger(client)
    machine[0] = 0.0
    verdict = replay(entries)
    assert not verdict.ok
    assert verdict.problems[0].startswith("entry 2 (invocation_accepted): charge: recomputed")


def test_an_exact_charge_is_compared_exactly(client: TestClient) -> None:
    entries = _ledger(client)
    assert replay(entries).ok
    laplace = entries[2]
    recorded = laplace["charge"]["epsilon"]
    assert recorded == "0." + "3" * 59 + "4" and laplace["charge"]["delta"] == "0"  # 1/3 up
    last = recorded[:-1] + "5"  # one in the last recorded digit
    laplace["charge"] = laplace["requested"] = {"epsilon": last, "delta": "0"}
    verdict = replay(rehashed(entries))
    assert not verdict.ok
    assert verdict.problems[0].startswith("entry 3 (invocation_accepted): charge: recomputed")


def test_the_tolerance_reads_epsilon_relative_and_delta_exactly() -> None:
    base = {"epsilon": "1", "delta": "0.00001"}
    assert within(base, {"epsilon": str(1 + TOLERANCE), "delta": "0.00001"})
    assert not within(base, {"epsilon": str(1 + 2 * TOLERANCE), "delta": "0.00001"})
    assert not within(base, {"epsilon": "1", "delta": "0.000010000000001"})
    assert not within({"epsilon": "0", "delta": "0"}, {"epsilon": "1e-30", "delta": "0"})
