"""Registering one invocation: what it brings to its transaction, how it is decided on its
locked levels, and what it writes.

A registration is decided under the lock of its dataset's levels (:mod:`app.writepath.locking`), on
the state the previous registration of its group left (:mod:`app.services.batching` runs the
transaction): idempotency lookup → decide at every level
(:func:`odometer_core.accounting.levels.decide_levels`, pure) → stage the ledger entry, the
levels' new states and the invocation row → render the response once and store it under the
idempotency key. A rejection is a decision, not an error: it is written to the ledger and
recorded as an invocation with status ``rejected``, and then answered with 409.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from app.db.rows import DatasetRow
from app.db.uow import UnitOfWork
from app.db.writes import InvocationInsert, Writes
from app.services import idempotency
from app.services._aggregate import load_filter, stage_entry
from app.services._blocks import PartitionLevel, Resolution, known_resolution, resolve
from app.services._common import fingerprint, new_id, utc_now
from app.services._levels import ORGANISATION, QUOTA, Uppers, organisation_level, quota_level, wire
from app.services.charging import ChargeWorkers
from app.services.errors import NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal
from app.services.responses import Registered, render_registration, reservation_json
from app.writepath import locking, write_path
from app.writepath.admission import Locked
from app.writepath.stored import stored
from odometer_core.accounting import Declaration, fmt, memo, state_to_json
from odometer_core.accounting.blocks import Selected
from odometer_core.accounting.effort import may_be_expensive
from odometer_core.accounting.levels import (
    DATASET,
    Filter,
    LevelsDecision,
    decide_levels,
    precompute_levels,
)
from odometer_core.accounting.summary import COSTLY, SearchStopped, refusal
from odometer_core.ledger import EntryKind
from odometer_core.partition import check_assertions

#: What a registration's transaction answers it: its recorded response, or the error it raises.
Outcome = RecordedResponse | BaseException


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    """What an analyst asks for: a declaration plus the request extras."""

    declaration: Declaration
    sub_budget: str | None = None
    conversion_delta: Decimal | None = None
    #: a partitioned dataset's block selection, as sent (keys, or ``"all"``)
    blocks: Any = None
    #: what the analyst asserts of the declaration's neighbours (``check_assertions``)
    contribution: str | None = None
    neighbours: str | None = None

    def extras(self) -> dict[str, Any]:
        """The request's options as the response echoes them (the assertions only when
        sent, so that earlier requests, fingerprints and entries are as before)."""
        out: dict[str, Any] = {
            "sub_budget": self.sub_budget,
            "conversion_delta": None
            if self.conversion_delta is None
            else fmt(self.conversion_delta),
        }
        if self.contribution is not None:
            out["contribution"] = self.contribution
        if self.neighbours is not None:
            out["neighbours"] = self.neighbours
        return out

    def check(self, ds: DatasetRow) -> None:
        """Refuse (422) a declaration not stated for the neighbours ``ds``'s budget protects
        (:func:`odometer_core.partition.check_assertions`)."""
        check_assertions(
            None if ds.partition_json is None else ds.partition_json.get("unit"),
            ds.relation,
            self.declaration,
            contribution=self.contribution,
            neighbours=self.neighbours,
        )

    def fingerprinted(self) -> dict[str, Any]:
        """The options that give the request its meaning (the selection only when sent, so
        that whole-dataset fingerprints are as before)."""
        out = self.extras()
        if self.blocks is not None:
            out["blocks"] = self.blocks
        return out


@dataclass(frozen=True, slots=True)
class Registration:
    """One registration waiting for its group's transaction (:mod:`app.services.batching`)."""

    principal: Principal
    dataset_id: str
    request: InvocationRequest
    key: str | None
    digest: str
    charges: dict[object, object] | None


def expensive(request: InvocationRequest) -> bool:
    """Whether preparing ``request`` may take long (its charges are computed before any lock,
    possibly waiting for a charge worker); a closed-form charge prepares without I/O."""
    return may_be_expensive(request.declaration)


