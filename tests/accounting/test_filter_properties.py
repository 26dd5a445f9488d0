"""Property tests of every filter under random adaptive histories (hypothesis).

For each mode: whatever sequence of declarations, settlements and cancellations an adaptive
analyst sends, (1) the admitted history never exceeds the budget under the mode's own
guarantee, checked against an independent reference computation; (2) a rejection leaves the
state unchanged; (3) replaying the same history gives the same state; (4) the state survives
its JSON codec unchanged.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odometer_core.accounting import conversions as cv
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.declarations import Declaration, parse_declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    BasicConfig,
    BasicState,
    Decision,
    FilterState,
    GDPConfig,
    GDPState,
    InvalidTransition,
    RDPConfig,
    RDPState,
    Reservation,
    SplitConfig,
    SplitState,
    ZCDPConfig,
    ZCDPState,
    admit,
    cancel,
    initial_state,
    make_config,
    settle,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.modes import gdp as gdp_mode
from tests.accounting.ladder_only import ladder_only
from tests.accounting.rdp_weights import rdp_in_force

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

eps = st.sampled_from(["0.01", "0.05", "0.1", "0.2", "0.25", "0.3", "0.5", "1"])
small_delta = st.sampled_from(["0", "1e-8", "5e-8", "1e-7"])

pure = st.builds(lambda e: {"type": "pure_dp", "epsilon": e}, eps)
approx = st.builds(lambda e, d: {"type": "approx_dp", "epsilon": e, "delta": d}, eps, small_delta)
gauss = st.builds(
    lambda s: {"type": "gaussian", "sigma": s, "sensitivity": 1},
    st.sampled_from(["2", "3", "5", "8", "20"]),
)
lap = st.builds(lambda b: {"type": "laplace", "scale": b}, st.sampled_from(["2", "5", "10"]))
zc = st.builds(lambda r: {"type": "zcdp", "rho": r}, st.sampled_from(["0.001", "0.01", "0.05"]))
odp = st.builds(
    lambda a, b, d: {
        "type": "odp",
        "cells": [{"name": "lo", "epsilon": a}, {"name": "hi", "epsilon": b}],
        "delta": d,
    },
    st.sampled_from(["0", "0.05", "0.1"]),
    st.sampled_from(["0.2", "0.4"]),
    small_delta,
)
svt = st.builds(
    lambda c: {"type": "svt", "epsilon1": "0.1", "epsilon2": "0.3", "c": c}, st.integers(1, 4)
)
sgd = st.builds(
    lambda q, t: {"type": "dp_sgd", "noise_multiplier": "1.5", "sample_rate": q, "steps": t},
    st.sampled_from(["0.01", "0.05"]),
    st.sampled_from([10, 100, 1000]),
)
gdp_decl = st.builds(lambda m: {"type": "gdp", "mu": m}, st.sampled_from(["0.05", "0.1", "0.3"]))

Op = tuple[str, Any]


def ops(decls: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[Op]]:
    op = st.one_of(
        decls.map(lambda d: ("admit", d)),
        st.tuples(st.integers(0, 50), st.sampled_from(["lo", "hi", "tops=0", "tops=1"])).map(
            lambda t: ("settle", t)
        ),
        st.integers(0, 50).map(lambda i: ("cancel", i)),
    )
    return st.lists(op, min_size=1, max_size=40)


def run(
    cfg: AccountingConfig, history: list[Op]
) -> tuple[FilterState, list[tuple[Decision, Declaration | None]]]:
    """Drive the filter; return the final state and every decision taken."""
    state = initial_state(cfg)
    open_: list[Reservation] = []
    log: list[tuple[Decision, Declaration | None]] = []
    for kind, arg in history:
        if kind == "admit":
            decl = parse_declaration(arg)
            d = admit(cfg, state, decl)
            if d.outcome == "rejected":
                assert d.state is state  # (2) a rejection changes nothing
            if d.reservation is not None:
                open_.append(d.reservation)
            log.append((d, decl))
            state = d.state
        elif open_:
            idx = (arg[0] if kind == "settle" else arg) % len(open_)
            res = open_[idx]
            try:
                d = settle(cfg, state, res, arg[1]) if kind == "settle" else cancel(cfg, state, res)
            except InvalidTransition as exc:
                assert exc.code == "UnknownCell"
                continue
            open_.pop(idx)
            log.append((d, None))
            state = d.state
        assert state_from_json(cfg, state_to_json(state)) == state  # (4)
    return state, log


def test_replay_is_deterministic_smoke() -> None:
    cfg = make_config(1, "1e-6", "add_remove", None)
    hist: list[Op] = [("admit", {"type": "pure_dp", "epsilon": "0.1"})] * 3
    assert run(cfg, hist)[0] == run(cfg, hist)[0]


# ---------------------------------------------------------------------------- basic
@SETTINGS
@given(ops(st.one_of(pure, approx, odp, svt, lap)), st.sampled_from(["0.5", "1", "2"]))
def test_basic_never_overspends(history: list[Op], budget: str) -> None:
    cfg = make_config(budget, "3e-7", "add_remove", None)
    assert isinstance(cfg, BasicConfig)
    state, log = run(cfg, history)
    assert run(cfg, history)[0] == state  # (3) replay
    # reference model in exact rationals: realised ε of accepted + settled, worst case of open
    realised, worst_open, delta = Fraction(0), Fraction(0), Fraction(0)
    open_worst: dict[int, Fraction] = {}
    for d, _ in log:
        if d.outcome == "accepted" and d.refund is None:
            realised += Fraction(d.charge.to_json()["epsilon"])
            delta += Fraction(d.charge.to_json()["delta"])
        elif d.outcome == "reserved":
            worst_open += Fraction(d.charge.to_json()["epsilon"])
            delta += Fraction(d.charge.to_json()["delta"])
        elif d.refund is not None:  # settle or cancel
            worst_open -= Fraction(d.requested.to_json()["epsilon"])
            realised += Fraction(d.charge.to_json()["epsilon"])
            refund = amount_json(d.refund) or {}
            if d.charge.to_json()["epsilon"] == "0" and refund["delta"] != "0":
                delta -= Fraction(refund["delta"])
        # (1) at every point: Algorithm 1's invariant E + reserved ≤ ε_B, D ≤ δ_B
        assert realised + worst_open <= Fraction(budget)
        assert delta <= Fraction("3e-7")
    del open_worst
    assert isinstance(state, BasicState)
    assert Fraction(state.spent_epsilon) == realised
    assert Fraction(state.reserved_epsilon) == worst_open
    assert Fraction(state.spent_delta) == delta


# ---------------------------------------------------------------------------- zcdp
@SETTINGS
@given(ops(st.one_of(pure, approx, gauss, zc, odp, lap)), st.sampled_from(["0.5", "1", "3"]))
def test_zcdp_never_overspends(history: list[Op], budget: str) -> None:
    cfg = make_config(
        budget, "1e-6", "add_remove", {"mode": "zcdp", "final_conversion_delta": "8e-7"}
    )
    assert isinstance(cfg, ZCDPConfig)
    state, log = run(cfg, history)
    assert run(cfg, history)[0] == state
    rho = sum(
        (Fraction(d.charge.to_json()["rho"]) for d, _ in log if d.outcome == "accepted"),
        Fraction(0),
    )
    dlt = sum(
        (Fraction(d.charge.to_json()["delta"]) for d, _ in log if d.outcome == "accepted"),
        Fraction(0),
    )
    assert isinstance(state, ZCDPState)
    assert Fraction(state.rho) == rho and Fraction(state.delta) == dlt
    assert rho <= Fraction(cfg.rho_budget) and dlt <= Fraction("2e-7")
    # the guarantee: a ρ-zCDP transcript is (ε_B, δ_c)-DP by CKS Cor. 13
    if rho > 0:
        assert cv.zcdp_delta(float(rho), float(budget)) <= 8e-7


# ---------------------------------------------------------------------------- rdp
@SETTINGS
@given(ops(st.one_of(pure, approx, gauss, zc, sgd, lap, odp)), st.sampled_from(["1", "3", "8"]))
def test_rdp_never_overspends(history: list[Op], budget: str) -> None:
    cfg = make_config(
        budget, "1e-5", "add_remove", {"mode": "rdp", "final_conversion_delta": "9e-6"}
    )
    assert isinstance(cfg, RDPConfig)
    cfg = ladder_only(cfg)  # the filter's ladder alone (the PLD branch: test_statements.py)
    state, log = run(cfg, history)
    assert run(cfg, history)[0] == state
    assert isinstance(state, RDPState)
    # the weights and thresholds in force: chosen by the first declaration admitted
    # (accounting 1.5.0), computed independently of the implementation
    thresholds, weights, _ = rdp_in_force(cfg, state.first)  # level 1: the filter
    orders = np.asarray(cfg.orders)
    total = np.zeros_like(orders)
    for d, _ in log:
        if d.outcome == "accepted":
            total = total + np.array([float(x) for x in d.charge.to_json()["rdp"]])
            live = total <= np.asarray(thresholds) * (1 + 1e-9)
            assert live.any()  # some order never crossed its threshold
    assert np.all(np.asarray(state.rdp) >= total * (1 - 1e-12))
    # the guarantee: at a live order, CKS δ(ε_B) ≤ w_α δ_c (Canonne–Kamath–Steinke 2020, Prop. 12)
    live_idx = [i for i, dead in enumerate(state.dead) if not dead]
    assert live_idx
    if total.any():
        i = live_idx[0]
        delta, _ = cv.rdp_to_delta([orders[i]], [state.rdp[i]], float(budget))
        assert delta <= weights[i] * 9e-6 * (1 + 1e-9)
    assert Fraction(state.delta) <= Fraction("1e-6")


# ---------------------------------------------------------------------------- gdp
@SETTINGS
@given(ops(st.one_of(gdp_decl, gauss)), st.sampled_from(["0.5", "1", "2"]))
def test_gdp_never_overspends(history: list[Op], budget: str) -> None:
    cfg = make_config(budget, "1e-6", "add_remove", {"mode": "gdp"})
    assert isinstance(cfg, GDPConfig)
    state, log = run(cfg, history)
    assert run(cfg, history)[0] == state
    m2 = sum(
        (Fraction(d.charge.to_json()["mu_squared"]) for d, _ in log if d.outcome == "accepted"),
        Fraction(0),
    )
    assert isinstance(state, GDPState) and Fraction(state.mu_squared) == m2
    # the budget of the filter in force: from accounting 1.9.0 the one the first declaration
    # shaped, whose level 1 may hold more of δ than the creation shape's (up to 0.9 against 0.6)
    assert m2 <= Fraction(gdp_mode.in_force(cfg, state).mu_squared_budget)
    if m2 > 0:
        assert cv.gdp_delta(math.sqrt(float(m2)), float(budget)) <= 1e-6 * (1 + 1e-9)


def test_reference_model_detects_a_broken_filter() -> None:
    """The basic invariant check above can fail: a filter that ignores reservations overspends."""
    cfg = make_config("0.5", 0, "add_remove", None)
    assert isinstance(cfg, BasicConfig)
    odp_decl = parse_declaration(
        {
            "type": "odp",
            "cells": [{"name": "lo", "epsilon": "0.1"}, {"name": "hi", "epsilon": "0.4"}],
        }
    )
    st0 = initial_state(cfg)
    d1 = admit(cfg, st0, odp_decl)
    broken_state = BasicState()  # "forgets" the reservation
    d2 = admit(cfg, broken_state, odp_decl)
    assert Fraction(d1.charge.to_json()["epsilon"]) + Fraction(
        d2.charge.to_json()["epsilon"]
    ) > Fraction("0.5")
    assert admit(cfg, d1.state, odp_decl).outcome == "rejected"
    assert Decimal(d1.remaining.to_json()["epsilon"]) == Decimal("0.1")


# ---------------------------------------------------------------------------- split
SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {
            "name": "odp",
            "budget": {"epsilon": "1", "delta": "2e-7"},
            "accounting": {"mode": "basic"},
        },
        {"name": "z", "budget": {"epsilon": "1", "delta": "5e-7"}, "accounting": {"mode": "zcdp"}},
        {"name": "r", "budget": {"epsilon": "1", "delta": "3e-7"}, "accounting": {"mode": "rdp"}},
    ],
}


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["odp", "z", "r"]), st.one_of(pure, odp, gauss)).map(
                lambda t: ("admit", t)
            ),
            st.tuples(st.integers(0, 50), st.sampled_from(["lo", "hi"])).map(
                lambda t: ("settle", t)
            ),
            st.integers(0, 50).map(lambda i: ("cancel", i)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_split_sub_budgets_never_overspend(history: list[Op]) -> None:
    """Each sub-budget is its own filter; the dataset guarantee is the concurrent basic
    composition of the sub-budget targets, which the configuration bounds by (ε_B, δ_B)."""
    cfg = make_config(3, "1e-6", "add_remove", SPLIT)
    assert isinstance(cfg, SplitConfig)
    state = initial_state(cfg)
    open_: list[Reservation] = []
    for kind, arg in history:
        if kind == "admit":
            ledger, payload = arg
            decl = parse_declaration(payload)
            d = admit(cfg, state, decl, sub_budget=ledger)
            if d.outcome == "rejected":
                assert d.state is state
            if d.reservation is not None:
                assert d.reservation.sub_budget == ledger == "odp"
                open_.append(d.reservation)
            state = d.state
        elif open_:
            idx = (arg[0] if kind == "settle" else arg) % len(open_)
            res = open_.pop(idx)
            state = (
                settle(cfg, state, res, arg[1]) if kind == "settle" else cancel(cfg, state, res)
            ).state
        assert isinstance(state, SplitState)
        assert state_from_json(cfg, state_to_json(state)) == state
        b = state.get("odp")
        assert isinstance(b, BasicState)
        assert b.spent_epsilon + b.reserved_epsilon <= 1 and b.spent_delta <= Decimal("2e-7")
        z = state.get("z")
        z_cfg = cfg.sub_budget("z")
        assert isinstance(z, ZCDPState) and isinstance(z_cfg, ZCDPConfig)
        assert z.rho <= z_cfg.rho_budget
        r = state.get("r")
        r_cfg = cfg.sub_budget("r")
        assert isinstance(r, RDPState) and isinstance(r_cfg, RDPConfig)
        r_thresholds, _, _ = rdp_in_force(r_cfg, r.first)  # the weights the first one chose
        # some order holds its total within its threshold, or (accounting 1.6.0) the PLD
        # branch's Σε_i is within the sub-budget's ε (the ladder's thresholds are then lower)
        assert any(s <= t * (1 + 1e-9) for s, t in zip(r.rdp, r_thresholds, strict=True)) or (
            r_cfg.branch is not None and not r.pld.off and r.pld.epsilon <= r_cfg.epsilon
        )
    total_eps = sum(Decimal(c.epsilon) for _, c in cfg.sub_budgets)
    total_delta = sum(Decimal(c.delta) for _, c in cfg.sub_budgets)
    assert total_eps <= cfg.epsilon and total_delta <= cfg.delta
