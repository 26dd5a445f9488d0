"""Invocation use cases: register (admit), preview, settle, cancel, read.

Register follows one path: lock the levels → idempotency lookup → decide at every level
(:func:`odometer_core.accounting.levels.decide_levels`, pure) → append the ledger entry, store the
levels' states and the invocation row → render the response once and store it under the
idempotency key → commit → return. A rejection is a decision, not an error: it is written to
the ledger and recorded as an invocation with status ``rejected``, and then answered with 409.
Settle and cancel follow the same path with the reservation's settle / cancel.

Seams: the reliability tests' deliberately broken builds replace :func:`stored_response`,
:func:`commit`, ``accounting_settle`` and ``accounting_cancel`` of this module, so these stay
module-level names that the steps below call through the module.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from functools import partial
from typing import Any, Final

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from app.db.admission import (
    DatasetRow,
    GrantRow,
    InvocationRow,
    Locked,
    OrgLock,
    OrgRow,
    StoredResponse,
    Writes,
    lock_grant,
    read_levels,
    read_many_levels,
    write,
)
from app.db.models import Invocation
from app.db.uow import UnitOfWork
from app.schemas.common import BudgetExceededBody, render
from app.schemas.invocations import InvocationCreated, InvocationFinished, InvocationOut, Preview
from app.services._aggregate import load_filter, stage_entry, visible_dataset
from app.services._common import fingerprint, new_id, utc_now
from app.services._levels import (
    ORGANISATION,
    QUOTA,
    QUOTA_GRANT,
    Uppers,
    dropped_quota_record,
    organisation_level,
    quota_level,
    wire,
)
from app.services.errors import (
    ConcurrentUpdate,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidOutput,
    InvocationNotReserved,
    NotFound,
)
from app.services.principals import Principal, Role
from odometer_core.accounting import (
    Decision,
    Declaration,
    DeclarationError,
    Reservation,
    cell_from_output,
    fmt,
    memo,
    parse_declaration,
    state_to_json,
)
from odometer_core.accounting import cancel as accounting_cancel
from odometer_core.accounting import settle as accounting_settle
from odometer_core.accounting.effort import may_be_expensive
from odometer_core.accounting.levels import (
    DATASET,
    Filter,
    LevelOutcome,
    LevelsDecision,
    decide_levels,
    finish_uppers,
    precompute_levels,
    quota_holds,
)
from odometer_core.ledger import EntryKind
from odometer_core.ledger import output_digest as sha256_of_output

#: Outcome codes of recorded responses that are not errors (the API maps them to 201 / 200).
CREATED = "created"
OK = "ok"
#: The outcome code of a refused registration (an error code: 409).
BUDGET_EXCEEDED = "BudgetExceeded"


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response rendered inside the transaction and stored verbatim under an idempotency key.

    ``outcome`` is :data:`CREATED`, :data:`OK` or an error code (``BudgetExceeded``);
    ``decision`` is the accounting outcome of a fresh request (``None`` for a replay).
    """

    outcome: str
    body: str
    decision: str | None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    """What an analyst asks for: a declaration plus the request extras."""

    declaration: Declaration
    sub_budget: str | None = None
    conversion_delta: Decimal | None = None

    def extras(self) -> dict[str, Any]:
        return {
            "sub_budget": self.sub_budget,
            "conversion_delta": None
            if self.conversion_delta is None
            else fmt(self.conversion_delta),
        }


@dataclass(frozen=True, slots=True)
class Registered:
    """A decided registration, as written: what its response is rendered from."""

    id: str
    dataset_id: str
    request: InvocationRequest
    declaration: dict[str, Any]
    levels: LevelsDecision
    reason: str | None
    ledger_seq: int
    at: str


@dataclass(frozen=True, slots=True)
class Finished:
    """A settled or cancelled reservation, as written."""

    id: str
    dataset_id: str
    status: str  # settled | cancelled
    cell: str | None
    dataset: Decision
    uppers: tuple[LevelOutcome, ...]
    ledger_seq: int
    at: str
    output_digest: str | None = None


def entry_kind(status: str) -> EntryKind:
    """The ledger entry kind of an invocation reaching ``status`` (the one place it is built)."""
    return EntryKind.for_invocation(status)


