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
from odometer_core.accounting.levels import LevelOutcome
from odometer_core.ledger.admission import Admission


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


def render_registration(
    decided: Admission, receipt: dict[str, Any] | None = None
) -> RecordedResponse:
    """The response to a registration, from the fields the core decided
    (:attr:`odometer_core.ledger.admission.Admission.response`): 201 with the charges, or 409
    BudgetExceeded (with the refusal's summary, when there is one). A field the response adds
    beside the core's is added here, to ``fields``."""
    fields = dict(decided.response)
    body: BaseModel
    if not decided.admitted:
        body = BudgetExceededBody(error=BUDGET_EXCEEDED, **fields)
        return RecordedResponse(BUDGET_EXCEEDED, render(body), "rejected")
    body = InvocationCreated(**fields, receipt=receipt)
    return RecordedResponse(CREATED, render(body), decided.outcome)


def render_finished(f: Finished, receipt: dict[str, Any] | None = None) -> RecordedResponse:
    """The response to a settle or cancel (200), with its entry's ``receipt``
    (:func:`app.services.receipts.receipt_of`)."""
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
        receipt=receipt,
    )
    return RecordedResponse(OK, render(body), f.status)
