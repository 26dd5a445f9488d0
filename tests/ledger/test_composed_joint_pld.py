"""Accounting 1.5.0 charges a ``composed`` list in ``basic`` mode by its joint PLD, for datasets
created from then on; a dataset created before keeps the rule of its time, and its ledger
replays unchanged.

The list is PipelineDP's pipeline calibrated to (1, 10⁻⁶) (``tests/accounting/test_joint_pld``):
over HTTP, a basic dataset of (1, 10⁻⁶) admits it (201, accepted) at ε = 0.9999943, δ = 10⁻⁶,
and the replay recomputes that joint charge. A ledger written by 1.4.0 (emulated here: the
configuration without its ``composed`` field, as ``basic`` parsed it before, and entries stamped
1.4.0) replays with the 1.4.0 charge ε = 1.0652, and the dataset goes on charging it.
"""

from __future__ import annotations

import dataclasses
import time
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.services import _aggregate
from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    admit,
    fmt,
    initial_state,
    make_config,
    parse_declaration,
)
from odometer_core.accounting.legacy import VERSION_1_4
from odometer_core.accounting.modes import LEAF_MODES, basic
from odometer_core.ledger import replay
from tests.accounting.test_joint_pld import PIPELINE_CONVERSION, _pipeline
from tests.support import AUTH, rehashed

#: The joint charge: ε 0.9999943 to seven digits. Its last digits are dp_accounting's FFT
#: convolution in floats, which differ between machines (0.99999426408817471135 on one,
#: 0.99999426408742975… on another: 7·10⁻¹³ apart), so the test holds the charge to the core's
#: own on this machine and to the seven digits everywhere.
JOINT_RANGE = (Decimal("0.9999942"), Decimal("0.9999944"))
ONE_BY_ONE = {"epsilon": "1.0651604904235247862", "delta": "0.000001"}


def _dataset(client: TestClient, epsilon: str, delta: str) -> str:
    body = {
        "name": "pipeline",
        "budget": {"epsilon": epsilon, "delta": delta},
        "accounting": {"mode": "basic"},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _register(client: TestClient, ds: str) -> Any:
    body = {"mechanism": _pipeline(), "conversion_delta": fmt(PIPELINE_CONVERSION)}
    return client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)


def _ledger(client: TestClient, ds: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()[
        "entries"
    ]
    return entries


def test_the_calibrated_pipeline_is_admitted_and_replayed(client: TestClient) -> None:
    ds = _dataset(client, "1", "0.000001")
    start = time.perf_counter()
    r = _register(client, ds)
    seconds = time.perf_counter() - start
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "accepted"
    charge = r.json()["charge"]
    assert charge["delta"] == "0.000001"
    assert JOINT_RANGE[0] <= Decimal(charge["epsilon"]) <= JOINT_RANGE[1], charge
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    mine = admit(
        config,
        initial_state(config),
        parse_declaration(_pipeline()),
        conversion_delta=PIPELINE_CONVERSION,
    )
    assert charge == mine.charge.to_json()
    assert seconds < 2.0, f"{seconds:.2f} s"
    entries = _ledger(client, ds)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["composed"] == "joint_pld"
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the replay recomputes the joint charge: the 1.4.0 charge recorded instead is a mismatch
    tampered = [dict(e) for e in entries]
    tampered[-1]["charge"] = ONE_BY_ONE
    assert not replay(rehashed(tampered)).ok


def _as_before_1_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configurations parsed and entries stamped as accounting 1.4.0 did."""
    parse = basic.MODE.parse

    def parse_1_4(*args: Any) -> Any:
        return dataclasses.replace(parse(*args), composed="one_by_one")

    monkeypatch.setitem(LEAF_MODES, "basic", dataclasses.replace(basic.MODE, parse=parse_1_4))
    monkeypatch.setattr(_aggregate, "ACCOUNTING_VERSION", VERSION_1_4)


def test_a_1_4_ledger_with_a_composed_list_replays_and_keeps_its_charge(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before:
        _as_before_1_5(before)
        ds = _dataset(client, "3", "0.00001")
        r = _register(client, ds)
        assert r.status_code == 201, r.text
        assert r.json()["charge"] == ONE_BY_ONE
    entries = _ledger(client, ds)
    assert [e["accounting_version"] for e in entries] == [VERSION_1_4] * 2
    assert "composed" not in entries[0]["config"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    assert verdict.state is not None
    assert Decimal(verdict.state["spent_epsilon"]) == Decimal(ONE_BY_ONE["epsilon"])

    # under 1.5.0 the dataset keeps the rule it was created with, and the ledger still replays
    r = _register(client, ds)
    assert r.status_code == 201, r.text
    assert r.json()["charge"] == ONE_BY_ONE
    entries = _ledger(client, ds)
    assert [e["accounting_version"] for e in entries] == [VERSION_1_4] * 2 + [ACCOUNTING_VERSION]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
