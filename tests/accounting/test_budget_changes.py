"""Budget changes keep every certified statement true (docs/accounting.md, *Budget changes*).

An adversarial curator raises and lowers budgets between adaptive invocations, choosing each
new budget after seeing the readings, in every curve mode and on a split dataset's
sub-budget. At every step:

- the certified reading equals an independent evaluation of the ladder fixed at creation:
  below the creation threshold the smallest ε over the levels that hold the running total
  (level 1 reads the creation target; level k ≥ 2 converts c_k at 0.08 · 6/(π²(k−1)²) of the
  pool), above it the level of the extended ladder holding it (0.02 · 6/(π²j²) of the pool);
  the conversions here are independent code (scipy for CKS20 Cor. 13, the closed form of
  CKS20 Prop. 12, bisection on the exact Gaussian profile for DRS19 Cor. 2.13);
- a budget change never moves the reading, and is refused exactly when the new ε is below it;
- the reading never exceeds the budget in force (ε and δ): the advertised guarantee.

Under the rule before accounting 1.4.0 (thresholds derived again from the new budget) the
first two fail at once: lowering the budget lowered the reading.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize_scalar
from scipy.special import ndtr

from odometer_core.accounting.declarations import parse_declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    FilterState,
    GDPConfig,
    GDPState,
    InvalidTransition,
    RDPConfig,
    SplitConfig,
    SplitState,
    ZCDPConfig,
    ZCDPState,
    admit,
    change_budget,
    initial_state,
    make_config,
    status,
)
from odometer_core.accounting.modes import UnusableBudget
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.accounting.odometer import LadderShape
from tests.accounting.ladder_only import ladder_1_4, ladder_only
from tests.accounting.rdp_weights import rdp_in_force

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RATIO = 2.0 ** (1 / 4)
SIX_OVER_PI2 = 6 / math.pi**2


# ---------------------------------------------------------------------------- conversions
def zcdp_eps(rho: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020, Cor. 13, minimised over α by scipy."""

    def objective(alpha: float) -> float:
        return alpha * rho + (
            math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha) - math.log(alpha)
        ) / (alpha - 1)

    return max(0.0, float(minimize_scalar(objective, bounds=(1.000001, 1e6), method="bounded").fun))


