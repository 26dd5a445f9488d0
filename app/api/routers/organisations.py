"""Organisations and their caps."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api.deps import AdminDep, CuratorDep, PrincipalDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.api.reads import ReadsDep
from app.schemas._types import JSONObject
from app.schemas.tenancy import (
    CapacityOut,
    CapacityQuery,
    OrganisationCap,
    OrganisationCreate,
    OrganisationList,
    OrganisationOut,
    OrganisationReport,
)
from app.services import organisations as service

router = APIRouter(prefix="/v1/organisations", tags=["organisations"], route_class=ExactJsonRoute)


@router.post(
    "",
    name="create_organisation",
    status_code=201,
    response_model=OrganisationOut,
    responses=responses(401, 403, 409, 413, 422, 503),
)
def create_organisation(
    body: OrganisationCreate, principal: AdminDep, uow: UowDep
) -> service.OrganisationView:
    """Create an organisation (admin)."""
    return service.create_organisation(uow, principal, body.name)


@router.get(
    "",
    name="list_organisations",
    response_model=OrganisationList,
    responses=responses(401, 503),
)
def list_organisations(principal: PrincipalDep, uow: UowDep) -> service.OrganisationList:
    """All organisations (admin) or the caller's own, with the cap's usage."""
    return service.list_organisations(uow, principal)


@router.patch(
    "/{organisation_id}/cap",
    name="set_organisation_cap",
    response_model=OrganisationOut,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def set_organisation_cap(
    organisation_id: str,
    principal: CuratorDep,
    uow: UowDep,
    body: Annotated[OrganisationCap | None, Body()] = None,
) -> service.OrganisationView:
    """Set or change the cap across the organisation's datasets (``null`` removes it), in any
    mode while it has counted nothing, then in the same mode; never below what is counted or
    certified (409 BudgetBelowSpent, ModeFixed). With ``"replace": true`` a cap that has
    counted is replaced by one in any mode, its reading kept as a closed statement (409
    ReservationsOpen while a reservation is open). Refused while a dataset of the organisation
    is behind its witness (409 LedgerBehindWitness)."""
    if body is None:
        return service.set_cap(uow, principal, organisation_id, None)
    cap = (body.epsilon, body.delta)
    return service.set_cap(
        uow, principal, organisation_id, cap, body.accounting_json(), replace=body.replace
    )


@router.post(
    "/{organisation_id}/cap/capacity",
    name="organisation_cap_capacity",
    response_model=CapacityOut,
    responses=responses(401, 404, 409, 413, 422, 503),
)
def organisation_cap_capacity(
    organisation_id: str, body: CapacityQuery, principal: PrincipalDep, uow: UowDep
) -> JSONObject:
    """How many more of a declaration the cap admits if nothing else runs, each decided by the
    cap's filter on the state the previous one left (409 NoCap without a cap in force)."""
    return service.cap_capacity(
        uow,
        principal,
        organisation_id,
        body.to_declaration(),
        dataset_id=body.dataset_id,
        conversion_delta=body.conversion_delta,
    )


@router.get(
    "/{organisation_id}/report",
    name="organisation_report",
    response_model=OrganisationReport,
    responses=responses(401, 403, 404, 422, 503),
)
def organisation_report(
    organisation_id: str, principal: PrincipalDep, read: ReadsDep
) -> service.OrganisationReport:
    """The cap replayed from every dataset's ledger in organisation order: verified or the
    problems, the certified reading, and what each dataset drew (curators and auditors)."""
    return read(lambda uow: service.organisation_report(uow, principal, organisation_id))
