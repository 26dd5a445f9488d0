"""A certified reading never exceeds the budget in force (docs/accounting.md, *Certified odometer
readings*, *Budget changes*).

Random histories in every mode — declarations chosen at random, some sized to land *exactly* on
the filter's threshold (Σρ = ρ_B, Σμ² = μ_B², Σε = ε_B), budget changes up and down (refused
ones included) — and after every step the reading of the filter, and of every sub-budget of a
``split`` dataset, is at most the budget in force: ε ≤ ε_B and δ ≤ δ_B. A running total exactly
at the level-1 threshold reads the creation target, not the level above it.
"""

from __future__ import annotations

import contextlib
from decimal import Decimal, localcontext
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odometer_core.accounting.declarations import parse_declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    ConfigError,
    FilterState,
    GDPConfig,
    InvalidTransition,
    SplitConfig,
    SplitState,
    ZCDPConfig,
    admit,
    change_budget,
    initial_state,
    make_config,
    status,
)
from odometer_core.accounting.modes import LeafConfig
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MODES = ("basic", "zcdp", "rdp", "gdp", "split")
EPSILONS = ("0.5", "1", "2", "3.7", "8")
DELTAS = ("1e-9", "1e-6", "0.00001", "1e-3")


def _accounting(mode: str, epsilon: str, delta: str) -> dict[str, Any]:
    if mode != "split":
        return {"mode": mode}
    half, eps = str(Decimal(delta) / 2), str(Decimal(epsilon) / 2)
    return {
        "mode": "split",
        "sub_budgets": [
            {
                "name": "z",
                "budget": {"epsilon": eps, "delta": half},
                "accounting": {"mode": "zcdp"},
            },
            {"name": "g", "budget": {"epsilon": eps, "delta": half}, "accounting": {"mode": "gdp"}},
        ],
    }


def _check(config: AccountingConfig, state: FilterState) -> None:
    """The reading (and each sub-budget's) is within the budget in force."""
    view = status(config, state)
    reading = view["odometer"]
    assert Decimal(reading["epsilon"]) <= config.epsilon, (reading, config.epsilon)
    assert Decimal(reading["delta"]) <= config.delta, (reading, config.delta)
    if isinstance(config, SplitConfig):
        for name, sub in config.sub_budgets:
            inner = view["sub_budgets"][name]["odometer"]
            assert Decimal(inner["epsilon"]) <= sub.epsilon, (name, inner, sub.epsilon)
            assert Decimal(inner["delta"]) <= sub.delta, (name, inner, sub.delta)


def _leaf(config: AccountingConfig, sub: str | None) -> LeafConfig:
    return config.sub_budget(sub) if isinstance(config, SplitConfig) else config


def _exact_root(square: Decimal) -> Decimal | None:
    """μ with μ·μ = ``square`` exactly (μ_B² is stored as the exact square of μ_B), or None."""
    with localcontext() as ctx:
        ctx.prec = 60
        root = square.sqrt().normalize()
        ctx.prec = 200
        return root if root * root == square else None


def _landing(config: AccountingConfig, state: FilterState, sub: str | None) -> dict[str, Any]:
    """A declaration whose charge is exactly what is left, landing the total on the threshold
    (when the unit allows it exactly; else a small one)."""
    leaf = _leaf(config, sub)
    leaf_state: Any = state.get(sub) if isinstance(state, SplitState) and sub else state
    if isinstance(leaf, ZCDPConfig | GDPConfig):  # the filter the first declaration shaped (1.9.0)
        leaf = (zcdp_mode if isinstance(leaf, ZCDPConfig) else gdp_mode).in_force(leaf, leaf_state)
    if isinstance(leaf, ZCDPConfig):
        left = leaf.rho_budget - leaf_state.rho
        if left > 0:
            return {"type": "zcdp", "rho": str(left)}
    elif isinstance(leaf, GDPConfig):
        root = _exact_root(leaf.mu_squared_budget - leaf_state.mu_squared)
        if root is not None and root > 0:
            return {"type": "gdp", "mu": str(root)}
    elif leaf.mode == "basic":
        left = leaf.epsilon - leaf_state.spent_epsilon
        if left > 0:
            return {"type": "pure_dp", "epsilon": str(left)}
    return {"type": "gaussian", "sigma": "40", "sensitivity": "1"}


