"""Principals and their API keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api.deps import CuratorDep, PrincipalDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.schemas.tenancy import (
    KeyCreate,
    KeyCreated,
    KeyRevoked,
    Me,
    PrincipalCreate,
    PrincipalList,
    PrincipalOut,
)
from app.services import grants
from app.services import principals as service

router = APIRouter(tags=["principals"], route_class=ExactJsonRoute)


@router.post(
    "/v1/principals",
    name="create_principal",
    status_code=201,
    response_model=PrincipalOut,
    responses=responses(401, 403, 404, 413, 422, 503),
)
def create_principal(
    body: PrincipalCreate, principal: CuratorDep, uow: UowDep
) -> service.PrincipalView:
    """Create a principal (admin: any; curator: analysts and auditors of its organisation)."""
    return service.create_principal(
        uow, principal, body.name, service.Role(body.role), body.organisation_id
    )


@router.get(
    "/v1/principals",
    name="list_principals",
    response_model=PrincipalList,
    responses=responses(401, 503),
)
def list_principals(principal: PrincipalDep, uow: UowDep) -> service.PrincipalList:
    """Principals of the caller's organisation (admin: all)."""
    return service.list_principals(uow, principal)


@router.get("/v1/me", name="whoami", response_model=Me, responses=responses(401, 503))
def whoami(principal: PrincipalDep, uow: UowDep) -> grants.Me:
    """The caller: identity, role, and for an analyst its grants with each quota's reading
    and what is left of it (a dashboard's role-aware home)."""
    return grants.whoami(uow, principal)


@router.post(
    "/v1/principals/{principal_id}/keys",
    name="create_key",
    status_code=201,
    response_model=KeyCreated,
    responses=responses(401, 403, 404, 413, 422, 503),
)
def create_key(
    principal_id: str,
    principal: CuratorDep,
    uow: UowDep,
    body: Annotated[KeyCreate | None, Body()] = None,
) -> service.KeyCreatedView:
    """Issue an API key; the token is in this response only (stored as its SHA-256)."""
    expires = body.expires_at if body is not None else None
    return service.create_key(uow, principal, principal_id, expires)


@router.delete(
    "/v1/keys/{key_id}",
    name="revoke_key",
    response_model=KeyRevoked,
    responses=responses(401, 403, 404, 503),
)
def revoke_key(key_id: str, principal: PrincipalDep, uow: UowDep) -> service.KeyRevokedView:
    """Revoke a key (its owner, its organisation's curator, or an admin)."""
    return service.revoke_key(uow, principal, key_id)
