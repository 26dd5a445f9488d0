"""The budget levels above a dataset, as rows: the organisation's cap and the analyst's quota.

Each level is one more privacy filter of the pure core; the rule that combines them with the
dataset's is :func:`odometer_core.accounting.levels.decide_levels`. The caller holds the three
aggregates (:func:`app.writepath.admission.read_levels`); this module loads the upper levels'
filters from their rows, sets their new states on them and says what the ledger records of them.
The organisation cap's filter lives here (not in :mod:`app.services.organisations`) because both
the organisations and the principals services create organisation rows, and the invocations
service spends at the cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, overload

from app.db.models import Organisation
from app.db.rows import GrantRow, LevelOwners, OrgRow
from app.services._common import utc_now
from odometer_core.accounting import (
    AccountingConfig,
    Decision,
    FilterState,
    config_from_json,
    initial_state,
    make_config,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.amounts import Amount
from odometer_core.accounting.json_types import AmountJSON, CapOrder, LevelPart
from odometer_core.accounting.levels import (
    DROPPED,
    ORGANISATION,
    QUOTA,
    Filter,
    LevelOutcome,
    cap_order,
    cap_used_by,
    stored_cap,
)
from odometer_core.accounting.levels import level_record as core_level_record

__all__ = [
    "ORGANISATION",
    "QUOTA",
    "QUOTA_GRANT",
    "Level",
    "Uppers",
    "cap_filter",
    "dropped_quota_record",
    "level_record",
    "new_organisation_row",
    "organisation_level",
    "quota_level",
    "wire",
]

#: The key of an invocation's ``levels`` naming the grant whose quota holds it (its
#: ``granted_seq``; :class:`app.db.models.Invocation`).
QUOTA_GRANT: Final = "quota_grant"


# ---------------------------------------------------------------------------- amounts
@overload
def wire(amount: Amount) -> AmountJSON: ...
@overload
def wire(amount: None) -> None: ...
def wire(amount: Amount | None) -> AmountJSON | None:
    """A decision's amount (charge, requested, remaining, refund) as it is written to a
    response body, a ledger entry or a row: the one place amounts leave the core's types."""
    return None if amount is None else amount.to_json()


# ---------------------------------------------------------------------------- organisation cap
def new_organisation_row(organisation_id: str, name: str) -> Organisation:
    """A new organisation: no cap, nothing counted."""
    at = utc_now()
    return Organisation(
        id=organisation_id,
        name=name,
        cap_json=None,
        cap_state_json=state_to_json(initial_state(make_config(1, 0, "add_remove", None))),
        cap_config_json=None,
        cap_seq=0,
        cap_config_seq=None,
        cap_usage_json=None,
        created_at=at,
        updated_at=at,
    )


def cap_filter(org: Organisation | OrgRow, relation: str) -> tuple[AccountingConfig, FilterState]:
    """The organisation cap's filter as it decides under ``relation`` (a dataset's):
    :func:`odometer_core.accounting.levels.stored_cap` on its row."""
    return stored_cap(org.cap_config_json, org.cap_json, org.cap_state_json, relation)


def sequence(org: OrgRow) -> CapOrder:
    """What a ledger entry that touches the cap records of its order across the
    organisation's datasets (:func:`odometer_core.accounting.levels.cap_order`), the cap's
    ``seq`` moved on its row."""
    out = cap_order(
        org.cap_seq + 1,
        org.cap_config_seq,
        org.cap_config_json,
        org.cap_json,
        org.cap_state_json,
        org.cap_closed_json,
    )
    org.cap_seq += 1
    org.dirty = True
    if org.cap_config_seq is None:
        org.cap_config_seq = org.cap_seq
    return out