# ---------------------------------------------------------------------------- idempotency
def stored_response(
    uow: UnitOfWork, principal: Principal, key: str | None, digest: str
) -> RecordedResponse | None:
    """The stored response for ``key`` (same request), or None; a different request → 422."""
    if key is None:
        return None
    record = uow.idempotency.get(principal.id, key)
    if record is None:
        return None
    if not hmac.compare_digest(record.fingerprint, digest):
        raise IdempotencyKeyReused("this Idempotency-Key was already used with a different request")
    return RecordedResponse(record.outcome, record.response_body, None, replayed=True)


def record_response(
    uow: UnitOfWork,
    writes: Writes,
    principal: Principal,
    key: str | None,
    digest: str,
    dataset_id: str,
    response: RecordedResponse,
) -> None:
    """Store the answered bytes under ``key`` (in the transaction that did the work)."""
    if key is not None:
        writes.idempotency.append(
            {
                "principal_id": principal.id,
                "key": key,
                "fingerprint": digest,
                "dataset_id": dataset_id,
                "outcome": response.outcome,
                "response_body": response.body,
                "created_at": utc_now(),
            }
        )
        uow.idempotency.remember(
            principal.id, key, StoredResponse(digest, response.outcome, response.body)
        )


def _conflict(exc: IntegrityError) -> ConcurrentUpdate | IdempotencyConflict:
    """A unique-constraint backstop fired: a concurrent writer won (→ 409)."""
    if "idempotency_keys" in str(exc.orig):
        return IdempotencyConflict(
            "a request with this Idempotency-Key is being processed; retry to get its response"
        )
    return ConcurrentUpdate("the dataset changed concurrently; retry the request")


def commit(uow: UnitOfWork) -> None:
    """Commit; a unique-constraint backstop firing means a concurrent writer won (→ 409)."""
    try:
        uow.commit()
    except IntegrityError as exc:
        raise _conflict(exc) from None


def _write(uow: UnitOfWork, writes: Writes, locked: Locked, *grants: GrantRow | None) -> None:
    """Write the transaction's rows and the levels' new states."""
    _write_all(uow, writes, [locked.dataset], locked.org, grants)


def _write_all(
    uow: UnitOfWork,
    writes: Writes,
    datasets: Sequence[DatasetRow],
    org: OrgRow | None,
    grants: Sequence[GrantRow | None],
) -> None:
    """Write the transaction's rows and the new states of its datasets, organisation and grants
    (PostgreSQL raises a unique violation here, at the statement, not at commit)."""
    try:
        write(uow.connection(), writes, datasets, org, [g for g in grants if g])
    except IntegrityError as exc:
        raise _conflict(exc) from None


# ---------------------------------------------------------------------------- locking
def lock_levels(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    *,
    admitting: bool,
    invocation_id: str | None = None,
    keys: Sequence[str] = (),
) -> Locked:
    """Lock every level of an invocation on ``dataset_id`` in one statement (organisation →
    dataset → the caller's grant; :func:`app.db.admission.read_levels`) as the caller may see
    them, else :class:`NotFound` (no cross-organisation existence leak: a dataset the caller
    may not see is never locked).

    ``admitting``: an admission under an organisation without a cap does not write the
    organisation row, so it shares the row instead of holding it alone; otherwise every
    admission on any dataset of the organisation would queue behind every other, and many
    datasets of one organisation would be served far more slowly than the same datasets each
    in an organisation of its own (``benchmarks/RESULTS.md``, *Measurements once quoted in the
    code*). Settle and cancel may write the cap's state and always hold it alone.
    Whether a cap is in force is guessed from the last time this process saw the dataset; a
    wrong ``share`` guess is rolled back and the levels are locked again, the organisation
    alone (a shared lock is never upgraded: two sharers upgrading deadlock).

    ``keys``: the caller's idempotency keys whose stored responses the transaction needs, read
    right after the lock statement (on PostgreSQL in its round trip; under the lock, so a
    request with the same key that committed first is seen).
    """
    modes = uow.database.org_modes
    org_lock: OrgLock = modes.guess(dataset_id) if admitting else "update"
    locked = _levels(uow, principal, dataset_id, org_lock, invocation_id, keys)
    capped = locked.org.cap_json is not None
    modes.learn(dataset_id, capped)
    if capped and org_lock == "share":
        uow.rollback()  # and what the keys read: read again under the new lock
        locked = _levels(uow, principal, dataset_id, "update", invocation_id, keys)
    return locked


