"""The budget levels above a dataset: the organisation's cap and the analyst's quota.

Each level is one more privacy filter of the pure core; an invocation is admitted only if the
dataset, the organisation cap (when set) and the caller's quota (when set) all admit it. The
caller holds the three aggregates (``lock_levels``); this module only decides and applies.
The organisation cap's filter and a new organisation's row live here, not in
:mod:`app.services.organisations`: the principals service creates organisation rows too, and
the organisations service depends on the principals one (no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from app.accounting import (
    AccountingConfig,
    Decision,
    Declaration,
    FilterState,
    Reservation,
    admit,
    config_from_json,
    fmt,
    initial_state,
    make_config,
    state_from_json,
    state_to_json,
)
from app.accounting import cancel as accounting_cancel
from app.accounting import settle as accounting_settle
from app.db.models import Dataset, Grant, Organisation
from app.services._common import utc_now

ORGANISATION = "organisation"
QUOTA = "quota"

#: The filter used for bookkeeping only (settle/cancel of reservations) when no cap is set.
_UNCAPPED = (Decimal(10) ** 6, Decimal("0.999999999999"))


def new_organisation_row(organisation_id: str, name: str) -> Organisation:
    """A new organisation: no cap, nothing counted."""
    at = utc_now()
    return Organisation(
        id=organisation_id,
        name=name,
        cap_json=None,
        cap_state_json=state_to_json(initial_state(make_config(1, 0, "add_remove", None))),
        created_at=at,
        updated_at=at,
    )


def cap_filter(org: Organisation, relation: str) -> tuple[AccountingConfig, FilterState]:
    """The organisation-level ``basic`` filter under ``relation`` (a dataset's)."""
    eps, dlt = (org.cap_json["epsilon"], org.cap_json["delta"]) if org.cap_json else _UNCAPPED
    config = make_config(eps, dlt, relation, {"mode": "basic"})
    return config, state_from_json(config, org.cap_state_json)


@dataclass(frozen=True, slots=True)
class Level:
    """One upper level's filter, as loaded under the locks."""

    name: str  # ORGANISATION | QUOTA
    owner: str  # organisation id | analyst id
    config: AccountingConfig
    state: FilterState
    org: Organisation | None = None
    grant: Grant | None = None

    def store(self, state: FilterState) -> None:
        """Write the level's new state to its row (inside the caller's transaction)."""
        if self.org is not None:
            self.org.cap_state_json = state_to_json(state)
        elif self.grant is not None:
            self.grant.quota_state_json = state_to_json(state)


def organisation_level(org: Organisation | None, ds: Dataset, *, admitting: bool) -> Level | None:
    """The cap level; when admitting only if a cap is in force (settle/cancel of a reservation
    taken under a cap always go back to the counted state)."""
    if org is None or (admitting and org.cap_json is None):
        return None
    config, state = cap_filter(org, ds.relation)
    return Level(ORGANISATION, org.id, config, state, org=org)


def quota_level(grant: Grant | None) -> Level | None:
    if grant is None or grant.quota_config_json is None or grant.quota_state_json is None:
        return None
    config = config_from_json(grant.quota_config_json)
    return Level(
        QUOTA,
        grant.principal_id,
        config,
        state_from_json(config, grant.quota_state_json),
        grant=grant,
    )


def admit_level(
    level: Level, declaration: Declaration, conversion_delta: Decimal | None
) -> Decision:
    # Upper levels are leaf filters: the dataset's sub-ledger choice does not apply to them.
    return admit(level.config, level.state, declaration, conversion_delta=conversion_delta)


def finish_level(level: Level, reservation: Reservation, cell: str | None) -> Decision:
    """Settle (``cell``) or cancel this level's share of an ODP reservation."""
    own = replace(reservation, ledger=None)
    if cell is None:
        return accounting_cancel(level.config, level.state, own)
    return accounting_settle(level.config, level.state, own, cell)


def level_record(
    level: Level, decision: Decision, *, applied: bool, config: bool = False
) -> dict[str, Any]:
    """What the ledger entry records of one level (part of the hashed payload)."""
    out: dict[str, Any] = {
        "id": level.owner,
        "outcome": decision.outcome,
        "applied": applied,
        "charge": decision.charge if applied else None,
        "requested": decision.requested,
        "refund": decision.refund if applied else None,
        "reservation": decision.reservation.to_json() if applied and decision.reservation else None,
        "state": state_to_json(decision.state if applied else level.state),
    }
    if config:
        out["budget"] = {"epsilon": fmt(level.config.epsilon), "delta": fmt(level.config.delta)}
    return out
