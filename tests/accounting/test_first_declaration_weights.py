"""``rdp`` weights chosen from the first declaration admitted (accounting 1.5.0,
``docs/accounting.md``, *Weights chosen from the first declaration*): what the filter admits,
that the choice is recorded in the state and made once, and that configurations stored before
keep their weights."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from odometer_core.accounting import (
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
from odometer_core.accounting.blocks import Blocks, decide_selection
from odometer_core.accounting.filters import change_budget
from odometer_core.accounting.modes.rdp import RDPConfig, RDPState

#: One epoch of the Opacus / TF Privacy MNIST tutorial: N = 60,000, batch 256, σ = 1.12.
EPOCH = parse_declaration(
    {
        "type": "dp_sgd",
        "noise_multiplier": "1.12",
        "sample_rate": str((Decimal(256) / Decimal(60_000)).quantize(Decimal("1e-20"))),
        "steps": 235,
    }
)

#: dp_accounting 0.6's RDP accountant allows 465 epochs under ε ≤ 8 at δ = 10⁻⁵ (its default
#: orders; benchmarks/quote.py computes it).
DPA_RDP_EPOCHS = 465


def _epochs(config: Any, limit: int = 1000) -> tuple[int, Any]:
    state, count = initial_state(config), 0
    while count < limit and (decision := admit(config, state, EPOCH)).admitted:
        state, count = decision.state, count + 1
    return count, state


def _legacy(config: Any) -> RDPConfig:
    """The same configuration as a 1.4.0 dataset stored it (no ``order_weights``)."""
    stored = config_to_json(config)
    assert stored.pop("order_weights") == "first_declaration"
    legacy = config_from_json(stored)
    assert isinstance(legacy, RDPConfig) and legacy.weights_rule == "fixed"
    assert config_to_json(legacy) == stored  # read back and written as it was
    return legacy


def test_the_tutorial_epochs_admitted_without_a_workload() -> None:
    config = make_config("8", "0.00001", "add_remove", {"mode": "rdp"})
    assert isinstance(config, RDPConfig) and config.weights_rule == "first_declaration"
    admitted, state = _epochs(config)
    assert admitted == 457  # 379 with the default weights fixed at creation
    assert admitted >= 0.9 * DPA_RDP_EPOCHS
    assert isinstance(state, RDPState) and state.first == "4.0"
    view = status(config, state)
    assert view["first"] == "4.0"
    assert view["weights"][config.orders.index(4.0)] == "0.8999999999999999"  # 0.9 rounded down
    # the other orders share the rest equally (rounded down)
    # (accounting 1.8.0: the orders only the ladder's levels use hold no level 1, weight 0)
    others = {float(w) for i, w in enumerate(view["weights"]) if i != 5 and config.weights[i]}
    assert len(others) == 1 and 0.1 / 15 * (1 - 1e-15) <= others.pop() <= 0.1 / 15
    assert math.fsum(float(w) for w in view["weights"]) <= 1.0
    # every reading stays within the budget, at δ_c
    assert Decimal(view["odometer"]["epsilon"]) <= 8
    assert view["odometer"]["delta"] == "0.00001"


def test_a_workload_declared_admits_as_many() -> None:
    workload = [{"mechanism": EPOCH.to_json(), "count": 60}]
    config = make_config("8", "0.00001", "add_remove", {"mode": "rdp", "workload": workload})
    assert isinstance(config, RDPConfig) and config.weights_rule == "fixed"
    admitted, _ = _epochs(config)
    assert admitted == 457
    assert admitted >= 0.98 * DPA_RDP_EPOCHS


def test_a_configuration_stored_before_keeps_its_weights() -> None:
    """A 1.4.0 configuration (no ``order_weights``) admits and reads as before, and its
    states are written as before (no ``first``)."""
    legacy = _legacy(make_config("8", "0.00001", "add_remove", {"mode": "rdp"}))
    admitted, state = _epochs(legacy)
    assert admitted == 379
    assert "first" not in state_to_json(state)
    assert "weights" not in status(legacy, state)


def test_the_choice_is_recorded_and_replayed() -> None:
    config = make_config("8", "0.00001", "add_remove", {"mode": "rdp"})
    decision = admit(config, initial_state(config), EPOCH)
    stored = state_to_json(decision.state)
    assert stored["first"] == "4.0"
    # replay: the stored state read back decides the next declaration exactly as the live one
    again = state_from_json(config, stored)
    assert again == decision.state
    live = admit(config, decision.state, EPOCH)
    replayed = admit(config, again, EPOCH)
    assert state_to_json(live.state) == state_to_json(replayed.state)
    assert isinstance(live.state, RDPState) and live.state.first == "4.0"


def test_a_refused_first_declaration_chooses_nothing() -> None:
    config = make_config("1", "0.00001", "add_remove", {"mode": "rdp"})
    job = parse_declaration(
        {"type": "dp_sgd", "noise_multiplier": "1.12", "sample_rate": "0.1", "steps": 10_000}
    )
    fresh = initial_state(config)
    decision = admit(config, fresh, job)
    assert not decision.admitted
    assert decision.state == fresh and isinstance(fresh, RDPState) and fresh.first is None
    # the next one chooses
    gaussian = parse_declaration({"type": "gaussian", "sigma": "30", "sensitivity": 1})
    after = admit(config, fresh, gaussian)
    assert after.admitted and after.state.first is not None


def test_a_budget_change_never_chooses_again() -> None:
    """After the choice a budget change (down, up) keeps it: the weights in force stay those the
    first declaration chose, and the new ε only caps the ladders."""
    config = make_config("8", "0.00001", "add_remove", {"mode": "rdp"})
    state = admit(config, initial_state(config), EPOCH).state
    before = status(config, state)["weights"]
    gaussian = parse_declaration({"type": "gaussian", "sigma": "5", "sensitivity": 1})
    for eps in ("3", "9"):
        config, state = change_budget(config, state, eps, "0.00001")
        assert isinstance(state, RDPState) and state.first == "4.0"
        assert status(config, state)["weights"] == before
        decision = admit(config, state, gaussian)
        assert decision.admitted
        assert isinstance(decision.state, RDPState) and decision.state.first == "4.0"
        assert Decimal(status(config, decision.state)["odometer"]["epsilon"]) <= Decimal(eps)


def test_a_declaration_that_charges_nothing_keeps_the_default_weights() -> None:
    config = make_config("1", "0.00001", "add_remove", {"mode": "rdp"})
    nothing = parse_declaration({"type": "gaussian", "sigma": "30", "sensitivity": 0})
    decision = admit(config, initial_state(config), nothing)
    assert isinstance(config, RDPConfig) and isinstance(decision.state, RDPState)
    assert decision.admitted and decision.state.first == "default"
    assert status(config, decision.state)["weights"] == [repr(w) for w in config.weights]


def test_each_block_chooses_at_its_own_first_declaration() -> None:
    """A partitioned dataset's blocks share one configuration, and each block chooses at the
    first declaration it admits: a DP-SGD epoch on blocks [0, 10), then a pure ε = 2 release
    on [5, 20)."""
    config = make_config("8", "0.00001", "add_remove", {"mode": "rdp"})
    blocks = Blocks().open(0, 20, initial_state(config))
    epoch = decide_selection(config, blocks, [(0, 10)], EPOCH)
    pure = parse_declaration({"type": "pure_dp", "epsilon": "2"})
    both = decide_selection(config, epoch.blocks, [(5, 20)], pure)
    assert both.admitted
    firsts = {
        b: state.first
        for b in (0, 5, 10, 19)
        if isinstance(state := both.blocks.state_of(b), RDPState)
    }
    # blocks 0–9 chose for the epoch (and keep it), blocks 10–19 for the pure release
    assert firsts == {0: "4.0", 5: "4.0", 10: "64.0", 19: "64.0"}
