"""``rdp`` grids: the default weights and the grid chosen for a declared workload.

The DP-SGD chunk case of the issue: chunks of 100 Poisson-subsampled Gaussian steps (q = 0.01,
σ = 1) under (ε, δ) = (3, 10⁻⁶). One order holding all of δ admits about 1,678 steps; the
non-adaptive PLD accountant about 2,061; equal weights over the 16 default orders admitted 1,100.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from odometer_core.accounting import (
    ConfigError,
    admit,
    change_budget,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    parse_declaration,
)
from odometer_core.accounting.modes import rdp

CHUNK: dict[str, Any] = {
    "type": "dp_sgd",
    "sample_rate": "0.01",
    "noise_multiplier": "1",
    "steps": 100,
}


def _fill(accounting: dict[str, Any], fixed: bool = False) -> tuple[rdp.RDPConfig, int, int]:
    """Admit 100-step chunks until one is refused, then single steps: (config, chunks, steps);
    ``fixed``: the weights stored at creation stay in force (the rule before accounting 1.5.0,
    where a new dataset's first declaration chooses them)."""
    config = make_config("3", "0.000001", "add_remove", accounting)
    assert isinstance(config, rdp.RDPConfig)
    if fixed:
        config = replace(config, weights_rule=rdp.WEIGHTS_FIXED)
    state = initial_state(config)
    counts = []
    for mechanism in (CHUNK, {**CHUNK, "steps": 1}):
        decl = parse_declaration(mechanism)
        n = 0
        while (d := admit(config, state, decl)).admitted:
            state, n = d.state, n + 1
        counts.append(n)
    return config, counts[0], 100 * counts[0] + counts[1]


def _pld_epsilon(steps: int) -> float:
    """dp_accounting's non-adaptive PLD ε of ``steps`` such steps at δ = 10⁻⁶."""
    acc = pld_privacy_accountant.PLDAccountant()
    event = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0))
    acc.compose(event, steps)
    return float(acc.get_epsilon(1e-6))


def test_default_weights_admit_the_dp_sgd_chunk_case() -> None:
    config, chunks, steps = _fill({"mode": "rdp"}, fixed=True)
    # (from accounting 1.8.0 the grid also holds the ladder's levels' own orders, weight 0)
    assert config.orders == rdp.DEFAULT_RDP_ORDERS + rdp.LEVEL_ORDERS
    assert sum(Decimal(w) for w in rdp.DEFAULT_RDP_WEIGHTS) == 1
    # was 11 chunks (1,100 steps) with equal weights; 1,327 steps with thresholds at the whole
    # δ_c, before the filter shared it with its ladder (docs/accounting.md, *Budget changes*)
    assert (chunks, steps) == (13, 1310)
    assert steps >= 1300
    assert _pld_epsilon(steps) <= 3  # never above what the non-adaptive PLD admits


def test_weights_from_the_first_declaration_admit_the_dp_sgd_chunk_case() -> None:
    """Accounting 1.5.0: no workload declared, the first chunk chooses the weights (0.9 on
    α = 8, the default order nearest the workload grid's 7.49): 15 chunks and 96 steps, within
    3 % of the declared workload's 1,637."""
    config, chunks, steps = _fill({"mode": "rdp"})
    assert config.weights_rule == rdp.WEIGHTS_FIRST
    assert (chunks, steps) == (15, 1596)
    assert _pld_epsilon(steps) <= 3


def test_workload_grid_admits_the_dp_sgd_chunk_case() -> None:
    config, chunks, steps = _fill({"mode": "rdp", "workload": [{"mechanism": CHUNK, "count": 20}]})
    assert config.workload is not None
    assert config.workload.order == 7.49
    assert config.workload.order in config.orders
    assert config.weights[config.orders.index(7.49)] == pytest.approx(0.9, rel=1e-15)
    assert (chunks, steps) == (16, 1637)  # 1,657 with thresholds at the whole δ_c
    assert steps >= 1630
    assert config.workload.expected == (chunks,)  # the expected count is what the filter admits
    assert _pld_epsilon(steps) <= 3


def test_explicit_orders_keep_equal_weights() -> None:
    config = make_config("3", "0.000001", "add_remove", {"mode": "rdp", "orders": [2, 4, 8]})
    assert isinstance(config, rdp.RDPConfig)
    assert config.weights == (1 / 3, 1 / 3, 1 / 3)
    assert config.workload is None


def test_workload_choice_is_deterministic_and_round_trips() -> None:
    acc = {
        "mode": "rdp",
        "workload": [
            {"mechanism": {"type": "gaussian", "sigma": "5", "sensitivity": "1"}, "count": 200},
            {"mechanism": {"type": "laplace", "scale": "10", "sensitivity": "1"}, "count": 100},
        ],
    }
    a = make_config("1", "0.00001", "add_remove", acc)
    b = make_config("1", "0.00001", "add_remove", acc)
    assert a == b
    assert isinstance(a, rdp.RDPConfig)
    assert a.workload is not None
    # Σ w_α ≤ 1 as exact decimals of the stored floats (the union bound's condition)
    assert sum(Decimal(w) for w in a.weights) <= 1
    back = config_from_json(config_to_json(a))
    assert back == a
    assert config_to_json(back) == config_to_json(a)
    # a budget change keeps the grid, weights and the record; thresholds follow the budget
    changed, _ = change_budget(a, initial_state(a), "2", "0.00001")
    assert isinstance(changed, rdp.RDPConfig)
    assert (changed.orders, changed.weights, changed.workload) == (a.orders, a.weights, a.workload)
    assert changed.thresholds != a.thresholds


