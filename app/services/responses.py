"""The write path's responses, rendered once from what a write did.

Register, settle and cancel render their response inside their transaction: the bytes are
stored under the caller's Idempotency-Key in that transaction and a retry is answered the same
bytes (:mod:`app.services.idempotency`), so the body is part of what the write commits and is
rendered here, beside the use cases, not at the HTTP edge (which only picks the status and the
``Idempotent-Replayed`` header: :func:`app.api.routers.invocations.recorded_response`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.schemas.common import BudgetExceededBody, render
from app.schemas.invocations import InvocationCreated, InvocationFinished
from app.services._levels import wire
from app.services.idempotency import BUDGET_EXCEEDED, CREATED, OK, RecordedResponse
from odometer_core.accounting import Decision
from odometer_core.accounting.levels import LevelOutcome, LevelsDecision


@dataclass(frozen=True, slots=True)
class Registered:
    """A decided registration, as written: what its response is rendered from."""

    id: str
    dataset_id: str
    declaration: dict[str, Any]
    extras: dict[str, Any]  # sub_budget, conversion_delta, as requested
    levels: LevelsDecision
    reason: str | None
    ledger_seq: int
    at: str
    #: a partitioned dataset's selection, as keys (``None`` on a whole dataset)
    blocks: list[dict[str, Any]] | None = None
    #: the selected blocks that refused, with what each has left (a 409 on blocks)
    refused_blocks: list[dict[str, Any]] | None = None


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


def reservation_json(decision: Decision) -> dict[str, Any] | None:
    return decision.reservation.to_json() if decision.reservation else None


def render_registration(r: Registered, summary: dict[str, Any] | None = None) -> RecordedResponse:
    """The response to a registration: 201 with the charges, or 409 BudgetExceeded (with the
    refusal's ``summary``, when there is one)."""
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
            blocks=r.refused_blocks,
            summary=summary,
        )
        return RecordedResponse(BUDGET_EXCEEDED, render(body), "rejected")
    decision = r.levels.dataset.decision
    body = InvocationCreated(
        id=r.id,
        dataset_id=r.dataset_id,
        status=decision.outcome,
        mechanism=r.declaration,
        **r.extras,
        charge=wire(decision.charge),
        requested=wire(decision.requested),
        remaining=wire(decision.remaining),
        reservation=reservation_json(decision),
        levels={
            o.name: {"charge": wire(o.decision.charge), "remaining": wire(o.decision.remaining)}
            for o in r.levels.uppers
        }
        or None,
        ledger_seq=r.ledger_seq,
        created_at=r.at,
        blocks=r.blocks,
    )
    return RecordedResponse(CREATED, render(body), decision.outcome)


def render_finished(f: Finished) -> RecordedResponse:
    """The response to a settle or cancel (200)."""
    body = InvocationFinished(
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
    return RecordedResponse(OK, render(body), f.status)