def registration(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None = None,
    charges: ChargeWorkers | None = None,
) -> Registration:
    """What a registration brings to its group: the request's fingerprint and, for a
    declaration whose charge may be expensive (:func:`expensive`), its charges computed before
    any lock, by ``charges`` (``None``: in this thread); for any other declaration nothing here
    touches the database."""
    digest = fingerprint(
        "register_invocation",
        dataset_id=dataset_id,
        declaration=request.declaration.to_json(),
        **request.fingerprinted(),
    )
    known = None
    if expensive(request):
        known = _charges_before_lock(uow, principal, dataset_id, request, idempotency_key, charges)
    return Registration(principal, dataset_id, request, idempotency_key, digest, known)


def read_levels(
    uow: UnitOfWork, principal: Principal, dataset_id: str
) -> tuple[DatasetRow, Uppers]:
    """The dataset and its upper levels as they are now, without locking (a read transaction
    must be open); a dataset the caller may not see is :class:`NotFound`."""
    seen = locking.read(uow, principal.viewer, dataset_id, None)
    if seen is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    org = organisation_level(seen.org, seen.dataset.relation, admitting=True)
    return seen.dataset, Uppers(org, quota_level(seen.grant))


def _charges_before_lock(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None,
    charges: ChargeWorkers | None,
) -> dict[object, object] | None:
    """The declaration's charges at every level, computed before any lock is taken, so that the
    decision under the lock only looks them up (:mod:`odometer_core.accounting.memo`). ``None``
    for a repeated idempotent request (its stored response is returned without deciding)."""
    with uow.read_only():
        if idempotency_key is not None and stored(uow).get(principal.id, idempotency_key):
            return None
        ds, uppers = read_levels(uow, principal, dataset_id)
        dataset = load_filter(ds)
    return compute_charges(charges, request, dataset, uppers)


def compute_charges(
    charges: ChargeWorkers | None, request: InvocationRequest, dataset: Filter, uppers: Uppers
) -> dict[object, object] | None:
    """The memo table of deciding ``request`` on these filters, computed by a charge worker
    with a CPU budget (:mod:`app.services.charging`), or in this thread without one (``None``).
    Raises ``ChargeTooExpensive`` (422) or ``ChargeWorkersBusy`` (503): nothing is written."""
    args = (
        dataset,
        request.declaration,
        uppers.organisation.filter if uppers.organisation else None,
        uppers.quota.filter if uppers.quota else None,
        request.sub_budget,
        request.conversion_delta,
    )
    if charges is None:
        return precompute_levels(*args)
    return charges.compute(precompute_levels, *args)


def decide(
    dataset: Filter | Selected,
    uppers: Uppers,
    request: InvocationRequest,
    *,
    exhaustive: bool = True,
) -> LevelsDecision:
    return decide_levels(
        dataset,
        request.declaration,
        organisation=uppers.organisation.filter if uppers.organisation else None,
        quota=uppers.quota.filter if uppers.quota else None,
        sub_budget=request.sub_budget,
        conversion_delta=request.conversion_delta,
        exhaustive=exhaustive,
        organisation_id=uppers.organisation.owner if uppers.organisation else None,
    )


def decide_in_order(
    uow: UnitOfWork,
    locked: Locked,
    items: Sequence[Registration],
    writes: Writes,
    resolution: Resolution | None = None,
) -> list[Outcome]:
    """Decide one dataset's ``items`` (one caller's) in order on its locked levels, staging
    what they change in ``writes``. Their idempotency keys were read with the lock statement,
    under the lock: a request with the same key that committed first is seen. An item's own
    refusal (a reused key, a declaration the accounting refuses) is its outcome; the others go
    on."""
    outcomes: list[Outcome] = []
    selections = [item.request.blocks for item in items]
    blocks = PartitionLevel.prepare(
        uow.connection, locked.dataset, selections, locked.window, resolution
    )
    for position, item in enumerate(items):
        owner = item.principal.id
        try:
            stored = idempotency.stored_response(uow, owner, item.key, item.digest)
            if stored is not None:
                outcomes.append(stored)
                continue
            uppers = Uppers(
                organisation_level(locked.org, locked.dataset.relation, admitting=True),
                quota_level(locked.grant),
            )
            item.request.check(locked.dataset)
            dataset = (
                whole_dataset(locked.dataset, item.request)
                if blocks is None
                else blocks.level(position)
            )
            with memo.charges(item.charges):
                levels = decide(dataset, uppers, item.request)
            if blocks is not None:
                blocks.check(levels)  # the limits on runs (docs/operations.md, Limits)
        except Exception as exc:  # nothing of this item was staged: the others go on
            outcomes.append(exc)
            continue
        registered = _stage(uow, writes, locked, item, uppers, levels, blocks, dataset)
        response = render_registration(registered, refusal_summary(levels, dataset, uppers, item))
        dataset_id = locked.dataset.id
        idempotency.record_response(uow, writes, owner, item.key, item.digest, dataset_id, response)
        outcomes.append(response)
    if blocks is not None:
        blocks.stage(writes)
    return outcomes


