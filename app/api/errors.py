"""The one place where errors become HTTP: a code → status table and the handlers.

Every error response has the shape ``{"error": "<Code>", "detail": "...", ...fields}``,
including framework errors (validation, 404, 405) and the body-size limit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final, TypeAlias, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from app.schemas._types import JSONObject
from app.schemas.common import BudgetExceededBody, ErrorBody
from app.services.errors import ServiceError
from app.writepath.witness import WitnessUnavailable
from odometer_core.accounting import (
    TRANSITION_CODES,
    AmountError,
    ConfigError,
    DeclarationError,
    InvalidTransition,
    UnsupportedInMode,
)

log = logging.getLogger("odometer")

#: Error code → HTTP status. Expected outcomes are 4xx; 5xx only when the server cannot work.
ERROR_STATUS: Final[dict[str, int]] = {
    "BadRequest": 400,
    "Unauthorized": 401,
    "Forbidden": 403,
    "NotFound": 404,
    "MethodNotAllowed": 405,
    "NotAcceptable": 406,
    # a decision or a state conflict: the request was valid but cannot be applied now
    "BudgetExceeded": 409,
    "InvocationNotReserved": 409,
    "IdempotencyConflict": 409,
    "ConcurrentUpdate": 409,
    "AlreadyExists": 409,
    "NoCap": 409,
    "BlockConflict": 409,
    "CheckpointsDisabled": 409,
    # the dataset's ledger is behind the witness of its heads (docs/witness.md): writes refused
    "LedgerBehindWitness": 409,
    "WitnessDisabled": 409,
    "NotBehindWitness": 409,
    "PayloadTooLarge": 413,
    "UnsupportedMediaType": 415,
    # the request is understood but invalid
    "ValidationError": 422,
    "InvalidDeclaration": 422,
    "InvalidOutput": 422,
    "InvalidBlocks": 422,
    "UnsupportedInMode": 422,
    "InvalidConfig": 422,
    "IdempotencyKeyReused": 422,
    "NotAnAnalyst": 422,
    "ChargeTooExpensive": 422,
    "TailRefused": 422,
    "InternalError": 500,
    "ServiceUnavailable": 503,
    # the accounting core's state-transition codes: conflicts are 409, malformed requests 422
    **{code: 409 if conflict else 422 for code, conflict in TRANSITION_CODES.items()},
}

_CODE_OF_STATUS: Final[dict[int, str]] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    422: "ValidationError",
    503: "ServiceUnavailable",
}


#: What a route documents of its answers by status (FastAPI's ``responses``): each status's
#: OpenAPI description (its ``model``, ``description``, ``content``).
Responses: TypeAlias = dict[int | str, JSONObject]


def error_payload(code: str, detail: str, **fields: Any) -> JSONObject:
    """The one error body: ``{"error": code, "detail": ..., **fields}`` (each error's own
    fields, such as ``field`` or ``status``: not one shape, hence a plain JSON object)."""
    return {"error": code, "detail": detail, **fields}


def error_response(
    code: str, detail: str, headers: dict[str, str] | None = None, **fields: Any
) -> JSONResponse:
    status = ERROR_STATUS[code]
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if status == 503:
        headers = {"Retry-After": "1", **(headers or {})}
    return JSONResponse(error_payload(code, detail, **fields), status_code=status, headers=headers)


def _describe(exc: Exception) -> tuple[str, str, JSONObject]:
    """(code, detail, fields) of a known exception."""
    if isinstance(exc, ServiceError):
        return exc.code, exc.detail, exc.fields
    if isinstance(exc, UnsupportedInMode):
        return "UnsupportedInMode", exc.detail, {"field": exc.field} if exc.field else {}
    if isinstance(exc, DeclarationError):
        return "InvalidDeclaration", exc.detail, {"field": exc.field} if exc.field else {}
    if isinstance(exc, ConfigError):
        return "InvalidConfig", str(exc), {}
    if isinstance(exc, InvalidTransition):
        return exc.code, exc.detail, {}
    if isinstance(exc, AmountError):
        return "ValidationError", str(exc), {}
    raise TypeError(type(exc).__name__)


class ValidationProblem(TypedDict):
    """One entry of a 422's ``errors``: where (as text), what, and the rule's type."""

    loc: list[str]
    msg: str
    type: str


def _validation_errors(exc: RequestValidationError) -> list[ValidationProblem]:
    # Only loc/msg/type: inputs may hold NaN or huge values that are not valid JSON.
    return [
        {
            "loc": [str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg")),
            "type": str(e.get("type")),
        }
        for e in exc.errors()
    ]


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """Every method the request's path supports, sorted: the methods of each route whose path
    matches it. Starlette answers a 405 with the first such route's methods alone (``POST``
    where the path also has a ``GET``), since each method is a route of its own."""
    methods: set[str] = set()
    for route in iter_route_contexts(routes):  # the included routers' routes too
        match, _ = route.matches(scope)
        if match != Match.NONE:
            methods |= route.methods or set()
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    async def domain_error(_: Request, exc: Exception) -> Response:
        code, detail, fields = _describe(exc)
        return error_response(code, detail, **fields)

    async def validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = _validation_errors(exc)
        detail = "invalid request"
        if errors:
            where, msg = ".".join(errors[0]["loc"]), str(errors[0]["msg"])
            detail = f"{where}: {msg}" if where else msg
        return error_response("ValidationError", detail, errors=errors[:50])

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = _CODE_OF_STATUS.get(
            exc.status_code, "BadRequest" if exc.status_code < 500 else "InternalError"
        )
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allowed = allowed_methods(request.app.router.routes, request.scope)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
        response = JSONResponse(
            error_payload(code, detail), status_code=exc.status_code, headers=headers or None
        )
        return response

    async def database_unavailable(_: Request, exc: Exception) -> Response:
        log.warning("database unavailable: %s", exc)
        return error_response(
            "ServiceUnavailable", "the database is busy or unreachable; retry", {"Retry-After": "1"}
        )

    async def witness_unavailable(_: Request, exc: Exception) -> Response:
        return error_response("ServiceUnavailable", str(exc), {"Retry-After": "5"})

    async def internal_error(_: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return error_response("InternalError", "internal error")

    async def database_error(request: Request, exc: Exception) -> Response:
        """A database error no service turned into an answer: 503 when its connection was
        lost with it (the server went away, ended the session, or no longer accepts writes:
        a failover; :func:`app.db.engine.connection_lost`), else 500. Nothing was committed."""
        assert isinstance(exc, DBAPIError)
        if exc.connection_invalidated:
            return await database_unavailable(request, exc)
        return await internal_error(request, exc)

    for exc_type in (ServiceError, DeclarationError, ConfigError, InvalidTransition, AmountError):
        app.add_exception_handler(exc_type, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    # the server unreachable, gone, busy, or not the primary: nothing was committed, and a
    # retry with the same Idempotency-Key may succeed (docs/operations.md, *What a client sees*)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(DBAPIError, database_error)
    # no pooled connection came free in time (e.g. all stuck on a server that went away)
    app.add_exception_handler(PoolTimeout, database_unavailable)
    app.add_exception_handler(WitnessUnavailable, witness_unavailable)
    app.add_exception_handler(Exception, internal_error)


def responses(*statuses: int, budget_exceeded: bool = False) -> Responses:
    """OpenAPI documentation of the error statuses a route can return. A route that reads a
    body (413 listed) can also get one that is not JSON at all: 400 is documented with it."""
    if 413 in statuses and 400 not in statuses:
        statuses = (400, *statuses)
    out: Responses = {s: {"model": ErrorBody, "description": _DESCRIPTIONS[s]} for s in statuses}
    if budget_exceeded:
        out[409] = {
            "model": BudgetExceededBody,
            "description": "BudgetExceeded (the rejection is in the ledger), or a state conflict "
            "(LedgerBehindWitness: the dataset's ledger is behind the witness of its heads, "
            "writes are refused until an operator recovers it)",
        }
    return out


_DESCRIPTIONS: Final[dict[int, str]] = {
    400: "BadRequest: the body is not valid JSON (or not UTF-8)",
    401: "Unauthorized: missing, unknown, revoked or expired bearer key",
    403: "Forbidden: the key's role may not do this",
    404: "NotFound (also for objects of another organisation)",
    409: "Conflict with the current state (on a write, LedgerBehindWitness: the dataset's "
    "ledger is behind the witness of its heads; writes are refused until an operator "
    "recovers it, reads are served)",
    413: "PayloadTooLarge: body above the size limit",
    422: "ValidationError, InvalidDeclaration, UnsupportedInMode, InvalidConfig, UnknownCell, "
    "IdempotencyKeyReused, ChargeTooExpensive (the charge needs more CPU than one request may "
    "use; nothing was charged)",
    503: "ServiceUnavailable: the database is busy or unreachable, no charge worker was free in "
    "time, or the witness of ledger heads is behind (retry after Retry-After with the same "
    "Idempotency-Key: the retry answers what was decided, once; docs/operations.md)",
}
