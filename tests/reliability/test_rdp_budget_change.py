"""Regression (found by the mixed-lifecycle auditor): in ``rdp`` mode a budget
change must leave at least one *live* order within its threshold.

Before the fix, ``_over_budget`` counted dead orders as fitting: raise the budget (a dead order
stays dead but is now under its threshold), then lower it so that every live order crosses -
the change was accepted and every order was dead, a state the admission rule never allows.
Observed in ``tests/concurrency/test_mixed_lifecycle.py`` at 32 × 500 on both backends as
"every RDP order is dead" after a ``budget_changed`` entry.

That rule is the one of filters stored before accounting 1.4.0 (replayed with
``anchored=False``). Since 1.4.0 an order's threshold is a cap on its certified reading: an order
is live exactly while its running value is within its cap, whatever happened before, so the
invariant holds by construction (the second test).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from odometer_core.accounting.filters import (
    InvalidTransition,
    RDPConfig,
    RDPState,
    change_budget,
    make_config,
    status,
)
from odometer_core.accounting.modes import rdp


def _config(epsilon: str) -> RDPConfig:
    """A filter as stored before accounting 1.4.0 (no anchor, thresholds at the whole δ_c)."""
    one = Decimal("0.000001")
    return rdp.make(Decimal(epsilon), one, "add_remove", one, (8.0, 32.0), (0.5, 0.5), False)


def test_budget_change_that_would_kill_every_live_order_is_refused() -> None:
    low, high, mid = _config("1"), _config("3"), _config("2")
    assert low.thresholds[0] < mid.thresholds[0] < high.thresholds[0]
    # order 8 died under the low budget and is within the mid threshold now; order 32 is live
    # and within the high threshold but over the mid one
    s8 = (low.thresholds[0] + mid.thresholds[0]) / 2
    s32 = (mid.thresholds[1] + high.thresholds[1]) / 2
    state = RDPState((s8, s32), (True, False), Decimal(0))
    with pytest.raises(InvalidTransition) as refused:
        change_budget(high, state, "2", "0.000001", anchored=False)
    assert refused.value.code == "BudgetBelowSpent"
    # a change that keeps the live order within its threshold is still accepted
    config, kept = change_budget(high, state, "2.9", "0.000001", anchored=False)
    assert isinstance(kept, RDPState) and kept.dead == (True, False)
    assert isinstance(config, RDPConfig) and s32 <= config.thresholds[1]


def test_an_anchored_change_keeps_exactly_the_orders_within_their_caps_live() -> None:
    """Lower, raise, lower again: a change is accepted exactly when the certified reading
    (which no budget change moves) is within the new ε; after it an order is dead exactly when
    its running value is over its cap, and some order is live. An order that died under a low
    cap is live again once a raise lifts the cap above it (its ladder certifies it at every
    level)."""
    high = make_config("3", "0.000001", "add_remove", {"mode": "rdp", "orders": [8, 32]})
    assert isinstance(high, RDPConfig) and high.thresholds_top == high.thresholds
    # order 8 spent to 10 % of its creation threshold (where a level below reads less than ε_B),
    # order 32 to 99 %
    spent = (0.1 * high.thresholds[0], 0.99 * high.thresholds[1])
    state = RDPState(spent, (False, False), Decimal(0))
    reading = Decimal(status(high, state)["odometer"]["epsilon"])
    assert Decimal("2.9") < reading < Decimal("2.95")
    config: RDPConfig = high
    accepted: list[str] = []
    for eps in ("2.9", "4", "2.95", str(reading), "10"):
        try:
            new, new_state = change_budget(config, state, eps, "0.000001")
        except InvalidTransition as refused:
            assert refused.code == "BudgetBelowSpent" and Decimal(eps) < reading
            continue
        assert Decimal(eps) >= reading
        assert isinstance(new, RDPConfig) and isinstance(new_state, RDPState)
        assert Decimal(status(new, new_state)["odometer"]["epsilon"]) == reading
        assert new_state.dead == tuple(s > b for s, b in zip(spent, new.thresholds, strict=True))
        assert not all(new_state.dead)
        if eps == str(reading):  # order 8 holds the reading, order 32 (99 % of its top) cannot
            assert new_state.dead == (False, True)
        config, state = new, new_state
        accepted.append(eps)
    assert accepted == ["4", "2.95", str(reading), "10"]
    # raised to 10, order 32 revives: its cap is above its creation threshold
    assert state.dead == (False, False) and config.thresholds[1] > high.thresholds[1]