def refusal_summary(
    levels: LevelsDecision, dataset: Filter | Selected, uppers: Uppers, item: Registration
) -> dict[str, Any] | None:
    """A refusal summed up for the 409 (:func:`odometer_core.accounting.summary.refusal`):
    the refusing level's filter, what bound and what would fit instead. A selection of blocks
    names its refusing blocks instead (``blocks`` in the 409)."""
    refused_by, decision = levels.refused_by, levels.refusal
    if refused_by is None or decision is None or isinstance(dataset, Selected):
        return None
    request = item.request
    sub_budget = request.sub_budget if refused_by == DATASET else None
    if refused_by == DATASET:
        refusing = dataset
    else:
        level = uppers.organisation if refused_by == ORGANISATION else uppers.quota
        assert level is not None
        refusing = level.filter
    return refusal(
        *refusing,
        request.declaration,
        level=refused_by,
        reason=decision.reason,
        sub_budget=sub_budget,
        conversion_delta=request.conversion_delta,
        admits=_bounded(request, admitted_everywhere(dataset, uppers, request)),
        search=_cheap_search(request, dataset, uppers),
    )


#: The CPU a refusal may spend searching what would fit for a costly kind (under the lock).
SEARCH_SECONDS = 0.1


def _bounded(
    request: InvocationRequest, admits: Callable[[Declaration], bool]
) -> Callable[[Declaration], bool]:
    """``admits`` for a costly kind's search (:data:`~odometer_core.accounting.summary.
    COSTLY`), stopped after :data:`SEARCH_SECONDS` of this thread's CPU in all
    (:class:`~odometer_core.accounting.summary.SearchStopped`: what was not found by then is
    left out); unchanged for other kinds, whose candidates are closed forms."""
    if not isinstance(request.declaration, COSTLY):
        return admits
    deadline = time.thread_time() + SEARCH_SECONDS

    def bounded(declaration: Declaration) -> bool:
        if time.thread_time() > deadline:
            raise SearchStopped
        return admits(declaration)

    return bounded


def _cheap_search(request: InvocationRequest, dataset: Filter, uppers: Uppers) -> bool:
    """Whether a refusal may search what would fit: always, but for a training job (a costly
    kind, :data:`~odometer_core.accounting.summary.COSTLY`) when a level is in ``basic``,
    where every candidate is a PLD of its own — the search runs under the dataset's lock."""
    if not isinstance(request.declaration, COSTLY):
        return True
    levels = [dataset[0]] + [
        level.filter[0] for level in (uppers.organisation, uppers.quota) if level is not None
    ]
    return all(config.mode != "basic" for config in levels)


def admitted_everywhere(
    dataset: Filter, uppers: Uppers, request: InvocationRequest
) -> Callable[[Declaration], bool]:
    """Whether a declaration in place of ``request``'s would be admitted at every level, on the
    filters this decision was taken on (a refusal leaves them as they were): the admission of
    :func:`decide`, so that a refusal's suggestion (:func:`~odometer_core.accounting.summary.
    instead`) sent as given is admitted, not only by the level that refused."""

    def admits(declaration: Declaration) -> bool:
        candidate = replace(request, declaration=declaration)
        return decide(dataset, uppers, candidate, exhaustive=False).admitted

    return admits


def known_window(
    uow: UnitOfWork, dataset_id: str, requests: Sequence[InvocationRequest]
) -> Resolution | None:
    """The selections of ``requests`` resolved when this process knows ``dataset_id`` is
    partitioned: the spans of runs they touch (:attr:`Resolution.window`) are read in the lock
    statement's round trip (:func:`app.writepath.locking.lock_levels`), and the selections are not
    resolved again under the lock; ``None`` otherwise."""
    known, partition_json = write_path(uow.database).partitions.get(dataset_id)
    if not known:
        return None
    return known_resolution(partition_json, [request.blocks for request in requests])


