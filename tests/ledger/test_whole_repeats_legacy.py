"""Ledgers of ``rdp`` datasets written by accounting 1.8.0 replay unchanged under 1.9.0
(``legacy.VERSION_1_8``): their configurations record the 40-level shape and no ``levels``
field, and keep their levels at multiples of the first declaration; a 1.9.0 ledger records
``"levels": "whole_repeats"`` and the 34-level shape, and replays them."""

from __future__ import annotations

import copy

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import config_from_json, state_from_json, status
from odometer_core.accounting.legacy import VERSION_1_8
from odometer_core.accounting.modes import rdp_shaped
from odometer_core.ledger import replay
from tests.ledger.legacy_histories import as_written_by, history
from tests.support import rehashed


def test_a_1_8_ledger_replays_with_its_levels_at_multiples(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service as 1.8.0 made these datasets (the 40-level shape, no ``levels``): the
    entries, marked 1.8.0, replay to the same states and the same reading, which is 1.8.0's,
    not the whole repeats' (the two differ on this history)."""
    monkeypatch.setattr(rdp_shaped, "DEFAULT_RDP_LADDER", rdp_shaped.LADDER_1_8)
    monkeypatch.setattr(rdp_shaped, "DEFAULT_LEVELS", rdp_shaped.LEVELS_1_8)
    entries = history(client, "rdp")
    configs = [e["config"] for e in entries if e.get("config")]
    assert all("levels" not in c and c["ladder"]["span"] == 40 for c in configs)
    verdict = replay(as_written_by(entries, VERSION_1_8))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    config = config_from_json(configs[-1])
    expected = status(config, state_from_json(config, entries[-1]["state"]))["odometer"]
    assert verdict.odometer == expected
    whole = config_from_json({**configs[-1], "levels": "whole_repeats"})
    assert status(whole, state_from_json(whole, entries[-1]["state"]))["odometer"] != expected


def test_a_1_9_ledger_records_its_placement_and_replays(client: TestClient) -> None:
    entries = history(client, "rdp")
    assert entries[0]["config"]["levels"] == "whole_repeats"
    assert entries[0]["config"]["ladder"]["span"] == 34
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the placement is part of what is replayed
    stripped = copy.deepcopy(entries)
    stripped[0]["config"].pop("levels")
    assert not replay(rehashed(stripped)).ok
