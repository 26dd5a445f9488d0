"""Heads that others keep: the signed tree heads published for witnesses to poll, with the
witness of ledger heads' cosignatures, and a dataset's acknowledged forks with their proofs
(see :mod:`app.services.heads`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.api.deps import QUERY_INTEGER, PrincipalDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.services import heads as service

router = APIRouter(tags=["checkpoints"], route_class=ExactJsonRoute)


class CosignedOut(BaseModel):
    epoch: int = Field(description="the witness's epoch (acknowledged losses before it)")
    size: int
    root: str = Field(description="RFC 9162 root, hex")
    cosigned_at: int = Field(description="POSIX seconds the cosignature states")
    note: str = Field(
        description="the operator's signed head with the witness's c2sp.org/tlog-cosignature "
        "line appended"
    )


class PublishedHeadOut(BaseModel):
    dataset_id: str
    size: int
    root: str = Field(description="RFC 9162 root of the first `size` entries, hex")
    note: str = Field(description="the current head, a c2sp.org/tlog-checkpoint signed now")
    cosigned: CosignedOut | None = Field(
        description="the last head the witness of ledger heads cosigned (null: none)"
    )


class HeadPageOut(BaseModel):
    heads: list[PublishedHeadOut]
    witness_vkey: str | None = Field(
        description="the witness of ledger heads' verifier key (odometer verify --cosigner); "
        "null when it cosigns nothing"
    )
    next_offset: int | None


class ForkOut(BaseModel):
    entry: dict[str, Any] = Field(description="the loss_acknowledged entry, as exported")
    proof: list[str] = Field(description="its RFC 9162 inclusion proof in the head, hex")


class ForksOut(BaseModel):
    dataset_id: str
    size: int
    root: str
    note: str = Field(description="the current head, signed now")
    forks: list[ForkOut]


@router.get(
    "/v1/ledger-heads",
    name="list_published_heads",
    response_model=HeadPageOut,
    responses=responses(401, 403, 409, 422, 503),
)
def list_published_heads(
    principal: PrincipalDep,
    uow: UowDep,
    limit: Annotated[int, Query(ge=1, le=1000), QUERY_INTEGER] = 100,
    offset: Annotated[int, Query(ge=0, le=10**9), QUERY_INTEGER] = 0,
) -> service.HeadPage:
    """The current signed tree head of every dataset the caller may see, for witnesses to
    poll (then `…/ledger/consistency?from=<the size they hold>`), with the last head the
    witness of ledger heads cosigned (409 CheckpointsDisabled without a checkpoint key)."""
    return service.published_heads(uow, principal, limit=limit, offset=offset)


@router.get(
    "/v1/datasets/{dataset_id}/ledger/forks",
    name="list_ledger_forks",
    response_model=ForksOut,
    responses=responses(401, 403, 404, 409, 503),
)
def list_ledger_forks(dataset_id: str, principal: PrincipalDep, uow: UowDep) -> service.ForksDoc:
    """The losses the operator acknowledged on this dataset (its `loss_acknowledged`
    entries), each with its inclusion proof in the current signed head: `odometer
    verify-receipt --forks` and `odometer verify --since … --forks` report a receipt or an
    earlier head they explain as forked, naming the acknowledgement."""
    return service.forks(uow, principal, dataset_id)
