"""The lean edge: the register route's common request served ahead of the middleware stack.

``POST /v1/datasets/{dataset_id}/invocations`` is what analysts' libraries send for every
mechanism they run, so its fixed cost per request is the service's. The common request (a JSON
body within the size limit, a bearer key of an analyst or the admin, a well-formed
``Idempotency-Key`` or none, a body that validates) is answered by :class:`FastRegister`
straight from :meth:`OdometerAPI.__call__`: parsed once, as the route's ``InvocationCreate``
would parse it, registered (:func:`register`: on the event loop when the worker serves nothing
else, else in its caller's group commit line, awaited on the loop), its metrics recorded as
:class:`~app.api.middleware.MetricsMiddleware` records them and any error answered by the app's
own exception handlers, as the stack would answer it. Every other request (and every request
of an app with middleware the edge does not know) goes through the whole stack, body replayed,
to the FastAPI route, so each error answer stays exactly the route's and the OpenAPI document
still describes the route. What each step bought is measured in ``benchmarks/RESULTS.md``,
*Server CPU at one client*.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import re
import threading
import time
from collections.abc import Callable, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final, TypeVar

import orjson
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.middleware import Metrics
from app.api.routers.invocations import invocation_request, recorded_response
from app.db.uow import Database, UnitOfWork
from app.schemas.invocations import InvocationCreate
from app.services import invocations as service
from app.services.errors import ServiceError
from app.services.principals import Principal, Role, admin_principal, authenticate
from app.settings import Settings
from odometer_core.accounting import DeclarationError
from odometer_core.accounting.effort import may_be_expensive

#: What ``IdempotencyKeyDep`` admits (1–255 visible ASCII characters).
_IDEMPOTENCY_KEY: Final = re.compile(rb"[\x21-\x7e]{1,255}")

#: Threads of this process that run the lean edge's blocking calls: as many as anyio lets
#: FastAPI's sync routes use at once (its default capacity limiter, 40 tokens), so the
#: concurrency the register route can reach is what it was through ``run_in_threadpool``;
#: more calls wait in line, first in first out, as they waited for a token. Shared by every
#: app of the process (as anyio's thread pool is); a thread starts only when a call finds none
#: idle.
REGISTER_THREADS: Final = 40
_THREADS: Final = ThreadPoolExecutor(REGISTER_THREADS, thread_name_prefix="odometer-register")

T = TypeVar("T")


class _Worker:
    """What the lean edge knows of the server process it runs in: the set of its open
    connections, when the server publishes it (``python -m app.serve`` does:
    :class:`app.serve.HttpProtocol`), and how many of its calls run in threads now."""

    def __init__(self) -> None:
        self.connections: Sized | None = None
        self._lock = threading.Lock()
        self._in_threads = 0

    def enter(self) -> None:
        with self._lock:
            self._in_threads += 1

    def leave(self) -> None:
        with self._lock:
            self._in_threads -= 1

    def alone(self) -> bool:
        """Whether a request being served is the only request this process can be serving:
        the server has one connection open (an HTTP/1.1 connection carries one request at a
        time), and no call of an earlier request (one whose client left) still runs in a
        thread."""
        connections = self.connections
        return connections is not None and len(connections) == 1 and self._in_threads == 0


#: The process's server, as far as the edge knows it.
WORKER: Final = _Worker()


def publish_connections(connections: Sized) -> None:
    """Called by the server's protocol with the live set of the process's open connections."""
    WORKER.connections = connections


def _left(_: Future[Any]) -> None:
    WORKER.leave()


def _submit(call: Callable[..., T], *args: object) -> Future[T]:
    """``call(*args)`` started in a register thread; it counts as running
    (:meth:`_Worker.alone`) until it returns."""
    WORKER.enter()
    try:
        job = _THREADS.submit(call, *args)
    except BaseException:
        WORKER.leave()
        raise
    job.add_done_callback(_left)
    return job


def spawn(call: Callable[..., object], *args: object) -> None:
    """Start ``call(*args)`` in a register thread and do not wait for it (a group commit line's
    runner, :meth:`~app.db.groups.GroupCommit.run_async`)."""
    _submit(call, *args)


async def in_thread(call: Callable[..., T], *args: object) -> T:
    """``call(*args)`` in one of the process's register threads, with the caller's context
    variables (as ``run_in_threadpool``). Straight through the event loop's executor hand-off
    (what ``loop.run_in_executor`` does): anyio's worker-thread machinery (capacity limiter,
    cancel scope, its own result queue) was a sizeable share of a worker's CPU at one client
    (``benchmarks/RESULTS.md``, *Server CPU at one client*). Once started, the call is not
    abandoned if the request is cancelled: its transaction commits or rolls back in its thread
    as it would have, and it counts as running (:meth:`_Worker.alone`) until then."""
    context = contextvars.copy_context()
    job: Future[T] = _submit(context.run, call, *args)
    return await asyncio.wrap_future(job)


async def blocking(call: Callable[..., T], *args: object, short: bool = True) -> T:
    """``call(*args)``, a blocking call of the register path: on the event loop itself when
    this request is the only one the process can be serving (:meth:`_Worker.alone`) and the
    call is ``short``, else in a register thread (:func:`in_thread`). Not short: a
    registration whose charge may be expensive (``may_be_expensive``), which waits for a charge
    worker for up to its CPU budget: a new connection's first request (a health probe, say)
    must not wait that long.

    A process serving one keep-alive connection has nothing else for its event loop to do
    while the request's transaction runs; the hand-off to a thread and back (a queue, two
    wake-ups, the loop's self-pipe) costs CPU on every request and throughput at one client
    (``benchmarks/RESULTS.md``, *Server CPU at one client*, *Levers, measured side by side*). What
    waits meanwhile is only a new connection's first request, for at most this transaction:
    from then on the process has two connections and hands every call to a thread again.
    """
    if short and WORKER.alone():
        return call(*args)
    return await in_thread(call, *args)


async def register(
    database: Database,
    principal: Principal,
    dataset_id: str,
    invocation: service.InvocationRequest,
    key: str | None,
) -> service.RecordedResponse:
    """One registration, served the cheapest way the process's state allows.

    Alone (:meth:`_Worker.alone`), on the event loop. With other requests in flight, a
    declaration whose charge is a closed form joins its caller's group commit line from the
    event loop (``GroupCommit.run_async``): one thread runs the line's groups one after
    another and each group's answers come back to the loop at once, where a thread per request
    cost a hand-off, an event and a wake-up of the loop each. A declaration whose charge may be
    expensive is registered in a thread of its own, as it waits for a charge worker before it
    joins the line."""
    uow = UnitOfWork(database)
    short = not may_be_expensive(invocation.declaration)
    groups = database.groups
    if not short or groups is None or WORKER.alone():
        return await blocking(
            service.register_invocation, uow, principal, dataset_id, invocation, key, short=short
        )
    item = service.registration(uow, principal, dataset_id, invocation, key)
    outcome: service.RecordedResponse = await groups.run_async(
        service.group_key(principal), item, functools.partial(service.register_group, uow), spawn
    )
    return outcome


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already read body to the app once more, then listens to
    the client as ``receive`` does."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _handler(app: FastAPI, exc: Exception) -> tuple[Callable[..., Any], bool]:
    """The app's handler of ``exc`` as its middleware stack would pick it, and whether it is the
    last resort (the handler of ``Exception``, which Starlette's ``ServerErrorMiddleware`` runs
    and after which it re-raises, so that the server logs the error)."""
    handlers = app.exception_handlers
    for cls in type(exc).__mro__:
        if cls is not Exception and cls in handlers:
            return handlers[cls], False
    return handlers.get(500) or handlers[Exception], True


class _Parsed:
    """What the fast path needs of a request, read from its headers in one pass."""

    __slots__ = ("authorization", "content_length", "content_type", "keys")

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.content_type = b""
        self.content_length = -1
        self.authorization = b""
        self.keys: list[bytes] = []
        for name, value in headers:
            if name == b"content-type":
                self.content_type = value
            elif name == b"content-length":
                self.content_length = int(value) if value.isdigit() else -1
            elif name == b"authorization":
                self.authorization = value
            elif name == b"idempotency-key":
                self.keys.append(value)


class FastRegister:
    """``POST /v1/datasets/{dataset_id}/invocations`` without the middleware stack and FastAPI's
    per-request dependency resolution, for the common request; every other request is handed to
    ``fallback`` (the app's whole stack) unchanged, its body replayed."""

    def __init__(self, route: APIRoute, fallback: ASGIApp, middleware: int) -> None:
        self.route = route
        self.fallback = fallback
        #: how many middleware the app had when the edge was installed: with more (added by a
        #: deployment), every request goes through the stack, theirs included
        self.middleware = middleware
        # the route's own path regex (``{dataset_id}``: one path segment), for the same matches
        self._path = route.path_regex
        self.template = route.path

    def dataset_of(self, scope: Scope) -> str | None:
        """The ``dataset_id`` of a request this edge may serve, else ``None`` (also behind a
        ``root_path``: the router strips it)."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return None
        match = self._path.match(scope["path"])
        return match.group("dataset_id") if match else None

    async def __call__(
        self, app: FastAPI, scope: Scope, receive: Receive, send: Send, dataset_id: str
    ) -> None:
        start = time.perf_counter()
        headers = _Parsed(scope["headers"])
        state = app.state
        settings: Settings = state.settings
        if not 0 <= headers.content_length <= settings.max_body_bytes:
            # announced too large (413), or chunked: the stack's body limit reads it
            await self.fallback(scope, receive, send)
            return
        body = await _read(receive, headers.content_length)
        if body is None:  # the client left before sending its body
            self._record(state.metrics, 500, start)
            return
        parsed = await self._parse(state.database, settings, headers, body)
        if parsed is None:
            await self.fallback(scope, _replay(body, receive), send)
            return
        principal, invocation, key = parsed
        scope["route"] = self.route
        scope["path_params"] = {"dataset_id": dataset_id}
        metrics: Metrics = state.metrics
        try:
            result = await register(state.database, principal, dataset_id, invocation, key)
        except Exception as exc:
            handler, last_resort = _handler(app, exc)
            answer = handler(Request(scope, receive), exc)
            response: Response = await answer if inspect.isawaitable(answer) else answer
            await response(scope, receive, send)
            self._record(metrics, response.status_code, start)
            if last_resort:
                raise
            return
        metrics.record_decision(result.decision)
        response = recorded_response(result)
        await response(scope, receive, send)
        self._record(metrics, response.status_code, start)

    def _record(self, metrics: Metrics, status: int, start: float) -> None:
        """What :class:`~app.api.middleware.MetricsMiddleware` records of a request."""
        metrics.record_request("POST", self.template, status, time.perf_counter() - start)

    async def _parse(
        self, database: Database, settings: Settings, headers: _Parsed, body: bytes
    ) -> tuple[Principal, service.InvocationRequest, str | None] | None:
        if headers.content_type.split(b";")[0].strip().lower() != b"application/json":
            return None
        keys = headers.keys
        if len(keys) > 1 or (keys and not _IDEMPOTENCY_KEY.fullmatch(keys[0])):
            return None
        scheme, _, raw_token = headers.authorization.partition(b" ")
        if scheme.lower() != b"bearer" or not raw_token:
            return None
        token = raw_token.decode("latin-1")
        admin_key = settings.admin_key.get_secret_value() if settings.admin_key else None
        principal = admin_principal(token, admin_key)
        if principal is None:
            try:
                principal = await blocking(authenticate, UnitOfWork(database), token, admin_key)
            except ServiceError:
                return None
        if not (principal.is_admin or principal.role is Role.ANALYST):
            return None
        try:
            invocation = invocation_request(InvocationCreate.model_validate(orjson.loads(body)))
        except (ValueError, ValidationError, DeclarationError):
            return None
        return principal, invocation, keys[0].decode("ascii") if keys else None


async def _read(receive: Receive, length: int) -> bytes | None:
    """The request's body (``length`` bytes announced, so bounded), or ``None`` if the client
    disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


class OdometerAPI(FastAPI):
    """The app: FastAPI, with the lean edge (:class:`FastRegister`) in front of its stack."""

    lean: FastRegister | None = None

    def serve_register_lean(self, route: APIRoute) -> None:
        """Answer ``route``'s common requests through :class:`FastRegister`; call once every
        middleware of the app was added."""
        stack = functools.partial(FastAPI.__call__, self)
        self.lean = FastRegister(route, stack, len(self.user_middleware))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lean = self.lean
        if lean is not None and not self.root_path and len(self.user_middleware) == lean.middleware:
            dataset_id = lean.dataset_of(scope)
            if dataset_id is not None:
                scope["app"] = self
                await lean(self, scope, receive, send, dataset_id)
                return
        await super().__call__(scope, receive, send)
