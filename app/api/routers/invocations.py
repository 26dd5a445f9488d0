"""Invocations: register, preview, settle, cancel, read."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from fastapi import APIRouter
from fastapi.requests import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.types import Message, Receive, Scope, Send

from app.api.deps import AnalystDep, IdempotencyKeyDep, InvocationReaderDep, MetricsDep, UowDep
from app.api.errors import ERROR_STATUS, responses
from app.db.uow import UnitOfWork
from app.schemas.invocations import (
    InvocationCreate,
    InvocationCreated,
    InvocationFinished,
    InvocationOut,
    Preview,
    SettleRequest,
)
from app.services import invocations as service
from app.services.errors import ServiceError
from app.services.principals import Principal, Role, admin_principal, authenticate
from odometer_core.accounting import DeclarationError

router = APIRouter(prefix="/v1/datasets/{dataset_id}/invocations", tags=["invocations"])


#: Non-error outcomes of recorded (idempotent) responses; the others are error codes.
_OUTCOME_STATUS: Final[dict[str, int]] = {service.CREATED: 201, service.OK: 200}


def recorded_response(recorded: service.RecordedResponse) -> Response:
    """Send a stored response byte for byte (fresh or replayed): 201 for a registration, 200
    for a settle / cancel, the error's status otherwise (a refusal: 409)."""
    status = _OUTCOME_STATUS.get(recorded.outcome) or ERROR_STATUS[recorded.outcome]
    headers = {"Idempotent-Replayed": "true"} if recorded.replayed else None
    return Response(
        recorded.body, status_code=status, media_type="application/json", headers=headers
    )


def _request(body: InvocationCreate) -> service.InvocationRequest:
    return service.InvocationRequest(
        declaration=body.to_declaration(),
        sub_budget=body.sub_budget,
        conversion_delta=body.conversion_delta,
    )


@router.post(
    "",
    name="register_invocation",
    status_code=201,
    response_model=InvocationCreated,
    responses=responses(401, 403, 404, 413, 422, 503, budget_exceeded=True),
)
def register_invocation(
    dataset_id: str,
    body: InvocationCreate,
    principal: AnalystDep,
    uow: UowDep,
    metrics: MetricsDep,
    idempotency_key: IdempotencyKeyDep = None,
) -> Response:
    """Declare an invocation: 201 accepted (charged) or reserved (ODP), 409 BudgetExceeded.

    The charge is computed before the dataset's budget is locked, within a CPU budget per
    request (default 1 s, ``ODOMETER_CHARGE_CPU_SECONDS``): past it the answer is 422
    ``ChargeTooExpensive`` and nothing is charged; when no charge worker is free in time, 503
    with ``Retry-After`` (retry with the same ``Idempotency-Key``)."""
    result = service.register_invocation(
        uow, principal, dataset_id, _request(body), idempotency_key
    )
    metrics.record_decision(result.decision)
    return recorded_response(result)


@router.post(
    "/preview",
    name="preview_invocation",
    response_model=Preview,
    responses=responses(401, 403, 404, 413, 422, 503),
)
def preview_invocation(
    dataset_id: str, body: InvocationCreate, principal: AnalystDep, uow: UowDep
) -> Preview:
    """The decision a registration would get now; nothing is written."""
    return service.preview_invocation(uow, principal, dataset_id, _request(body))


