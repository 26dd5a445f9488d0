"""Registering one invocation: what it brings to its transaction, how it is decided on its
locked levels, and what it writes.

The core decides a registration in one call, and prepares it in one before that
(:mod:`odometer_core.ledger.admission`): :func:`prepare` before any lock (the declaration
parsed, the fingerprint, the selection resolved; the charges computed when they may be
expensive, :func:`with_charges`), then, under the lock of its dataset's levels
(:mod:`app.writepath.locking`), on the state the previous registration of its group left
(:mod:`app.services.batching` runs the transaction): the idempotency lookup → the core's
:func:`~odometer_core.ledger.admission.admit` (the decision at every level, the ledger entry,
the levels' new states, the invocation row and the response's fields) → staged
(:func:`app.services._aggregate.stage_admission`, :func:`staged_levels`) → the response
rendered once (:func:`app.services.responses.render_registration`) and stored under the
idempotency key. A rejection is a decision, not an error: it is written to the ledger and
recorded as an invocation with status ``rejected``, and then answered with 409.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from app.db.blocks import BlockWindow, read_window
from app.db.rows import DatasetRow
from app.db.uow import Database, UnitOfWork
from app.db.writes import Writes
from app.services import _aggregate, idempotency
from app.services._aggregate import load_filter, stage_admission
from app.services._blocks import Resolution, not_open, partition_of, resolve
from app.services._common import new_id, utc_now
from app.services._levels import Uppers, organisation_level, quota_level
from app.services.charging import ChargeWorkers
from app.services.errors import BlockConflict, InvalidBlocks, NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal
from app.services.receipts import receipt_of
from app.services.responses import render_registration
from app.writepath import locking, write_path
from app.writepath.admission import Locked
from app.writepath.stored import stored
from odometer_core.accounting import Declaration
from odometer_core.accounting.blocks import Selected
from odometer_core.accounting.effort import may_be_expensive
from odometer_core.accounting.levels import Filter, LevelsDecision, decide_levels, precompute_levels
from odometer_core.ledger.admission import Admission, BadSelection, Prepared, RunRow, plan
from odometer_core.ledger.admission import admit as admit  # the call a test makes slow
from odometer_core.ledger.admission import charges as precharge
from odometer_core.ledger.admission import prepare as prepare_request
from odometer_core.ledger.blocks import Held, NotOpen, RunLimit
from odometer_core.partition import Partition, check_assertions

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


@dataclass(frozen=True, slots=True)
class RequestBody:
    """A registration's request as its schema validated it, the declaration not parsed yet:
    the core parses it when it prepares the registration (:func:`prepare`)."""

    mechanism: dict[str, Any]
    sub_budget: str | None = None
    conversion_delta: Decimal | None = None
    blocks: Any = None
    contribution: str | None = None
    neighbours: str | None = None


@dataclass(frozen=True, slots=True)
class Registration:
    """One registration waiting for its group's transaction (:mod:`app.services.batching`)."""

    principal: Principal
    dataset_id: str
    request: InvocationRequest
    key: str | None
    digest: str
    charges: dict[object, object] | None
    #: the request as the core prepared it (:func:`odometer_core.ledger.admission.prepare`)
    prepared: Prepared


def expensive(request: InvocationRequest) -> bool:
    """Whether preparing ``request`` may take long (its charges are computed before any lock,
    possibly waiting for a charge worker); a closed-form charge prepares without I/O."""
    return may_be_expensive(request.declaration)


def prepare(
    database: Database,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest | RequestBody,
    idempotency_key: str | None = None,
) -> Registration:
    """What a registration brings to its group, prepared by the core in one call (the
    declaration parsed, the fingerprint, on a dataset this process knows to be partitioned the
    selection resolved): nothing here touches the database. Its charges, when they may be
    expensive (:attr:`Prepared.expensive`), are computed next, before any lock
    (:func:`with_charges`)."""
    known, partition_json = write_path(database).partitions.get(dataset_id)
    declaration = request.mechanism if isinstance(request, RequestBody) else request.declaration
    prepared = prepare_request(
        dataset_id,
        declaration,
        sub_budget=request.sub_budget,
        conversion_delta=request.conversion_delta,
        blocks=request.blocks,
        contribution=request.contribution,
        neighbours=request.neighbours,
        partition=partition_of(partition_json) if known else None,
        keyed=idempotency_key is not None,
    )
    if isinstance(request, RequestBody):
        request = InvocationRequest(
            prepared.declaration,
            prepared.sub_budget,
            prepared.conversion_delta,
            prepared.blocks,
            prepared.contribution,
            prepared.neighbours,
        )
    return Registration(
        principal, dataset_id, request, idempotency_key, prepared.digest, None, prepared
    )


def with_charges(
    uow: UnitOfWork, item: Registration, charges: ChargeWorkers | None = None
) -> Registration:
    """``item`` with its charges computed before any lock, when they may be expensive
    (:attr:`Prepared.expensive`), by ``charges`` (``None``: in this thread), on the levels read
    without locking: the core's :func:`odometer_core.ledger.admission.charges`, one call, so
    that the decision under the lock only looks them up. A repeated idempotent request (its
    stored response is returned without deciding) computes none. Raises
    ``ChargeTooExpensive`` (422) or ``ChargeWorkersBusy`` (503): nothing is written."""
    if not item.prepared.expensive:
        return item
    with uow.read_only():
        if item.key is not None and stored(uow).get(item.principal.id, item.key):
            return item
        seen = locking.read(uow, item.principal.viewer, item.dataset_id, None)
        if seen is None:
            raise NotFound(f"dataset '{item.dataset_id}' not found")
    args = (item.prepared, seen.dataset, seen.org, seen.grant)
    known = precharge(*args) if charges is None else charges.compute(precharge, *args)
    return replace(item, charges=known)