# ---------------------------------------------------------------------------- levels
@dataclass(frozen=True, slots=True)
class Level:
    """One upper level's filter, as loaded under the locks."""

    name: str  # ORGANISATION | QUOTA
    owner: str  # organisation id | analyst id
    config: AccountingConfig
    state: FilterState
    org: OrgRow | None = None
    grant: GrantRow | None = None

    @property
    def filter(self) -> Filter:
        return self.config, self.state

    @property
    def granted_seq(self) -> int | None:
        """The grant of a quota level (the ``seq`` of the entry that made it)."""
        return None if self.grant is None else self.grant.granted_seq

    def sequenced(self) -> CapOrder:
        """The order of this decision at the level (the cap's ``seq``; nothing for a quota,
        which lives in the dataset's ledger)."""
        return {} if self.org is None else sequence(self.org)

    def count_use(self, dataset_id: str) -> None:
        """One more invocation of ``dataset_id`` registered under the cap."""
        if self.org is not None:
            usage = dict(self.org.cap_usage_json or {})
            usage[dataset_id] = int(usage.get(dataset_id, 0)) + 1
            self.org.cap_usage_json = usage
            self.org.dirty = True

    def used_by(self, limit: int = 5) -> str:
        """The datasets that used the cap most, as a refusal says it."""
        return cap_used_by(None if self.org is None else self.org.cap_usage_json, limit)

    def store(self, state: FilterState) -> None:
        """Set the level's new state on its row (written with the transaction's other writes:
        :func:`app.db.writes.write`)."""
        if self.org is not None:
            self.org.cap_state_json = state_to_json(state)
            self.org.dirty = True
        elif self.grant is not None:
            self.grant.quota_state_json = state_to_json(state)
            self.grant.dirty = True


def organisation_level(org: OrgRow | None, relation: str, *, admitting: bool) -> Level | None:
    """The cap level under a dataset's ``relation``; when admitting only if a cap is in force
    (settle/cancel of a reservation taken under a cap always go back to the counted state)."""
    if org is None or (admitting and org.cap_json is None):
        return None
    config, state = cap_filter(org, relation)
    return Level(ORGANISATION, org.id, config, state, org=org)


def quota_level(grant: GrantRow | None) -> Level | None:
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


@dataclass(frozen=True, slots=True)
class Uppers:
    """The upper levels of one invocation (``None``: not in force)."""

    organisation: Level | None
    quota: Level | None

    def present(self) -> tuple[Level, ...]:
        """The levels in force, in the fixed order organisation, quota."""
        return tuple(lv for lv in (self.organisation, self.quota) if lv is not None)

    def filters(self) -> tuple[tuple[str, Filter], ...]:
        return tuple((lv.name, lv.filter) for lv in self.present())

    def owners(self, *, holding: bool) -> LevelOwners:
        """The invocation row's ``levels``: who holds its charge (nobody unless ``holding``),
        and the grant whose quota holds it."""
        out: LevelOwners = {
            ORGANISATION: self.organisation.owner if holding and self.organisation else None,
            QUOTA: self.quota.owner if holding and self.quota else None,
        }
        if holding and self.quota is not None and self.quota.granted_seq is not None:
            out[QUOTA_GRANT] = self.quota.granted_seq
        return out

    def apply(
        self, outcomes: tuple[LevelOutcome, ...], *, applied: bool, budget: bool
    ) -> dict[str, LevelPart]:
        """Store each level's new state (when ``applied``); return what the ledger entry
        records of each level (with the cap's budget when ``budget``: on registration)."""
        records: dict[str, LevelPart] = {}
        for level, outcome in zip(self.present(), outcomes, strict=True):
            order = level.sequenced()
            if applied:
                level.store(outcome.state)
            records[level.name] = level_record(
                level,
                outcome.decision,
                applied=applied,
                config=budget and level.name == ORGANISATION,
            )
            # a CapOrder's keys are a LevelPart's own (mypy wants an update to name every key)
            records[level.name].update(order)  # type: ignore[typeddict-item]
        return records


def level_record(
    level: Level, decision: Decision, *, applied: bool, config: bool = False
) -> LevelPart:
    """What the ledger entry records of one level (part of the hashed payload):
    :func:`odometer_core.accounting.levels.level_record`."""
    return core_level_record(
        level.owner,
        level.filter,
        decision,
        applied=applied,
        budget=config,
        granted_seq=level.granted_seq,
    )


def dropped_quota_record(owner: str, granted_seq: int | None) -> LevelPart:
    """What a settle or cancel entry records of the quota that reserved when its grant is gone
    (revoked, or replaced by a new grant): its share of the reservation is dropped, no quota
    changes (:func:`odometer_core.accounting.levels.quota_holds`). ``granted_seq``: the grant
    that reserved (``None``: unknown, reserved before grants were told apart)."""
    out: LevelPart = {
        "id": owner,
        "outcome": DROPPED,
        "applied": False,
        "charge": None,
        "requested": None,
        "refund": None,
        "reservation": None,
        "state": None,
    }
    if granted_seq is not None:
        out["grant"] = granted_seq
    return out
