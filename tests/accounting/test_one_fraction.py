"""One fraction per budget (docs/accounting.md, *One fraction per budget*): a summary's
``fraction_spent`` is the most spent of the bounds the mode's filter keeps, in the unit it
counts, rounded up to four places; ``fraction_left`` is exactly 1 − it, the least left of the
``left`` items. Each figure is recomputed here from the status view, not from the summary."""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Any

import pytest

from odometer_core.accounting import admit, initial_state, make_config, parse_declaration, status
from odometer_core.accounting.exact import rounded
from odometer_core.accounting.summary import compose, spent_fraction

GAUSSIAN = parse_declaration({"type": "gaussian", "sigma": "9", "sensitivity": "1"})
APPROX = parse_declaration({"type": "approx_dp", "epsilon": "0.05", "delta": "0.0000006"})


def _up4(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.0001"), rounding=ROUND_CEILING).normalize())


def _share(spent: str, budget: str) -> Decimal:
    return Decimal(spent) / Decimal(budget)


def _spent_by_hand(view: dict[str, Any]) -> Decimal:
    """The most spent bound of a leaf status, from its own figures."""
    mode = view["mode"]
    if mode == "basic":
        eps = Decimal(view["spent"]["epsilon"]) + Decimal(view["reserved"]["epsilon"])
        return max(
            eps / Decimal(view["budget"]["epsilon"]),
            _share(view["spent"]["delta"], view["budget"]["delta"]),
        )
    if mode == "zcdp":
        return _share(view["spent"]["rho"], view["rho_budget"])
    if mode == "gdp":
        return _share(view["spent"]["mu_squared"], view["mu_squared_budget"])
    shares = [
        Decimal(repr(float(u))) / Decimal(repr(float(t)))
        for t, u, dead in zip(
            view["thresholds"], view["spent"]["rdp"], view["spent"]["dead"], strict=True
        )
        if not dead
    ]
    return min(shares)


@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
@pytest.mark.parametrize("count", [0, 1, 3, 100])
def test_the_summary_says_one_fraction(mode: str, count: int) -> None:
    config = make_config("1", "0.00001", "add_remove", {"mode": mode})
    state = initial_state(config)
    declaration = APPROX if mode == "basic" else GAUSSIAN
    for _ in range(count):  # up to the limit: a refused one changes nothing
        decision = admit(config, state, declaration)
        state = decision.state if decision.admitted else state
    view = status(config, state)
    summary = compose(view)
    spent, left = Decimal(summary["fraction_spent"]), Decimal(summary["fraction_left"])
    assert spent + left == 1
    assert summary["fraction_spent"] == _up4(_spent_by_hand(view))
    assert left == min(Decimal(item["fraction"]) for item in summary["left"])


def test_basic_binds_on_the_more_spent_of_its_bounds() -> None:
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    state = admit(config, initial_state(config), APPROX).state  # δ: 0.6 of δ_B, ε: 0.05
    summary = compose(status(config, state))
    assert [(i["unit"], i["fraction"]) for i in summary["left"]] == [
        ("epsilon", "0.95"),
        ("delta", "0.4"),
    ]
    assert (summary["fraction_spent"], summary["fraction_left"]) == ("0.6", "0.4")


def test_a_ladder_reading_at_its_top_is_not_all_spent() -> None:
    """zcdp of (1, 10⁻⁵), four Gaussians of σ = 9: the reading is the ladder's top, ε = 1,
    while ρ = 4/(2·81) is 0.8696 of ρ_B (Bun–Steinke 2016, Prop. 1.6; the ρ_B of the ladder the
    first Gaussian shaped, accounting 1.9.0; 0.8225 of 1.7.0–1.8.0's, whose level 1 held 0.85 of
    δ_c, and 0.8174 before 1.7.0, 0.9)."""
    config = make_config("1", "0.00001", "add_remove", {"mode": "zcdp"})
    state = initial_state(config)
    for _ in range(4):
        state = admit(config, state, GAUSSIAN).state
    assert not admit(config, state, GAUSSIAN).admitted
    view = status(config, state)
    assert view["odometer"]["epsilon"] == "1"
    rho = Decimal(view["spent"]["rho"])  # 4 · 1/(2 · 81), each rounded up
    assert 0 <= rho - Decimal(4) / Decimal(162) < Decimal("1e-25")
    summary = compose(view)
    assert (summary["fraction_spent"], summary["fraction_left"]) == ("0.8696", "0.1304")
    assert summary["left"][0]["fraction"] == "0.1304"


def test_a_split_budget_reads_its_most_spent_sub_budget() -> None:
    half = {"epsilon": "0.5", "delta": "0.000005"}
    accounting = {
        "mode": "split",
        "sub_budgets": [
            {"name": "a", "budget": half, "accounting": {"mode": "zcdp"}},
            {"name": "b", "budget": half, "accounting": {"mode": "basic"}},
        ],
    }
    config = make_config("1", "0.00001", "add_remove", accounting)
    pure = parse_declaration({"type": "pure_dp", "epsilon": "0.1"})
    state = admit(config, initial_state(config), pure, sub_budget="b").state
    view = status(config, state)
    assert spent_fraction(view) == max(spent_fraction(s) for s in view["sub_budgets"].values())
    assert spent_fraction(view) == Decimal("0.2")  # ε 0.1 of b's 0.5; a untouched
    summary = compose(view)
    assert (summary["fraction_spent"], summary["fraction_left"]) == ("0.2", "0.8")


def test_rdp_with_no_live_order_has_spent_everything() -> None:
    view = {
        "mode": "rdp",
        "orders": ["2.0", "4.0"],
        "thresholds": ["0.5", "0.7"],
        "spent": {"rdp": ["0.6", "0.8"], "dead": [True, True]},
        "remaining": {"delta": "0.000001"},
        "delta_approx": "0.000002",
    }
    assert spent_fraction(view) == 1  # whatever δ_A has left


def test_fractions_round_by_the_one_display_rounding() -> None:
    assert rounded(Decimal("0.81730001"), up=True, places=4) == Decimal("0.8174")
    assert rounded(Decimal("0.00001"), up=True, places=4) == Decimal("0.0001")
    assert rounded(Decimal("0.81739999"), up=False, places=4) == Decimal("0.8173")
