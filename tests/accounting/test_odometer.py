"""Certified odometer readings (docs/accounting.md, *Certified odometer readings*).

Two kinds of checks:

- property tests (hypothesis): an analyst picks each declaration from the outcomes so far
  (admitted or refused, and a released output bit) and stops by a rule of its own (when the
  reading crosses a threshold drawn in advance, or when an output says so). At every step — any
  step may be the stopping time — the reading is certified, never exceeds the filter's target
  (ε_B, δ_B), and is never below an independent reference: the exact sums in ``basic``; in the
  curve modes the (ε, δ) of a *non-adaptive* Gaussian mechanism with the same total ρ (or μ),
  whose exact privacy profile (Balle–Wang 2018, Thm 8) any sound reading must cover, because
  that mechanism satisfies every guarantee the history's total certifies; and the mode's own
  non-adaptive conversion (``spent_eps_delta``): adaptivity costs, so the odometer is never
  below it. (The simpler ρ + 2√(ρ log(1/δ)) of Bun–Steinke 2016 is an *upper* bound on the
  CKS conversion, so it cannot serve as a lower reference.)
- reference vectors on fixed histories: the reading's level, δ share and ε recomputed here from
  the documented formulas with independent code (scipy's minimiser for Canonne–Kamath–Steinke
  2020 Cor. 13, the single-order Prop. 12 formula, the Dong–Roth–Su 2019 Cor. 2.13 profile),
  and pinned as exact decimal text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from odometer_core.accounting import odometer as odo
from odometer_core.accounting.declarations import parse_declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    FilterState,
    RDPConfig,
    ZCDPConfig,
    admit,
    cancel,
    initial_state,
    make_config,
    settle,
    status,
)
from odometer_core.accounting.modes.gdp import GDPConfig
from tests.accounting.ladder_only import ladder_1_4, ladder_only

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------- references
def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_delta(mu: float, eps: float) -> float:
    """δ(ε) of the Gaussian mechanism with sensitivity/σ = μ: exact (Balle–Wang 2018, Thm 8;
    equivalently the μ-GDP profile of Dong–Roth–Su 2019, Cor. 2.13)."""
    return _phi(-eps / mu + mu / 2) - math.exp(eps) * _phi(-eps / mu - mu / 2)


def gaussian_epsilon_floor(mu: float, delta: float) -> float:
    """A lower bound on the smallest ε at which the μ-Gaussian is (ε, δ)-DP (bisection, keeping
    the end where δ(ε) is still above δ, less a relative margin for the float error)."""
    if mu == 0 or gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while gaussian_delta(mu, hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if gaussian_delta(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo * (1 - 1e-9)


def cks_zcdp_epsilon(rho: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020, Cor. 13, minimised over α by scipy (independent code)."""

    def objective(alpha: float) -> float:
        return alpha * rho + (
            math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha) - math.log(alpha)
        ) / (alpha - 1)

    best = minimize_scalar(objective, bounds=(1.000001, 1e5), method="bounded")
    return float(best.fun)


