"""Ledgers of ``zcdp`` and ``gdp`` datasets written by accounting 1.8.0 replay unchanged under
1.9.0 (``legacy.VERSION_1_8``): their configurations have no ``ladder_rule``, keep the constant
shape of 1.7.0 and read as they did; a 1.9.0 ledger records the shape its first declaration
chose in the state, and the replay recomputes it (``docs/accounting.md``, *Ladders shaped by the
first declaration*)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    config_from_json,
    state_from_json,
    status,
)
from odometer_core.accounting.legacy import VERSION_1_8
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.ledger import replay
from tests.ledger.legacy_histories import as_written_by, history
from tests.support import rehashed

#: The readings after the history of ``legacy_histories.history`` (three Gaussians of σ 20 on
#: (1, 10⁻⁶), the budget lowered to 0.9, one more) under the 1.7.0–1.8.0 constant shapes:
#: what a 1.8.0 ledger's replay must still read, bit for bit.
READ_BY_1_8 = {"zcdp": "0.56305475160825613213", "gdp": "0.50939315905929116735"}


@pytest.mark.parametrize(("mode", "module"), [("zcdp", zcdp_mode), ("gdp", gdp_mode)])
def test_a_1_8_ledger_replays_with_its_constant_shape(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, mode: str, module: Any
) -> None:
    """The service as 1.8.0 made these datasets (no rule): the entries, marked 1.8.0, replay to
    the same states, which record no first declaration, and to the 1.8.0 reading."""
    monkeypatch.setattr(module, "DEFAULT_RULE", None)
    entries = history(client, mode)
    assert all("ladder_rule" not in (e.get("config") or {}) for e in entries)
    assert all("first" not in (e.get("state") or {}) for e in entries)
    verdict = replay(as_written_by(entries, VERSION_1_8))
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    config = config_from_json([e["config"] for e in entries if e.get("config")][-1])
    expected = status(config, state_from_json(config, entries[-1]["state"]))["odometer"]
    assert verdict.odometer == expected
    assert expected["epsilon"] == READ_BY_1_8[mode]


@pytest.mark.parametrize("mode", ["zcdp", "gdp"])
def test_a_1_9_ledger_records_the_first_declarations_shape_and_replays(
    client: TestClient, mode: str
) -> None:
    """Each state from the first admission on records the first Gaussian's charge and the shape
    it chose; the replay, from a cold memo, recomputes them. A ledger whose recorded shape was
    altered, or whose configuration lost its rule, does not replay."""
    entries = history(client, mode)
    assert {e["accounting_version"] for e in entries} == {ACCOUNTING_VERSION}
    assert entries[0]["config"]["ladder_rule"] == "first_declaration"
    firsts = [e["state"]["first"] for e in entries if (e.get("state") or {}).get("first")]
    assert len(firsts) >= 4 and all(f == firsts[0] for f in firsts)
    first_ladder.choose.cache_clear()
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    altered = copy.deepcopy(entries)
    for entry in altered:
        if (entry.get("state") or {}).get("first"):
            entry["state"]["first"]["ladder"]["steps"] = 5
    assert not replay(rehashed(altered)).ok
    stripped = copy.deepcopy(entries)
    stripped[0]["config"].pop("ladder_rule")
    assert not replay(rehashed(stripped)).ok
