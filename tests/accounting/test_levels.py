"""The three-level decision (dataset → organisation cap → quota), without a database."""

from __future__ import annotations

from typing import Any

from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    Reservation,
    initial_state,
    make_config,
    parse_declaration,
    status,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.levels import (
    DATASET,
    ORGANISATION,
    QUOTA,
    decide_levels,
    finish_uppers,
)

Filter = tuple[AccountingConfig, FilterState]


def basic(epsilon: str, delta: str = "0.000001") -> Filter:
    config = make_config(epsilon, delta, "add_remove", {"mode": "basic"})
    return config, initial_state(config)


def spent(level: Filter, state: FilterState) -> Any:
    return status(level[0], state)["spent"]


def laplace(epsilon: str) -> Any:
    return parse_declaration({"type": "laplace", "scale": "1", "sensitivity": epsilon})


def pure(epsilon: str) -> Any:
    return parse_declaration({"type": "pure_dp", "epsilon": epsilon})


def test_the_organisation_cap_refuses_and_nothing_changes_anywhere() -> None:
    dataset, cap = basic("1"), basic("0.5")
    levels = decide_levels(dataset, laplace("0.6"), organisation=cap)
    assert levels.refused_by == ORGANISATION and not levels.admitted
    assert levels.dataset.decision.admitted  # the dataset alone would have admitted it
    refusal = levels.refusal
    assert refusal is not None and refusal.outcome == "rejected"
    assert refusal.requested.to_json() == {"epsilon": "0.6", "delta": "0"}
    assert refusal.remaining.to_json() == {"epsilon": "0.5", "delta": "0.000001"}
    assert levels.reported is refusal
    # every level keeps the state it held
    assert levels.dataset.state == dataset[1]
    (org,) = levels.uppers
    assert org.name == ORGANISATION and org.state == cap[1]


def test_the_quota_refuses_and_nothing_changes_anywhere() -> None:
    dataset, cap, quota = basic("1"), basic("5"), basic("0.3")
    levels = decide_levels(dataset, pure("0.4"), organisation=cap, quota=quota)
    assert levels.refused_by == QUOTA
    assert [o.name for o in levels.uppers] == [ORGANISATION, QUOTA]
    assert [o.decision.outcome for o in levels.uppers] == ["accepted", "rejected"]
    assert levels.dataset.state == dataset[1]
    assert [o.state for o in levels.uppers] == [cap[1], quota[1]]


def test_every_level_admits_and_each_is_charged_exactly() -> None:
    dataset, cap, quota = basic("1"), basic("5"), basic("2")
    levels = decide_levels(dataset, pure("0.4"), organisation=cap, quota=quota)
    assert levels.admitted and levels.refused_by is None and levels.refusal is None
    assert levels.reported is levels.dataset.decision
    charged = {"epsilon": "0.4", "delta": "0"}
    assert spent(dataset, levels.dataset.state) == charged
    org, q = levels.uppers
    assert spent(cap, org.state) == charged and spent(quota, q.state) == charged
    assert levels.upper(QUOTA) is q and levels.upper("nobody") is None


def test_the_dataset_refusal_wins_when_the_quota_refuses_too() -> None:
    dataset, quota = basic("0.3"), basic("0.2")
    levels = decide_levels(dataset, pure("0.5"), quota=quota)
    assert levels.refused_by == DATASET
    assert levels.refusal is levels.dataset.decision
    # registration decides every level (the ledger records them all) ...
    (q,) = levels.uppers
    assert q.decision.outcome == "rejected" and q.state == quota[1]
    # ... a preview stops at the first refusal
    assert decide_levels(dataset, pure("0.5"), quota=quota, exhaustive=False).uppers == ()


def test_without_upper_levels_the_dataset_decides_alone() -> None:
    dataset = basic("1")
    levels = decide_levels(dataset, pure("0.25"))
    assert levels.admitted and levels.uppers == ()
    assert spent(dataset, levels.dataset.state) == {"epsilon": "0.25", "delta": "0"}


def test_a_reservation_is_settled_and_cancelled_at_the_upper_levels() -> None:
    dataset, cap = basic("1"), basic("2")
    odp = parse_declaration(
        {
            "type": "odp",
            "cells": [{"name": "a", "epsilon": "0.2"}, {"name": "b", "epsilon": "0.5"}],
            "delta": "0.0000001",
        }
    )
    levels = decide_levels(dataset, odp, organisation=cap)
    assert levels.dataset.decision.outcome == "reserved"
    (org,) = levels.uppers
    reservation = levels.dataset.decision.reservation
    assert isinstance(reservation, Reservation)
    held = ((ORGANISATION, (cap[0], org.state)),)

    (settled,) = finish_uppers(held, reservation, "a")
    assert settled.decision.charge.to_json() == {"epsilon": "0.2", "delta": "0"}
    assert amount_json(settled.decision.refund) == {"epsilon": "0.3", "delta": "0"}
    assert spent(cap, settled.state) == {"epsilon": "0.2", "delta": "0.0000001"}

    (cancelled,) = finish_uppers(held, reservation, None)
    assert amount_json(cancelled.decision.refund) == {"epsilon": "0.5", "delta": "0.0000001"}
    assert spent(cap, cancelled.state) == {"epsilon": "0", "delta": "0"}