def cks_rdp_epsilon(alpha: float, tau: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020, Prop. 12 at one order."""
    return tau + math.log((alpha - 1) / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)


def level(top: float, k: int) -> float:
    """The documented ladder: c_k = top · 2^(−(k−1)/4)."""
    return top * math.pow(2.0, -(k - 1) / 4)


def share(pool: float, k: int) -> float:
    """The documented δ share of a ladder stored before accounting 1.4.0: pool · 6/(π² k²)."""
    return pool * 6 / (math.pi**2 * k * k)


def anchored_share(pool: float, k: int) -> float:
    """The documented δ share of a ladder fixed at creation (1.4.0): 0.9 of the pool at level 1
    (the filter), 0.08 · 6/(π²(k−1)²) below it, 0.02 · 6/(π²k²) above it (k ≤ −1)."""
    if k == 1:
        return 0.9 * pool
    if k >= 2:
        return 0.08 * pool * 6 / (math.pi**2 * (k - 1) ** 2)
    return 0.02 * pool * 6 / (math.pi**2 * k * k)


def _at_order(alpha: float, weight: float, c: float, k: int) -> float:
    return cks_rdp_epsilon(alpha, c, anchored_share(1e-6 * weight, k))


def smallest_reading(
    top: float, spent: float, epsilon_b: float, convert: Callable[[float, int], float]
) -> tuple[float, int]:
    """Independently: the smallest ε over the levels k ≥ 1 of an anchored ladder that hold
    ``spent`` (level 1 reads the creation target ε_B; ``convert(c_k, k)`` the others)."""
    best = (epsilon_b, 1)
    k = 2
    while level(top, k) >= spent * (1 + 1e-12) and k <= 80:
        best = min(best, (convert(level(top, k), k), k))
        k += 1
    return best


def reading(config: AccountingConfig, state: FilterState) -> dict[str, Any]:
    out: dict[str, Any] = status(config, state)["odometer"]
    return out


def check_common(config: AccountingConfig, state: FilterState) -> dict[str, Any]:
    """What every reading satisfies: certified, and within the filter's target."""
    r = reading(config, state)
    assert r["certified"] is True
    assert Decimal(r["epsilon"]) <= config.epsilon
    assert Decimal(r["delta"]) <= config.delta
    assert Decimal(r["epsilon"]) >= 0 and Decimal(r["delta"]) >= 0
    return r


# ---------------------------------------------------------------------------- the analyst
small_eps = ["0.01", "0.05", "0.1", "0.2"]
large_eps = ["0.25", "0.3", "0.5"]
sigmas = ["2", "3", "5", "8", "20"]


def _next_choice(data: st.DataObject, last_admitted: bool, released: bool) -> str:
    """An adaptive choice of size: after a refusal ask for less, after a released 1 for more."""
    if not last_admitted:
        return data.draw(st.sampled_from(small_eps))
    return data.draw(st.sampled_from(large_eps if released else small_eps + large_eps))


def _stop(data: st.DataObject, r: dict[str, Any], threshold: Decimal, released: bool) -> bool:
    """The analyst's stopping rule: the reading crossed a threshold chosen in advance, or an
    output told it to stop."""
    return Decimal(r["epsilon"]) > threshold or (released and data.draw(st.booleans()))


# ---------------------------------------------------------------------------- basic
@SETTINGS
@given(data=st.data())
def test_basic_reading_is_the_exact_running_sum(data: st.DataObject) -> None:
    config = make_config(
        data.draw(st.sampled_from(["0.5", "1", "2"])),
        data.draw(st.sampled_from(["0", "1e-6"])),
        "add_remove",
        {"mode": "basic"},
    )
    state = initial_state(config)
    threshold = Decimal(data.draw(st.sampled_from(["0.3", "0.8", "5"])))
    ref_eps, ref_delta = Fraction(0), Fraction(0)
    admitted, released = True, False
    for _ in range(data.draw(st.integers(1, 20))):
        e = _next_choice(data, admitted, released)
        kind = data.draw(st.sampled_from(["pure", "approx", "odp"]))
        if kind == "pure":
            decl: dict[str, Any] = {"type": "pure_dp", "epsilon": e}
        elif kind == "approx":
            decl = {"type": "approx_dp", "epsilon": e, "delta": "1e-7"}
        else:
            cells = [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": e}]
            decl = {"type": "odp", "cells": cells, "delta": "1e-8"}
        decision = admit(config, state, parse_declaration(decl))
        admitted = decision.admitted
        if admitted:
            state = decision.state
            ref_eps += Fraction(e)
            ref_delta += Fraction(decl.get("delta", "0"))
        released = data.draw(st.booleans())
        if decision.reservation is not None:
            # the output decides: settle to the cell it fell in, or the mechanism never ran
            end = data.draw(st.sampled_from(["low", "high", "cancel"]))
            if end == "cancel":
                state = cancel(config, state, decision.reservation).state
                ref_eps -= Fraction(e)
                ref_delta -= Fraction("1e-8")
            else:
                state = settle(config, state, decision.reservation, end).state
                ref_eps -= Fraction(e) - Fraction("0.01" if end == "low" else e)
        r = check_common(config, state)
        assert r["source"] == "basic" and r["level"] is None
        assert Fraction(Decimal(r["epsilon"])) == ref_eps
        assert Fraction(Decimal(r["delta"])) == ref_delta
        if _stop(data, r, threshold, released):
            break


# ---------------------------------------------------------------------------- zcdp / rdp / gdp
def _curve_decl(data: st.DataObject, mode: str, admitted: bool) -> tuple[dict[str, Any], Fraction]:
    """A declaration of the curve modes with its exact ρ (μ² in ``gdp``): Gaussians, and zCDP
    (ρ) or GDP (μ) declarations of a size chosen from the last outcome."""
    if data.draw(st.booleans()):
        sigma = data.draw(st.sampled_from(sigmas if admitted else sigmas[2:]))
        ratio2 = 1 / Fraction(sigma) ** 2
        decl: dict[str, Any] = {"type": "gaussian", "sigma": sigma, "sensitivity": 1}
        return decl, (ratio2 if mode == "gdp" else ratio2 / 2)
    size = data.draw(st.sampled_from(["0.001", "0.005", "0.02"] if admitted else ["0.001"]))
    if mode == "gdp":
        return {"type": "gdp", "mu": size}, Fraction(size) ** 2
    return {"type": "zcdp", "rho": size}, Fraction(size)


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(["zcdp", "rdp", "gdp"]))
def test_curve_mode_reading_covers_the_non_adaptive_value(data: st.DataObject, mode: str) -> None:
    config = make_config(
        data.draw(st.sampled_from(["0.5", "1", "3"])),
        data.draw(st.sampled_from(["1e-6", "1e-9"])),
        "add_remove",
        {"mode": mode},
    )
    if isinstance(config, RDPConfig):  # the ladder's claims (the PLD branch: test_statements.py)
        config = ladder_only(config)
    state = initial_state(config)
    threshold = Decimal(data.draw(st.sampled_from(["0.2", "0.6", "5"])))
    total = Fraction(0)  # Σρ (Σμ² in gdp), exact
    admitted, released = True, False
    for _ in range(data.draw(st.integers(1, 20))):
        decl, cost = _curve_decl(data, mode, admitted and not released)
        decision = admit(config, state, parse_declaration(decl))
        admitted = decision.admitted
        if admitted:
            state, total = decision.state, total + cost
        released = data.draw(st.booleans())
        r = check_common(config, state)
        if total == 0 and not isinstance(config, RDPConfig):  # nothing released (1.7.0 on)
            assert (r["epsilon"], r["delta"]) == ("0", "0")
        else:
            assert r["delta"] == status(config, state)["budget"]["delta"]  # δ_B, fixed ahead
        eps = Decimal(r["epsilon"])
        # (1) never below the mode's own non-adaptive conversion of the same total
        estimate = status(config, state)["spent_eps_delta"]["epsilon"]
        assert eps >= Decimal(estimate)
        # (2) never below the exact (ε, δ) of one Gaussian with the same total, at the δ the
        # conversion may use
        mu = math.sqrt(float(total) if mode == "gdp" else 2 * float(total))
        pool = config.final_conversion_delta if isinstance(config, ZCDPConfig | RDPConfig) else None
        conv_delta = float(pool if pool is not None else config.delta)
        assert float(eps) >= gaussian_epsilon_floor(mu, conv_delta)
        if total == 0:
            assert eps == 0 and r["level"] == 0
        # the ladder's own value: the reading below ε_B, the reason for the cap above it
        ladder = Decimal(r["ladder_epsilon"]) if r["ladder_epsilon"] is not None else None
        if r["source"] == "ladder":
            assert ladder == eps
        else:
            assert r["source"] == "filter" and eps == config.epsilon
            assert ladder is None or ladder >= config.epsilon
        if _stop(data, r, threshold, released):
            break


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(["zcdp", "rdp"]))
def test_an_approximate_declaration_moves_the_reading_to_the_target(
    data: st.DataObject, mode: str
) -> None:
    """δ_A > 0: once an approximate declaration is admitted the ladder no longer applies and the
    reading is the filter's target, which is certified at every stopping time."""
    config = make_config(
        "1", "1e-6", "add_remove", {"mode": mode, "final_conversion_delta": "5e-7"}
    )
    state = initial_state(config)
    approx_seen = False
    for _ in range(data.draw(st.integers(1, 10))):
        if data.draw(st.booleans()):
            decl: dict[str, Any] = {"type": "approx_dp", "epsilon": "0.05", "delta": "1e-8"}
        else:
            decl = {"type": "gaussian", "sigma": data.draw(st.sampled_from(sigmas[2:]))}
        decision = admit(config, state, parse_declaration(decl))
        if decision.admitted:
            state = decision.state
            approx_seen = approx_seen or decl["type"] == "approx_dp"
        r = check_common(config, state)
        if approx_seen:
            assert r["source"] == "filter"
            assert (r["epsilon"], r["delta"]) == ("1", "0.000001")


