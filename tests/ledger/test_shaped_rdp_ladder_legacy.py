"""Ledgers of ``rdp`` datasets written by accounting 1.7.0 replay unchanged under 1.8.0
(``legacy.VERSION_1_7``): their configurations have no ``ladder`` field, keep the 16 orders and
their per-order ladders, and read as they did; a 1.8.0 ledger records its shape and the first
declaration's curve (``design``) and replays them."""

from __future__ import annotations

import copy

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    config_from_json,
    config_to_json,
    state_from_json,
    status,
)
from odometer_core.accounting.legacy import VERSION_1_7
from odometer_core.accounting.modes import rdp_shaped
from odometer_core.ledger import replay
from tests.ledger.legacy_histories import as_written_by, history
from tests.support import rehashed


def test_a_1_7_ledger_replays_with_its_per_order_ladders(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service as 1.7.0 made these datasets (no shape, 16 orders): the entries, marked
    1.7.0, replay to the same states and the same reading."""
    monkeypatch.setattr(rdp_shaped, "DEFAULT_RDP_LADDER", None)
    entries = history(client, "rdp")
    configs = [e["config"] for e in entries if e.get("config")]
    assert all("ladder" not in c and len(c["orders"]) == 16 for c in configs)
    assert all("design" not in (e.get("state") or {}) for e in entries)
    verdict = replay(as_written_by(entries, VERSION_1_7))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    config = config_from_json(configs[-1])
    expected = status(config, state_from_json(config, entries[-1]["state"]))["odometer"]
    assert verdict.odometer == expected
    assert "ladder" not in config_to_json(config)
    assert expected["level"] > 1 and expected["delta"] == "0.000001"


def test_a_shaped_ledger_records_its_shape_and_design_and_replays(client: TestClient) -> None:
    """From 1.8.0 on (the levels at whole repeats of 1.9.0: test_whole_repeats_legacy.py)."""
    entries = history(client, "rdp")
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["ladder"]["first"] == "0.9"
    assert len(entries[0]["config"]["orders"]) == 27
    assert len(entries[-1]["state"]["design"]) == 27
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the shape and the design are part of what is replayed
    stripped = copy.deepcopy(entries)
    stripped[0]["config"].pop("ladder")
    assert not replay(rehashed(stripped)).ok
    altered = copy.deepcopy(entries)
    for entry in altered:
        if (entry.get("state") or {}).get("design"):
            entry["state"]["design"][0] = "1.0"
    assert not replay(rehashed(altered)).ok
