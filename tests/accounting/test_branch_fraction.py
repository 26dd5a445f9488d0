"""An rdp filter of accounting 1.6.0 admits while its ladder *or* its PLD branch has room, so
its one fraction (``fraction_spent``) and what it says is ``left`` come from whichever of the
two statements has more left, and what it says is left is what it admits.

The MNIST tutorial's DP-SGD job (N = 60,000, batch 256, σ = 1.12, 60 epochs) on (2.6, 10⁻⁵)
is admitted by the branch alone (its PLD ε at the first slot, 2.4082, where the ladder's
orders cannot hold it). Before the fraction read the branch, the summary said 100 % spent,
"rdp 0 of 0" left, while the filter still admitted a pure ε of 0.19: this test then failed on
``assert '1' == '0.9263'``."""

from __future__ import annotations

from decimal import Decimal

from odometer_core.accounting import filters
from odometer_core.accounting.declarations import parse_declaration
from odometer_core.accounting.summary import compose

JOB = {
    "type": "dp_sgd",
    "noise_multiplier": "1.12",
    "sample_rate": "0.0042666666666666667",
    "steps": 14100,
}


def _after_the_job() -> tuple[filters.AccountingConfig, filters.FilterState]:
    config = filters.make_config(Decimal("2.6"), Decimal("1e-5"), "add_remove", {"mode": "rdp"})
    decision = filters.admit(config, filters.initial_state(config), parse_declaration(JOB))
    assert decision.admitted
    return config, decision.state


def test_the_fraction_and_what_is_left_follow_the_branch() -> None:
    config, state = _after_the_job()
    view = filters.status(config, state)
    assert all(view["spent"]["dead"]) or view["odometer"]["source"] == "pld_branch"
    summary = compose(view)
    epsilon = Decimal(view["odometer"]["epsilon"])
    assert epsilon.quantize(Decimal("0.0001")) == Decimal("2.4082")
    # 2.4082 of 2.6 spent by the branch: 0.92621…, shown rounded up to 4 places
    assert summary["fraction_spent"] == "0.9263"
    assert summary["fraction_left"] == "0.0737"
    (left,) = summary["left"]
    assert left["unit"] == "epsilon" and left["budget"] == "2.6"
    assert Decimal(left["amount"]) == (Decimal("2.6") - epsilon).quantize(
        Decimal("1e-8"), rounding="ROUND_DOWN"
    )


def test_what_is_said_to_be_left_is_what_is_admitted() -> None:
    config, state = _after_the_job()
    left = Decimal(compose(filters.status(config, state))["left"][0]["amount"])
    inside = parse_declaration({"type": "pure_dp", "epsilon": str(left)})
    past = parse_declaration({"type": "pure_dp", "epsilon": str(left + Decimal("0.001"))})
    assert filters.admit(config, state, inside).admitted
    assert not filters.admit(config, state, past).admitted
