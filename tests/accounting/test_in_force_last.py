"""The filter in force is remembered from one admission to the next (``in_force`` of ``rdp``,
``zcdp`` and ``gdp`` keeps its last answer with the very objects it came from), and that changes
no decision: filters admitted in turn decide exactly as each alone, and as with the memory
cleared before every admission (issue 51: the capacity file's loops of 10⁶ admissions); and
rdp's remaining curve, now computed in plain floats, is numpy's bit for bit."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from odometer_core.accounting import FilterState, admit, initial_state, make_config, memo
from odometer_core.accounting import parse_declaration as parse
from odometer_core.accounting.exact import ZERO
from odometer_core.accounting.filters import AccountingConfig
from odometer_core.accounting.modes import gdp, rdp, zcdp

MODES = {"rdp": rdp, "zcdp": zcdp, "gdp": gdp}
ROUNDS = 40


def gaussian(sigma: object) -> dict[str, Any]:
    return {"type": "gaussian", "sigma": str(sigma), "sensitivity": "1"}


def filters(mode: str) -> list[tuple[AccountingConfig, FilterState, dict[str, Any]]]:
    """Three filters of ``mode``: two budgets whose first declarations choose different
    ladders, and a third configuration equal to the first but a distinct object."""
    made = [
        (make_config("1", "1e-6", "add_remove", {"mode": mode}), 10),
        (make_config("3", "1e-7", "add_remove", {"mode": mode}), 200),
        (make_config("1", "1e-6", "add_remove", {"mode": mode}), 10),
    ]
    return [(config, initial_state(config), gaussian(sigma)) for config, sigma in made]


def decide(
    mode: str, order: list[int], before: Callable[[], None] = lambda: None
) -> dict[int, list[str]]:
    """The decisions (their full text) of ``order``'s filters, each admitted in turn on the
    state its previous admission left."""
    runs = filters(mode)
    states = [state for _, state, _ in runs]
    seen: dict[int, list[str]] = {i: [] for i in range(len(runs))}
    with memo.charges():
        for i in order:
            config, _, mechanism = runs[i]
            before()
            decision = admit(config, states[i], parse(mechanism))
            states[i] = decision.state
            seen[i].append(repr(decision))
    return seen


@pytest.mark.parametrize("mode", MODES)
def test_filters_in_turn_decide_as_each_alone_and_as_without_the_memory(mode: str) -> None:
    module = MODES[mode]

    def forget() -> None:
        module._IN_FORCE_LAST = None  # type: ignore[attr-defined]

    alone = {i: decide(mode, [i] * ROUNDS)[i] for i in range(3)}
    assert alone[0] == alone[2] and alone[0] != alone[1]
    assert all("accepted" in alone[i][0] for i in range(3))
    assert [alone[0][0].count("ladder"), alone[1][0].count("ladder")] == [1, 1]
    assert alone[0][0].split("ladder")[1] != alone[1][0].split("ladder")[1]
    in_turn = decide(mode, [0, 1, 2] * ROUNDS)
    assert in_turn == alone
    assert decide(mode, [0, 1, 1, 2, 0, 0] * ROUNDS, forget) == decide(
        mode, [0, 1, 1, 2, 0, 0] * ROUNDS
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_loop_on_one_filter_reads_the_filter_in_force_once(mode: str) -> None:
    """After the first admission, every admission of the loop gets the same filter object
    (it was rebuilt, a copy of the configuration, on each one)."""
    module = MODES[mode]
    config, state, mechanism = filters(mode)[0]
    in_force: list[Any] = []
    with memo.charges():
        for _ in range(5):
            state = admit(config, state, parse(mechanism)).state
            in_force.append(module.in_force(config, state))
    assert in_force[0] is not config
    assert all(found is in_force[0] for found in in_force)


def _numpy_remaining(
    thresholds: list[float], spent: list[float], dead: list[bool]
) -> tuple[float, ...]:
    """rdp's remaining curve as computed before (numpy, up to accounting 1.10.0)."""
    b, s, d = np.asarray(thresholds), np.asarray(spent), np.asarray(dead)
    with np.errstate(invalid="ignore"):
        rem = np.where(d, 0.0, np.maximum(b - s, 0.0))
    return tuple(np.where(rem > 0, np.nextafter(rem, -np.inf), 0.0).tolist())


def test_the_remaining_curve_is_the_numpy_one_bit_for_bit() -> None:
    """B(α) − S(α) rounded down where positive and live, else 0, now in plain floats: the same
    binary64 values as numpy's over infinities, NaN, signed zeros, subnormals, ties and random
    pairs (compared by their text, so −0.0 and 0.0 differ)."""
    special = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.0, 1.0 + 2**-52, 3.5, 1e308]
    special += [math.inf, -math.inf, math.nan, 1e-300, 0.1, 0.30000000000000004]
    rng = random.Random(51)
    pairs = [(b, s) for b in special for s in special]
    pairs += [(rng.uniform(0, 50), rng.uniform(0, 50)) for _ in range(3000)]
    pairs += [(x, math.nextafter(x, -math.inf)) for x in (rng.uniform(0, 9) for _ in range(500))]
    thresholds, spent = [b for b, _ in pairs], [s for _, s in pairs]
    dead = [rng.random() < 0.2 for _ in pairs]
    config = make_config("1", "1e-6", "add_remove", {"mode": "rdp"})
    assert isinstance(config, rdp.RDPConfig)
    grid = rdp._Grid(np.asarray(thresholds), np.asarray(thresholds), [])
    found = rdp._rdp_remaining(config, grid, np.asarray(spent), np.asarray(dead), ZERO)
    assert repr(found.rdp) == repr(_numpy_remaining(thresholds, spent, dead))
    assert sum(v > 0 for v in found.rdp) > 1000