def whole_dataset(ds: DatasetRow, request: InvocationRequest) -> Filter:
    """The dataset level of an invocation on a whole dataset (a selection of blocks there is
    :class:`InvalidBlocks`)."""
    resolve(None, request.blocks)
    return load_filter(ds)


def _reason(
    levels: LevelsDecision, uppers: Uppers, blocks: PartitionLevel | None = None
) -> str | None:
    """The recorded reason: the dataset's (on a partitioned dataset, naming the blocks that
    refused), or the level above it that refused (the cap names the datasets that used it)."""
    refusal = levels.refusal
    if refusal is not None and levels.refused_by == DATASET and blocks is not None:
        return blocks.refusal(levels)
    if refusal is None or levels.refused_by == DATASET:
        return levels.dataset.decision.reason
    reason = f"{levels.refused_by} level: {refusal.reason or 'budget exceeded'}"
    if levels.refused_by == ORGANISATION and uppers.organisation is not None:
        reason += f" (the cap is {uppers.organisation.used_by()})"
    return reason


def _stage(
    uow: UnitOfWork,
    writes: Writes,
    locked: Locked,
    item: Registration,
    uppers: Uppers,
    levels: LevelsDecision,
    blocks: PartitionLevel | None = None,
    dataset: Filter | Selected | None = None,
) -> Registered:
    """Set the levels' new states (if admitted), stage the ledger entry and the row."""
    at, invocation_id = utc_now(), new_id("inv")
    request, ds, actor = item.request, locked.dataset, item.principal.id
    row = _invocation_row(invocation_id, ds.id, actor, request, uppers, levels, at, blocks)
    records = uppers.apply(levels.uppers, applied=levels.admitted, budget=True)
    if levels.admitted and uppers.organisation is not None:
        uppers.organisation.count_use(ds.id)
    staged = None
    if blocks is not None and isinstance(dataset, Selected):
        staged = blocks.decided(levels, dataset)
        row["request"]["blocks"] = staged.selection
        state = staged.state
    else:
        state = state_to_json(levels.dataset.state)
    seq = stage_entry(
        uow,
        writes,
        ds,
        kind=EntryKind.for_invocation(row["status"]),
        actor=actor,
        at=at,
        invocation_id=invocation_id,
        declaration=row["declaration"],
        request=row["request"],
        charge=_dataset_charge(levels),
        requested=row["requested"],
        reservation=row["reservation"],
        reason=row["reason"],
        state=state,
        org=records.get(ORGANISATION),
        quota=records.get(QUOTA),
    )
    writes.invocations.append(row)
    return Registered(
        invocation_id,
        ds.id,
        row["declaration"],
        request.extras(),
        levels,
        row["reason"],
        seq,
        at,
        None if staged is None else staged.selected,
        None if staged is None else staged.refused,
    )


def _invocation_row(
    invocation_id: str,
    dataset_id: str,
    actor: str,
    request: InvocationRequest,
    uppers: Uppers,
    levels: LevelsDecision,
    at: str,
    blocks: PartitionLevel | None = None,
) -> InvocationInsert:
    """The ``invocations`` row of a registration, by column name."""
    decision, declaration = levels.dataset.decision, request.declaration.to_json()
    return {
        "id": invocation_id,
        "dataset_id": dataset_id,
        "status": decision.outcome if levels.admitted else "rejected",
        "kind": declaration["type"],
        "ledger": decision.sub_budget,  # the sub-budget's column kept its first name
        "declaration": declaration,
        "request": request.extras(),
        "charge": _dataset_charge(levels) or {},
        "requested": wire(decision.requested),
        "refund": None,
        "reservation": reservation_json(decision) if levels.admitted else None,
        "cell": None,
        "reason": _reason(levels, uppers, blocks),
        "actor": actor,
        "created_at": at,
        "updated_at": at,
        "levels": uppers.owners(holding=levels.admitted),
    }


def _dataset_charge(levels: LevelsDecision) -> dict[str, Any] | None:
    """The dataset's charge; refused above the dataset, nothing was charged here (null, not
    a zero charge)."""
    if levels.refused_by in (None, DATASET):
        return wire(levels.dataset.decision.charge)
    return None