def _lock_shared(
    uow: UnitOfWork, principal: Principal, dataset_ids: Sequence[str], keys: Sequence[str] = ()
) -> dict[str, Locked]:
    """Lock the levels of several datasets in one statement (in the order of their ids, each
    organisation row shared; :func:`app.db.admission.read_many_levels`), as the caller may see
    them: a dataset it may not see is missing from the answer. Raises :class:`_CapAppeared`
    when one of the organisations has a cap (which the process did not know of). ``keys``: as
    for :func:`lock_levels`."""
    found = read_many_levels(
        uow.connection(),
        dataset_ids,
        scope=None if principal.is_admin else principal.organisation,
        analyst=principal.id if principal.role is Role.ANALYST else None,
        then=_prefetch(uow, principal, keys),
    )
    modes = uow.database.org_modes
    capped = [d for d, locked in found.items() if locked.org.cap_json is not None]
    for dataset_id, locked in found.items():
        modes.learn(dataset_id, locked.org.cap_json is not None)
    if capped:
        raise _CapAppeared(capped[0])
    return found


def _prefetch(
    uow: UnitOfWork, principal: Principal, keys: Sequence[str]
) -> Callable[[], None] | None:
    """Reading the stored responses of ``keys``, to follow a lock statement (``None``: none)."""
    if not keys:
        return None
    return partial(uow.idempotency.prefetch, principal.id, keys)


class _CapAppeared(Exception):
    """A cap came into force on a dataset's organisation since this process last saw it, in a
    transaction that locked the organisation row shared with other datasets' rows (it may not
    be upgraded there: two sharers upgrading deadlock)."""


def _levels(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    org_lock: OrgLock | None,
    invocation_id: str | None = None,
    keys: Sequence[str] = (),
) -> Locked:
    """The levels as the caller may see them (locked unless ``org_lock`` is ``None``)."""
    locked = read_levels(
        uow.connection(),
        dataset_id,
        scope=None if principal.is_admin else principal.organisation,
        analyst=principal.id if principal.role is Role.ANALYST else None,
        org_lock=org_lock,
        invocation_id=invocation_id,
        then=_prefetch(uow, principal, keys),
    )
    if locked is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    return locked


# ---------------------------------------------------------------------------- register
@dataclass(frozen=True, slots=True)
class Registration:
    """One registration waiting for its group's transaction (:mod:`app.db.groups`)."""

    principal: Principal
    dataset_id: str
    request: InvocationRequest
    key: str | None
    digest: str
    charges: dict[object, object] | None


def group_key(principal: Principal) -> str:
    """The line a registration waits in for its group (:mod:`app.db.groups`): one per caller,
    whatever the dataset."""
    return principal.id


def register_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None = None,
) -> RecordedResponse:
    """Admit, reserve or reject one invocation, atomically with its ledger entry.

    Concurrent registrations of one caller in this process share a transaction (group commit,
    :mod:`app.db.groups`): on one dataset, decided one after another in arrival order, one
    ledger entry each; across datasets (of organisations without a cap), all locked in one
    statement and written in one; one commit, each answered only after it."""
    item = registration(uow, principal, dataset_id, request, idempotency_key)
    groups = uow.database.groups
    if groups is None:
        return _register_alone(uow, item)
    outcome: RecordedResponse = groups.run(group_key(principal), item, partial(register_group, uow))
    return outcome


def registration(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None = None,
) -> Registration:
    """What a registration brings to its group: the request's fingerprint and, for a
    declaration whose charge may be expensive, its charges computed before any lock (which
    reads the database and may wait for a charge worker); for any other declaration nothing
    here touches the database (:func:`register_invocation` runs the group; the lean edge, with
    several requests in flight, awaits it on the event loop: ``GroupCommit.run_async``)."""
    digest = fingerprint(
        "register_invocation",
        dataset_id=dataset_id,
        declaration=request.declaration.to_json(),
        **request.extras(),
    )
    known = _charges_before_lock(uow, principal, dataset_id, request, idempotency_key)
    return Registration(principal, dataset_id, request, idempotency_key, digest, known)


Outcome = RecordedResponse | BaseException


