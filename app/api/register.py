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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

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

    def responder(self) -> Callable[[Request, bytes], Coroutine[Any, Any, Response]]:
        """The route's answer to a request whose body (``raw``) was read already."""
        endpoint = self.endpoint

        async def respond(request: Request, raw: bytes) -> Response:
            body = _decoded(raw, request.headers.get("content-type"))
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

        return respond

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        respond = self.responder()

        async def handle(request: Request) -> Response:
            return await respond(request, await request.body())

        return handle


class RegisterLane:
    """The register route served straight from the app's innermost middleware
    (:class:`app.api.middleware.BodySizeLimitMiddleware`, which has read the body already),
    past the layers between it and the route that do nothing for this route: Starlette's
    exception middleware (whose handlers are applied here, the same ones, looked up the same
    way), FastAPI's exit stacks for dependencies with ``yield`` (the route has none), and the
    router's walk over the app's routers (the route matched here by its own
    :meth:`~starlette.routing.Route.matches`, the scope given what the router gives it:
    ``route``, ``endpoint``, ``path_params``, ``router``). The route is the first the router
    tries (:func:`app.main.create_app` includes the invocations router first), so a request it
    matches is the request the router would have given it. Under FastAPI's own telemetry
    (which the router tells the route it chose) the lane stands aside. Those layers were about
    a third of a registration's instructions through the ASGI app (``benchmarks/RESULTS.md``,
    *Write path CPU, this round*)."""

    def __init__(self, route: RegisterRoute) -> None:
        self.route = route
        self.respond = route.responder()
        self._handlers: tuple[dict[Any, Any], dict[int, Any]] | None = None
        #: whether the app's router gives the route its requests (asked at the first)
        self._routed: bool | None = None

    def _first(self, app: Any, scope: Scope) -> bool:
        """Whether the app's router, given a request the route matches, would pick the route:
        it is the first route (or the first of the first router) to match the request in
        full. An app given another route at the same path ahead of it is served by its
        router, without the lane."""
        probe = {k: scope[k] for k in ("type", "method", "path", "root_path") if k in scope}
        for route in app.router.routes:
            if route.matches(dict(probe))[0] is not Match.FULL:
                continue
            inner = getattr(getattr(route, "original_router", None), "routes", None)
            if route is self.route or inner is None:
                return route is self.route
            first = next((r for r in inner if r.matches(dict(probe))[0] is Match.FULL), None)
            return first is self.route
        return False

    async def __call__(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Answer the request when it is the route's (``True``); else leave it (``False``)."""
        if "fastapi.telemetry" in scope:
            return False
        match, child = self.route.matches(scope)
        if match is not Match.FULL:
            return False
        app = scope["app"]
        if self._routed is None:
            self._routed = self._first(app, scope)
        if not self._routed:
            return False
        scope.update(child)
        if "router" not in scope:
            scope["router"] = app.router
        request = Request(scope, receive)
        try:
            response = await self.respond(request, body)
        except Exception as exc:
            await self._handled(app, exc, request, receive, send)
        else:
            await response(scope, receive, send)
        return True

    async def _handled(
        self, app: Any, exc: Exception, request: Request, receive: Receive, send: Send
    ) -> None:
        """``exc`` answered by the app's handler of it, as its exception middleware answers it;
        one it has none for (the app's ``Exception`` handler is its server error middleware's)
        goes on up."""
        if self._handlers is None:
            handlers = {
                k: v for k, v in app.exception_handlers.items() if k not in (500, Exception)
            }
            middleware = ExceptionMiddleware(app, handlers=handlers)
            self._handlers = (middleware._exception_handlers, middleware._status_handlers)
        request.scope["starlette.exception_handlers"] = self._handlers

        async def raising(scope: Scope, receive: Receive, send: Send) -> None:
            raise exc

        await wrap_app_handling_exceptions(raising, request)(request.scope, receive, send)


def register_lane(routes: Sequence[BaseRoute]) -> RegisterLane:
    """The lane of the register route among ``routes`` (its router's)."""
    for route in routes:
        if isinstance(route, RegisterRoute):
            return RegisterLane(route)
    raise LookupError("no register route")
