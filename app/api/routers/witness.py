"""The witness of ledger heads (admin): its state, a check now, and the recovery of a dataset
whose ledger is behind it (see :mod:`app.services.witness` and ``docs/witness.md``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from app.api.deps import AdminDep, DatabaseDep, UowDep
from app.api.errors import Responses, responses
from app.api.jsonbody import ExactJsonRoute
from app.schemas._types import JSONObject
from app.schemas.common import ErrorBody
from app.services import witness as service

router = APIRouter(tags=["witness"], route_class=ExactJsonRoute)


class FrozenOut(BaseModel):
    dataset_id: str
    reason: str = Field(
        description="behind (entries lost), forked (another entry at the witnessed seq), "
        "unwitnessed (its head could not be witnessed), organisation (another dataset of its "
        "capped organisation is behind)"
    )
    witnessed_seq: int
    witnessed_hash: str | None
    database_seq: int
    sibling: str | None = Field(description="for organisation: the dataset that is behind")


class WitnessOut(BaseModel):
    enabled: bool = Field(description="false: ODOMETER_WITNESS_DIR is unset")
    location: str | None
    signed: bool = Field(description="records are signed with the checkpoint key")
    frozen: list[FrozenOut] = Field(description="datasets refusing writes in this process")


class TailIn(BaseModel):
    entries: list[JSONObject] = Field(
        description="ledger entries as exported (the whole ledger or a part holding the lost "
        "tail): those after the database's head are imported"
    )


class AcknowledgeIn(BaseModel):
    reason: str = Field(min_length=1, max_length=2000, description="recorded in the ledger")


_CONFLICT: Responses = {
    409: {
        "model": ErrorBody,
        "description": "WitnessDisabled (no witness configured), NotBehindWitness (nothing to "
        "recover), ConcurrentUpdate",
    }
}


@router.get(
    "/v1/witness", name="get_witness", response_model=WitnessOut, responses=responses(401, 403)
)
def get_witness(principal: AdminDep, database: DatabaseDep) -> service.WitnessStatus:
    """Whether heads are witnessed, where, and the datasets this process refuses writes to."""
    return service.witness_status(database)


@router.post(
    "/v1/witness/check",
    name="check_witness",
    response_model=WitnessOut,
    responses=responses(401, 403, 503),
)
async def check_witness(principal: AdminDep, database: DatabaseDep) -> service.WitnessStatus:
    """Compare every dataset's head with the witness now (as at start and periodically)."""
    await run_in_threadpool(service.check, database)
    return service.witness_status(database)


@router.post(
    "/v1/datasets/{dataset_id}/witness/import",
    name="import_ledger_tail",
    responses={**responses(401, 403, 404, 413, 422, 503), **_CONFLICT},
)
def import_ledger_tail(
    dataset_id: str, body: TailIn, principal: AdminDep, uow: UowDep
) -> JSONObject:
    """Append a frozen dataset's lost entries from an export taken before the loss: they must
    follow the database's head, end exactly at the witnessed head and replay (422 TailRefused
    otherwise; nothing changes). The dataset then serves writes again."""
    return service.import_tail(uow, principal, dataset_id, body.entries)


@router.post(
    "/v1/datasets/{dataset_id}/witness/acknowledge",
    name="acknowledge_ledger_loss",
    status_code=201,
    responses={**responses(401, 403, 404, 413, 422, 503), **_CONFLICT},
)
def acknowledge_ledger_loss(
    dataset_id: str, body: AcknowledgeIn, principal: AdminDep, uow: UowDep
) -> JSONObject:
    """Give up a frozen dataset's lost entries: a ``loss_acknowledged`` entry is written (the
    state does not move; what the lost entries spent is not counted) and the witness moves to
    it. The dataset then serves writes again."""
    return service.acknowledge_loss(uow, principal, dataset_id, body.reason)
