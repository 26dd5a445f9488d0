"""Grants: which analysts may spend on a dataset, with optional quotas."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import CuratorDep, GrantReaderDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.schemas.tenancy import GrantCreate, GrantList, GrantOut
from app.services import grants as service

router = APIRouter(
    prefix="/v1/datasets/{dataset_id}/grants", tags=["grants"], route_class=ExactJsonRoute
)


@router.post(
    "",
    name="create_grant",
    status_code=201,
    response_model=GrantOut,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def create_grant(
    dataset_id: str, body: GrantCreate, principal: CuratorDep, uow: UowDep
) -> service.GrantView:
    """Let an analyst spend on the dataset, optionally within a quota (a ledger entry)."""
    quota = None if body.quota is None else (body.quota.epsilon, body.quota.delta)
    return service.create_grant(uow, principal, dataset_id, body.principal_id, quota)


@router.get(
    "",
    name="list_grants",
    response_model=GrantList,
    responses=responses(401, 403, 404, 503),
)
def list_grants(dataset_id: str, principal: GrantReaderDep, uow: UowDep) -> service.GrantList:
    """The dataset's grants and quota usage (curators, auditors)."""
    return service.list_grants(uow, principal, dataset_id)


@router.delete(
    "/{principal_id}",
    name="delete_grant",
    response_model=GrantOut,
    responses=responses(401, 403, 404, 409, 503),
)
def delete_grant(
    dataset_id: str, principal_id: str, principal: CuratorDep, uow: UowDep
) -> service.GrantView:
    """Revoke an analyst's grant (its quota state is dropped; a ledger entry)."""
    return service.delete_grant(uow, principal, dataset_id, principal_id)