#: A basic and a zcdp sub-budget, (1, 10⁻⁶) each, of a (2, 2·10⁻⁶) dataset.
SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {"name": "b", "budget": {"epsilon": "1", "delta": "1e-6"}},
        {"name": "z", "budget": {"epsilon": "1", "delta": "1e-6"}, "accounting": {"mode": "zcdp"}},
    ],
}


@SETTINGS
@given(data=st.data())
def test_split_reading_is_the_sum_of_its_parts(data: st.DataObject) -> None:
    config = make_config("2", "2e-6", "add_remove", SPLIT)
    state = initial_state(config)
    pure_total, rho_total = Fraction(0), Fraction(0)
    for _ in range(data.draw(st.integers(1, 15))):
        if data.draw(st.booleans()):
            e = data.draw(st.sampled_from(small_eps + large_eps))
            decision = admit(
                config, state, parse_declaration({"type": "pure_dp", "epsilon": e}), sub_budget="b"
            )
            if decision.admitted:
                state, pure_total = decision.state, pure_total + Fraction(e)
        else:
            rho = data.draw(st.sampled_from(["0.001", "0.005"]))
            decision = admit(
                config, state, parse_declaration({"type": "zcdp", "rho": rho}), sub_budget="z"
            )
            if decision.admitted:
                state, rho_total = decision.state, rho_total + Fraction(rho)
        r = check_common(config, state)
        view = status(config, state)
        parts = [view["sub_budgets"][n]["odometer"] for n in ("b", "z")]
        assert Decimal(r["epsilon"]) == sum(Decimal(p["epsilon"]) for p in parts)
        assert Decimal(r["delta"]) == sum(Decimal(p["delta"]) for p in parts)
        assert Fraction(Decimal(parts[0]["epsilon"])) == pure_total
        assert float(parts[1]["epsilon"]) >= gaussian_epsilon_floor(
            math.sqrt(2 * float(rho_total)), 1e-6
        )


