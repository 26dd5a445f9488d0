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


#: :class:`InvocationCreated`'s fields in declaration order, each with what its value may be to
#: pass without conversion (the model's validation would return it unchanged): its exact types
#: (``NoneType`` for an optional field), or the values it may take; tested in one loop,
#: without a call per field (``blocks``, a list of dicts, is tested on its own)
_NONE: Final[type] = type(None)
_TEXT: Final[frozenset[type]] = frozenset({str})
_OPTIONAL_TEXT: Final[frozenset[type]] = frozenset({str, _NONE})
_OBJECT: Final[frozenset[type]] = frozenset({dict})
_OPTIONAL_OBJECT: Final[frozenset[type]] = frozenset({dict, _NONE})
_CREATED: Final[dict[str, tuple[frozenset[type], frozenset[object] | None]]] = {
    "id": (_TEXT, None),
    "dataset_id": (_TEXT, None),
    "status": (_TEXT, frozenset({"accepted", "reserved"})),
    "mechanism": (_OBJECT, None),
    "sub_budget": (_OPTIONAL_TEXT, None),
    "conversion_delta": (_OPTIONAL_TEXT, None),
    "contribution": (_OPTIONAL_TEXT, frozenset({None, "record", "person"})),
    "neighbours": (_OPTIONAL_TEXT, frozenset({None, "zero_out"})),
    "charge": (_OBJECT, None),
    "requested": (_OBJECT, None),
    "remaining": (_OBJECT, None),
    "reservation": (_OPTIONAL_OBJECT, None),
    "levels": (_OPTIONAL_OBJECT, None),
    "ledger_seq": (frozenset[type]({int}), None),
    "created_at": (_TEXT, None),
    "blocks": (frozenset[type]({list, _NONE}), None),
    "receipt": (_OPTIONAL_OBJECT, None),
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
    for name, (types, values) in _CREATED.items():
        value = fields.get(name, _ABSENT)
        if value is _ABSENT:
            if name in _REQUIRED:
                return None
        elif type(value) not in types or (values is not None and value not in values):
            return None
    blocks = fields.get("blocks")
    if blocks is not None and not all(type(b) is dict for b in blocks):
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
