"""``zcdp`` and ``gdp`` ladders shaped by the first declaration (accounting 1.9.0,
``docs/accounting.md``, *Ladders shaped by the first declaration*): the shape is a function of
the first admitted declaration and the creation target alone (later declarations and budget
changes leave it; a change before the first admission does not choose), a replay recomputes it,
every candidate's shares sum to at most the pool, the chosen shapes and readings of reference
histories, and readings that stay at least the exact ε while admission is the reading."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    InvalidTransition,
    admit,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    parse_declaration,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting import conversions as cv
from odometer_core.accounting.filters import change_budget
from odometer_core.accounting.levels import cap_config, replace_cap
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.accounting.odometer import LadderShape

MODES = ("zcdp", "gdp")
MODULES: dict[str, Any] = {"zcdp": zcdp_mode, "gdp": gdp_mode}


def _gaussian(sigma: str) -> Any:
    return parse_declaration({"type": "gaussian", "sigma": sigma, "sensitivity": 1})


def _reading(config: Any, state: Any) -> dict[str, Any]:
    reading: dict[str, Any] = status(config, state)["odometer"]
    return reading


def _shaped(config: AccountingConfig) -> zcdp_mode.ZCDPConfig | gdp_mode.GDPConfig:
    """``config``, of one of the modes whose ladder the first declaration shapes."""
    assert isinstance(config, (zcdp_mode.ZCDPConfig, gdp_mode.GDPConfig))
    return config


def _shaped_state(state: FilterState) -> zcdp_mode.ZCDPState | gdp_mode.GDPState:
    """``state``, of one of the modes whose ladder the first declaration shapes."""
    assert isinstance(state, (zcdp_mode.ZCDPState, gdp_mode.GDPState))
    return state


def _ladder(state: FilterState) -> LadderShape:
    """The ladder shape a ``zcdp`` / ``gdp`` state's first admitted declaration chose."""
    ladder = _shaped_state(state).ladder
    assert ladder is not None
    return ladder


def _shape(state: Any) -> dict[str, Any] | None:
    first: dict[str, Any] | None = state_to_json(state).get("first")
    return None if first is None else first["ladder"]


# ---------------------------------------------------------------------------- the candidates
@pytest.mark.parametrize(
    "shape",
    [first_ladder.candidate(s, f) for s in first_ladder.STEPS for f in first_ladder.FIRSTS],
    ids=lambda s: f"{s.steps}-{s.first}",
)
def test_every_candidate_shares_at_most_the_pool(shape: LadderShape) -> None:
    """first + spread + above + tail = 1 in exact decimals, the tail ≥ 0, and the levels' float
    weights, summed exactly as fractions over the span, 10⁴ tail levels and 10⁴ levels above,
    the rest bounded by their series (Σ_{j ≥ J} 1/j² < 1/(J − 1/2)), stay below 1."""
    assert shape.first + shape.spread + shape.above + shape.tail == 1
    assert shape.tail >= 0
    total = Fraction(0)
    far = 10_000
    for k in range(1, shape.span + 2 + far):
        total += Fraction(shape.weight(k))
    for k in range(1, far):
        total += Fraction(shape.weight(-k))
    zeta = Fraction(6 / math.pi**2) * (1 + Fraction(1, 10**15))
    half = Fraction(1, 2)
    rest = zeta * (Fraction(shape.tail) / (far + half) + Fraction(shape.above) / (far - half))
    assert total + rest < 1


def test_new_configurations_record_the_rule_and_stored_ones_do_not() -> None:
    for mode in MODES:
        config = _shaped(make_config("1", "0.00001", "add_remove", {"mode": mode}))
        assert config_to_json(config)["ladder_rule"] == "first_declaration"
        assert config_from_json(config_to_json(config)) == config
        before = replace(config, ladder_rule=None)  # as accounting 1.8.0 made it
        assert "ladder_rule" not in config_to_json(before)
        assert config_from_json(config_to_json(before)) == before


# ---------------------------------------------------------------------------- reference vectors
#: (mode, budget, σ): the shape the first Gaussian chooses (steps, first), the Gaussians
#: admitted, and the reading after the last, against the 1.8.0 constant shape's count
#: (``python -m benchmarks quote``'s rows).
CHOICES = (
    ("zcdp", ("1", "0.00001"), "20", (4, "0.85"), 24, 24),
    ("zcdp", ("1", "0.00001"), "60", (6, "0.7"), 211, 216),
    ("zcdp", ("1", "0.000001"), "20", (8, "0.8"), 19, 19),
    ("zcdp", ("3", "0.0000001"), "20", (8, "0.5"), 120, 124),
    ("gdp", ("1", "0.00001"), "20", (8, "0.6"), 27, 27),
    ("gdp", ("1", "0.000001"), "60", (8, "0.5"), 188, 192),
)