def _register_alone(uow: UnitOfWork, item: Registration) -> RecordedResponse:
    outcome = _register_together(uow, (item,))[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def register_group(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """The outcomes of a group, in as few transactions as are safe (:func:`_transactions`)."""
    outcomes: list[Outcome | None] = [None] * len(items)
    for members in _transactions(uow, items):
        done = _register_part(uow, [items[i] for i in members])
        for i, outcome in zip(members, done, strict=True):
            outcomes[i] = outcome
    return [o for o in outcomes if o is not None]


def _transactions(uow: UnitOfWork, items: Sequence[Registration]) -> list[list[int]]:
    """A group's members (their positions), split into the transactions that decide them.

    The datasets whose organisation is known to have no cap share one transaction: their
    organisation rows are only shared-locked, and their dataset rows are locked in the order of
    their ids, so no two such transactions (of this or another process) can wait on each other
    in a cycle. A dataset under a capped organisation holds its organisation row alone: two
    transactions holding two such rows could each wait for the other's, so each of those
    datasets gets a transaction of its own, as a request alone does. Arrival order within a
    dataset is kept in every case."""
    by_dataset = _by_dataset(items)
    if len(by_dataset) == 1:
        return [list(range(len(items)))]
    guess = uow.database.org_modes.guess
    shared: list[int] = []
    alone: list[list[int]] = []
    for dataset_id, members in by_dataset.items():
        if guess(dataset_id) == "share":
            shared.extend(members)
        else:
            alone.append(members)
    return ([sorted(shared)] if shared else []) + alone


def _by_dataset(items: Sequence[Registration]) -> dict[str, list[int]]:
    """The positions of ``items`` by dataset, in arrival order."""
    by_dataset: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_dataset.setdefault(item.dataset_id, []).append(i)
    return by_dataset


def _register_part(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """The outcomes of one transaction's members; a transaction that failed never half-applies
    (nothing of it was committed), and each of its requests is then run alone, for its own
    answer."""
    try:
        return _register_together(uow, items)
    except Exception as exc:
        if len(items) == 1:
            return [exc]
    outcomes: list[Outcome] = []
    for item in items:
        try:
            outcomes.append(_register_alone(uow, item))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _register_together(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """Decide ``items`` (one caller) in one transaction: the levels of their datasets locked at
    once, in the order of the datasets' ids; each dataset's members decided in arrival order on
    the state the previous one left; one write for all; one commit. An item's own refusal (a
    dataset it may not see, a reused key, a declaration the accounting refuses) is its outcome;
    the others go on. With several datasets, a cap found in force where none was known fails
    the transaction (:class:`_CapAppeared`)."""
    principal = items[0].principal
    by_dataset = _by_dataset(items)
    datasets = sorted(by_dataset)
    outcomes: list[Outcome | None] = [None] * len(items)
    with ExitStack() as held:
        for dataset_id in datasets:  # this process's turns, in the order of the row locks
            held.enter_context(uow.turn(dataset_id))
        held.enter_context(uow.core())
        keys = [item.key for item in items if item.key is not None]
        if len(datasets) == 1:
            only = lock_levels(uow, principal, datasets[0], admitting=True, keys=keys)
            found = {datasets[0]: only}
        else:
            found = _lock_shared(uow, principal, datasets, keys)
        writes = Writes()
        for dataset_id in datasets:
            members = by_dataset[dataset_id]
            locked = found.get(dataset_id)
            decided: Sequence[Outcome] = (
                [NotFound(f"dataset '{dataset_id}' not found")] * len(members)
                if locked is None
                else _decide_group(uow, principal, locked, [items[i] for i in members], writes)
            )
            for i, outcome in zip(members, decided, strict=True):
                outcomes[i] = outcome
        if writes:
            levels = list(found.values())
            org = levels[0].org if len(levels) == 1 else None  # shared rows are never written
            _write_all(uow, writes, [lv.dataset for lv in levels], org, [lv.grant for lv in levels])
            commit(uow)
    return [o for o in outcomes if o is not None]


def _decide_group(
    uow: UnitOfWork,
    principal: Principal,
    locked: Locked,
    items: Sequence[Registration],
    writes: Writes,
) -> list[Outcome]:
    """Decide one dataset's ``items`` in order on its locked levels, staging what they change
    in ``writes``. Their idempotency keys were read with the lock statement (:func:`lock_levels`,
    :func:`_lock_shared`), under the lock: a request with the same key that committed first is
    seen."""
    outcomes: list[Outcome] = []
    for item in items:
        try:
            stored = stored_response(uow, principal, item.key, item.digest)
            if stored is not None:
                outcomes.append(stored)
                continue
            uppers = Uppers(
                organisation_level(locked.org, locked.dataset.relation, admitting=True),
                quota_level(locked.grant),
            )
            with memo.charges(item.charges):
                levels = _decide(load_filter(locked.dataset), uppers, item.request)
        except Exception as exc:  # nothing of this item was staged: the others go on
            outcomes.append(exc)
            continue
        registered = _write_registration(uow, writes, principal, locked, item, uppers, levels)
        response = _render_registration(registered)
        record_response(uow, writes, principal, item.key, item.digest, locked.dataset.id, response)
        outcomes.append(response)
    return outcomes


def _read_levels(
    uow: UnitOfWork, principal: Principal, dataset_id: str
) -> tuple[DatasetRow, Uppers]:
    """The dataset and its upper levels as they are now, without locking (a read
    transaction must be open)."""
    seen = _levels(uow, principal, dataset_id, None)
    org = organisation_level(seen.org, seen.dataset.relation, admitting=True)
    return seen.dataset, Uppers(org, quota_level(seen.grant))


def _charges_before_lock(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None,
) -> dict[object, object] | None:
    """The declaration's charges at every level, computed before any lock is taken, so that the
    decision under the lock only looks them up (:mod:`odometer_core.accounting.memo`). ``None`` for
    declarations whose charge is a closed form, and for a repeated idempotent request (its
    stored response is returned without deciding anything)."""
    if not may_be_expensive(request.declaration):
        return None
    with uow.read_only():
        if idempotency_key is not None and uow.idempotency.get(principal.id, idempotency_key):
            return None
        ds, uppers = _read_levels(uow, principal, dataset_id)
        dataset = load_filter(ds)
    return _compute_charges(uow, request, dataset, uppers)


def _compute_charges(
    uow: UnitOfWork, request: InvocationRequest, dataset: Filter, uppers: Uppers
) -> dict[object, object] | None:
    """The memo table of deciding ``request`` on these filters, computed by a charge worker
    with a CPU budget (:mod:`app.charging`), or in this thread without one. Raises
    ``ChargeTooExpensive`` (422) or ``ChargeWorkersBusy`` (503): nothing is written then."""
    args = (
        dataset,
        request.declaration,
        uppers.organisation.filter if uppers.organisation else None,
        uppers.quota.filter if uppers.quota else None,
        request.sub_budget,
        request.conversion_delta,
    )
    workers = uow.charges
    if workers is None:
        return precompute_levels(*args)
    return workers.compute(precompute_levels, *args)


def _decide(
    dataset: Filter, uppers: Uppers, request: InvocationRequest, *, exhaustive: bool = True
) -> LevelsDecision:
    return decide_levels(
        dataset,
        request.declaration,
        organisation=uppers.organisation.filter if uppers.organisation else None,
        quota=uppers.quota.filter if uppers.quota else None,
        sub_budget=request.sub_budget,
        conversion_delta=request.conversion_delta,
        exhaustive=exhaustive,
    )


def _reason(levels: LevelsDecision) -> str | None:
    """The recorded reason: the dataset's, or the level above it that refused."""
    refusal = levels.refusal
    if refusal is None or levels.refused_by == DATASET:
        return levels.dataset.decision.reason
    return f"{levels.refused_by} level: {refusal.reason or 'budget exceeded'}"


def _write_registration(
    uow: UnitOfWork,
    writes: Writes,
    principal: Principal,
    locked: Locked,
    item: Registration,
    uppers: Uppers,
    levels: LevelsDecision,
) -> Registered:
    """Set the levels' new states (if admitted), stage the ledger entry and the row."""
    at, invocation_id = utc_now(), new_id("inv")
    request, ds = item.request, locked.dataset
    records = uppers.apply(levels.uppers, applied=levels.admitted, budget=True)
    row = _invocation_row(invocation_id, ds.id, principal, request, uppers, levels, at)
    seq = stage_entry(
        uow,
        writes,
        ds,
        kind=entry_kind(row["status"]),
        actor=principal.id,
        at=at,
        invocation_id=invocation_id,
        declaration=row["declaration"],
        request=row["request"],
        charge=_dataset_charge(levels),
        requested=row["requested"],
        reservation=row["reservation"],
        reason=row["reason"],
        state=state_to_json(levels.dataset.state),
        org=records.get(ORGANISATION),
        quota=records.get(QUOTA),
    )
    writes.invocations.append(row)
    return Registered(
        invocation_id, ds.id, request, row["declaration"], levels, row["reason"], seq, at
    )


def _invocation_row(
    invocation_id: str,
    dataset_id: str,
    principal: Principal,
    request: InvocationRequest,
    uppers: Uppers,
    levels: LevelsDecision,
    at: str,
) -> dict[str, Any]:
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
        "reservation": _reservation(decision) if levels.admitted else None,
        "cell": None,
        "reason": _reason(levels),
        "actor": principal.id,
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


def _reservation(decision: Decision) -> dict[str, Any] | None:
    return decision.reservation.to_json() if decision.reservation else None


def _render_registration(r: Registered) -> RecordedResponse:
    """The response to a registration: 201 with the charges, or 409 BudgetExceeded."""
    refusal = r.levels.refusal
    body: BaseModel
    if refusal is not None:
        body = BudgetExceededBody(
            error=BUDGET_EXCEEDED,
            detail=r.reason or "budget exceeded",
            id=r.id,
            level=r.levels.refused_by,
            requested=wire(refusal.requested),
            remaining=wire(refusal.remaining),
            ledger_seq=r.ledger_seq,
        )
        return RecordedResponse(BUDGET_EXCEEDED, render(body), "rejected")
    decision = r.levels.dataset.decision
    body = InvocationCreated(
        id=r.id,
        dataset_id=r.dataset_id,
        status=decision.outcome,
        mechanism=r.declaration,
        **r.request.extras(),
        charge=wire(decision.charge),
        requested=wire(decision.requested),
        remaining=wire(decision.remaining),
        reservation=_reservation(decision),
        levels={
            o.name: {"charge": wire(o.decision.charge), "remaining": wire(o.decision.remaining)}
            for o in r.levels.uppers
        }
        or None,
        ledger_seq=r.ledger_seq,
        created_at=r.at,
    )
    return RecordedResponse(CREATED, render(body), decision.outcome)


def preview_invocation(
    uow: UnitOfWork, principal: Principal, dataset_id: str, request: InvocationRequest
) -> Preview:
    """The decision :func:`register_invocation` would take now; nothing is written."""
    with uow.read_only():
        ds, uppers = _read_levels(uow, principal, dataset_id)
        dataset = load_filter(ds)
    # Nothing is written: the decision is taken on this snapshot, outside the transaction,
    # with the charges computed as for a registration (in a worker, within the CPU budget).
    expensive = may_be_expensive(request.declaration)
    known = _compute_charges(uow, request, dataset, uppers) if expensive else None
    with memo.charges(known):
        levels = _decide(dataset, uppers, request, exhaustive=False)
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
        reservation=_reservation(decision),
    )


# ---------------------------------------------------------------------------- settle / cancel
class _NoOutput(Enum):
    """The type of :data:`NO_OUTPUT` (``None`` is an output: ⊥)."""

    NO_OUTPUT = "no output"


#: A settle that sent no released output (it names the cell).
NO_OUTPUT: Final = _NoOutput.NO_OUTPUT


@dataclass(frozen=True, slots=True)
class _Settle:
    """What a settle says: the cell named, the released output, its digest (when sent)."""

    cell: str | None
    output: object
    digest: str | None

    def request(self) -> dict[str, Any]:
        """The fields that give the request its meaning (the idempotency fingerprint's): an
        output's digest only when one was sent, so that cell-only fingerprints are as before."""
        out: dict[str, Any] = {"cell": self.cell}
        if self.digest is not None:
            out["output_digest"] = self.digest
        return out


def settle_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    cell: str | None,
    idempotency_key: str | None = None,
    *,
    output: object = NO_OUTPUT,
) -> RecordedResponse:
    """Charge the released output's cell and refund the rest of the reservation (ε only).

    The cell is named (``cell``), derived from the released ``output`` by the template
    (:func:`odometer_core.accounting.cell_from_output`), or both, which must agree; an output's
    SHA-256 over canonical JSON is recorded in the settle entry (``request.output_digest``).
    """
    if output is NO_OUTPUT:
        if cell is None:
            raise InvalidOutput("send the cell, the released output, or both", field="cell")
        settling = _Settle(cell, output, None)
    else:
        settling = _Settle(cell, output, _digest(output))
    return _finish_reservation(uow, principal, dataset_id, invocation_id, settling, idempotency_key)


def _digest(output: object) -> str:
    try:
        return sha256_of_output(output)
    except (TypeError, ValueError) as exc:
        raise InvalidOutput(
            f"the output cannot be recorded: {exc} (send numbers as integers or decimal "
            "strings: the ledger records the SHA-256 of its canonical JSON, which has no "
            "binary floats)",
            field="output",
        ) from None


def _settled_cell(inv: InvocationRow, settling: _Settle) -> str:
    """The cell to charge: the one named, or the one the released output lies in (both sent:
    they must agree). Checked before anything is staged: a refusal changes nothing."""
    if settling.output is NO_OUTPUT:
        assert settling.cell is not None
        return settling.cell
    assert inv.declaration is not None
    try:
        derived = cell_from_output(parse_declaration(inv.declaration), settling.output)
    except DeclarationError as exc:
        raise InvalidOutput(exc.detail, field="output") from None
    if settling.cell is not None and settling.cell != derived:
        raise InvalidOutput(
            f"the cell named, '{settling.cell}', contradicts the output, which lies in "
            f"cell '{derived}'",
            field="cell",
            derived_cell=derived,
        )
    return derived


def cancel_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    idempotency_key: str | None = None,
) -> RecordedResponse:
    """Release a reservation whose mechanism never ran (full refund)."""
    return _finish_reservation(uow, principal, dataset_id, invocation_id, None, idempotency_key)


def _finish_reservation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    settling: _Settle | None,
    idempotency_key: str | None,
) -> RecordedResponse:
    """Settle (``settling``) or cancel (``None``) a reservation at every level that holds it."""
    if settling is None:
        digest = fingerprint(
            "cancel_invocation", dataset_id=dataset_id, invocation_id=invocation_id, cell=None
        )
    else:
        digest = fingerprint(
            "settle_invocation",
            dataset_id=dataset_id,
            invocation_id=invocation_id,
            **settling.request(),
        )
    with uow.turn(dataset_id), uow.core():
        # One statement locks organisation → dataset → grant (as on registration; settle may
        # write the cap's state, so the organisation is held alone) and reads the invocation
        # the dataset owns.
        locked = lock_levels(
            uow,
            principal,
            dataset_id,
            admitting=False,
            invocation_id=invocation_id,
            keys=() if idempotency_key is None else (idempotency_key,),
        )
        stored = stored_response(uow, principal, idempotency_key, digest)
        if stored is not None:
            return stored
        inv = _reserved_invocation(principal, locked, invocation_id)
        cell = None if settling is None else _settled_cell(inv, settling)
        output_digest = None if settling is None else settling.digest
        quota_grant, uppers, dropped = _holding_levels(uow, inv, locked)
        writes = Writes()
        finished = _write_finish(
            uow, writes, principal, locked.dataset, inv, uppers, cell, output_digest, dropped
        )
        response = RecordedResponse(OK, render(_finished_body(finished)), finished.status)
        record_response(uow, writes, principal, idempotency_key, digest, dataset_id, response)
        _write(uow, writes, locked, locked.grant, quota_grant)
        commit(uow)
    return response