# ---------------------------------------------------------------------------- the ladder itself
@settings(max_examples=200, deadline=None)
@given(
    spent=st.floats(min_value=1e-300, max_value=1e3, allow_nan=False),
    top=st.floats(min_value=1e-6, max_value=1e3, allow_nan=False),
)
def test_level_of_finds_the_smallest_level_above_the_total(spent: float, top: float) -> None:
    k = odo.level_of(spent, top)
    if spent > top:
        assert k is None
        return
    assert k is not None and k >= 1
    assert odo.level_value(top, k) >= spent
    assert k == odo.MAX_LEVEL or odo.level_value(top, k + 1) < spent


def test_the_shares_sum_below_the_pool() -> None:
    total = math.fsum(odo.level_share(1.0, k) for k in range(1, 200_000))
    assert total < 1.0
    assert total > 1.0 - 1e-5  # and nearly all of it is used
    assert odo.level_share(1e-6, 3) <= share(1e-6, 3)


# ---------------------------------------------------------------------------- reference vectors
def _run(config: AccountingConfig, decls: list[dict[str, Any]]) -> FilterState:
    state = initial_state(config)
    for d in decls:
        decision = admit(config, state, parse_declaration(d))
        assert decision.admitted, decision.reason
        state = decision.state
    return state


def test_reference_vector_basic() -> None:
    """ε_B = 1, δ_B = 10⁻⁶: pure 0.1, (0.2, 10⁻⁷), ODP {a 0.05, b 0.25} δ 10⁻⁸ reserved, then
    settled to a: (0.1 + 0.2 + 0.25, 1.1·10⁻⁷) while reserved, (0.35, 1.1·10⁻⁷) after."""
    config = make_config("1", "1e-6", "add_remove", {"mode": "basic"})
    state = initial_state(config)
    for d in (
        {"type": "pure_dp", "epsilon": "0.1"},
        {"type": "approx_dp", "epsilon": "0.2", "delta": "1e-7"},
    ):
        state = admit(config, state, parse_declaration(d)).state
    odp = {
        "type": "odp",
        "cells": [{"name": "a", "epsilon": "0.05"}, {"name": "b", "epsilon": "0.25"}],
        "delta": "1e-8",
    }
    decision = admit(config, state, parse_declaration(odp))
    r = reading(config, decision.state)
    assert (r["epsilon"], r["delta"], r["source"]) == ("0.55", "0.00000011", "basic")
    assert decision.reservation is not None
    state = settle(config, decision.state, decision.reservation, "a").state
    assert (reading(config, state)["epsilon"], reading(config, state)["delta"]) == (
        "0.35",
        "0.00000011",
    )