@pytest.mark.parametrize(("mode", "budget", "sigma", "shape", "count", "before"), CHOICES)
def test_reference_choices(
    mode: str, budget: tuple[str, str], sigma: str, shape: tuple[int, str], count: int, before: int
) -> None:
    """The first Gaussian chooses the shape of the table, which the state records with its ρ
    (μ²); repeats of it fill the budget to ``count`` (the 1.8.0 shape: ``before``), each read
    at least the exact ε and the last one at most ε_B."""
    config = _shaped(make_config(*budget, "add_remove", {"mode": mode}))
    old = replace(config, ladder_rule=None)
    state, n = initial_state(config), 0
    while (decision := admit(config, state, _gaussian(sigma))).admitted:
        state, n = decision.state, n + 1
        if n == 1:
            first = state_to_json(state)["first"]
            assert (first["ladder"]["steps"], first["ladder"]["first"]) == shape
            unit = "rho" if mode == "zcdp" else "mu_squared"
            assert Decimal(first[unit]) == Decimal(state_to_json(state)[unit])
    assert n == count
    reading = _reading(config, state)
    exact = cv.gdp_epsilon(math.sqrt(n) / float(sigma), float(reading["delta"]))
    assert exact <= float(reading["epsilon"]) <= float(budget[0])
    legacy, m = initial_state(old), 0
    while (decision := admit(old, legacy, _gaussian(sigma))).admitted:
        legacy, m = decision.state, m + 1
    assert m == before
    assert "first" not in state_to_json(legacy)


# ---------------------------------------------------------------------------- the conditions
@settings(max_examples=25, deadline=None)
@given(
    mode=st.sampled_from(MODES),
    first=st.sampled_from(["3", "8", "20", "60", "150"]),
    one=st.lists(st.sampled_from(["2", "6", "20", "70"]), max_size=12),
    two=st.lists(st.sampled_from(["4", "10", "40", "120"]), max_size=12),
    change=st.sampled_from([None, ("0.6", "0.00001"), ("2", "0.00001"), ("1", "0.000001")]),
    budget=st.sampled_from([("1", "0.00001"), ("3", "0.0000001"), ("0.5", "0.000001")]),
)
def test_the_shape_depends_only_on_the_first_declaration(
    mode: str,
    first: str,
    one: list[str],
    two: list[str],
    change: tuple[str, str] | None,
    budget: tuple[str, str],
) -> None:
    """Two histories with the same first declaration and different continuations (one with a
    budget change after its third step) end with the shape the first declaration alone gives
    (``chosen_shape`` of the configuration and its charge), and the filter in force keeps it;
    a budget change before the first admission chooses nothing."""
    config = make_config(*budget, "add_remove", {"mode": mode})
    module = MODULES[mode]
    fresh, fresh_state = change_budget(config, initial_state(config), "2", budget[1])
    assert _shape(fresh_state) is None and _shaped(fresh).shape == _shaped(config).shape
    decision = admit(config, initial_state(config), _gaussian(first))
    if not decision.admitted:
        return
    charge = decision.state.first
    expected = module.chosen_shape(config, charge) or _shaped(config).shape
    assert decision.state.ladder == expected
    ends = []
    for rest, changed in ((one, change), (two, None)):
        cfg, state = config, decision.state
        for i, sigma in enumerate(rest):
            if i == 3 and changed is not None:
                try:
                    cfg, state = change_budget(cfg, state, *changed)
                except InvalidTransition:  # below what is certified: refused, nothing moves
                    pass
                else:
                    assert _shaped(cfg).shape == expected
            step = admit(cfg, state, _gaussian(sigma))
            state = step.state if step.admitted else state
        assert state.ladder == expected and state.first == charge
        assert module.in_force(cfg, state).shape == expected
        ends.append(_shape(state))
    assert ends[0] == ends[1] == expected.to_json()


@pytest.mark.parametrize("mode", MODES)
def test_replay_recomputes_the_shape(mode: str) -> None:
    """Read back from JSON, from a cold memo, the same declarations give the same states (the
    recorded choice included) and the same readings; a state whose recorded shape differs
    from the recomputed one is not what the replay gets."""
    config = make_config("3", "0.0000001", "add_remove", {"mode": mode})
    state = initial_state(config)
    for sigma in ("9", "20", "4", "30"):
        state = admit(config, state, _gaussian(sigma)).state
    recorded = state_to_json(state)
    first_ladder.choose.cache_clear()
    again = config_from_json(config_to_json(config))
    replayed = initial_state(again)
    for sigma in ("9", "20", "4", "30"):
        replayed = admit(again, replayed, _gaussian(sigma)).state
    assert state_to_json(replayed) == recorded
    assert state_from_json(again, recorded) == replayed
    assert _reading(again, replayed) == _reading(config, state)
    other = first_ladder.candidate(4, "0.9") if _ladder(replayed).steps != 4 else None
    other = other or first_ladder.candidate(12, "0.9")
    assert state_to_json(replace(_shaped_state(replayed), ladder=other)) != recorded


