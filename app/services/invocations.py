"""Invocation use cases that are not a group's: register one invocation on its own, preview a
registration, read an invocation.

The HTTP route registers through :class:`app.services.batching.Registrar` (one caller's
concurrent registrations share a transaction); :func:`register_invocation` is the same
decision for a caller in process (the command line, tests, benchmarks), in a transaction of its
own. Settle and cancel are :mod:`app.services.reservations`'.
"""

from __future__ import annotations

from typing import Literal, TypedDict, cast

from app.db.models import Invocation
from app.db.uow import UnitOfWork
from app.schemas.invocations import InvocationOut, Preview
from app.services._aggregate import load_filter, visible_dataset
from app.services._blocks import PartitionLevel
from app.services._levels import Uppers, wire
from app.services.batching import register_alone
from app.services.charging import ChargeWorkers
from app.services.errors import NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal
from app.services.registration import (
    InvocationRequest,
    compute_charges,
    decide,
    expensive,
    read_levels,
    registration,
    whole_dataset,
)
from app.services.responses import reservation_json
from odometer_core.accounting import Capacity, capacity, memo
from odometer_core.accounting.blocks import Selected, affordable, selection_capacity
from odometer_core.accounting.json_types import BlockSpan, CapacityJSON
from odometer_core.accounting.levels import DATASET, Filter
from odometer_core.ledger.blocks import SHOWN_RANGES
from odometer_core.partition import Partition


class LevelFit(CapacityJSON):
    """How many more fit in a row at every level (:func:`how_many_fit`): the fewest any level
    admits, and the level that binds."""

    level: str


class BlocksPreview(TypedDict):
    """What a preview says of a partitioned dataset's selection (``Preview.blocks``): its
    blocks, those that can still afford the declaration and those that cannot (each as the
    core's key ranges, :meth:`~odometer_core.partition.Partition.keys`, at most
    :data:`~odometer_core.ledger.blocks.SHOWN_RANGES` of each), how many more fit in a row
    (:func:`how_many_fit` without its ``level``), and what a block protects."""

    selected: list[BlockSpan]
    affordable: list[BlockSpan]
    refused: list[BlockSpan]
    fit: CapacityJSON
    unit: Literal["record", "person"]


def register_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None = None,
    charges: ChargeWorkers | None = None,
) -> RecordedResponse:
    """Admit, reserve or reject one invocation, atomically with its ledger entry, in a
    transaction of its own (``charges``: where an expensive charge is computed; ``None``: in
    this thread)."""
    item = registration(uow, principal, dataset_id, request, idempotency_key, charges)
    return register_alone(uow, item)


def preview_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    charges: ChargeWorkers | None = None,
) -> Preview:
    """The decision a registration would get now; nothing is written."""
    with uow.read_only():
        ds, uppers = read_levels(uow, principal, dataset_id)
        fresh = load_filter(ds)
        request.check(ds)
        blocks = PartitionLevel.prepare(uow.connection, ds, [request.blocks])
        level = whole_dataset(ds, request) if blocks is None else blocks.level(0)
    # Nothing is written: the decision is taken on this snapshot, outside the transaction,
    # with the charges computed as for a registration (in a worker, within the CPU budget).
    known = compute_charges(charges, request, fresh, uppers) if expensive(request) else None
    with memo.charges(known):
        levels = decide(level, uppers, request, exhaustive=False)
        fit = how_many_fit(level, uppers, request)
        on_blocks = None
        if blocks is not None and isinstance(level, Selected):
            on_blocks = _blocks_preview(blocks.partition, level, request, fit)
    decision = levels.reported
    return Preview(
        status=decision.outcome,
        mechanism=request.declaration.to_json(),
        sub_budget=decision.sub_budget,
        charge=wire(decision.charge),
        requested=wire(decision.requested),
        remaining=wire(decision.remaining),
        reason=decision.reason,
        level=levels.refused_by,
        reservation=reservation_json(decision),
        fit=fit,
        blocks=on_blocks,
    )


def how_many_fit(
    dataset: Filter | Selected, uppers: Uppers, request: InvocationRequest
) -> LevelFit:
    """How many more of the request this caller could register in a row, nothing else
    admitted meanwhile: the fewest any level admits (each level is its own filter, charged
    once per invocation, so the n-th registration is admitted iff every level admits its n-th:
    the minimum is exact), each counted by :func:`~odometer_core.accounting.capacity` (the
    filter's own ``admit``, up to its limit). ``level`` names the level that binds; a
    declaration a level cannot account counts 0 there with the reason."""
    declaration, conversion = request.declaration, request.conversion_delta
    counts: list[tuple[str, Capacity]] = []
    try:
        if isinstance(dataset, Selected):
            own = selection_capacity(dataset, declaration, conversion_delta=conversion)
        else:
            own = capacity(
                *dataset, declaration, sub_budget=request.sub_budget, conversion_delta=conversion
            )
        counts.append((DATASET, own))
        for level in uppers.present():
            counts.append(
                (level.name, capacity(*level.filter, declaration, conversion_delta=conversion))
            )
    except ValueError as exc:  # refused by the accounting: the decision above says why
        return {"count": 0, "at_least": False, "reason": str(exc), "level": DATASET}
    name, fit = min(counts, key=lambda c: c[1].count)
    return {**fit.to_json(), "level": name}


def _blocks_preview(
    partition: Partition, selected: Selected, request: InvocationRequest, fit: LevelFit
) -> BlocksPreview:
    """Which blocks of the selection can still afford the declaration, and how many more of
    it fit in a row (:func:`how_many_fit`)."""
    declaration, conversion = request.declaration, request.conversion_delta
    yes, no = affordable(selected, declaration, conversion_delta=conversion)
    return {
        "selected": partition.keys(selected.ranges),
        "affordable": partition.keys(yes[:SHOWN_RANGES]),
        "refused": partition.keys(no[:SHOWN_RANGES]),
        "fit": cast(CapacityJSON, {k: v for k, v in fit.items() if k != "level"}),
        "unit": partition.unit,
    }


def _own_invocation(
    uow: UnitOfWork, principal: Principal, dataset_id: str, invocation_id: str
) -> Invocation:
    """The invocation; analysts only see their own (others' are 404, like missing ones)."""
    inv = uow.invocations.get(dataset_id, invocation_id)
    if inv is None or not principal.sees_invocation_of(inv.actor):
        raise NotFound(f"invocation '{invocation_id}' not found")
    return inv


def get_invocation(
    uow: UnitOfWork, principal: Principal, dataset_id: str, invocation_id: str
) -> InvocationOut:
    """One invocation with its charges and the ledger entries that concern it."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        inv = _own_invocation(uow, principal, ds.id, invocation_id)
        events = [
            {
                "seq": e.seq,
                "kind": e.kind,
                "at": e.at,
                "actor": e.actor,
                "charge": e.charge,
                "refund": e.refund,
                "hash": e.hash,
            }
            for e in uow.ledger.for_invocation(ds.id, inv.id)
        ]
        return InvocationOut.model_validate(
            {
                "id": inv.id,
                "dataset_id": inv.dataset_id,
                "status": inv.status,
                "mechanism": inv.declaration,
                "sub_budget": inv.sub_budget,
                "conversion_delta": inv.request.get("conversion_delta"),
                "charge": inv.charge,
                "requested": inv.requested,
                "refund": inv.refund,
                "reservation": inv.reservation,
                "cell": inv.cell,
                "reason": inv.reason,
                "actor": inv.actor,
                "levels": inv.levels,
                "created_at": inv.created_at,
                "updated_at": inv.updated_at,
                "events": events,
            }
        )