def _reserved_invocation(principal: Principal, locked: Locked, invocation_id: str) -> InvocationRow:
    """The locked dataset's invocation; analysts only see their own (others' are 404, like
    missing ones)."""
    inv = locked.invocation
    if inv is None or (principal.role is Role.ANALYST and inv.actor != principal.id):
        raise NotFound(f"invocation '{invocation_id}' not found")
    if inv.status != "reserved" or inv.reservation is None:
        raise InvocationNotReserved(
            f"invocation '{invocation_id}' is {inv.status}, not reserved", status=inv.status
        )
    return inv


def _holding_levels(
    uow: UnitOfWork, inv: InvocationRow, locked: Locked
) -> tuple[GrantRow | None, Uppers, dict[str, Any] | None]:
    """The upper levels that reserved ``inv`` get the same settle / cancel, and the grant
    locked for it when it is not the caller's.

    The quota holds the reservation only while the grant that reserved is in force
    (:func:`~odometer_core.accounting.levels.quota_holds`): a grant revoked since, or replaced
    by a new grant of the analyst, took its quota with it, and the reservation's quota share
    is dropped (the third value: what the entry records of it); the quota in force now, which
    reserved nothing, is not touched."""
    held = inv.levels or {}
    quota_owner = held.get(QUOTA)
    grant, other = locked.grant, None
    if quota_owner is not None and (grant is None or grant.principal_id != quota_owner):
        # Settled by someone else (the admin): the quota is the invocation's analyst's.
        # Still the last lock taken, so the fixed order holds.
        grant = other = lock_grant(uow.connection(), locked.dataset.id, quota_owner)
    quota, dropped = None, None
    if quota_owner is not None:
        reserved_under = held.get(QUOTA_GRANT)
        in_force = quota_level(grant)
        if in_force is not None and quota_holds(reserved_under, in_force.granted_seq):
            quota = in_force
        else:
            dropped = dropped_quota_record(quota_owner, reserved_under)
    relation = locked.dataset.relation
    organisation = (
        organisation_level(locked.org, relation, admitting=False)
        if held.get(ORGANISATION)
        else None
    )
    return other, Uppers(organisation, quota), dropped


