"""One reading to quote (:mod:`odometer_core.accounting.summary`): rounding on the safe side,
what is left in each mode's unit, ``more`` equal to what the filter admits, ``instead`` at the
exact edge of what fits, and attributions converted as the dataset's own status converts."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from odometer_core.accounting import (
    AccountingConfig,
    Declaration,
    FilterState,
    admit,
    capacity,
    initial_state,
    make_config,
    parse_declaration,
    status,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.summary import (
    Spend,
    instead,
    refusal,
    round_down,
    round_up,
    summarise,
)

MODES = ["basic", "zcdp", "rdp", "gdp"]
GAUSSIAN = parse_declaration({"type": "gaussian", "sigma": 10, "sensitivity": 1})
PURE = parse_declaration({"type": "pure_dp", "epsilon": "0.3"})


def _filter(mode: str, n: int = 3) -> tuple[AccountingConfig, FilterState, Declaration]:
    config = make_config("2", "0.000001", "add_remove", {"mode": mode})
    declaration = PURE if mode == "basic" else GAUSSIAN
    state = initial_state(config)
    for _ in range(n):
        state = admit(config, state, declaration).state
    return config, state, declaration


@pytest.mark.parametrize(
    ("value", "up", "down"),
    [
        ("1.9307913876459474878", "1.9307914", "1.9307913"),
        ("0.000001", "0.000001", "0.000001"),
        ("123456789.5", "123456790", "123456780"),
        ("0.0723999999999", "0.0724", "0.072399999"),
        ("0", "0", "0"),
    ],
)
def test_rounding_to_eight_digits_on_the_safe_side(value: str, up: str, down: str) -> None:
    assert round_up(Decimal(value)) == Decimal(up)
    assert round_down(Decimal(value)) == Decimal(down)


@pytest.mark.parametrize("mode", MODES)
def test_the_summary_rounds_the_reading_up_and_what_is_left_down(mode: str) -> None:
    config, state, declaration = _filter(mode)
    view = status(config, state)
    s = summarise(config, state, declaration)
    reading = view["odometer"]
    assert s["guarantee"] == {
        "epsilon": str(round_up(Decimal(reading["epsilon"]))),
        "delta": str(round_up(Decimal(reading["delta"]))),
    }
    assert Decimal(s["guarantee"]["epsilon"]) >= Decimal(reading["epsilon"])
    unit = {"basic": "epsilon", "zcdp": "rho", "gdp": "mu_squared", "rdp": "rdp"}[mode]
    first = s["left"][0]
    assert first["unit"] == unit
    if mode != "rdp":
        exact = Decimal(view["remaining"][unit])
        assert Decimal(first["amount"]) == round_down(exact) <= exact
    assert all(len(Decimal(x["amount"]).normalize().as_tuple().digits) <= 8 for x in s["left"])
    assert s["text"].startswith(f"certified ε = {s['guarantee']['epsilon']}")


def test_a_budget_of_more_digits_than_shown_is_rounded_down_not_up() -> None:
    """A budget of 9.9999999999 is shown 9.9999999, not 10: what is left is rounded down, and
    the budget it is read against must not flatter either (it was rounded up, so a summary read
    "of 10" for a cap below 10)."""
    config = make_config("9.9999999999", "0.000001", "add_remove", {"mode": "basic"})
    state = admit(config, initial_state(config), PURE).state
    epsilon, delta = summarise(config, state, PURE)["left"]
    assert (epsilon["unit"], epsilon["budget"], epsilon["amount"]) == (
        "epsilon",
        "9.9999999",
        "9.6999999",
    )
    assert (delta["unit"], delta["budget"], delta["amount"]) == ("delta", "0.000001", "0.000001")


@pytest.mark.parametrize("mode", MODES)
def test_more_is_exactly_what_the_filter_admits_in_a_row(mode: str) -> None:
    config, state, declaration = _filter(mode)
    s = summarise(config, state, declaration)
    more = s["more"]
    assert more is not None
    assert more["count"] == capacity(config, state, declaration).count > 0
    for _ in range(more["count"]):
        decision = admit(config, state, declaration)
        assert decision.admitted
        state = decision.state
    assert not admit(config, state, declaration).admitted
    assert (
        f"{more['count']} more gaussian" in s["text"]
        or f"{more['count']} more pure_dp" in s["text"]
    )


def test_rdp_gives_no_epsilon_remainder_but_its_best_order() -> None:
    config, state, _ = _filter("rdp")
    (left,) = summarise(config, state)["left"]
    view = status(config, state)
    i = view["orders"].index(left["order"])
    threshold, spent = float(view["thresholds"][i]), float(view["spent"]["rdp"][i])
    assert Decimal(left["amount"]) <= Decimal(repr(threshold)) - Decimal(repr(spent))
    shares = [
        (float(t) - float(u)) / float(t)
        for t, u, dead in zip(
            view["thresholds"], view["spent"]["rdp"], view["spent"]["dead"], strict=True
        )
        if not dead and math.isfinite(float(t)) and float(t) > 0
    ]
    assert Decimal(left["fraction"]) == Decimal(max(shares)).quantize(
        Decimal("0.0001"), "ROUND_FLOOR"
    )


def test_instead_in_basic_is_the_exact_epsilon_left() -> None:
    config = make_config("1", "0", "add_remove", {"mode": "basic"})
    state = admit(
        config, initial_state(config), parse_declaration({"type": "pure_dp", "epsilon": "0.7"})
    ).state
    big = parse_declaration({"type": "pure_dp", "epsilon": "0.5"})
    assert instead(config, state, big) == {"type": "pure_dp", "epsilon": "0.3"}


def test_instead_in_zcdp_is_the_closed_form_sigma_rounded_up_and_is_the_edge() -> None:
    config, state, _ = _filter("zcdp")
    rho_left = Decimal(status(config, state)["remaining"]["rho"])
    big = parse_declaration({"type": "gaussian", "sigma": 1, "sensitivity": 2})
    found = instead(config, state, big)
    assert found is not None
    sigma = Decimal(found["sigma"])
    # ρ = Δ²/(2σ²) (Bun–Steinke 2016, Prop. 1.6): the smallest σ with ρ ≤ ρ left is Δ/√(2ρ)
    assert sigma == round_up(Decimal(2) / (2 * rho_left).sqrt())
    assert admit(config, state, parse_declaration(found)).admitted
    one_less = {**found, "sigma": str(sigma - Decimal(1).scaleb(sigma.adjusted() - 7))}
    assert not admit(config, state, parse_declaration(one_less)).admitted


@pytest.mark.parametrize("mode", MODES)
def test_what_instead_suggests_is_admitted_and_a_digit_beyond_is_not(mode: str) -> None:
    config, state, _ = _filter(mode, n=1)
    kinds = [{"type": "gaussian", "sigma": "0.5"}] if mode != "basic" else []
    kinds += [{"type": "pure_dp", "epsilon": "50"}] if mode != "gdp" else []
    for body in kinds:
        found = instead(config, state, parse_declaration(body))
        assert found is not None, body
        assert admit(config, state, parse_declaration(found)).admitted
        field = "sigma" if body["type"] == "gaussian" else "epsilon"
        value = Decimal(found[field])
        step = Decimal(1).scaleb(value.adjusted() - 7)
        beyond = value - step if field == "sigma" else value + step
        assert not admit(config, state, parse_declaration({**found, field: str(beyond)})).admitted


def test_a_refusal_names_the_level_the_bound_and_what_fits() -> None:
    config, state, _ = _filter("zcdp")
    big = parse_declaration({"type": "gaussian", "sigma": "0.5"})
    decision = admit(config, state, big)
    assert not decision.admitted
    r = refusal(config, state, big, level="quota", reason=decision.reason)
    assert r["level"] == "quota" and r["bound"] == "rho budget exceeded"
    assert r["instead"] == instead(config, state, big)
    assert r["instead"] is not None
    assert r["text"].startswith("refused by the quota budget: rho budget exceeded; left ρ ")
    assert f"gaussian with sigma ≥ {r['instead']['sigma']} would fit" in r["text"]


@pytest.mark.parametrize("mode", MODES)
def test_one_analysts_attribution_is_the_datasets_own_estimate(mode: str) -> None:
    config = make_config("2", "0.000001", "add_remove", {"mode": mode})
    state = initial_state(config)
    spend = Spend()
    declaration = PURE if mode == "basic" else GAUSSIAN
    for _ in range(3):
        decision = admit(config, state, declaration)
        state = decision.state
        spend.add(amount_json(decision.charge), None)
    estimate = status(config, state)["spent_eps_delta"]
    got = spend.attribution(config)
    assert got == {
        "epsilon": str(round_up(Decimal(estimate["epsilon"]))),
        "delta": str(round_up(Decimal(estimate["delta"]))),
        "certified": False,
    }


def test_attribution_in_rdp_is_per_analyst_and_not_additive() -> None:
    config = make_config("2", "0.000001", "add_remove", {"mode": "rdp"})
    state = initial_state(config)
    ann, bob = Spend(), Spend()
    for who in (ann, bob, ann):
        decision = admit(config, state, GAUSSIAN)
        state = decision.state
        who.add(amount_json(decision.charge), None)
    a, b = ann.attribution(config), bob.attribution(config)
    whole = Decimal(status(config, state)["spent_eps_delta"]["epsilon"])
    assert Decimal(0) < Decimal(b["epsilon"]) < Decimal(a["epsilon"]) < whole
    # ε of composed RDP is sub-additive: the shares sum to more than the whole's estimate
    assert Decimal(a["epsilon"]) + Decimal(b["epsilon"]) > whole
    # a refund subtracts: ann's second charge refunded leaves ann equal to bob
    ann.add(amount_json(admit(config, initial_state(config), GAUSSIAN).charge), None, -1)
    assert ann.attribution(config) == b


@pytest.mark.parametrize("mode", ["zcdp", "rdp"])
def test_a_delta_refusal_without_a_delta_share_says_why(mode: str) -> None:
    approx = parse_declaration({"type": "approx_dp", "epsilon": "0.1", "delta": "1e-12"})
    for conversion, explained in (("0.000001", True), ("0.0000005", False)):
        config = make_config(
            "2", "0.000001", "add_remove", {"mode": mode, "final_conversion_delta": conversion}
        )
        state = initial_state(config)
        decision = admit(config, state, approx)
        if not explained:  # a δ share: the same declaration is admitted
            assert decision.admitted
            continue
        assert decision.reason == "delta budget exceeded"
        text = refusal(config, state, approx, level="dataset", reason=decision.reason)["text"]
        assert "keeps no δ for approximate declarations" in text
        assert "final_conversion_delta < δ_B" in text
