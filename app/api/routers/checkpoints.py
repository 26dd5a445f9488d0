"""Signed checkpoints of ledger heads: the verification key, a dataset's checkpoints, and
signing the current head on demand (see :mod:`app.services.checkpoints`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from app.api.deps import QUERY_INTEGER, GrantReaderDep, PrincipalDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.schemas.common import ErrorBody
from app.services import checkpoints as service
from app.services import receipts

router = APIRouter(tags=["checkpoints"], route_class=ExactJsonRoute)


class CheckpointKeyOut(BaseModel):
    enabled: bool = Field(description="false: this server signs no checkpoints (no key)")
    algorithm: str = Field(examples=["Ed25519"])
    key_id: str | None = Field(description="first 32 hex digits of SHA-256 of the raw public key")
    public_key: str | None = Field(description="SubjectPublicKeyInfo PEM")
    every: int | None = Field(description="the head is signed when seq is a multiple of this")


class CheckpointOut(BaseModel):
    dataset_id: str
    seq: int
    head_hash: str
    signed_at: str
    key_id: str
    algorithm: str
    signature: str = Field(description="base64 Ed25519 signature of the canonical statement")


class CheckpointPageOut(BaseModel):
    dataset_id: str
    checkpoints: list[CheckpointOut]


@router.get(
    "/v1/checkpoint-key",
    name="get_checkpoint_key",
    response_model=CheckpointKeyOut,
    responses=responses(401, 503),
)
def get_checkpoint_key(principal: PrincipalDep, uow: UowDep) -> service.KeyInfo:
    """The key checkpoints are signed with (``enabled`` false when none is configured).

    Any authenticated caller may read it, but it is a convenience, not the trust anchor: an
    auditor should pin the public key received from the operator out of band, since a key
    served by the server under audit proves nothing about that server. Hence no reason to
    open this route to anonymous callers either.
    """
    return service.public_key_info(uow.signer)


@router.get(
    "/v1/datasets/{dataset_id}/checkpoints",
    name="list_checkpoints",
    response_model=CheckpointPageOut,
    responses=responses(401, 403, 404, 422, 503),
)
def list_checkpoints(
    dataset_id: str,
    principal: GrantReaderDep,
    uow: UowDep,
    after_seq: Annotated[
        int,
        Query(ge=0, le=2**62, description="cursor: checkpoints with seq > this"),
        QUERY_INTEGER,
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000), QUERY_INTEGER] = 1000,
) -> service.CheckpointPage:
    """The dataset's signed checkpoints, oldest first (curators, auditors; `odometer verify
    EXPORT --checkpoints FILE --public-key PEM` reads this document as is)."""
    return service.list_checkpoints(uow, principal, dataset_id, after_seq=after_seq, limit=limit)


@router.post(
    "/v1/datasets/{dataset_id}/checkpoints",
    name="create_checkpoint",
    status_code=201,
    response_model=CheckpointOut,
    responses={
        200: {"model": CheckpointOut, "description": "This head was already signed"},
        **responses(401, 403, 404, 503),
        409: {
            "model": ErrorBody,
            "description": "CheckpointsDisabled (no key configured), or ConcurrentUpdate",
        },
    },
)
def create_checkpoint(
    dataset_id: str, principal: GrantReaderDep, uow: UowDep, response: Response
) -> service.CheckpointView:
    """Sign the dataset's current head now (201; 200 with the existing checkpoint if this
    head is already signed). Auditors may: it records a fact and spends no budget."""
    body, created = service.checkpoint_head(uow, principal, dataset_id)
    if not created:
        response.status_code = 200
    return body


class InclusionOut(BaseModel):
    seq: int
    entry_hash: str
    proof: list[str] = Field(description="RFC 9162 PATH(seq - 1, D[size]), bottom-up, hex")


class SignedHeadOut(BaseModel):
    dataset_id: str
    origin: str = Field(description="the log's name: origin line and key name of its notes")
    size: int = Field(description="the tree of the first `size` entries (the head's seq)")
    root: str = Field(description="RFC 9162 root of that tree, hex")
    note: str = Field(
        description="the signed tree head: a c2sp.org/tlog-checkpoint signed note (origin, "
        "size, base64 root; a signature line by the checkpoint key under the origin's name)"
    )
    key_name: str
    vkey: str = Field(description="the note verifier key (name+ID+base64 key) of the signature")
    inclusion: InclusionOut | None = Field(
        None, description="with seq: that entry's inclusion proof in this head"
    )


@router.get(
    "/v1/datasets/{dataset_id}/ledger/checkpoint",
    name="get_signed_tree_head",
    response_model=SignedHeadOut,
    responses=responses(401, 403, 404, 409, 422, 503),
)
def get_signed_tree_head(
    dataset_id: str,
    principal: PrincipalDep,
    uow: UowDep,
    seq: Annotated[
        int | None,
        Query(ge=1, le=2**62, description="also prove this entry's inclusion in the head"),
        QUERY_INTEGER,
    ] = None,
) -> receipts.SignedHead:
    """The ledger's current tree head (its size and Merkle root), signed now with the
    checkpoint key as a C2SP tlog-checkpoint note (409 CheckpointsDisabled without a key);
    with ``seq``, that entry's inclusion proof in it (`odometer verify-receipt`). For whoever
    may see the dataset. Beside the JSON checkpoints, which are unchanged: an auditor keeps
    it, and later checks a newer head extends it (`…/ledger/consistency`,
    `odometer verify --since`)."""
    return receipts.signed_head(uow, principal, dataset_id, seq)