@pytest.mark.parametrize("mode", MODES)
def test_configurations_of_1_8_keep_their_readings(mode: str) -> None:
    """A configuration without ``ladder_rule`` (as accounting 1.8.0 stored it) reads as the
    constant shape of 1.7.0 does, bit for bit (the vectors of ``test_shaped_ladders.py``), and
    writes its states without ``first``."""
    stored = config_to_json(make_config("1", "0.000001", "add_remove", {"mode": mode}))
    stored.pop("ladder_rule")
    config = config_from_json(stored)
    state = initial_state(config)
    expected = {
        "zcdp": ("0.27373028638717805672", "0.39249426144602855838", "0.47006595550900021064"),
        "gdp": ("0.24661064246328118222", "0.3543559028848695669", "0.45132239386617500899"),
    }[mode]
    for eps in expected:
        state = admit(config, state, _gaussian("20")).state
        assert _reading(config, state)["epsilon"] == eps
        assert "first" not in state_to_json(state)


@settings(max_examples=30, deadline=None)
@given(
    mode=st.sampled_from(MODES),
    sigmas=st.lists(st.sampled_from(["2", "5", "11", "30", "90"]), min_size=1, max_size=30),
    budget=st.sampled_from([("1", "0.00001"), ("3", "0.000001"), ("0.5", "0.0000001")]),
)
def test_readings_are_at_least_the_exact_epsilon_and_admission_is_the_reading(
    mode: str, sigmas: list[str], budget: tuple[str, str]
) -> None:
    """Every reading is ≥ the exact ε of the Gaussians released at the reading's δ
    (Dong–Roth–Su 2019, Cor. 3.3 and 2.13); an admitted Gaussian reads ≤ ε_B, and a refused
    one's total lies above the top of the filter in force (the shape the first chose)."""
    config = _shaped(make_config(*budget, "add_remove", {"mode": mode}))
    module = MODULES[mode]
    state, mu_squared = _shaped_state(initial_state(config)), 0.0
    for sigma in sigmas:
        declaration = _gaussian(sigma)
        decision = admit(config, state, declaration)
        if not decision.admitted:
            if mode == "gdp":
                charge = gdp_mode.gdp_charge(declaration)
            else:
                charge = zcdp_mode.zcdp_charge(declaration)[0]
            shape = state.ladder  # a refused first: the filter of the shape it chose decides
            if state.first is None:
                shape = module.chosen_shape(config, charge) or config.shape
            in_force = module.in_force(config, replace(state, ladder=shape))
            if mode == "gdp":
                assert isinstance(state, gdp_mode.GDPState)
                assert state.mu_squared + charge > in_force.mu_squared_top
            else:
                assert isinstance(state, zcdp_mode.ZCDPState)
                assert state.rho + charge > in_force.rho_top
            continue
        state = decision.state
        mu_squared += 1 / float(sigma) ** 2
        reading = _reading(config, state)
        assert Decimal(reading["epsilon"]) <= Decimal(budget[0])
        exact = cv.gdp_epsilon(math.sqrt(mu_squared), float(reading["delta"]))
        assert float(reading["epsilon"]) >= exact * (1 - 1e-12)


# ---------------------------------------------------------------------------- levels above
@pytest.mark.parametrize("mode", MODES)
def test_caps_are_shaped_by_their_first_counted_declaration(mode: str) -> None:
    """An organisation cap made in ``zcdp`` / ``gdp`` carries the rule, and so does a cap that
    replaces another after it counted (a new filter from then on); each is shaped by its own
    first counted declaration, and a shaped cap replaced keeps nothing of its shape."""
    cap = _shaped(cap_config("2", "0.00001", {"mode": mode}))
    assert cap.ladder_rule == "first_declaration"
    state = admit(cap, initial_state(cap), _gaussian("20")).state
    assert state.ladder is not None and state.first is not None
    basic = cap_config("2", "0.00001", {"mode": "basic"})
    counted = admit(basic, initial_state(basic), _gaussian("20")).state
    replaced, fresh, closed = replace_cap(basic, counted, "2", "0.00001", {"mode": mode}, 1)
    assert closed is not None and _shaped(replaced).ladder_rule == "first_declaration"
    assert _shaped_state(fresh).first is None
    again, fresh_again, _ = replace_cap(cap, state, "2", "0.00001", {"mode": mode}, 2)
    assert _shaped(again).shape == cap.shape and _shaped_state(fresh_again).ladder is None
    later = admit(again, fresh_again, _gaussian("60")).state
    assert later.ladder == MODULES[mode].chosen_shape(again, later.first)
