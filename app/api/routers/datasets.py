"""Datasets: create, list, status, budget changes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import QUERY_INTEGER, CuratorDep, ReaderDep, UowDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.api.reads import ReadsDep
from app.schemas.blocks import BlocksChange, BlocksChanged, BlocksPage
from app.schemas.datasets import (
    BudgetChangeOut,
    BudgetPatch,
    DatasetCreate,
    DatasetCreated,
    DatasetList,
    DatasetOut,
)
from app.services import blocks
from app.services import datasets as service

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], route_class=ExactJsonRoute)


@router.post(
    "",
    name="create_dataset",
    status_code=201,
    response_model=DatasetCreated,
    responses=responses(401, 403, 404, 413, 422, 503),
)
def create_dataset(body: DatasetCreate, principal: CuratorDep, uow: UowDep) -> service.DatasetView:
    """Create a dataset: budget (ε, δ), neighbouring relation, accounting mode."""
    return service.create_dataset(
        uow,
        principal,
        service.NewDataset(
            name=body.name,
            epsilon=body.budget.epsilon,
            delta=body.budget.delta,
            relation=body.relation,
            accounting=body.accounting_json(),
            organisation_id=body.organisation_id,
            partition=body.partition_json(),
        ),
    )


@router.get(
    "", name="list_datasets", response_model=DatasetList, responses=responses(401, 422, 503)
)
def list_datasets(
    principal: ReaderDep,
    read: ReadsDep,
    limit: Annotated[int, Query(ge=1, le=1000), QUERY_INTEGER] = 100,
    offset: Annotated[int, Query(ge=0, le=10**9), QUERY_INTEGER] = 0,
) -> service.DatasetPage:
    """Datasets visible to the caller, with their budget status."""
    return read(lambda uow: service.list_datasets(uow, principal, limit=limit, offset=offset))


@router.get(
    "/{dataset_id}",
    name="get_dataset",
    response_model=DatasetOut,
    responses=responses(401, 404, 422, 503),
)
def get_dataset(dataset_id: str, principal: ReaderDep, read: ReadsDep) -> service.DatasetView:
    """Budget status: total, spent, reserved, remaining (mode units and (ε, δ))."""
    return read(lambda uow: service.get_dataset(uow, principal, dataset_id), dataset=dataset_id)


@router.patch(
    "/{dataset_id}/budget",
    name="change_budget",
    response_model=BudgetChangeOut,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def change_budget(
    dataset_id: str, body: BudgetPatch, principal: CuratorDep, uow: UowDep
) -> service.DatasetView:
    """Raise or lower the budget, never below spent + reserved nor below the certified reading
    (a ledger entry); the response says what the change did to the capacity."""
    return service.change_budget(
        uow,
        principal,
        dataset_id,
        service.BudgetChange(
            epsilon=body.epsilon,
            delta=body.delta,
            sub_budget=body.sub_budget,
            final_conversion_delta=body.final_conversion_delta,
            workload=body.workload_json(),
        ),
    )


@router.post(
    "/{dataset_id}/blocks",
    name="change_blocks",
    response_model=BlocksChanged,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def change_blocks(
    dataset_id: str, body: BlocksChange, principal: CuratorDep, uow: UowDep
) -> blocks.BlocksAction:
    """Open blocks of a partitioned dataset (never opened before: a block's history never
    restarts) or retire open ones, on the public schedule the curator keeps (never because of
    what the records hold); a ledger entry."""
    opening = None if body.open is None else (body.open.from_, body.open.to)
    retiring = None if body.retire is None else (body.retire.from_, body.retire.to)
    return blocks.open_or_retire(uow, principal, dataset_id, opening=opening, retiring=retiring)


@router.get(
    "/{dataset_id}/blocks",
    name="list_blocks",
    response_model=BlocksPage,
    response_model_by_alias=True,
    responses=responses(401, 404, 422, 503),
)
def list_blocks(
    dataset_id: str,
    principal: ReaderDep,
    read: ReadsDep,
    from_: Annotated[str | None, Query(alias="from", max_length=64)] = None,
    to: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=blocks.MAX_PAGE), QUERY_INTEGER] = 100,
) -> blocks.BlocksPage:
    """A partitioned dataset's open blocks from ``from`` to ``to`` (keys, both included), as
    runs of blocks that share one history, each with its status and the fraction of its budget
    the certified reading has used; ``next`` is the ``from`` of the next page."""
    return read(
        lambda uow: blocks.blocks_page(
            uow, principal, dataset_id, first=from_, last=to, limit=limit
        ),
        dataset=dataset_id,
    )