@router.post(
    "/{invocation_id}/settle",
    name="settle_invocation",
    response_model=InvocationFinished,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def settle_invocation(
    dataset_id: str,
    invocation_id: str,
    body: SettleRequest,
    principal: AnalystDep,
    uow: UowDep,
    metrics: MetricsDep,
    idempotency_key: IdempotencyKeyDep = None,
) -> Response:
    """Settle a reservation at the released output's cell; the rest of its ε is refunded.

    Name the cell (``cell``), or send the released output (``output``) and the service
    derives the cell from the template (svt, ptr, iterative, tested_release), or both: they
    must agree. An impossible output, an output for a plain ``odp`` declaration, or a cell
    that contradicts the output is 422 ``InvalidOutput`` and changes nothing. The output's
    SHA-256 over canonical JSON is recorded in the ledger entry and answered as
    ``output_digest``."""
    result = service.settle_invocation(
        uow,
        principal,
        dataset_id,
        invocation_id,
        body.cell,
        idempotency_key,
        output=body.output if body.has_output else service.NO_OUTPUT,
    )
    metrics.record_decision(result.decision)
    return recorded_response(result)


@router.post(
    "/{invocation_id}/cancel",
    name="cancel_invocation",
    response_model=InvocationFinished,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def cancel_invocation(
    dataset_id: str,
    invocation_id: str,
    principal: AnalystDep,
    uow: UowDep,
    metrics: MetricsDep,
    idempotency_key: IdempotencyKeyDep = None,
) -> Response:
    """Release a reservation whose mechanism never ran (full refund of ε and δ)."""
    result = service.cancel_invocation(uow, principal, dataset_id, invocation_id, idempotency_key)
    metrics.record_decision(result.decision)
    return recorded_response(result)


@router.get(
    "/{invocation_id}",
    name="get_invocation",
    response_model=InvocationOut,
    responses=responses(401, 403, 404, 422, 503),
)
def get_invocation(
    dataset_id: str, invocation_id: str, principal: InvocationReaderDep, uow: UowDep
) -> InvocationOut:
    """One invocation with its charges and ledger entries."""
    return service.get_invocation(uow, principal, dataset_id, invocation_id)


# ---------------------------------------------------------------------------- the lean edge
#: What ``IdempotencyKeyDep`` admits (1–255 visible ASCII characters).
_IDEMPOTENCY_KEY: Final = re.compile(r"[\x21-\x7e]{1,255}")

#: Threads of this process that run the lean edge's blocking calls: as many as anyio lets
#: FastAPI's sync routes use at once (its default capacity limiter, 40 tokens), so the
#: concurrency the register route can reach is what it was through ``run_in_threadpool``;
#: more calls wait in line, first in first out, as they waited for a token. Shared by every
#: app of the process (as anyio's thread pool is); a thread starts only when a call finds none
#: idle.
REGISTER_THREADS: Final = 40
_THREADS: Final = ThreadPoolExecutor(REGISTER_THREADS, thread_name_prefix="odometer-register")

T = TypeVar("T")


async def in_thread(call: Callable[..., T], *args: object) -> T:
    """``call(*args)`` in one of the process's register threads, with the caller's context
    variables (as ``run_in_threadpool``). Straight through the event loop's executor hand-off:
    anyio's worker-thread machinery (capacity limiter, cancel scope, its own result queue) cost
    ≈ 10 % of a worker's CPU at one client (``benchmarks/RESULTS.md``, *Server CPU at one
    client*). The call is not abandoned if the request is cancelled: its transaction commits or
    rolls back in its thread as it would have."""
    context = contextvars.copy_context()
    job = functools.partial(context.run, call, *args)
    return await asyncio.get_running_loop().run_in_executor(_THREADS, job)


def _replay(body: bytes) -> Receive:
    """A ``receive`` that hands the already read body to the route once more."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


class FastRegister:
    """``POST /v1/datasets/{dataset_id}/invocations`` without FastAPI's per-request dependency
    resolution: the common request (a JSON body that validates, a bearer key of an analyst or
    the admin, a well-formed ``Idempotency-Key`` or none) is parsed once, as the route's
    ``InvocationCreate`` would be, and registered; every other request is handed to the
    FastAPI route unchanged, so each error answer stays exactly the route's (and the OpenAPI
    document still describes the route). Errors the service raises reach the app's exception
    handlers as from the route. Measured: ``benchmarks/RESULTS.md``, *The lean HTTP edge*."""

    def __init__(self, route: APIRoute) -> None:
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.route  # the metrics' route template, as for the route itself
        request = Request(scope, receive)
        body = await request.body()
        parsed = await self._parse(request, body)
        if parsed is None:
            await self.route.handle(scope, _replay(body), send)
            return
        principal, invocation, key = parsed
        state = request.app.state
        result = await in_thread(
            service.register_invocation,
            UnitOfWork(state.database),
            principal,
            scope["path_params"]["dataset_id"],
            invocation,
            key,
        )
        state.metrics.record_decision(result.decision)
        await recorded_response(result)(scope, receive, send)

    async def _parse(
        self, request: Request, body: bytes
    ) -> tuple[Principal, service.InvocationRequest, str | None] | None:
        headers = request.headers
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return None
        keys = headers.getlist("idempotency-key")
        if len(keys) > 1 or (keys and not _IDEMPOTENCY_KEY.fullmatch(keys[0])):
            return None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        settings = request.app.state.settings
        admin_key = settings.admin_key.get_secret_value() if settings.admin_key else None
        principal = admin_principal(token, admin_key)
        if principal is None:
            uow = UnitOfWork(request.app.state.database)
            try:
                principal = await in_thread(authenticate, uow, token, admin_key)
            except ServiceError:
                return None
        if not (principal.is_admin or principal.role is Role.ANALYST):
            return None
        try:
            invocation = _request(InvocationCreate.model_validate(json.loads(body)))
        except (ValueError, ValidationError, DeclarationError):
            return None
        return principal, invocation, keys[0] if keys else None
