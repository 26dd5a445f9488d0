"""Ledgers written by accounting 1.0.0 (``delta_conversion``) still replay: entries keep the
JSON they were hashed with, and the replay upgrades them before re-running them."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from app.accounting import ACCOUNTING_VERSION
from app.accounting.legacy import VERSION_1_0
from app.ledger import entry_hash, replay
from app.ledger.chain import GENESIS_HASH
from tests.support import AUTH


def _as_written_by_1_0(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history as accounting 1.0.0 wrote it: the old field name, the old version, and
    the chain re-hashed over that JSON."""
    old = []
    prev = GENESIS_HASH
    for entry in copy.deepcopy(entries):
        entry["accounting_version"] = VERSION_1_0
        for part in (
            entry.get("config"),
            entry.get("request"),
            (entry.get("quota") or {}).get("config"),
        ):
            if isinstance(part, dict) and "final_conversion_delta" in part:
                part["delta_conversion"] = part.pop("final_conversion_delta")
        entry["prev_hash"] = prev
        entry["hash"] = prev = entry_hash(entry)
        old.append(entry)
    return old


def _history(client: TestClient) -> list[dict[str, Any]]:
    body = {
        "name": "legacy",
        "budget": {"epsilon": 2, "delta": "1e-6"},
        "accounting": {"mode": "rdp", "final_conversion_delta": "9e-7"},
    }
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    for _ in range(3):
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "gaussian", "sigma": "8", "sensitivity": "1"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
    patch = {"epsilon": 3, "delta": "1e-6", "final_conversion_delta": "8e-7"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=patch, headers=AUTH).status_code == 200
    entries: list[dict[str, Any]] = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()[
        "entries"
    ]
    return entries


def test_a_ledger_written_by_accounting_1_0_replays(client: TestClient) -> None:
    entries = _history(client)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["final_conversion_delta"] == "0.0000009"
    assert entries[-1]["request"]["final_conversion_delta"] == "0.0000008"
    old = _as_written_by_1_0(entries)
    assert "delta_conversion" in old[0]["config"] and "delta_conversion" in old[-1]["request"]
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
