"""Typed errors of the client. Every error the server answers carries its body
``{"error": "<Code>", "detail": "…", …fields}``; amounts in it are parsed to ``Decimal``."""

from __future__ import annotations

from decimal import Decimal
from typing import cast

from odometer_client.models import decimals
from odometer_client.shapes import Amount, JSONObject, RefusalSummary, RefusedSpan


class OdometerError(Exception):
    """Base class of every error raised by :mod:`odometer_client`."""


class ApiError(OdometerError):
    """The server answered with an error status (after any retries)."""

    def __init__(self, status_code: int, body: JSONObject) -> None:
        self.status_code = status_code
        self.body = body
        self.error: str = str(body.get("error", "Error"))
        self.detail: str = str(body.get("detail", ""))
        super().__init__(f"{status_code} {self.error}: {self.detail}")


class InvalidRequest(ApiError):
    """400, 413, 415 or 422: the request is malformed or invalid (also raised before
    sending when the shared request models refuse it; ``status_code`` is then 422), e.g.
    ``InvalidBlocks``: a bad block key, or blocks named on a dataset that is not partitioned."""


class Unauthorized(ApiError):
    """401: missing or unknown API key."""


class Forbidden(ApiError):
    """403: the key's role may not do this."""


class NotFound(ApiError):
    """404: no such dataset or invocation (or it belongs to another organisation)."""


class Conflict(ApiError):
    """409: the request is valid but cannot be applied now (e.g. ``InvocationNotReserved``,
    ``BudgetBelowSpent``, ``BlockConflict``: blocks opened before, or not open)."""


class BudgetExceeded(Conflict):
    """409 ``BudgetExceeded``: the invocation was rejected (and the rejection is in the ledger).

    ``requested`` and ``remaining`` are the server's amounts parsed to ``Decimal``. On a
    partitioned dataset ``blocks`` lists the selected blocks that refused, as ranges with what
    each still has and why: ``{"from", "to", "blocks", "remaining", "reason"}`` (at most 20;
    empty on a whole dataset)."""

    def __init__(self, status_code: int, body: JSONObject) -> None:
        super().__init__(status_code, body)
        self.invocation_id: str | None = body.get("id")
        self.requested: Amount[Decimal] = decimals(body.get("requested") or {})
        self.remaining: Amount[Decimal] = decimals(body.get("remaining") or {})
        self.ledger_seq: int | None = body.get("ledger_seq")
        refusing = body.get("blocks")
        self.blocks: list[RefusedSpan] = decimals(refusing) if isinstance(refusing, list) else []
        summary = body.get("summary")
        #: the refusal in one line (``summary["text"]``): which budget and constraint bound,
        #: what is left, and ``summary["instead"]``, a declaration that fits now (``None``
        #: from a server before the summary, or on a partitioned dataset)
        self.summary: RefusalSummary[str] | None = (
            cast(RefusalSummary[str], summary) if isinstance(summary, dict) else None
        )

    @property
    def requested_epsilon(self) -> Decimal | None:
        value = self.requested.get("epsilon")
        return value if isinstance(value, Decimal) else None

    @property
    def remaining_epsilon(self) -> Decimal | None:
        value = self.remaining.get("epsilon")
        return value if isinstance(value, Decimal) else None


class ServerError(ApiError):
    """5xx after the bounded retries were exhausted."""


class TransportError(OdometerError):
    """The server could not be reached (connection error or timeout) after the retries."""


class ReservationNotSettled(OdometerError):
    """A ``reserve()`` block ended normally without ``settle()`` or ``cancel()``.

    The reservation is left charged at its worst cell (safe, never an overspend); settle it
    with ``client.settle(dataset, invocation_id, cell)`` once you know the released cell, or
    cancel it if the mechanism never ran."""

    def __init__(self, dataset_id: str, invocation_id: str) -> None:
        self.dataset_id = dataset_id
        self.invocation_id = invocation_id
        super().__init__(
            f"reservation {invocation_id} on {dataset_id} left the 'with' block unsettled: "
            "call r.settle(cell) with the cell the released output fell in (or r.cancel() if "
            "the mechanism never ran); it stays charged at its worst cell until then"
        )


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: InvalidRequest,
    415: InvalidRequest,
    422: InvalidRequest,
}


def error_for(status_code: int, body: JSONObject) -> ApiError:
    """The typed exception for an error response."""
    if status_code == 409 and body.get("error") == "BudgetExceeded":
        return BudgetExceeded(status_code, body)
    if status_code >= 500:
        return ServerError(status_code, body)
    return _BY_STATUS.get(status_code, ApiError)(status_code, body)
