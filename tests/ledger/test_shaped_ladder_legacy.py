"""Ledgers of ``zcdp`` and ``gdp`` datasets written by accounting 1.6.0 replay unchanged under
1.7.0 (``legacy.VERSION_1_6``): their configurations have no ``ladder`` field, keep the 1.4.0
ladder, and read as they did; a 1.7.0 ledger records its shape and replays it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    config_from_json,
    config_to_json,
    state_from_json,
    status,
)
from odometer_core.accounting.legacy import VERSION_1_6
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.ledger import replay
from tests.ledger.legacy_histories import as_written_by, history
from tests.support import rehashed


@pytest.mark.parametrize(("mode", "module"), [("zcdp", zcdp_mode), ("gdp", gdp_mode)])
def test_a_1_6_ledger_replays_with_the_1_4_ladder(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, mode: str, module: Any
) -> None:
    """The service as 1.6.0 made these datasets (no shape): the entries, marked 1.6.0, replay
    to the same states and the same reading, which is the 1.4.0 ladder's."""
    monkeypatch.setattr(module, "DEFAULT_LADDER", None)
    monkeypatch.setattr(module, "DEFAULT_RULE", None)  # nor a rule choosing one (1.9.0)
    entries = history(client, mode)
    assert all("ladder" not in (e.get("config") or {}) for e in entries)
    verdict = replay(as_written_by(entries, VERSION_1_6))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the reading replayed is the one the stored configuration gives: the 1.4.0 ladder's
    config = config_from_json([e["config"] for e in entries if e.get("config")][-1])
    expected = status(config, state_from_json(config, entries[-1]["state"]))["odometer"]
    assert verdict.odometer == expected
    assert "ladder" not in config_to_json(config)
    assert expected["level"] > 1 and expected["delta"] == "0.000001"


@pytest.mark.parametrize(("mode", "module"), [("zcdp", zcdp_mode), ("gdp", gdp_mode)])
def test_a_1_7_ledger_records_its_shape_and_replays(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, mode: str, module: Any
) -> None:
    """The constant shape of 1.7.0–1.8.0 (no 1.9.0 rule: its shape is the configuration's, so
    the configuration without it does not replay; under the rule the first declaration's
    choice is recorded in the state: ``test_first_shaped_ladder_legacy.py``)."""
    monkeypatch.setattr(module, "DEFAULT_RULE", None)
    entries = history(client, mode)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["ladder"]["steps"] == 6
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # a 1.7.0 configuration stripped of its shape does not replay: the shape is part of it
    stripped = copy.deepcopy(entries)
    stripped[0]["config"].pop("ladder")
    assert not replay(rehashed(stripped)).ok
