"""The register route's parameter resolution, written for it.

``POST /v1/datasets/{dataset_id}/invocations`` is what analysts' libraries send for every
mechanism they run, so its fixed cost per request is the service's. The route is declared like
every other (:func:`app.api.routers.invocations.register_invocation`: its signature is what the
OpenAPI document describes, its body is what runs), goes through the app's middleware and
exception handlers, and authenticates and checks the Idempotency-Key with the same functions
and declarations as every other route. Only the step between request and call differs:
FastAPI's general resolver (the dependency graph walked per request, with its telemetry and
context bookkeeping) was most of the framework's share of a registration's CPU, so
:class:`RegisterRoute` resolves this one signature directly, in the order and with the error
answers of FastAPI's resolver (``benchmarks/RESULTS.md``, *Measurements once quoted in the
code*):

1. the body is read once and, under a JSON content type, decoded as every route's is
   (:func:`app.api.jsonbody.decode`: a number's literal kept; a decoding error is 422
   ``json_invalid``; bytes that are not UTF-8 are 400);
2. the caller is authenticated (:func:`app.api.deps.principal_of`; 401 / 403 as
   :func:`app.api.deps.require_role` answers);
3. the Idempotency-Key header and the body are validated together, every error in one 422.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any, Final

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.deps import IdempotencyKeyDep, bearer, principal_of
from app.api.jsonbody import ExactJsonRoute, decode
from app.api.middleware import is_json
from app.schemas.invocations import InvocationCreate
from app.services.principals import Role

#: The Idempotency-Key rule, as every other route declares it (:data:`IdempotencyKeyDep`).
IDEMPOTENCY_KEY: Final = TypeAdapter(IdempotencyKeyDep)
_HEADER: Final = "idempotency-key"
_BODY: Final = TypeAdapter(InvocationCreate)


def _decoded(raw: bytes, content_type: str | None) -> Any:
    """The body as the route's model will read it: JSON decoded, else the bytes themselves;
    ``None`` for an empty body (missing)."""
    if not raw:
        return None
    if not is_json(content_type):
        return raw
    try:
        return decode(raw)  # numbers with a fraction or an exponent: their literal, exactly
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from exc
    except ValueError as exc:  # not UTF-8
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def _errors(exc: ValidationError, *loc: str | int) -> list[ErrorDetails]:
    return [{**e, "loc": (*loc, *e.get("loc", ()))} for e in exc.errors(include_url=False)]


class RegisterRoute(ExactJsonRoute):
    """An :class:`~fastapi.routing.APIRoute` whose request handler resolves the register
    route's own parameters (the module's docstring says how) and calls its endpoint."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            body = _decoded(await request.body(), request.headers.get("content-type"))
            state = request.app.state
            principal = await principal_of(await bearer(request), state.database, state.settings)
            principal.require(Role.ANALYST)
            errors: list[ErrorDetails] = []
            key = invocation = None
            try:
                key = IDEMPOTENCY_KEY.validate_python(request.headers.get(_HEADER))
            except ValidationError as exc:
                errors += _errors(exc, "header", "Idempotency-Key")
            if body is None:
                errors.append(
                    {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
                )
            else:
                try:
                    invocation = _BODY.validate_python(body, from_attributes=True)
                except ValidationError as exc:
                    errors += _errors(exc, "body")
            if errors:
                raise RequestValidationError(errors, body=body)
            response: Response = await endpoint(
                dataset_id=request.path_params["dataset_id"],
                body=invocation,
                principal=principal,
                registrar=state.registrar,
                metrics=state.metrics,
                idempotency_key=key,
            )
            return response

        return handle