def test_reference_vector_zcdp() -> None:
    """ε_B = 1, δ_B = 10⁻⁶ (all of it for the conversion): three ρ = 0.005 → Σρ = 0.015."""
    config = make_config("1", "1e-6", "add_remove", {"mode": "zcdp"})
    assert isinstance(config, ZCDPConfig)
    config = ladder_1_4(config)  # the documented 1.4.0 ladder (1.7.0's: test_shaped_ladders)
    state = _run(config, [{"type": "zcdp", "rho": "0.005"}] * 3)
    r = reading(config, state)
    top = float(config.rho_budget)
    # the filter's threshold is ρ at level 1's share of δ_c (0.9): its conversion is ε_B
    assert cks_zcdp_epsilon(top, 0.9e-6) == pytest.approx(1.0, abs=1e-9)
    # independently: the smallest reading over the levels holding 0.015, CKS at each
    expected, k = smallest_reading(
        top, 0.015, 1.0, lambda c, k: cks_zcdp_epsilon(c, anchored_share(1e-6, k))
    )
    assert r["level"] == k == 3
    assert float(r["epsilon"]) == pytest.approx(expected, rel=1e-9)
    assert float(r["epsilon"]) >= expected * (1 - 1e-12)
    assert (r["epsilon"], r["delta"], r["source"]) == (
        "0.98900974780520745089",
        "0.000001",
        "ladder",
    )
    # the estimate it replaces as a certificate is the non-adaptive conversion of 0.015
    assert status(config, state)["spent_eps_delta"]["epsilon"] == "0.77173422481837472553"
    assert float("0.77173422481837472553") == pytest.approx(cks_zcdp_epsilon(0.015, 1e-6), rel=1e-9)


def test_reference_vector_rdp() -> None:
    """The 16 default orders with equal weights (the default of datasets created before the
    weighted default), ε_B = 1, δ_B = 10⁻⁶: three Gaussians σ = 10 → S(α) = 0.015·α."""
    config = make_config("1", "1e-6", "add_remove", {"mode": "rdp", "weights": ["0.0625"] * 16})
    assert isinstance(config, RDPConfig)
    config = ladder_only(config)  # the ladder's vector (no PLD branch, as before 1.6.0)
    state = _run(config, [{"type": "gaussian", "sigma": "10", "sensitivity": 1}] * 3)
    r = reading(config, state)
    candidates = []
    for alpha, b, w in zip(config.orders, config.thresholds, config.weights, strict=True):
        spent = 0.015 * alpha
        if not (b > 0 and spent <= b):
            continue
        # level 1 is the order's threshold, CKS Prop. 12 at 0.9 of its w_α·δ_c reads ε_B
        assert cks_rdp_epsilon(alpha, b, 0.9e-6 * w) == pytest.approx(1.0, abs=1e-9)
        eps, k = smallest_reading(b, spent, 1.0, functools.partial(_at_order, alpha, w))
        candidates.append((eps, k, alpha))
    expected, k, alpha = min(candidates)
    assert (alpha, r["level"], k) == (32.0, 2, 2)
    assert float(r["epsilon"]) == pytest.approx(expected, rel=1e-9)
    assert (r["epsilon"], r["delta"], r["source"]) == (
        "0.99786594549247853437",
        "0.000001",
        "ladder",
    )


