"""Filters per mode: exact admission decisions."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from odometer_core.accounting import conversions as cv
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.declarations import DeclarationError, parse_declaration
from odometer_core.accounting.filters import (
    BasicState,
    InvalidTransition,
    RDPConfig,
    ZCDPConfig,
    admit,
    cancel,
    change_budget,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    settle,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.modes.common import UnsupportedInMode

PURE_01 = parse_declaration({"type": "pure_dp", "epsilon": "0.1"})
ODP = parse_declaration(
    {
        "type": "odp",
        "cells": [{"name": "none", "epsilon": "0.2"}, {"name": "some", "epsilon": "0.5"}],
        "delta": "1e-7",
    }
)


# ---------------------------------------------------------------------------- basic
def test_basic_ten_tenths_then_reject() -> None:
    cfg = make_config("1", "1e-6", "add_remove", {"mode": "basic"})
    st = initial_state(cfg)
    for _ in range(10):
        d = admit(cfg, st, PURE_01)
        assert d.outcome == "accepted"
        st = d.state
    assert isinstance(st, BasicState) and st.spent_epsilon == Decimal(1)
    d = admit(cfg, st, PURE_01)
    assert d.outcome == "rejected"
    assert d.state is st
    assert d.requested.to_json() == {"epsilon": "0.1", "delta": "0"}
    assert d.remaining.to_json() == {"epsilon": "0", "delta": "0.000001"}


def test_basic_odp_reserve_settle_refunds_epsilon_not_delta() -> None:
    cfg = make_config(1, "1e-6", "add_remove", None)
    d = admit(cfg, initial_state(cfg), ODP)
    assert d.outcome == "reserved" and d.reservation is not None
    st = d.state
    assert isinstance(st, BasicState)
    assert (st.spent_epsilon, st.reserved_epsilon, st.spent_delta) == (
        0,
        Decimal("0.5"),
        Decimal("1e-7"),
    )
    s = settle(cfg, st, d.reservation, "none")
    assert amount_json(s.refund) == {"epsilon": "0.3", "delta": "0"}
    assert s.charge.to_json() == {"epsilon": "0.2", "delta": "0"}
    final = s.state
    assert isinstance(final, BasicState)
    assert (final.spent_epsilon, final.reserved_epsilon, final.spent_delta) == (
        Decimal("0.2"),
        0,
        Decimal("1e-7"),
    )
    assert s.remaining.to_json() == {"epsilon": "0.8", "delta": "0.0000009"}


def test_basic_reservation_blocks_budget_at_worst_case_and_cancel_returns_all() -> None:
    cfg = make_config("0.6", "1e-6", "add_remove", None)
    d = admit(cfg, initial_state(cfg), ODP)
    st = d.state
    # worst case 0.5 is reserved: a 0.2 invocation no longer fits
    assert (
        admit(cfg, st, parse_declaration({"type": "pure_dp", "epsilon": "0.2"})).outcome
        == "rejected"
    )
    assert d.reservation is not None
    c = cancel(cfg, st, d.reservation)
    assert amount_json(c.refund) == {"epsilon": "0.5", "delta": "0.0000001"}
    assert c.state == initial_state(cfg)


def test_basic_unknown_cell_is_refused() -> None:
    cfg = make_config(1, "1e-6", "add_remove", None)
    d = admit(cfg, initial_state(cfg), ODP)
    assert d.reservation is not None
    with pytest.raises(InvalidTransition) as exc:
        settle(cfg, d.state, d.reservation, "other")
    assert exc.value.code == "UnknownCell"


def test_basic_svt_settlement_saves_budget() -> None:
    cfg = make_config(3, 0, "add_remove", None)
    svt = parse_declaration({"type": "svt", "epsilon1": "0.5", "epsilon2": "1", "c": 4})
    d = admit(cfg, initial_state(cfg), svt)
    assert d.requested.to_json() == {"epsilon": "1.5", "delta": "0"}
    assert d.reservation is not None
    s = settle(cfg, d.state, d.reservation, "tops=1")
    assert s.charge.to_json()["epsilon"] == "0.75"
    assert amount_json(s.refund) == {"epsilon": "0.75", "delta": "0"}


def test_basic_delta_budget_is_separate() -> None:
    cfg = make_config(10, "1e-6", "add_remove", None)
    approx = parse_declaration({"type": "approx_dp", "epsilon": "0.1", "delta": "4e-7"})
    st = initial_state(cfg)
    st = admit(cfg, st, approx).state
    st = admit(cfg, st, approx).state
    d = admit(cfg, st, approx)
    assert d.outcome == "rejected" and d.reason == "delta budget exceeded"


def test_basic_gaussian_uses_analytic_gaussian_at_conversion_delta() -> None:
    cfg = make_config(10, "1e-5", "add_remove", {"mode": "basic", "conversion_delta": "1e-6"})
    g = parse_declaration({"type": "gaussian", "sigma": "4.530877117", "sensitivity": 1})
    d = admit(cfg, initial_state(cfg), g)
    eps = Decimal(d.charge.to_json()["epsilon"])
    # Balle–Wang analytic Gaussian is tighter than the RDP figure 1.0000003 (reference #3)
    assert Decimal("0.92") < eps < Decimal("0.93")
    assert d.charge.to_json()["delta"] == "0.000001"
    assert cv.analytic_gaussian_delta(4.530877117, 1.0, float(eps)) <= 1e-6


def test_basic_infinite_cost_is_never_admitted() -> None:
    cfg = make_config(1e6, "0.5", "add_remove", None)
    d = admit(cfg, initial_state(cfg), parse_declaration({"type": "gaussian", "sigma": 0}))
    assert d.outcome == "rejected"
    assert d.requested.to_json()["epsilon"] == "Infinity"


def test_basic_zero_delta_budget_rejects_curve_kinds() -> None:
    cfg = make_config(5, 0, "add_remove", None)
    d = admit(cfg, initial_state(cfg), parse_declaration({"type": "zcdp", "rho": "0.01"}))
    assert d.outcome == "rejected" and d.requested.to_json()["epsilon"] == "Infinity"


def test_relation_mismatch_names_both() -> None:
    cfg = make_config(5, "1e-5", "replace_one", None)
    sub = parse_declaration(
        {
            "type": "subsampled",
            "scheme": "poisson",
            "rate": 0.1,
            "mechanism": {"type": "pure_dp", "epsilon": 1},
        }
    )
    with pytest.raises(DeclarationError, match=r"add_remove.*replace_one"):
        admit(cfg, initial_state(cfg), sub)


def test_poisson_subsampled_pure_dp_amplifies() -> None:
    cfg = make_config(5, "1e-5", "add_remove", None)
    sub = parse_declaration(
        {
            "type": "subsampled",
            "scheme": "poisson",
            "rate": "0.01",
            "mechanism": {"type": "pure_dp", "epsilon": 1},
        }
    )
    d = admit(cfg, initial_state(cfg), sub)
    expected = math.log1p(0.01 * math.expm1(1.0))
    eps = Decimal(d.charge.to_json()["epsilon"])
    assert Decimal(expected) <= eps <= Decimal(expected) * (1 + Decimal("1e-12"))


def test_dp_sgd_charge_in_basic_is_pld_upper_bound() -> None:
    cfg = make_config(10, "1e-4", "add_remove", None)
    sgd = parse_declaration(
        {
            "type": "dp_sgd",
            "noise_multiplier": "1.1",
            "sample_rate": "0.01",
            "steps": 10000,
            "delta": "1e-5",
        }
    )
    d = admit(cfg, initial_state(cfg), sgd)
    eps = Decimal(d.charge.to_json()["epsilon"])
    assert Decimal("5.192620") <= eps <= Decimal("5.192620") * Decimal("1.005")
    assert d.charge.to_json()["delta"] == "0.00001"


@pytest.mark.parametrize(
    ("payload", "owed"),
    [
        (  # nested composition: 10 × δ = 1e-3 inside
            {
                "type": "composed",
                "mechanisms": [
                    {
                        "type": "composed",
                        "count": 10,
                        "mechanism": {"type": "approx_dp", "epsilon": "0.5", "delta": "1e-3"},
                    },
                    {"type": "gaussian", "sigma": 5},
                ],
            },
            Decimal("0.01"),
        ),
        (  # amplified δ of a subsampled (ε, δ) item: q·δ = 5e-4
            {
                "type": "composed",
                "mechanisms": [
                    {
                        "type": "subsampled",
                        "scheme": "poisson",
                        "rate": "0.5",
                        "mechanism": {"type": "approx_dp", "epsilon": "0.5", "delta": "1e-3"},
                    },
                    {"type": "gaussian", "sigma": 5},
                ],
            },
            Decimal("0.0005"),
        ),
    ],
)
def test_basic_composed_charges_every_delta_it_owes(
    payload: dict[str, object], owed: Decimal
) -> None:
    """Regression: a composed invocation once charged only the top-level items' δ plus the
    conversion δ (1e-9 here), dropping δ owed by nested or subsampled items."""
    cfg = make_config(50, "0.5", "add_remove", {"mode": "basic", "conversion_delta": "1e-9"})
    d = admit(cfg, initial_state(cfg), parse_declaration(payload))
    assert Decimal(d.charge.to_json()["delta"]) >= owed


# ---------------------------------------------------------------------------- zcdp
def test_zcdp_tight_conversion_admits_five_gaussians_where_loose_admits_four() -> None:
    cfg = make_config(2, "1e-7", "add_remove", {"mode": "zcdp"})
    assert isinstance(cfg, ZCDPConfig)
    g = parse_declaration({"type": "gaussian", "sigma": 6, "sensitivity": 1})  # ρ = 1/72
    st = initial_state(cfg)
    admitted = 0
    while True:
        d = admit(cfg, st, g)
        if d.outcome == "rejected":
            break
        admitted += 1
        st = d.state
    assert admitted == 5
    # the loose bound ρ + 2√(ρ log 1/δ) ≤ ε_B would admit only 4
    lo, hi = 0.0, 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cv.simple_zcdp_epsilon(mid, 1e-7) <= 2 else (lo, mid)
    assert math.floor(lo * 72) == 4
    # and the filter's own guarantee holds: CKS δ(ε_B) of ρ_B is ≤ δ_c
    assert cv.zcdp_delta(float(cfg.rho_budget), 2.0) <= 1e-7


def test_zcdp_pure_dp_charged_tanh() -> None:
    cfg = make_config(2, "1e-6", "add_remove", {"mode": "zcdp"})
    d = admit(cfg, initial_state(cfg), PURE_01)
    rho = Decimal(d.charge.to_json()["rho"])
    exact = 0.1 * math.tanh(0.05)
    assert Decimal(exact) <= rho < Decimal(exact) * (1 + Decimal("1e-13"))
    assert rho < Decimal("0.005")  # strictly better than ε²/2


def test_zcdp_approx_dp_uses_eps_squared_over_two_and_delta_approx() -> None:
    cfg = make_config(2, "2e-6", "add_remove", {"mode": "zcdp", "final_conversion_delta": "1e-6"})
    assert isinstance(cfg, ZCDPConfig) and cfg.delta_approx == Decimal("1e-6")
    d = admit(
        cfg,
        initial_state(cfg),
        parse_declaration({"type": "approx_dp", "epsilon": "0.2", "delta": "5e-7"}),
    )
    assert d.charge.to_json() == {"rho": "0.02", "delta": "0.0000005"}


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "rdp", "orders": [2, 4], "values": [0.1, 0.2]},
        {
            "type": "subsampled",
            "scheme": "poisson",
            "rate": 0.01,
            "mechanism": {"type": "gaussian", "sigma": 1},
        },
        {"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": 0.01, "steps": 10},
    ],
)
def test_zcdp_rejects_uncertified_kinds_suggesting_rdp(payload: dict[str, object]) -> None:
    cfg = make_config(2, "1e-6", "add_remove", {"mode": "zcdp"})
    with pytest.raises(UnsupportedInMode, match="'rdp'"):
        admit(cfg, initial_state(cfg), parse_declaration(payload))


def test_zcdp_odp_is_charged_worst_case_without_reservation() -> None:
    cfg = make_config(5, "1e-6", "add_remove", {"mode": "zcdp", "final_conversion_delta": "5e-7"})
    d = admit(cfg, initial_state(cfg), ODP)
    assert d.outcome == "accepted" and d.reservation is None
    assert d.charge.to_json() == {"rho": "0.125", "delta": "0.0000001"}  # (0.5²/2, δ)


# ---------------------------------------------------------------------------- rdp
def test_rdp_thresholds_follow_the_formula() -> None:
    cfg = make_config(3, "1e-6", "add_remove", {"mode": "rdp", "orders": [8]})
    assert isinstance(cfg, RDPConfig)
    # the formula at the filter's share of δ_c (0.9: its ladder holds the rest, docs/accounting.md)
    b = 3 + (math.log(0.9e-6) + math.log(7) - 8 * math.log(1 - 1 / 8)) / 7
    assert cfg.thresholds[0] <= b
    assert cfg.thresholds[0] >= b - 1e-11
    # single order = Feldman–Zrnic: the threshold converts back to exactly (ε_B, δ_c)
    delta, _ = cv.rdp_to_delta([8.0], [cfg.thresholds[0]], 3.0)
    assert delta <= 1e-6


def test_rdp_drops_orders_without_budget() -> None:
    # at ε = 0.3 the small orders' thresholds are ≤ 0; a budget where every order's is (ε = 0.1
    # here before) could never admit anything and is refused (test_unusable_budgets.py)
    cfg = make_config("0.3", "1e-6", "add_remove", {"mode": "rdp"})
    assert isinstance(cfg, RDPConfig)
    st = initial_state(cfg)
    assert all(dead == (b == -math.inf) for dead, b in zip(st.dead, cfg.thresholds, strict=True))  # type: ignore[union-attr]
    assert any(b == -math.inf for b in cfg.thresholds)
    assert any(b > 0 for b in cfg.thresholds)


def test_rdp_dp_sgd_admitted_and_matches_mtz() -> None:
    cfg = make_config(8, "1e-5", "add_remove", {"mode": "rdp"})
    sgd = parse_declaration(
        {"type": "dp_sgd", "noise_multiplier": "1.1", "sample_rate": "0.01", "steps": 10000}
    )
    d = admit(cfg, initial_state(cfg), sgd)
    assert d.outcome == "accepted"
    assert isinstance(cfg, RDPConfig)
    import numpy as np

    from odometer_core.accounting.subsampling import poisson_gaussian_rdp

    ref = poisson_gaussian_rdp(0.01, 1.1, np.asarray(cfg.orders)) * 10000
    got = np.array([float(x) for x in d.charge.to_json()["rdp"]])
    assert np.all(got >= ref) and np.allclose(got, ref, rtol=1e-12)
    # a second identical run does not fit the ε_B = 8 budget
    assert admit(cfg, d.state, sgd).outcome == "rejected"


def test_rdp_user_curve_uses_next_supplied_order() -> None:
    cfg = make_config(20, "1e-6", "add_remove", {"mode": "rdp", "orders": [2, 3, 10]})
    curve = parse_declaration({"type": "rdp", "orders": [2.5, 4], "values": [0.1, 0.3]})
    d = admit(cfg, initial_state(cfg), curve)
    vals = [float(x) for x in d.charge.to_json()["rdp"]]
    assert vals[0] == pytest.approx(0.1) and vals[0] >= 0.1
    assert vals[1] == pytest.approx(0.3) and vals[1] >= 0.3
    assert vals[2] == math.inf
    assert d.outcome == "accepted"


def test_rdp_order_dies_for_good() -> None:
    cfg = make_config(20, "1e-6", "add_remove", {"mode": "rdp", "orders": [2, 32]})
    assert isinstance(cfg, RDPConfig)
    # a curve that is cheap at α=2 only: infinite at 32 kills that order immediately
    curve = parse_declaration({"type": "rdp", "orders": [2], "values": [0.01]})
    d = admit(cfg, initial_state(cfg), curve)
    assert d.outcome == "accepted"
    assert d.state.dead == (False, True)


# ---------------------------------------------------------------------------- gdp
def test_gdp_filter() -> None:
    cfg = make_config(1, "1e-6", "add_remove", {"mode": "gdp"})
    budget = cfg.mu_squared_budget  # type: ignore[union-attr]
    mu_b = math.sqrt(float(budget))
    # μ_B at the filter's share of δ_B (0.6 since accounting 1.7.0, 0.9 before: its ladder
    # holds the rest, docs/accounting.md)
    assert cv.gdp_delta(mu_b, 1.0) <= 0.6e-6
    assert cv.gdp_delta(mu_b * 1.001, 1.0) > 0.6e-6
    g = parse_declaration({"type": "gdp", "mu": "0.1"})
    st = initial_state(cfg)
    n = 0
    while (d := admit(cfg, st, g)).outcome == "accepted":
        st, n = d.state, n + 1
    assert n == math.floor(float(budget) / 0.01 + 1e-12)
    with pytest.raises(UnsupportedInMode):
        admit(cfg, st, PURE_01)


# ---------------------------------------------------------------------------- split
def test_split_sub_budgets_are_independent_and_bounded() -> None:
    cfg = make_config(
        3,
        "1e-5",
        "add_remove",
        {
            "mode": "split",
            "sub_budgets": [
                {
                    "name": "odp",
                    "budget": {"epsilon": 1, "delta": 0},
                    "accounting": {"mode": "basic"},
                },
                {
                    "name": "ml",
                    "budget": {"epsilon": 2, "delta": "1e-5"},
                    "accounting": {"mode": "rdp"},
                },
            ],
        },
    )
    st = initial_state(cfg)
    d = admit(cfg, st, ODP.__class__(ODP.cells, Decimal(0)), sub_budget="odp")  # type: ignore[attr-defined, call-arg]
    assert d.outcome == "reserved" and d.reservation is not None
    assert d.reservation.sub_budget == "odp"
    s = settle(cfg, d.state, d.reservation, "none")
    assert amount_json(s.refund) == {"epsilon": "0.3", "delta": "0"}
    with pytest.raises(DeclarationError, match="sub_budget"):
        admit(cfg, st, PURE_01)
    with pytest.raises(Exception, match="sum to"):
        make_config(
            1,
            0,
            "add_remove",
            {
                "mode": "split",
                "sub_budgets": [
                    {"name": "a", "budget": {"epsilon": 1, "delta": 0}},
                    {"name": "b", "budget": {"epsilon": "0.1", "delta": 0}},
                ],
            },
        )


# ---------------------------------------------------------------------------- budgets
def test_budget_change_never_below_spent() -> None:
    cfg = make_config(1, 0, "add_remove", None)
    st = initial_state(cfg)
    for _ in range(5):
        st = admit(cfg, st, PURE_01).state
    new_cfg, _ = change_budget(cfg, st, "0.5", 0)
    assert new_cfg.epsilon == Decimal("0.5")
    assert admit(new_cfg, st, PURE_01).outcome == "rejected"
    with pytest.raises(InvalidTransition) as exc:
        change_budget(cfg, st, "0.4", 0)
    assert exc.value.code == "BudgetBelowSpent"
    raised, _ = change_budget(cfg, st, 2, 0)
    assert admit(raised, st, PURE_01).outcome == "accepted"


# ---------------------------------------------------------------------------- codecs, status
@pytest.mark.parametrize(
    "accounting",
    [
        {"mode": "basic"},
        {"mode": "zcdp"},
        {"mode": "rdp"},
        {"mode": "gdp"},
        {
            "mode": "split",
            "sub_budgets": [
                {
                    "name": "a",
                    "budget": {"epsilon": 1, "delta": "5e-7"},
                    "accounting": {"mode": "zcdp"},
                },
                {
                    "name": "b",
                    "budget": {"epsilon": 1, "delta": "5e-7"},
                    "accounting": {"mode": "basic"},
                },
            ],
        },
    ],
)
def test_config_and_state_json_are_lossless(accounting: dict[str, object]) -> None:
    cfg = make_config(2, "1e-6", "add_remove", accounting)
    assert config_from_json(config_to_json(cfg)) == cfg
    decl = parse_declaration({"type": "gaussian", "sigma": 5})
    ledger = "a" if accounting["mode"] == "split" else None
    st = admit(cfg, initial_state(cfg), decl, sub_budget=ledger).state
    assert state_from_json(cfg, state_to_json(st)) == st
    s = status(cfg, st)
    assert s["mode"] == accounting["mode"]
