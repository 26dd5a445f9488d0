"""What the accounting core charges one declaration on a fresh filter, and the check every
formula test of a declaration kind makes: the charge equals the cited formula up to a relative
tolerance, is never below it, and the check itself fails on a charge 5 % smaller."""

from __future__ import annotations

from typing import Any

from odometer_core.accounting import AccountingConfig, admit, initial_state, parse_declaration
from odometer_core.accounting.declarations import Declaration


def charge(config: AccountingConfig, mechanism: dict[str, Any] | Declaration) -> dict[str, Any]:
    """What ``config``'s filter charges ``mechanism`` from a fresh state (its budget must be far
    larger: the declaration is admitted)."""
    decl = mechanism if isinstance(mechanism, Declaration) else parse_declaration(mechanism)
    decision = admit(config, initial_state(config), decl)
    assert decision.admitted, decision.reason
    out: dict[str, Any] = decision.requested.to_json()
    return out


def matches(charged: float, formula: float, rel: float = 1e-9) -> bool:
    """The charge is the formula, up to a relative ``rel``, and never below it."""
    return formula <= charged <= formula * (1 + rel) + 1e-300


def check(charged: float, formula: float, rel: float = 1e-9) -> None:
    """:func:`matches`, and the check bites: a charge 5 % smaller would fail it."""
    assert matches(charged, formula, rel), (charged, formula)
    assert not matches(0.95 * charged, formula, rel)
