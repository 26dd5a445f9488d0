"""Ledgers of ``rdp`` datasets written by accounting 1.9.0 replay unchanged under 1.10.0
(``legacy.VERSION_1_9``): their configurations have no ``ladder_rule`` and keep the 34-level
shape of 1.9.0, their states record no ``ladder``; a 1.10.0 ledger records the rule and, from
the first admission on, the shape its first declaration chose, which the replay recomputes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import config_from_json, state_from_json, status
from odometer_core.accounting.legacy import VERSION_1_9
from odometer_core.accounting.modes import rdp_choice
from odometer_core.ledger import replay
from tests.ledger.legacy_histories import as_written_by, history
from tests.support import rehashed


def _readings(entries: list[dict[str, Any]]) -> list[str]:
    """The certified ε after each entry that records a state, under the configuration in
    force at that entry."""
    out, config = [], None
    for entry in entries:
        config = config_from_json(entry["config"]) if entry.get("config") else config
        if entry.get("state") and config is not None:
            out.append(
                status(config, state_from_json(config, entry["state"]))["odometer"]["epsilon"]
            )
    return out


def test_a_1_9_ledger_replays_with_its_constant_shape(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service as 1.9.0 made these datasets (no ``ladder_rule``): the entries, marked
    1.9.0, replay to the same states and reading, which is 1.9.0's, not the chosen shape's
    (the two differ on this history)."""
    monkeypatch.setattr(rdp_choice, "DEFAULT_LADDER_RULE", None)
    entries = history(client, "rdp")
    configs = [e["config"] for e in entries if e.get("config")]
    assert all("ladder_rule" not in c and c["ladder"]["span"] == 34 for c in configs)
    assert all("ladder" not in (e.get("state") or {}) for e in entries)
    verdict = replay(as_written_by(entries, VERSION_1_9))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    config = config_from_json(configs[-1])
    expected = status(config, state_from_json(config, entries[-1]["state"]))["odometer"]
    assert verdict.odometer == expected
    monkeypatch.undo()  # the same history, today's default: another shape, other readings
    assert _readings(history(client, "rdp")) != _readings(entries)


def test_a_1_10_ledger_records_the_chosen_shape_and_replays(client: TestClient) -> None:
    entries = history(client, "rdp")
    assert entries[0]["config"]["ladder_rule"] == "first_declaration"
    shapes = [e["state"]["ladder"] for e in entries if e.get("state", {}).get("ladder")]
    assert shapes and all(s == shapes[0] for s in shapes)  # chosen once, never again
    assert (shapes[0]["steps"], shapes[0]["span"]) == (7, 35)
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # the recorded shape is part of what is replayed
    forged = copy.deepcopy(entries)
    for entry in forged:
        if entry.get("state", {}).get("ladder"):
            entry["state"]["ladder"] = {**entry["state"]["ladder"], "steps": 6, "span": 34}
    assert not replay(rehashed(forged)).ok
