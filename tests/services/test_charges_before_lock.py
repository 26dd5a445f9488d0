"""Charges are computed before the budget's lock is taken, and a charge computed for another
configuration is never used (core/odometer_core/accounting/memo.py, app/services/invocations.py)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from app.db.uow import UnitOfWork
from app.services import invocations, registration
from app.services.principals import Principal, Role
from odometer_core.accounting import admit, initial_state, make_config, memo, parse_declaration
from odometer_core.accounting.amounts import EpsilonDelta
from odometer_core.accounting.levels import precompute_levels
from odometer_core.accounting.modes import basic
from tests.support import service_dataset

ADMIN = Principal("admin", Role.ADMIN, None)
DP_SGD = {"type": "dp_sgd", "noise_multiplier": "1.1", "sample_rate": "0.01", "steps": 1000}


def test_the_charge_is_computed_while_no_transaction_is_open(
    uow: UnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = {"id": service_dataset(uow, "before-lock", epsilon="10")}
    calls: list[bool] = []
    real = basic.eps_delta

    def spy(decl: Any, conversion_delta: Decimal, effort: Any = None) -> Any:
        if effort is None:  # the top-level computation of a charge, not a nested item
            calls.append(uow._open)  # is a unit of work (a transaction, a lock) open now?
        return real(decl, conversion_delta, effort)

    monkeypatch.setattr(basic, "eps_delta", spy)
    request = registration.InvocationRequest(parse_declaration(DP_SGD))
    body = json.loads(invocations.register_invocation(uow, ADMIN, ds["id"], request).body)
    assert body["status"] == "accepted"
    # computed once, with no transaction open; the decision under the lock looked it up
    assert calls == [False]
    preview = invocations.preview_invocation(uow, ADMIN, ds["id"], request)
    assert preview.charge == body["charge"]
    assert calls == [False, False]


def test_a_charge_computed_for_another_configuration_is_not_used() -> None:
    declaration = parse_declaration(DP_SGD)
    then = make_config("10", "0.00001", "add_remove", {"mode": "basic"})
    now = make_config(
        "10", "0.00001", "add_remove", {"mode": "basic", "conversion_delta": "0.0000001"}
    )
    table: dict[Any, Any] = precompute_levels(
        (then, initial_state(then)), declaration, None, None, None, None
    )
    # the charge (and its lower bound, ``None`` here) at the default conversion δ = δ_B/10
    assert {(name.rsplit(".", 1)[1], args[1]) for name, args in table} == {
        ("charge", Decimal("0.000001")),
        ("charge_floor", Decimal("0.000001")),
    }
    fresh = admit(now, initial_state(now), declaration)
    with memo.charges(table):
        decided = admit(now, initial_state(now), declaration)
    assert decided == fresh
    assert isinstance(decided.charge, EpsilonDelta)
    assert decided.charge.delta == Decimal("0.0000001")
    assert len(table) == 4  # computed again for the configuration in force, and kept
    with memo.charges(table):
        charge = admit(then, initial_state(then), declaration).charge
    assert isinstance(charge, EpsilonDelta) and charge.delta == Decimal("0.000001")