def _write_finish(
    uow: UnitOfWork,
    writes: Writes,
    principal: Principal,
    ds: DatasetRow,
    inv: InvocationRow,
    uppers: Uppers,
    cell: str | None,
    output_digest: str | None = None,
    dropped: dict[str, Any] | None = None,
) -> Finished:
    """Settle / cancel at the dataset and the levels above; stage the entry and the row
    (``dropped``: the quota share that no quota holds any more, recorded as it is)."""
    assert inv.reservation is not None
    config, state = load_filter(ds)
    reservation = Reservation.from_json(inv.reservation)
    if cell is None:
        decision, status = accounting_cancel(config, state, reservation), "cancelled"
    else:
        decision, status = accounting_settle(config, state, reservation, cell), "settled"
    outcomes = finish_uppers(uppers.filters(), reservation, cell)
    records = uppers.apply(outcomes, applied=True, budget=False)
    at = utc_now()
    seq = stage_entry(
        uow,
        writes,
        ds,
        kind=entry_kind(status),
        actor=principal.id,
        at=at,
        invocation_id=inv.id,
        request=_settle_request(cell, output_digest),
        charge=wire(decision.charge),
        requested=wire(decision.requested),
        refund=wire(decision.refund),
        reservation=inv.reservation,
        state=state_to_json(decision.state),
        org=records.get(ORGANISATION),
        quota=records.get(QUOTA, dropped),
    )
    inv.status, inv.cell, inv.updated_at = status, cell, at
    inv.charge, inv.refund = wire(decision.charge), wire(decision.refund)
    writes.finished.append(inv)
    return Finished(inv.id, ds.id, status, cell, decision, outcomes, seq, at, output_digest)


