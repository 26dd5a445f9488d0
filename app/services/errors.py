"""Errors the services raise. Each carries a stable ``code`` and its data; the HTTP status of
every code lives in one table (:mod:`app.api.errors`)."""

from __future__ import annotations

from typing import Any

from app.schemas._types import JSONObject


class ServiceError(Exception):
    """Base class: ``code`` names the error in responses, ``fields`` are extra response data."""

    code: str = "Error"

    def __init__(self, detail: str, **fields: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields

    def payload(self) -> JSONObject:
        """The one error shape: ``{"error": code, "detail": ..., **fields}``."""
        return {"error": self.code, "detail": self.detail, **self.fields}


class NotFound(ServiceError):
    code = "NotFound"


class Unauthorized(ServiceError):
    code = "Unauthorized"


class Forbidden(ServiceError):
    code = "Forbidden"


class InvocationNotReserved(ServiceError):
    """Settle / cancel of an invocation that holds no open reservation."""

    code = "InvocationNotReserved"


class InvalidOutput(ServiceError):
    """A settle's released output is impossible for the template, belongs to a declaration
    settled by naming the cell, or lies in another cell than the one named."""

    code = "InvalidOutput"


class IdempotencyKeyReused(ServiceError):
    """The key was used before with a different request (Stripe: 422)."""

    code = "IdempotencyKeyReused"


class IdempotencyConflict(ServiceError):
    """A concurrent request with the same key won the race; retry to get its response."""

    code = "IdempotencyConflict"


class ConcurrentUpdate(ServiceError):
    """A uniqueness backstop fired (two writers on one aggregate); safe to retry."""

    code = "ConcurrentUpdate"


class NoCap(ServiceError):
    """An organisation-cap question asked of an organisation with no cap in force."""

    code = "NoCap"


class AlreadyExists(ServiceError):
    """A uniquely named object (organisation name, grant) already exists."""

    code = "AlreadyExists"


class InvalidBlocks(ServiceError):
    """A block selection or range that is malformed, names keys the partition does not have,
    or is sent to a dataset that is not partitioned (or not sent to one that is)."""

    code = "InvalidBlocks"


class BlockConflict(ServiceError):
    """Blocks that are not open (selected, retired) or were opened before (opened again)."""

    code = "BlockConflict"


class InvalidQuery(ServiceError):
    """A query parameter the service cannot act on (→ 422, as a validation error)."""

    code = "ValidationError"


class LedgerBehindWitness(ServiceError):
    """The dataset's ledger in the database is behind (or beside) the head the witness recorded
    outside it: the database was restored from a backup, or replaced, and the budget spent since
    would be spent again. Writes are refused until an operator imports the lost tail or
    acknowledges the loss (``docs/witness.md``); reads are served."""

    code = "LedgerBehindWitness"
