"""A replay on another machine accepts the ladder shape a first declaration chose where float
noise could tip the choice, and nothing else (``docs/accounting.md``, *Ladders shaped by the
first declaration*, *What replay checks*).

The rule judges candidates in floats. At the first charge :data:`EDGE` on a ``zcdp`` dataset of
(1, 10⁻⁶), level 1's share 0.5 reads, after its last repeat, 1.12 × the reference ε to within
10⁻¹⁵: this machine finds the reading above the bound and goes on to share 0.7 (steps 8); a
machine whose floats put it a hair below stops at 0.5 (steps 12). A ledger written there (the
bound raised by 10⁻¹⁰, which that machine's floats amount to) must replay here."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import make_config
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.accounting.odometer import LadderShape
from odometer_core.ledger import replay
from tests.support import AUTH, rehashed

#: ρ of the first declaration at the edge (found by bisection on ρ at 11 repeats of share 0.5)
EDGE = "0.0020634284158397876781452431"
BUDGET = {"epsilon": "1", "delta": "1e-6"}
#: what this machine chooses at EDGE, and what a machine off by 10⁻¹⁰ in the bound chooses
HERE, THERE = (8, "0.7"), (12, "0.5")
#: the float noise another machine's library may add to the bound's comparison
NOISE = 1 + 1e-10


#: what ``chosen_shape`` passes to the rule, but the last bound
Args = tuple[first_ladder.Top, first_ladder.Convert, Decimal, Decimal, Decimal, float]


def _args(charge: str, mode: str = "zcdp", epsilon: str = "1", delta: str = "1e-6") -> Args:
    """What ``chosen_shape`` passes to the rule for a first ``charge`` on a new filter."""
    config = make_config(epsilon, delta, "add_remove", {"mode": mode})
    if isinstance(config, zcdp_mode.ZCDPConfig):
        assert config.anchor is not None
        pool = config.final_conversion_delta
        return (
            zcdp_mode.level_one,
            cv.zcdp_epsilon,
            config.anchor.epsilon,
            pool,
            Decimal(charge),
            2.0,
        )
    assert isinstance(config, gdp_mode.GDPConfig) and config.anchor is not None
    top, convert = gdp_mode.level_one, gdp_mode._gdp_level_epsilon
    return (top, convert, config.anchor.epsilon, config.anchor.delta, Decimal(charge), 1.0)


def _pair(shape: LadderShape | None) -> tuple[int, str] | None:
    return None if shape is None else (shape.steps, str(shape.first))


def test_the_edge_is_one_float_noise_can_tip() -> None:
    """At EDGE the rule chooses HERE, and with the bound off by 10⁻¹⁰ THERE. Every share admits
    11 repeats there and reads ε_B after the last (level 1), so every share's first test sits on
    the bound: the rule could stop at any share (with that share's best spacing) or judge all
    24 pairs (HERE, the best of them); the other candidates it could not choose."""
    args = _args(EDGE)
    assert _pair(first_ladder.choose(*args, zcdp_mode.LAST_WITHIN)) == HERE
    assert _pair(first_ladder.choose(*args, zcdp_mode.LAST_WITHIN * NOISE)) == THERE
    could = {
        (steps, share)
        for steps in first_ladder.STEPS
        for share in first_ladder.FIRSTS
        if first_ladder.could_choose(
            first_ladder.candidate(steps, share), *args, zcdp_mode.LAST_WITHIN
        )
    }
    assert could == {HERE, THERE, (12, "0.6"), (8, "0.8"), (8, "0.85"), (8, "0.9")}
    # without a tolerance, only the rule's own choice
    assert not first_ladder.could_choose(
        first_ladder.candidate(*THERE), *args, zcdp_mode.LAST_WITHIN, tolerance=0.0
    )


def test_far_from_an_edge_only_the_choice_could_be_chosen() -> None:
    args = _args(str(Decimal(1) / 800))  # a Gaussian of σ 20
    chosen = first_ladder.choose(*args, zcdp_mode.LAST_WITHIN)
    assert _pair(chosen) == (8, "0.8")
    for steps in first_ladder.STEPS:
        for share in first_ladder.FIRSTS:
            shape = first_ladder.candidate(steps, share)
            could = first_ladder.could_choose(shape, *args, zcdp_mode.LAST_WITHIN)
            assert could == (shape == chosen), (steps, share)


def test_the_rules_own_choices_could_be_chosen() -> None:
    """Over a sample of the pinned grid (``first_ladder_choices.json``), every choice passes the
    replay's check of what the rule could choose."""
    grid = json.loads((Path(__file__).parent / "first_ladder_choices.json").read_text())
    for target in ("zcdp 1 1e-5", "gdp 3 1e-7", "zcdp 0.1 1e-9", "gdp 0.5 1e-6"):
        mode, epsilon, delta = target.split()
        module: Any = zcdp_mode if mode == "zcdp" else gdp_mode
        config = make_config(epsilon, delta, "add_remove", {"mode": mode})
        for charge, choice in grid[target][::5]:
            shape = module.chosen_shape(config, Decimal(charge))
            assert (None if shape is None else f"{shape.steps}/{shape.first}") == choice
            if shape is None:
                continue
            args = _args(charge, mode, epsilon, delta)
            assert first_ladder.could_choose(shape, *args, module.LAST_WITHIN)


def _ledger(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A zcdp dataset's ledger written by a machine whose floats put share 0.5 within the
    bound at EDGE: the first declaration, then two Gaussians."""
    with monkeypatch.context() as there:
        there.setattr(zcdp_mode, "LAST_WITHIN", zcdp_mode.LAST_WITHIN * NOISE)
        body = {"name": "edge", "budget": BUDGET, "accounting": {"mode": "zcdp"}}
        ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
        first = {"type": "zcdp", "rho": EDGE}
        gaussian = {"type": "gaussian", "sigma": "20", "sensitivity": "1"}
        for mechanism in (first, gaussian, gaussian):
            r = client.post(
                f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=AUTH
            )
            assert r.status_code == 201, r.text
        ledger = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
    entries: list[dict[str, Any]] = ledger
    return entries


def _recorded(entries: list[dict[str, Any]]) -> set[tuple[int, str]]:
    return {
        (e["state"]["first"]["ladder"]["steps"], e["state"]["first"]["ladder"]["first"])
        for e in entries
        if (e.get("state") or {}).get("first")
    }


def _with_shape(entries: list[dict[str, Any]], shape: dict[str, Any]) -> list[dict[str, Any]]:
    altered = copy.deepcopy(entries)
    for entry in altered:
        if (entry.get("state") or {}).get("first"):
            entry["state"]["first"]["ladder"] = shape
    return rehashed(altered)


def test_a_shape_chosen_within_float_noise_replays(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other machine's ledger records THERE; here the rule recomputes HERE, and the replay
    accepts THERE (a candidate the rule could choose within the tolerance), deciding every
    entry with it: the states match exactly."""
    entries = _ledger(client, monkeypatch)
    assert _recorded(entries) == {THERE}
    first_ladder.choose.cache_clear()
    assert _pair(first_ladder.choose(*_args(EDGE), zcdp_mode.LAST_WITHIN)) == HERE
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]


def test_a_shape_the_rule_could_not_choose_is_a_mismatch(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ledger recording a candidate no float noise leads to (steps 4, level 1 at 0.9),
    or a shape outside the candidates (THERE with one more level in its span), or THERE where
    this machine's check admits no tolerance, does not replay."""
    entries = _ledger(client, monkeypatch)
    assert replay(entries).ok
    far = first_ladder.candidate(4, "0.9").to_json()
    verdict = replay(_with_shape(entries, far))
    assert not verdict.ok and "state" in verdict.problems[0]
    outside = first_ladder.candidate(*THERE).to_json()
    outside["span"] += 1
    assert not replay(_with_shape(entries, outside)).ok
    monkeypatch.setattr(first_ladder, "FLOAT_TOLERANCE", 0.0)
    assert not replay(entries).ok