def _random(data: st.DataObject, mode: str) -> dict[str, Any]:
    size = data.draw(st.sampled_from(["0.001", "0.01", "0.05", "0.2", "0.7", "1.5"]))
    kinds = {
        "basic": ["pure_dp", "approx_dp"],
        "zcdp": ["zcdp", "pure_dp", "gaussian"],
        "rdp": ["pure_dp", "gaussian", "zcdp"],
        "gdp": ["gdp", "gaussian"],
        "split": ["gaussian", "gdp"],
    }[mode]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "approx_dp":
        return {"type": "approx_dp", "epsilon": size, "delta": "1e-10"}
    if kind == "gaussian":
        return {"type": "gaussian", "sigma": str(Decimal(1) / Decimal(size)), "sensitivity": "1"}
    if kind == "gdp":
        return {"type": "gdp", "mu": size}
    if kind == "zcdp":
        return {"type": "zcdp", "rho": size}
    return {"type": "pure_dp", "epsilon": size}


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES))
def test_a_reading_never_exceeds_the_budget_in_force(data: st.DataObject, mode: str) -> None:
    epsilon = data.draw(st.sampled_from(EPSILONS))
    delta = data.draw(st.sampled_from(DELTAS))
    config = make_config(epsilon, delta, "add_remove", _accounting(mode, epsilon, delta))
    state = initial_state(config)
    _check(config, state)
    for _ in range(data.draw(st.integers(1, 12))):
        sub = data.draw(st.sampled_from(["z", "g"])) if mode == "split" else None
        step = data.draw(st.sampled_from(["random", "random", "land", "change"]))
        if step == "change":
            factor = Decimal(data.draw(st.sampled_from(["0.25", "0.5", "0.9", "1.1", "2", "4"])))
            target = _leaf(config, sub)
            # a refused change changes nothing
            with contextlib.suppress(InvalidTransition, ConfigError):
                config, state = change_budget(
                    config,
                    state,
                    str(target.epsilon * factor),
                    str(target.delta),
                    sub_budget=sub,
                )
        else:
            raw = _landing(config, state, sub) if step == "land" else _random(data, mode)
            decision = admit(config, state, parse_declaration(raw), sub_budget=sub)
            if decision.admitted:
                state = decision.state
        _check(config, state)


@pytest.mark.parametrize(("epsilon", "delta"), [("2", "1e-6"), ("1", "1e-6"), ("0.5", "1e-9")])
def test_a_zcdp_total_exactly_at_the_threshold_reads_the_target(epsilon: str, delta: str) -> None:
    """Σρ = ρ_B (the ``rho_budget`` status shows) reads ε_B at level 1, not the level above."""
    config = make_config(epsilon, delta, "add_remove", {"mode": "zcdp"})
    assert isinstance(config, ZCDPConfig)
    decision = admit(
        config,
        initial_state(config),
        parse_declaration({"type": "zcdp", "rho": str(config.rho_budget)}),
    )
    assert decision.outcome == "accepted"
    reading = status(config, decision.state)["odometer"]
    assert (reading["epsilon"], reading["level"]) == (epsilon, 1)
    assert Decimal(reading["delta"]) == Decimal(delta)


@pytest.mark.parametrize(("epsilon", "delta"), [("2", "1e-6"), ("1", "1e-5"), ("0.5", "1e-9")])
def test_a_gdp_total_exactly_at_the_threshold_reads_the_target(epsilon: str, delta: str) -> None:
    """Σμ² = μ_B² reads ε_B at level 1 (μ_B² is stored as an exact square)."""
    config = make_config(epsilon, delta, "add_remove", {"mode": "gdp"})
    assert isinstance(config, GDPConfig)
    mu = _exact_root(config.mu_squared_budget)
    assert mu is not None
    decision = admit(
        config, initial_state(config), parse_declaration({"type": "gdp", "mu": str(mu)})
    )
    assert decision.outcome == "accepted"
    reading = status(config, decision.state)["odometer"]
    assert (reading["epsilon"], reading["level"]) == (epsilon, 1)
