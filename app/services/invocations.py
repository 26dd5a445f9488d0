"""Invocation use cases: register (admit), preview, settle, cancel, read.

Register follows one path (STYLE.md): lock the aggregate → idempotency lookup → pure
``admit`` → append the ledger entry and update the state → store the response under the
idempotency key → commit → return. A rejection is a decision, not an error: it is written to
the ledger and recorded as an invocation with status ``rejected``, and then answered with 409.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.accounting import (
    Decision,
    Declaration,
    Reservation,
    admit,
    fmt,
    state_to_json,
)
from app.accounting import (
    cancel as accounting_cancel,
)
from app.accounting import (
    settle as accounting_settle,
)
from app.db.models import IdempotencyRecord, Invocation
from app.db.uow import UnitOfWork
from app.services._aggregate import append_entry, load_filter, lock_levels, visible_dataset
from app.services._common import fingerprint, new_id, render_json, utc_now
from app.services._levels import (
    ORGANISATION,
    QUOTA,
    Level,
    admit_level,
    finish_level,
    level_record,
    organisation_level,
    quota_level,
)
from app.services.errors import (
    ConcurrentUpdate,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvocationNotReserved,
    NotFound,
)
from app.services.principals import Principal, Role

#: Outcome codes of recorded responses that are not errors (the API maps them to 201 / 200).
CREATED = "created"
OK = "ok"


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response built inside the transaction and stored verbatim under an idempotency key.

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
    ledger: str | None = None
    conversion_delta: Decimal | None = None

    def extras(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "conversion_delta": None
            if self.conversion_delta is None
            else fmt(self.conversion_delta),
        }


# ---------------------------------------------------------------------------- idempotency
def _stored(
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


def _record(
    uow: UnitOfWork,
    principal: Principal,
    key: str | None,
    digest: str,
    dataset_id: str,
    response: RecordedResponse,
) -> None:
    if key is not None:
        uow.idempotency.add(
            IdempotencyRecord(
                principal_id=principal.id,
                key=key,
                fingerprint=digest,
                dataset_id=dataset_id,
                outcome=response.outcome,
                response_body=response.body,
                created_at=utc_now(),
            )
        )


def _commit(uow: UnitOfWork) -> None:
    """Commit; a unique-constraint backstop firing means a concurrent writer won (→ 409)."""
    try:
        uow.commit()
    except IntegrityError as exc:
        if "idempotency_keys" in str(exc.orig):
            raise IdempotencyConflict(
                "a request with this Idempotency-Key is being processed; retry to get its response"
            ) from None
        raise ConcurrentUpdate("the dataset changed concurrently; retry the request") from None


# ---------------------------------------------------------------------------- register
def register_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    request: InvocationRequest,
    idempotency_key: str | None = None,
) -> RecordedResponse:
    """Admit, reserve or reject one invocation, atomically with its ledger entry."""
    declaration_json = request.declaration.to_json()
    extras = request.extras()
    digest = fingerprint(
        "register_invocation", dataset_id=dataset_id, declaration=declaration_json, **extras
    )
    with uow:
        org, ds, grant = lock_levels(uow, principal, dataset_id, admitting=True)
        stored = _stored(uow, principal, idempotency_key, digest)
        if stored is not None:
            return stored
        config, state = load_filter(ds)
        decision = admit(
            config,
            state,
            request.declaration,
            ledger=request.ledger,
            conversion_delta=request.conversion_delta,
        )
        # Every level decides on the state it holds; the first refusal (in the order dataset,
        # organisation, quota) is reported and then nothing changes at any level.
        uppers: list[tuple[Level, Decision]] = []
        for level in (
            organisation_level(org, ds, admitting=True),
            quota_level(grant),
        ):
            if level is not None:
                uppers.append(
                    (level, admit_level(level, request.declaration, request.conversion_delta))
                )
        refused: tuple[str, Decision] | None = None
        if not decision.admitted:
            refused = ("dataset", decision)
        else:
            for level, level_decision in uppers:
                if not level_decision.admitted:
                    refused = (level.name, level_decision)
                    break
        admitted = refused is None
        records: dict[str, dict[str, Any]] = {}
        for level, level_decision in uppers:
            if admitted:
                level.store(level_decision.state)
            records[level.name] = level_record(
                level, level_decision, applied=admitted, config=level.name == ORGANISATION
            )
        at = utc_now()
        invocation_id = new_id("inv")
        reservation = decision.reservation.to_json() if decision.reservation else None
        by_dataset = refused is None or refused[0] == "dataset"
        outcome_kind = decision.outcome if admitted else "rejected"
        reason = decision.reason
        if refused is not None and refused[0] != "dataset":
            reason = f"{refused[0]} level: {refused[1].reason or 'budget exceeded'}"
        entry = append_entry(
            uow,
            ds,
            kind=f"invocation_{outcome_kind}",
            actor=principal.id,
            at=at,
            invocation_id=invocation_id,
            declaration=declaration_json,
            request=extras,
            # Refused above the dataset: nothing was charged here (null, not a zero charge).
            charge=decision.charge if by_dataset else None,
            requested=decision.requested,
            reservation=reservation if admitted else None,
            reason=reason,
            state=state_to_json(decision.state if admitted else state),
            org=records.get(ORGANISATION),
            quota=records.get(QUOTA),
        )
        levels = {
            ORGANISATION: org.id if admitted and ORGANISATION in records and org else None,
            QUOTA: principal.id if admitted and QUOTA in records else None,
        }
        uow.invocations.add(
            Invocation(
                id=invocation_id,
                dataset_id=ds.id,
                status=outcome_kind,
                kind=declaration_json["type"],
                ledger=decision.ledger,
                declaration=declaration_json,
                request=extras,
                charge=decision.charge if by_dataset else {},
                requested=decision.requested,
                refund=None,
                reservation=reservation if admitted else None,
                cell=None,
                reason=reason,
                actor=principal.id,
                created_at=at,
                updated_at=at,
                levels=levels,
            )
        )
        if refused is not None:
            body: dict[str, Any] = {
                "error": "BudgetExceeded",
                "detail": reason or "budget exceeded",
                "id": invocation_id,
                "level": refused[0],
                "requested": refused[1].requested,
                "remaining": refused[1].remaining,
                "ledger_seq": entry.seq,
            }
            outcome = "BudgetExceeded"
        else:
            body = {
                "id": invocation_id,
                "dataset_id": ds.id,
                "status": decision.outcome,
                "mechanism": declaration_json,
                **{k: v for k, v in extras.items() if v is not None},
                "charge": decision.charge,
                "requested": decision.requested,
                "remaining": decision.remaining,
                **({"reservation": reservation} if reservation is not None else {}),
                **(
                    {
                        "levels": {
                            level.name: {
                                "charge": d.charge,
                                "remaining": d.remaining,
                            }
                            for level, d in uppers
                        }
                    }
                    if uppers
                    else {}
                ),
                "ledger_seq": entry.seq,
                "created_at": at,
            }
            outcome = CREATED
        response = RecordedResponse(
            outcome, render_json(body), decision.outcome if admitted else "rejected"
        )
        _record(uow, principal, idempotency_key, digest, ds.id, response)
        _commit(uow)
    return response


def preview_invocation(
    uow: UnitOfWork, principal: Principal, dataset_id: str, request: InvocationRequest
) -> dict[str, Any]:
    """The decision :func:`register_invocation` would take now; nothing is written."""
    refused_by: str | None = None
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        config, state = load_filter(ds)
        decision = admit(
            config,
            state,
            request.declaration,
            ledger=request.ledger,
            conversion_delta=request.conversion_delta,
        )
        if not decision.admitted:
            refused_by = "dataset"
        else:
            grant = uow.grants.get(ds.id, principal.id) if principal.role is Role.ANALYST else None
            for level in (
                organisation_level(uow.organisations.get(ds.organisation), ds, admitting=True),
                quota_level(grant),
            ):
                if level is None:
                    continue
                level_decision = admit_level(level, request.declaration, request.conversion_delta)
                if not level_decision.admitted:
                    decision, refused_by = level_decision, level.name
                    break
    out: dict[str, Any] = {
        "status": decision.outcome,
        "mechanism": request.declaration.to_json(),
        "charge": decision.charge,
        "requested": decision.requested,
        "remaining": decision.remaining,
    }
    if decision.ledger is not None:
        out["ledger"] = decision.ledger
    if decision.reason is not None:
        out["reason"] = decision.reason
    if refused_by is not None:
        out["level"] = refused_by
    if decision.reservation is not None:
        out["reservation"] = decision.reservation.to_json()
    return out


# ---------------------------------------------------------------------------- settle / cancel
def settle_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    cell: str,
    idempotency_key: str | None = None,
) -> RecordedResponse:
    """Charge the released output's cell and refund the rest of the reservation (ε only)."""
    return _finish_reservation(uow, principal, dataset_id, invocation_id, cell, idempotency_key)


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
    cell: str | None,
    idempotency_key: str | None,
) -> RecordedResponse:
    operation = "cancel_invocation" if cell is None else "settle_invocation"
    digest = fingerprint(operation, dataset_id=dataset_id, invocation_id=invocation_id, cell=cell)
    with uow:
        # Lock order: organisation → dataset → grant (as on registration), then the
        # invocation the dataset owns.
        org, ds, grant = lock_levels(uow, principal, dataset_id)
        stored = _stored(uow, principal, idempotency_key, digest)
        if stored is not None:
            return stored
        inv = _own_invocation(uow, principal, ds.id, invocation_id)
        if inv.status != "reserved" or inv.reservation is None:
            raise InvocationNotReserved(
                f"invocation '{invocation_id}' is {inv.status}, not reserved", status=inv.status
            )
        config, state = load_filter(ds)
        reservation = Reservation.from_json(inv.reservation)
        if cell is None:
            decision = accounting_cancel(config, state, reservation)
            new_status = "cancelled"
        else:
            decision = accounting_settle(config, state, reservation, cell)
            new_status = "settled"
        # The upper levels that reserved this invocation get the same settle / cancel (a
        # grant revoked since holds no quota any more).
        held = inv.levels or {}
        quota_owner = held.get(QUOTA)
        if quota_owner is not None and (grant is None or grant.principal_id != quota_owner):
            # Settled by someone else (the admin): the quota is the invocation's analyst's.
            # Still the last lock taken, so the fixed order holds.
            grant = uow.grants.get_for_update(ds.id, quota_owner)
        records: dict[str, dict[str, Any]] = {}
        upper: list[Level | None] = [
            organisation_level(org, ds, admitting=False) if held.get(ORGANISATION) else None,
            quota_level(grant) if held.get(QUOTA) else None,
        ]
        finished = []
        for level in upper:
            if level is not None:
                level_decision = finish_level(level, reservation, cell)
                finished.append((level, level_decision))
        for level, level_decision in finished:
            level.store(level_decision.state)
            records[level.name] = level_record(level, level_decision, applied=True)
        at = utc_now()
        entry = append_entry(
            uow,
            ds,
            kind=f"invocation_{new_status}",
            actor=principal.id,
            at=at,
            invocation_id=inv.id,
            request={"cell": cell} if cell is not None else {},
            charge=decision.charge,
            requested=decision.requested,
            refund=decision.refund,
            reservation=inv.reservation,
            state=state_to_json(decision.state),
            org=records.get(ORGANISATION),
            quota=records.get(QUOTA),
        )
        inv.status = new_status
        inv.charge = decision.charge
        inv.refund = decision.refund
        inv.cell = cell
        inv.updated_at = at
        body: dict[str, Any] = {
            "id": inv.id,
            "dataset_id": ds.id,
            "status": new_status,
            **({"cell": cell} if cell is not None else {}),
            "charge": decision.charge,
            "refund": decision.refund,
            "remaining": decision.remaining,
            **(
                {
                    "levels": {
                        level.name: {"charge": d.charge, "refund": d.refund}
                        for level, d in finished
                    }
                }
                if finished
                else {}
            ),
            "ledger_seq": entry.seq,
            "updated_at": at,
        }
        response = RecordedResponse(OK, render_json(body), new_status)
        _record(uow, principal, idempotency_key, digest, ds.id, response)
        _commit(uow)
    return response


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
) -> dict[str, Any]:
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
        return {
            "id": inv.id,
            "dataset_id": inv.dataset_id,
            "status": inv.status,
            "mechanism": inv.declaration,
            "ledger": inv.ledger,
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