def registration(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest | RequestBody,
    idempotency_key: str | None = None,
    charges: ChargeWorkers | None = None,
) -> Registration:
    """:func:`prepare`, then :func:`with_charges`, in this thread."""
    item = prepare(uow.database, principal, dataset_id, request, idempotency_key)
    return with_charges(uow, item, charges)


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
    what they change in ``writes``: each item is one call of the core
    (:func:`odometer_core.ledger.admission.admit`), on the rows as the previous one left them.
    Their idempotency keys were read with the lock statement, under the lock: a request with
    the same key that committed first is seen. An item's own refusal (a reused key, a
    declaration the accounting refuses) is its outcome; the others go on."""
    ds = locked.dataset
    partition = partition_of(ds.partition_json)
    prepared = [item.prepared for item in items]
    runs: Held | Sequence[RunRow] | None = None
    if partition is not None:
        if resolution is not None and resolution.partition is partition:
            prepared, window = resolution.prepared, resolution.window
        else:  # a partition learned with this lock: the selections resolved now
            prepared, window = plan(partition, prepared)
        if locked.window is not None and locked.window.covers(window):
            runs = locked.window.rows()
        else:
            runs = read_window(uow.connection(), ds.id, window) if window else []
    outcomes: list[Outcome] = []
    changes = None
    for item, request in zip(items, prepared, strict=True):
        owner = item.principal.id
        try:
            stored = idempotency.stored_response(uow, owner, item.key, item.digest)
            if stored is not None:
                outcomes.append(stored)
                continue
            decided = admit(
                request,
                ds,
                locked.org,
                locked.grant,
                partition=partition,
                runs=runs,
                charges=item.charges,
                actor=owner,
                at=utc_now(),
                invocation_id=new_id("inv"),
                accounting_version=_aggregate.ACCOUNTING_VERSION,
                signer=uow.signer,
                search_seconds=SEARCH_SECONDS,
            )
        except Exception as exc:  # nothing of this item was staged: the others go on
            outcomes.append(refused(exc, partition))
            continue
        if decided.held is not None:
            runs, changes = decided.held, decided.changes
        stage_admission(uow, writes, ds, decided)
        staged_levels(locked, decided)
        writes.invocations.append(decided.invocation)
        receipt = receipt_of(uow.signer, ds) if decided.admitted else None
        response = render_registration(decided, receipt)
        idempotency.record_response(uow, writes, owner, item.key, item.digest, ds.id, response)
        outcomes.append(response)
    if changes is not None and (changes[0] or changes[1]):
        writes.blocks.append(BlockWindow(ds.id, *changes))
    return outcomes


def staged_levels(locked: Locked, decided: Admission) -> None:
    """Set what a registration changed on the organisation's row (the cap's order, state and
    usage) and the grant's (its quota's state); written with the transaction's other writes
    (:func:`app.db.writes.write`)."""
    cap, org = decided.cap, locked.org
    if cap is not None:
        org.cap_seq, org.cap_config_seq = cap.cap_seq, cap.cap_config_seq
        if cap.cap_state_json is not None:
            org.cap_state_json = cap.cap_state_json
        if cap.cap_usage_json is not None:
            org.cap_usage_json = cap.cap_usage_json
        org.dirty = True
    if decided.quota_state_json is not None and locked.grant is not None:
        locked.grant.quota_state_json = decided.quota_state_json
        locked.grant.dirty = True


def refused(exc: Exception, partition: Partition | None) -> Exception:
    """The API's answer to what the core refused a request for, before deciding it: its
    selection (:class:`~odometer_core.ledger.admission.BadSelection`, blocks not open, a limit
    on runs: ``docs/operations.md``, *Limits*), or the core's own error."""
    if isinstance(exc, BadSelection):
        return InvalidBlocks(str(exc), field="blocks")
    if isinstance(exc, NotOpen) and partition is not None:
        return not_open(exc, partition)
    if isinstance(exc, RunLimit):
        if exc.per_request:
            return InvalidBlocks(str(exc), field="blocks")
        return BlockConflict(str(exc))
    return exc


#: The CPU a refusal may spend searching what would fit for a costly kind (under the lock).
SEARCH_SECONDS = 0.1


def known_window(
    uow: UnitOfWork, dataset_id: str, items: Sequence[Registration]
) -> Resolution | None:
    """The selections of ``items`` resolved when this process knows ``dataset_id`` is
    partitioned: the spans of runs they touch (:attr:`Resolution.window`) are read in the lock
    statement's round trip (:func:`app.writepath.locking.lock_levels`), and the selections are
    not resolved again under the lock (one request: as it was prepared); ``None`` otherwise."""
    known, partition_json = write_path(uow.database).partitions.get(dataset_id)
    if not known:
        return None
    partition = partition_of(partition_json)
    if partition is None:
        return None
    if len(items) == 1 and items[0].prepared.partition is partition:
        return Resolution(partition, [items[0].prepared], items[0].prepared.window)
    return Resolution(partition, *plan(partition, [item.prepared for item in items]))


def whole_dataset(ds: DatasetRow, request: InvocationRequest) -> Filter:
    """The dataset level of an invocation on a whole dataset (a selection of blocks there is
    :class:`InvalidBlocks`)."""
    resolve(None, request.blocks)
    return load_filter(ds)
