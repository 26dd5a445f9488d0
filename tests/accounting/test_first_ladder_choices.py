"""The first declaration's ladder choice pinned over a grid (``docs/accounting.md``, *Ladders
shaped by the first declaration*): the ledger records the shape and a replay recomputes it, so
a faster :func:`~odometer_core.accounting.modes.first_ladder.choose` must choose exactly what
accounting 1.9.0 first chose.

``first_ladder_choices.json`` holds, per (mode, ε_B, δ_B), 50 first charges c₁ (ρ in ``zcdp``,
μ² in ``gdp``): 38 halving by √2 from above level 1's largest threshold down to 10⁻⁶ of it,
12 drawn log-uniformly, each with the shape the 1.9.0 code (before the judgement was made
faster) chose, as ``"steps/first"``, or ``null`` where no candidate admits c₁ once. 2,000 choices:
every candidate (steps 4, 6, 8 and 12, level-1 shares 0.5 to 0.9) wins somewhere."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from odometer_core.accounting import make_config
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode

GRID: dict[str, list[list[Any]]] = json.loads(
    (Path(__file__).parent / "first_ladder_choices.json").read_text()
)


def _choice(mode: str, config: Any, charge: Decimal) -> str | None:
    module: Any = zcdp_mode if mode == "zcdp" else gdp_mode
    shape = module.chosen_shape(config, charge)
    return None if shape is None else f"{shape.steps}/{shape.first}"


@pytest.mark.parametrize("target", list(GRID))
def test_the_choices_are_those_of_1_9_0(target: str) -> None:
    mode, epsilon, delta = target.split()
    config = make_config(epsilon, delta, "add_remove", {"mode": mode})
    chosen = [[charge, _choice(mode, config, Decimal(charge))] for charge, _ in GRID[target]]
    assert chosen == GRID[target]


def test_the_grid_covers_every_candidate_and_the_constant_shape() -> None:
    seen = {choice for rows in GRID.values() for _, choice in rows}
    assert None in seen
    assert {"12/0.5", "8/0.5", "6/0.5", "4/0.5", "4/0.9", "4/0.85", "8/0.85"} <= seen
    assert len(seen) >= 18
