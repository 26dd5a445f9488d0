"""The write path's responses, rendered once from what a write did.

Register, settle and cancel render their response inside their transaction: the bytes are
stored under the caller's Idempotency-Key in that transaction and a retry is answered the same
bytes (:mod:`app.services.idempotency`), so the body is part of what the write commits and is
rendered here, beside the use cases, not at the HTTP edge (which only picks the status and the
``Idempotent-Replayed`` header: :func:`app.api.routers.invocations.recorded_response`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson
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
    fields["receipt"] = receipt
    text = created_text(fields)
    if text is None:  # not the shape the core gives: the model says what is wrong
        text = render(InvocationCreated(**fields))
    return RecordedResponse(CREATED, text, decided.outcome)


#: :class:`InvocationCreated`'s fields in declaration order, each with the test its value
#: passes without conversion (the model's validation would return it unchanged)
def _text(v: object) -> bool:
    return type(v) is str


def _optional_text(v: object) -> bool:
    return v is None or type(v) is str


def _object(v: object) -> bool:
    return type(v) is dict


def _optional_object(v: object) -> bool:
    return v is None or type(v) is dict


_CREATED: Final = {
    "id": _text,
    "dataset_id": _text,
    "status": lambda v: v == "accepted" or v == "reserved",
    "mechanism": _object,
    "sub_budget": _optional_text,
    "conversion_delta": _optional_text,
    "contribution": lambda v: v is None or v == "record" or v == "person",
    "neighbours": lambda v: v is None or v == "zero_out",
    "charge": _object,
    "requested": _object,
    "remaining": _object,
    "reservation": _optional_object,
    "levels": _optional_object,
    "ledger_seq": lambda v: type(v) is int,
    "created_at": _text,
    "blocks": lambda v: v is None or (type(v) is list and all(type(b) is dict for b in v)),
    "receipt": _optional_object,
}
assert tuple(_CREATED) == tuple(InvocationCreated.model_fields)
_REQUIRED: Final = frozenset(
    n for n, f in InvocationCreated.model_fields.items() if f.is_required()
)
_ABSENT: Final = object()


def created_text(fields: dict[str, Any]) -> str | None:
    """The 201 body of ``fields`` exactly as :func:`app.schemas.common.render` writes
    ``InvocationCreated(**fields)`` (its fields in declaration order, a ``None`` left out,
    orjson), without building the model: ``None`` when a field is missing, unknown or of a
    type the model would convert or refuse (the caller then builds the model). About a tenth
    of a registration's rendering and validation CPU, for the same bytes
    (``tests/services/test_created_text.py``)."""
    if not fields.keys() <= _CREATED.keys():
        return None
    for name, accepts in _CREATED.items():
        value = fields.get(name, _ABSENT)
        if value is _ABSENT:
            if name in _REQUIRED:
                return None
        elif not accepts(value):
            return None
    out = {name: value for name in _CREATED if (value := fields.get(name)) is not None}
    return orjson.dumps(out).decode()


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
