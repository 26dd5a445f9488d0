"""Regression (found by the mixed-lifecycle auditor): in ``rdp`` mode a budget
change must leave at least one *live* order within its threshold.

Before the fix, ``_over_budget`` counted dead orders as fitting: raise the budget (a dead order
stays dead but is now under its threshold), then lower it so that every live order crosses -
the change was accepted and every order was dead, a state the admission rule never allows.
Observed in ``tests/concurrency/test_mixed_lifecycle.py`` at 32 × 500 on both backends as
"every RDP order is dead" after a ``budget_changed`` entry.
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
)


def _config(epsilon: str) -> RDPConfig:
    config = make_config(epsilon, "0.000001", "add_remove", {"mode": "rdp", "orders": [8, 32]})
    assert isinstance(config, RDPConfig)
    return config


def test_budget_change_that_would_kill_every_live_order_is_refused() -> None:
    low, high, mid = _config("1"), _config("3"), _config("2")
    assert low.thresholds[0] < mid.thresholds[0] < high.thresholds[0]
    # order 8 died under the low budget and is within the mid threshold now; order 32 is live
    # and within the high threshold but over the mid one
    s8 = (low.thresholds[0] + mid.thresholds[0]) / 2
    s32 = (mid.thresholds[1] + high.thresholds[1]) / 2
    state = RDPState((s8, s32), (True, False), Decimal(0))
    with pytest.raises(InvalidTransition) as refused:
        change_budget(high, state, "2", "0.000001")
    assert refused.value.code == "BudgetBelowSpent"
    # a change that keeps the live order within its threshold is still accepted
    config, kept = change_budget(high, state, "2.9", "0.000001")
    assert isinstance(kept, RDPState) and kept.dead == (True, False)
    assert isinstance(config, RDPConfig) and s32 <= config.thresholds[1]
