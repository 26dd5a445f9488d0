"""Accounting 1.5.0 chooses an ``rdp`` dataset's order weights from its first admitted
declaration when it was created without a workload (``docs/accounting.md``, *Weights chosen
from the first declaration*): the choice is written in the state of the entry that admits it
and replay recomputes it. A ledger written by 1.4.0 (emulated here: the configuration without
its ``order_weights`` field, as ``rdp`` parsed it before, and entries stamped 1.4.0) replays
with the weights it stored, and the dataset goes on admitting with them under 1.5.0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.services import _aggregate
from odometer_core.accounting import ACCOUNTING_VERSION
from odometer_core.accounting.legacy import VERSION_1_4
from odometer_core.accounting.modes import LEAF_MODES, rdp
from odometer_core.ledger import replay
from tests.accounting.test_first_declaration_weights import EPOCH
from tests.support import AUTH, rehashed


def _dataset(client: TestClient) -> str:
    body = {
        "name": "mnist",
        "budget": {"epsilon": "8", "delta": "0.00001"},
        "accounting": {"mode": "rdp"},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _epoch(client: TestClient, ds: str) -> Any:
    r = client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": EPOCH.to_json()}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    return r.json()


def _ledger(client: TestClient, ds: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()[
        "entries"
    ]
    return entries


def test_the_choice_is_written_and_replayed(client: TestClient) -> None:
    ds = _dataset(client)
    assert _epoch(client, ds)["status"] == "accepted"
    assert _epoch(client, ds)["status"] == "accepted"
    r = client.patch(
        f"/v1/datasets/{ds}/budget", json={"epsilon": "6", "delta": "0.00001"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    assert _epoch(client, ds)["status"] == "accepted"
    entries = _ledger(client, ds)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["order_weights"] == "first_declaration"
    assert "first" not in entries[0]["state"]
    assert [e["state"].get("first") for e in entries[1:]] == ["4.0"] * (len(entries) - 1)
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the replay recomputes the choice: another order recorded instead is a mismatch
    tampered = [dict(e) for e in entries]
    tampered[1] = {**tampered[1], "state": {**tampered[1]["state"], "first": "8.0"}}
    assert not replay(rehashed(tampered)).ok


def _as_before_1_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configurations parsed and entries stamped as accounting 1.4.0 did."""
    parse = rdp.MODE.parse

    def parse_1_4(*args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(parse(*args, **kwargs), weights_rule=rdp.WEIGHTS_FIXED)

    monkeypatch.setitem(LEAF_MODES, "rdp", dataclasses.replace(rdp.MODE, parse=parse_1_4))
    monkeypatch.setattr(_aggregate, "ACCOUNTING_VERSION", VERSION_1_4)


def test_a_1_4_ledger_replays_and_keeps_its_weights(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before:
        _as_before_1_5(before)
        ds = _dataset(client)
        assert _epoch(client, ds)["status"] == "accepted"
    entries = _ledger(client, ds)
    assert [e["accounting_version"] for e in entries] == [VERSION_1_4] * 2
    assert "order_weights" not in entries[0]["config"]
    assert "first" not in entries[1]["state"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]

    # under 1.5.0 the dataset keeps its stored weights: no choice, and the ledger replays
    assert _epoch(client, ds)["status"] == "accepted"
    entries = _ledger(client, ds)
    assert [e["accounting_version"] for e in entries] == [VERSION_1_4] * 2 + [ACCOUNTING_VERSION]
    assert "first" not in entries[-1]["state"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
