"""Organisations and their cap across datasets.

The cap rule (sound across accounting modes): an organisation's cap is a ``basic`` (ε, δ)
filter — Rogers–Roth–Ullman–Vadhan 2016 basic composition, as in the core's ``basic`` mode —
over every invocation on every dataset of the organisation. Each invocation is charged at the
organisation level exactly what the core's ``basic`` mode charges it (its (ε, δ) guarantee;
curve-based kinds converted at the cap's ``conversion_delta`` = δ_cap/10 unless the request
names one; ODP reserved at the worst cell and refunded on settle/cancel). Basic composition of
the guarantees is conservative whatever the datasets' own modes, and whether or not the
datasets overlap. The filter is built per invocation with *that dataset's* neighbouring
relation (each invocation's guarantee is stated under its own dataset's relation).

The cap counts invocations admitted while a cap is in force; removing the cap keeps the
counted state, and a new cap continues from it and may never be below it.
"""

from __future__ import annotations

from typing import Any

from app.db.models import Organisation
from app.db.uow import UnitOfWork
from app.services._common import new_id, utc_now
from app.services._levels import cap_filter, new_organisation_row
from app.services.errors import AlreadyExists, NotFound
from app.services.principals import Principal, Role
from odometer_core.accounting import change_budget as accounting_change_budget
from odometer_core.accounting import fmt, status


def organisation_view(org: Organisation) -> dict[str, Any]:
    config, state = cap_filter(org, "add_remove")
    counted = status(config, state)
    return {
        "id": org.id,
        "name": org.name,
        "cap": org.cap_json,
        "spent": counted["spent"],
        "reserved": counted["reserved"],
        "remaining": counted["remaining"] if org.cap_json else None,
        "created_at": org.created_at,
        "updated_at": org.updated_at,
    }


def create_organisation(uow: UnitOfWork, caller: Principal, name: str) -> dict[str, Any]:
    """Create an organisation (admin)."""
    caller.require(Role.ADMIN)
    with uow:
        if uow.organisations.by_name(name) is not None:
            raise AlreadyExists(f"an organisation named '{name}' exists")
        org = new_organisation_row(new_id("org"), name)
        uow.organisations.add(org)
        view = organisation_view(org)
        uow.commit()
    return view


def list_organisations(uow: UnitOfWork, caller: Principal) -> dict[str, Any]:
    """All organisations for the admin, the caller's own otherwise."""
    with uow.read_only():
        rows = uow.organisations.list(None if caller.is_admin else caller.organisation or "")
        return {"organisations": [organisation_view(o) for o in rows]}


def set_cap(
    uow: UnitOfWork, caller: Principal, organisation_id: str, cap: tuple[object, object] | None
) -> dict[str, Any]:
    """Set, change or remove (``None``) the cap; never below what is counted (409)."""
    caller.require(Role.CURATOR)
    with uow:
        org = uow.organisations.get_for_update(organisation_id)
        if org is None or not caller.can_see(org.id):
            raise NotFound(f"organisation '{organisation_id}' not found")
        if cap is None:
            org.cap_json = None
        else:
            config, state = cap_filter(org, "add_remove")
            new_config, _ = accounting_change_budget(config, state, cap[0], cap[1])
            org.cap_json = {"epsilon": fmt(new_config.epsilon), "delta": fmt(new_config.delta)}
        org.updated_at = utc_now()
        view = organisation_view(org)
        uow.commit()
    return view