def rdp_eps(alpha: float, tau: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020, Prop. 12 at one order."""
    value = tau + math.log((alpha - 1) / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
    return max(0.0, value)


def gdp_eps(mu_squared: float, delta: float) -> float:
    """Dong–Roth–Su 2019, Cor. 2.13: the ε where the μ-Gaussian profile reaches δ."""
    mu = math.sqrt(mu_squared)

    def excess(eps: float) -> float:
        return float(ndtr(-eps / mu + mu / 2) - math.exp(eps) * ndtr(-eps / mu - mu / 2)) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(brentq(excess, 0.0, hi, xtol=1e-14, rtol=1e-13))


# ---------------------------------------------------------------------------- the reference
def reference(
    top: float,
    pool: float,
    eps_b: float,
    spent: float,
    convert: Callable[[float, float], float],
    shape: LadderShape | None = None,
) -> float | None:
    """The reading of the ladder fixed at creation (``None`` where ``spent`` sits within 1e-9
    of a level's value, where float rounding may put it on either side): the documented 1.4.0
    ladder, or the ``shape`` of accounting 1.7.0 (docs/accounting.md, *Shaped ladders*)."""
    steps, depth = (4, 80) if shape is None else (shape.steps, shape.span + 41)

    def below(k: int) -> float:  # δ_k of a level k ≥ 2
        if shape is None:
            return 0.08 * pool * SIX_OVER_PI2 / (k - 1) ** 2
        if k <= shape.span + 1:
            return pool * float(shape.spread) / shape.span
        return pool * float(shape.tail) * SIX_OVER_PI2 / (k - shape.span - 1) ** 2

    above = 0.02 if shape is None else float(shape.above)
    if spent <= 0:
        return 0.0
    if spent <= top:
        best, k = eps_b, 2
        while k <= depth and (c := top * 2 ** (-(k - 1) / steps)) >= spent:
            if abs(c - spent) <= 1e-9 * c:
                return None
            best = min(best, convert(c, below(k)))
            k += 1
        return best
    j = 1
    while (c := top * 2 ** (j / steps)) < spent:
        j += 1
    if abs(c - spent) <= 1e-9 * c:
        return None
    return convert(c, above * pool * SIX_OVER_PI2 / j**2)


def reference_reading(creation: AccountingConfig, state_json: dict[str, Any]) -> float | None:
    """An independent reading for a leaf filter, from its creation configuration (its
    thresholds and weights) and the running totals in its status."""
    spent = state_json["spent"]
    if isinstance(creation, ZCDPConfig):
        if Decimal(spent["delta"]) > 0:
            return float(creation.epsilon)
        pool = float(creation.final_conversion_delta)
        return reference(
            float(creation.rho_budget),
            pool,
            float(creation.epsilon),
            float(spent["rho"]),
            zcdp_eps,
            creation.shape,
        )
    if isinstance(creation, GDPConfig):
        return reference(
            float(creation.mu_squared_budget),
            float(creation.delta),
            float(creation.epsilon),
            float(spent["mu_squared"]),
            gdp_eps,
            creation.shape,
        )
    assert isinstance(creation, RDPConfig)
    if Decimal(spent["delta"]) > 0:
        return float(creation.epsilon)
    best: float | None = math.inf
    tops, _, weights = rdp_in_force(creation, state_json.get("first"))  # levels other than 1
    for alpha, top, w, s in zip(creation.orders, tops, weights, spent["rdp"], strict=True):
        if not top > 0:
            continue
        pool = w * float(creation.final_conversion_delta)
        value = reference(
            top,
            pool,
            float(creation.epsilon),
            float(s),
            lambda c, d, a=alpha: rdp_eps(a, c, d),  # type: ignore[misc]
        )
        if value is None:
            return None
        if best is not None:
            best = min(best, value)
    return None if best == math.inf else best


# ---------------------------------------------------------------------------- the game
MODES: dict[str, dict[str, Any]] = {
    "zcdp": {"mode": "zcdp"},
    "zcdp_approx": {"mode": "zcdp", "final_conversion_delta": "8e-7"},
    "rdp": {"mode": "rdp"},
    "gdp": {"mode": "gdp"},
}


def _shaped(creation: Any, config: AccountingConfig, state: FilterState) -> Any:
    """The creation filter with the shape its first declaration chose (accounting 1.9.0: the
    ladder in force is the one the first admission recorded in the state, made at the creation
    target; before it, and for configurations without the rule, the creation filter itself)."""
    leaf = state
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)  # a split configuration's state is a split state
        leaf = state.get("z")
    if isinstance(creation, ZCDPConfig) and getattr(leaf, "ladder", None) is not None:
        assert isinstance(leaf, ZCDPState)  # only zcdp and gdp states record a ladder
        return zcdp_mode.in_force(creation, leaf)
    if isinstance(creation, GDPConfig) and getattr(leaf, "ladder", None) is not None:
        assert isinstance(leaf, GDPState)
        return gdp_mode.in_force(creation, leaf)
    return creation


def _leaf(config: AccountingConfig, state_view: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The leaf whose changes the curator makes and its status (a split dataset's 'z')."""
    if isinstance(config, SplitConfig):
        return config.sub_budget("z"), state_view["sub_budgets"]["z"]
    return config, state_view


def _untouched(view: dict[str, Any]) -> bool:
    """Whether a leaf filter's status shows nothing charged (nor reserved)."""
    spent = view["spent"]
    return all(
        not any(float(x) for x in v) if isinstance(v, list) else Decimal(v) == 0
        for k, v in spent.items()
        if k != "dead"
    )


def _declaration(kind: str, size: float, approximate: bool) -> dict[str, Any]:
    if approximate:
        return {"type": "approx_dp", "epsilon": f"{size / 10:.3f}", "delta": "1e-8"}
    if kind == "rdp" and size > 0.5:
        return {
            "type": "subsampled",
            "scheme": "poisson",
            "rate": "0.05",
            "mechanism": {"type": "gaussian", "sigma": "1.2", "sensitivity": 1},
        }
    return {"type": "gaussian", "sigma": f"{8 + 40 * size:.2f}", "sensitivity": 1}


@SETTINGS
@given(
    data=st.data(),
    kind=st.sampled_from([*MODES, "split"]),
    start=st.sampled_from([("1", "1e-6"), ("3", "1e-6"), ("0.5", "1e-5")]),
)
def test_an_adversarial_curator_never_moves_or_breaks_a_certified_reading(
    data: st.DataObject, kind: str, start: tuple[str, str]
) -> None:
    eps_b, delta_b = start
    if kind == "split":
        total = f"{2 * float(eps_b)}"
        accounting: dict[str, Any] = {
            "mode": "split",
            "sub_budgets": [
                {"name": "b", "budget": {"epsilon": eps_b, "delta": delta_b}},
                {
                    "name": "z",
                    "budget": {"epsilon": eps_b, "delta": delta_b},
                    "accounting": {"mode": "zcdp"},
                },
            ],
        }
        config = make_config(total, f"{2 * float(delta_b)}", "add_remove", accounting)
    else:
        config = make_config(eps_b, delta_b, "add_remove", MODES[kind])
    if isinstance(config, RDPConfig):
        config = ladder_only(config)
    creation, _ = _leaf(config, status(config, initial_state(config)))
    sub = "z" if kind == "split" else None
    leaf_kind = "zcdp" if kind == "split" else kind
    state: FilterState = initial_state(config)
    last_reading = Decimal(0)
    released = 0.0
    for step in range(data.draw(st.integers(6, 18), label="steps")):
        leaf, view = _leaf(config, status(config, state))
        reading = view["odometer"]
        eps_now = Decimal(reading["epsilon"])
        # the reading is the ladder fixed at creation, evaluated independently
        expected = reference_reading(_shaped(creation, config, state), view)
        if expected is not None:
            assert float(eps_now) >= expected * (1 - 1e-9), (step, reading, expected)
            assert float(eps_now) <= expected * (1 + 1e-9) + 1e-300, (step, reading, expected)
        # never above the budget in force
        assert eps_now <= leaf.epsilon and Decimal(reading["delta"]) <= leaf.delta
        if step % 2 == 0:
            # the analyst: sizes chosen from what was released and whether it was admitted
            size = data.draw(st.floats(0.0, 1.0), label="size")
            size = (size + released) % 1.0
            approximate = kind == "zcdp_approx" and data.draw(st.booleans(), label="approx")
            decision = admit(
                config,
                state,
                parse_declaration(_declaration(leaf_kind, size, approximate)),
                sub_budget=sub,
            )
            state = decision.state
            released = size if decision.admitted else released / 2
            continue
        # the curator, after seeing the reading: exactly it, just below it, or anywhere
        choice = data.draw(st.sampled_from(["at", "below", "raise", "lower", "delta"]))
        new_eps = {
            "at": eps_now if eps_now > 0 else leaf.epsilon,
            "below": eps_now * Decimal("0.999") if eps_now > 0 else leaf.epsilon,
            "raise": leaf.epsilon * Decimal(data.draw(st.sampled_from(["1.2", "2", "5"]))),
            "lower": (eps_now + leaf.epsilon) / 2 if eps_now > 0 else leaf.epsilon / 2,
            "delta": leaf.epsilon,
        }[choice]
        new_delta = leaf.delta * (Decimal(2) if choice == "delta" else Decimal(1))
        if kind == "split" and new_eps > leaf.epsilon:  # room in the dataset's total first
            bigger = config.epsilon + new_eps
            config, state = change_budget(config, state, bigger, 2 * config.delta)
        if kind == "split" and new_delta > leaf.delta:
            config, state = change_budget(config, state, config.epsilon, config.delta + new_delta)
        before = status(config, state)
        try:
            config, state = change_budget(config, state, new_eps, new_delta, sub_budget=sub)
        except UnusableBudget:
            # a filter still untouched lowered to a budget its grid cannot convert (refused as
            # before: the previous commit refuses it too); a touched one reads ≤ the new ε at
            # some order, so some cap stays above 0
            assert _untouched(view) and kind in ("rdp", "split")
            continue
        except InvalidTransition as refused:
            assert refused.code == "BudgetBelowSpent" and not _untouched(view)
            # refused exactly when the new ε is below the reading, or after an approximate
            # declaration below the creation target (which then is the reading)
            assert new_eps < eps_now, (choice, new_eps, eps_now)
            assert status(config, state) == before
            continue
        assert new_eps >= eps_now
        after_leaf, after_view = _leaf(config, status(config, state))
        assert after_leaf.epsilon == new_eps
        # a budget change never moves the reading
        assert after_view["odometer"]["epsilon"] == reading["epsilon"]
        if _untouched(view):
            # nothing charged yet: the filter was made anew for the new budget, which is now
            # the creation budget its ladder is fixed at (a reading of 0 holds at any δ)
            creation = after_leaf
            assert after_view["odometer"]["epsilon"] == "0"
            continue
        assert after_view["odometer"]["delta"] == reading["delta"]
        last_reading = eps_now
    assert last_reading >= 0


@pytest.mark.parametrize("mode", ["zcdp", "rdp", "gdp"])
def test_a_change_before_the_first_charge_makes_the_filter_anew(mode: str) -> None:
    """Nothing was released yet: the filter is made for the new budget, with full capacity
    (the creation of a dataset with that budget), and anchored there."""
    config = make_config("1", "1e-6", "add_remove", {"mode": mode})
    changed, _ = change_budget(config, initial_state(config), "2", "1e-6")
    fresh = make_config("2", "1e-6", "add_remove", {"mode": mode})
    assert changed == fresh


# ---------------------------------------------------------------------------- reference vectors
#: Three Gaussians σ = 30 on (1, 10⁻⁶), then the budget lowered to 0.5, to the reading, raised
#: to 2, and Gaussians until refused: the reading after the three, the threshold in force
#: after each change (zcdp ρ, gdp μ², rdp the last order's), and the Gaussians admitted after
#: the raise with the reading and level (k < 0: above the creation threshold) they end at.
HISTORIES = {
    "zcdp": (
        ("0.347574938275982126", 16),
        ("0.0035868898218561228764", "0.0017934449109280618719", "0.048259244689741555289"),
        (83, "1.8611261531509910583", -4),
    ),
    "rdp": (
        ("0.43452614955218421545", 12),
        ("0.169867489912389", "0.12011445402018771", "1.6160610208917268"),
        (82, "1.947725382509241543", -5),
    ),
    "gdp": (
        ("0.32553682985218479474", 17),
        ("0.0082443172755370178195", "0.003466308421606674895", "0.11092186949141352725"),
        (96, "1.9043737010414214517", -4),
    ),
}
THRESHOLD = {"zcdp": "rho_budget", "gdp": "mu_squared_budget"}
CONVERT: dict[str, Callable[[float, float], float]] = {"zcdp": zcdp_eps, "gdp": gdp_eps}


@pytest.mark.parametrize("mode", sorted(HISTORIES))
def test_reference_history(mode: str) -> None:
    (reading, level), thresholds, (more, end, end_level) = HISTORIES[mode]
    gaussian = parse_declaration({"type": "gaussian", "sigma": "30", "sensitivity": 1})
    config = make_config("1", "1e-6", "add_remove", {"mode": mode})
    if isinstance(config, RDPConfig):  # the vector is of the default weights, in force throughout
        config = replace(ladder_only(config), weights_rule="fixed")  # (before 1.5.0 and 1.6.0)
    elif isinstance(config, ZCDPConfig | GDPConfig):  # the documented 1.4.0 ladder (1.7.0's
        config = ladder_1_4(config)  # changes: tests/accounting/test_shaped_ladders.py)
    state = initial_state(config)
    for _ in range(3):
        state = admit(config, state, gaussian).state
    odo = status(config, state)["odometer"]
    assert (odo["epsilon"], odo["level"]) == (reading, level)
    creation = config
    for eps, expected in zip(("0.5", reading, "2"), thresholds, strict=True):
        config, state = change_budget(config, state, eps, "1e-6")
        view = status(config, state)
        got = view[THRESHOLD[mode]] if mode in THRESHOLD else view["thresholds"][-1]
        assert got == expected
        assert view["odometer"]["epsilon"] == reading
        if mode in THRESHOLD:
            # independently: the highest level of the creation ladder whose reading is ≤ ε
            top = float(status(creation, initial_state(creation))[THRESHOLD[mode]])
            pool = 1e-6
            level_value = _highest_level(top, pool, float(eps), CONVERT[mode])
            assert float(got) == pytest.approx(level_value, rel=1e-12)
    admitted = 0
    while (decision := admit(config, state, gaussian)).admitted:
        state, admitted = decision.state, admitted + 1
    odo = status(config, state)["odometer"]
    assert (admitted, odo["epsilon"], odo["level"]) == (more, end, end_level)
    assert Decimal(end) <= 2


def _highest_level(
    top: float, pool: float, eps: float, convert: Callable[[float, float], float]
) -> float:
    """The largest c_k of the anchored ladder (levels above the top first) reading ≤ ``eps``."""
    if eps >= 1:  # level 1 reads the creation ε_B = 1; climb while the levels above fit
        best, j = top, 1
        while convert(top * 2 ** (j / 4), 0.02 * pool * SIX_OVER_PI2 / j**2) <= eps:
            best, j = top * 2 ** (j / 4), j + 1
        return best
    k = 2
    while convert(c := top * 2 ** (-(k - 1) / 4), 0.08 * pool * SIX_OVER_PI2 / (k - 1) ** 2) > eps:
        k += 1
    return c
