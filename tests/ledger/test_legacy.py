"""Ledgers written by accounting 1.0.0 (``delta_conversion``, split ``ledgers``) still replay:
entries keep the JSON they were hashed with, and the replay upgrades them before re-running
them."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient

from odometer_core.accounting import ACCOUNTING_VERSION, change_budget, config_to_json
from odometer_core.accounting.filters import ZCDPConfig, state_from_json
from odometer_core.accounting.legacy import VERSION_1_0, VERSION_1_3
from odometer_core.accounting.modes import zcdp
from odometer_core.ledger import entry_hash, replay
from tests.support import AUTH, rehashed

OLD_NAMES = {
    "final_conversion_delta": "delta_conversion",
    "sub_budgets": "ledgers",
    "sub_budget": "ledger",
}


def _as_written_by_1_0(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history as accounting 1.0.0 wrote it: the old field name, the old version, and
    the chain re-hashed over that JSON."""
    old = copy.deepcopy(entries)
    for entry in old:
        entry["accounting_version"] = VERSION_1_0
        config = entry.get("config") or {}
        parts = [config, *config.get("sub_budgets", []), entry.get("request"), entry["state"]]
        parts += [entry.get("reservation"), (entry.get("quota") or {}).get("config")]
        parts += [(entry.get(level) or {}).get("reservation") for level in ("org", "quota")]
        for part in parts:
            for new, name in OLD_NAMES.items():
                if isinstance(part, dict) and new in part:
                    part[name] = part.pop(new)
    return rehashed(old)


def _history(client: TestClient) -> list[dict[str, Any]]:
    body = {
        "name": "legacy",
        "budget": {"epsilon": 2, "delta": "1e-6"},
        "accounting": {"mode": "rdp", "final_conversion_delta": "9e-7"},
    }
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    # δ_c can change only before the first charge (since accounting 1.4.0 the δ shares of the
    # certified readings are fixed from then on), so the renamed request field is sent first
    patch = {"epsilon": 3, "delta": "1e-6", "final_conversion_delta": "8e-7"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=patch, headers=AUTH).status_code == 200
    for _ in range(3):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "gaussian", "sigma": "8", "sensitivity": "1"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    raise_ = {"epsilon": 4, "delta": "1e-6"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=raise_, headers=AUTH).status_code == 200
    entries: list[dict[str, Any]] = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()[
        "entries"
    ]
    return entries


def test_a_ledger_written_by_accounting_1_0_replays(client: TestClient) -> None:
    entries = _history(client)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["final_conversion_delta"] == "0.0000009"
    assert entries[1]["request"]["final_conversion_delta"] == "0.0000008"
    old = _as_written_by_1_0(entries)
    assert "delta_conversion" in old[0]["config"] and "delta_conversion" in old[1]["request"]
    verdict = replay(old)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]


def test_a_split_ledger_written_by_accounting_1_0_replays(client: TestClient) -> None:
    """Sub-budgets were ``ledgers`` in 1.0.0: in the configuration, the state, the request
    extras and the reservations (of the dataset and of its upper levels)."""
    half = {"epsilon": 1, "delta": "5e-7"}
    accounting = {
        "mode": "split",
        "sub_budgets": [
            {"name": "odp", "budget": half},
            {"name": "z", "budget": half, "accounting": {"mode": "zcdp"}},
        ],
    }
    body = {"name": "s", "budget": {"epsilon": 2, "delta": "1e-6"}, "accounting": accounting}
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    odp = {
        "type": "odp",
        "cells": [{"name": "a", "epsilon": "0.1"}, {"name": "b", "epsilon": "0.4"}],
    }
    url = f"/v1/datasets/{ds}/invocations"
    reserved = client.post(url, json={"mechanism": odp, "sub_budget": "odp"}, headers=AUTH)
    assert reserved.status_code == 201 and reserved.json()["status"] == "reserved"
    assert reserved.json()["reservation"]["sub_budget"] == "odp"
    inv = reserved.json()["id"]
    assert client.post(f"{url}/{inv}/settle", json={"cell": "a"}, headers=AUTH).status_code == 200
    gauss = {"type": "gaussian", "sigma": "5", "sensitivity": "1"}
    assert (
        client.post(url, json={"mechanism": gauss, "sub_budget": "z"}, headers=AUTH).status_code
        == 201
    )
    patch = {"epsilon": "0.9", "delta": "5e-7", "sub_budget": "odp"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=patch, headers=AUTH).status_code == 200
    entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
    old = _as_written_by_1_0(entries)
    assert [e["name"] for e in old[0]["config"]["ledgers"]] == ["odp", "z"]
    assert old[1]["request"]["ledger"] == "odp" and old[1]["reservation"]["ledger"] == "odp"
    verdict = replay(old)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]


def test_an_unknown_accounting_version_is_refused(client: TestClient) -> None:
    entries = _history(client)
    entries[2]["accounting_version"] = "0.9.0"
    entries[2]["hash"] = entry_hash(entries[2])
    verdict = replay(entries)
    assert not verdict.ok
    assert any("accounting version '0.9.0'" in p for p in verdict.problems)


def test_a_1_3_budget_change_replays_with_the_rule_of_its_time(client: TestClient) -> None:
    """A 1.3.0 ledger of a zcdp filter (no anchor, ρ_B at the whole δ_c) whose budget was
    lowered after three Gaussians: 1.3.0 derived ρ_B again from the new budget, and its entries
    replay with that rule; the same change written as a 1.4.0 entry is refused by the replay
    (a pre-1.4.0 filter can no longer change once charged)."""
    body = {"name": "z", "budget": {"epsilon": 1, "delta": "1e-6"}, "accounting": {"mode": "zcdp"}}
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    for _ in range(3):
        gauss = {"mechanism": {"type": "gaussian", "sigma": "30", "sensitivity": "1"}}
        assert (
            client.post(f"/v1/datasets/{ds}/invocations", json=gauss, headers=AUTH).status_code
            == 201
        )
    patch = {"epsilon": 1, "delta": "1e-6"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=patch, headers=AUTH).status_code == 200
    entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
    one = Decimal("1e-6")
    legacy = zcdp.make(Decimal(1), one, "add_remove", one, anchored=False)
    entries[0]["config"] = config_to_json(legacy)
    for entry in entries:  # states as 1.3.0 wrote them (no 1.9.0 first declaration's choice)
        (entry.get("state") or {}).pop("first", None)
    state = state_from_json(legacy, entries[-2]["state"])
    lowered, _ = change_budget(legacy, state, "0.25", "1e-6", anchored=False)
    assert isinstance(lowered, ZCDPConfig) and lowered.rho_budget < legacy.rho_budget
    entries[-1]["request"]["epsilon"] = "0.25"
    entries[-1]["config"] = config_to_json(lowered)
    for entry in entries:
        entry["accounting_version"] = VERSION_1_3
    verdict = replay(rehashed(entries))
    assert verdict.ok, verdict.problems
    entries[-1]["accounting_version"] = ACCOUNTING_VERSION
    verdict = replay(rehashed(entries))
    assert not verdict.ok
    assert any("before accounting 1.4.0" in p for p in verdict.problems), verdict.problems