def _settle_request(cell: str | None, output_digest: str | None) -> dict[str, Any]:
    """The entry's ``request``: ``{}`` for a cancel, the cell for a settle, and the released
    output's digest when it was sent (absent otherwise, as in every earlier entry)."""
    if cell is None:
        return {}
    if output_digest is None:
        return {"cell": cell}
    return {"cell": cell, "output_digest": output_digest}


def _finished_body(f: Finished) -> InvocationFinished:
    return InvocationFinished(
        id=f.id,
        dataset_id=f.dataset_id,
        status=f.status,
        cell=f.cell,
        output_digest=f.output_digest,
        charge=wire(f.dataset.charge),
        refund=wire(f.dataset.refund),
        remaining=wire(f.dataset.remaining),
        levels={
            o.name: {"charge": wire(o.decision.charge), "refund": wire(o.decision.refund)}
            for o in f.uppers
        }
        or None,
        ledger_seq=f.ledger_seq,
        updated_at=f.at,
    )


def _own_invocation(
    uow: UnitOfWork, principal: Principal, dataset_id: str, invocation_id: str
) -> Invocation:
    """The invocation; analysts only see their own (others' are 404, like missing ones)."""
    inv = uow.invocations.get(dataset_id, invocation_id)
    if inv is None or (principal.role is Role.ANALYST and inv.actor != principal.id):
        raise NotFound(f"invocation '{invocation_id}' not found")
    return inv


# ---------------------------------------------------------------------------- read
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