def test_mixed_workload_expected_counts_match_the_filter() -> None:
    """Interleaved in proportion (two Gaussians per Laplace), the filter admits the expected
    counts to within one invocation per declaration (per-step rounding up)."""
    gauss = {"type": "gaussian", "sigma": "50", "sensitivity": "1"}
    lap = {"type": "laplace", "scale": "100", "sensitivity": "1"}
    acc = {
        "mode": "rdp",
        "workload": [{"mechanism": gauss, "count": 400}, {"mechanism": lap, "count": 200}],
    }
    config = make_config("1", "0.00001", "add_remove", acc)
    assert isinstance(config, rdp.RDPConfig) and config.workload is not None
    schedule = [(0, parse_declaration(gauss))] * 2 + [(1, parse_declaration(lap))]
    admitted = _interleave(config, schedule)
    expected = config.workload.expected
    assert 0 < expected[0] < 400 and 0 < expected[1] < 200
    assert abs(admitted[0] - expected[0]) <= 1 and abs(admitted[1] - expected[1]) <= 1
    # the workload's grid admits more of this mix than the default one
    default = make_config("1", "0.00001", "add_remove", {"mode": "rdp"})
    assert sum(_interleave(default, schedule)) < sum(admitted)


def _interleave(config: Any, schedule: list[tuple[int, Any]]) -> list[int]:
    """Admit the schedule round after round until one invocation is refused: counts per index."""
    state = initial_state(config)
    admitted = [0, 0]
    while True:
        for k, decl in schedule:
            d = admit(config, state, decl)
            if not d.admitted:
                return admitted
            state = d.state
            admitted[k] += 1


def test_old_configuration_without_workload_reads_back_unchanged() -> None:
    """A configuration stored before workloads and default weights existed (equal weights on
    the 16 default orders) keeps its meaning and its JSON."""
    old = rdp.make(
        Decimal(3),
        Decimal("0.000001"),
        "add_remove",
        Decimal("0.000001"),
        rdp.DEFAULT_RDP_ORDERS,
        (1 / 16,) * 16,
    )
    stored = config_to_json(old)
    assert "workload" not in stored
    back = config_from_json(stored)
    assert back == old
    assert config_to_json(back) == stored


BAD_WORKLOADS: list[tuple[str, Any, str]] = [
    ("not a list", {"mechanism": CHUNK, "count": 1}, "must be a list"),
    ("empty", [], "must be a list"),
    ("too many", [{"mechanism": CHUNK, "count": 1}] * 9, "1–8 items"),
    ("unknown kind", [{"mechanism": {"type": "nope"}, "count": 1}], "unknown mechanism type"),
    ("zero count", [{"mechanism": CHUNK, "count": 0}], "count must be an integer"),
    ("negative count", [{"mechanism": CHUNK, "count": -3}], "count must be an integer"),
    ("huge count", [{"mechanism": CHUNK, "count": 10**6 + 1}], "count must be an integer"),
    ("boolean count", [{"mechanism": CHUNK, "count": True}], "count must be an integer"),
    ("extra field", [{"mechanism": CHUNK, "count": 1, "x": 1}], "'mechanism' and 'count'"),
    (
        "unsupported in rdp",
        [
            {
                "mechanism": {
                    "type": "subsampled",
                    "scheme": "poisson",
                    "rate": "0.1",
                    "mechanism": {"type": "laplace", "scale": "1", "sensitivity": "1"},
                },
                "count": 1,
            }
        ],
        "Gaussian mechanism only",
    ),
    ("bad value", [{"mechanism": {"type": "pure_dp", "epsilon": "-1"}, "count": 1}], "epsilon"),
]


@pytest.mark.parametrize(("name", "workload", "message"), BAD_WORKLOADS)
def test_bad_workloads_are_refused(name: str, workload: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config("3", "0.000001", "add_remove", {"mode": "rdp", "workload": workload})


def test_workload_excludes_explicit_grids_and_checks_the_relation() -> None:
    with pytest.raises(ConfigError, match="not both"):
        make_config(
            "3",
            "0.000001",
            "add_remove",
            {"mode": "rdp", "orders": [2], "workload": [{"mechanism": CHUNK, "count": 1}]},
        )
    with pytest.raises(ConfigError, match="add_remove"):
        make_config(
            "3",
            "0.000001",
            "replace_one",
            {"mode": "rdp", "workload": [{"mechanism": CHUNK, "count": 1}]},
        )


def test_workload_that_cannot_fit_expects_nothing() -> None:
    config = make_config(
        "0.1",
        "0.000001",
        "add_remove",
        {
            "mode": "rdp",
            "workload": [{"mechanism": {"type": "pure_dp", "epsilon": "5"}, "count": 3}],
        },
    )
    assert isinstance(config, rdp.RDPConfig) and config.workload is not None
    assert config.workload.expected == (0,)
    d = admit(config, initial_state(config), parse_declaration({"type": "pure_dp", "epsilon": "5"}))
    assert not d.admitted
    assert not math.isnan(config.workload.order)