def test_reference_vector_gdp() -> None:
    """ε_B = 1, δ_B = 10⁻⁶: two μ = 0.1 → Σμ² = 0.02."""
    config = make_config("1", "1e-6", "add_remove", {"mode": "gdp"})
    assert isinstance(config, GDPConfig)
    config = ladder_1_4(config)  # the documented 1.4.0 ladder (1.7.0's: test_shaped_ladders)
    state = _run(config, [{"type": "gdp", "mu": "0.1"}] * 2)
    r = reading(config, state)
    top = float(status(config, state)["mu_squared_budget"])
    k = r["level"]
    assert level(top, k) >= 0.02 > level(top, k + 1) * (1 - 1e-12)
    assert k == 6
    mu_k, d_k = math.sqrt(level(top, k)), anchored_share(1e-6, k)
    eps = float(r["epsilon"])
    # the μ_k-GDP profile at the reading is within δ_k, and just below it is not
    assert gaussian_delta(mu_k, eps) <= d_k < gaussian_delta(mu_k, eps * (1 - 1e-9))
    # and no level above it holding 0.02 reads less (level 1 reads ε_B = 1)
    for j in range(2, k):
        assert gaussian_delta(math.sqrt(level(top, j)), eps) > anchored_share(1e-6, j)
    assert (r["epsilon"], r["delta"], r["source"]) == (
        "0.8143962145027929811",
        "0.000001",
        "ladder",
    )


def test_reference_vector_split_and_the_cap() -> None:
    """A basic and a zcdp sub-budget: the dataset's reading is their sum; a zcdp sub-budget spent
    close to its threshold reads its target (ε_k, δ_k) at level 1, which is the filter itself,
    never more."""
    config = make_config("2", "2e-6", "add_remove", SPLIT)
    state = initial_state(config)
    state = admit(
        config, state, parse_declaration({"type": "pure_dp", "epsilon": "0.3"}), sub_budget="b"
    ).state
    for _ in range(3):
        state = admit(
            config, state, parse_declaration({"type": "zcdp", "rho": "0.005"}), sub_budget="z"
        ).state
    r = reading(config, state)
    # the zcdp sub-budget's ladder shaped by its first ρ = 0.005 (accounting 1.9.0: level 1 at
    # 0.5 of δ_c, 2^(1/6) apart; 1.26898496492232122357 on 1.7.0's constant shape,
    # 1.28900974780520745089 on the 1.4.0 ladder, 0.3 + the zcdp vector above)
    assert (r["epsilon"], r["delta"], r["source"]) == (
        "1.26447666360218109461",
        "0.000001",
        "split",
    )
    sub = status(config, state)["sub_budgets"]["z"]  # up to the threshold in force (1.9.0)
    left = Decimal(sub["rho_budget"]) - Decimal(sub["spent"]["rho"])
    decision = admit(
        config, state, parse_declaration({"type": "zcdp", "rho": str(left)}), sub_budget="z"
    )
    assert decision.admitted
    state = decision.state
    z = status(config, state)["sub_budgets"]["z"]["odometer"]
    assert (z["epsilon"], z["delta"], z["source"], z["level"]) == ("1", "0.000001", "ladder", 1)
    top = float(status(config, state)["sub_budgets"]["z"]["rho_budget"])
    # level 1 of the ladder the first ρ = 0.005 shaped holds 0.5 of δ_c (0.85 in 1.7.0–1.8.0)
    assert cks_zcdp_epsilon(top, 0.5e-6) == pytest.approx(1.0, abs=1e-9)
    assert z["ladder_epsilon"] == "1"
    assert reading(config, state)["epsilon"] == "1.3"
