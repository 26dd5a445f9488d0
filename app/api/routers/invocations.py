"""Invocations: register, preview, settle, cancel, read."""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter
from fastapi.responses import Response

from app.api.deps import (
    AnalystDep,
    ChargesDep,
    IdempotencyKeyDep,
    InvocationReaderDep,
    MetricsDep,
    RegistrarDep,
    UowDep,
)
from app.api.errors import ERROR_STATUS, responses
from app.api.jsonbody import ExactJsonRoute
from app.api.reads import ReadsDep
from app.api.register import RegisterRoute
from app.schemas.blocks import selection_json
from app.schemas.invocations import (
    InvocationCreate,
    InvocationCreated,
    InvocationFinished,
    InvocationOut,
    Preview,
    SettleRequest,
)
from app.services import invocations as service
from app.services import reservations
from app.services.idempotency import CREATED, OK, RecordedResponse
from app.services.registration import InvocationRequest, RequestBody

router = APIRouter(
    prefix="/v1/datasets/{dataset_id}/invocations", tags=["invocations"], route_class=ExactJsonRoute
)


#: Non-error outcomes of recorded (idempotent) responses; the others are error codes.
_OUTCOME_STATUS: Final[dict[str, int]] = {CREATED: 201, OK: 200}


def recorded_response(recorded: RecordedResponse) -> Response:
    """Send a stored response byte for byte (fresh or replayed): 201 for a registration, 200
    for a settle / cancel, the error's status otherwise (a refusal: 409)."""
    status = _OUTCOME_STATUS.get(recorded.outcome) or ERROR_STATUS[recorded.outcome]
    headers = {"Idempotent-Replayed": "true"} if recorded.replayed else None
    return Response(
        recorded.body, status_code=status, media_type="application/json", headers=headers
    )


def invocation_request(body: InvocationCreate) -> InvocationRequest:
    return InvocationRequest(
        declaration=body.to_declaration(),
        sub_budget=body.sub_budget,
        conversion_delta=body.conversion_delta,
        blocks=selection_json(body.blocks),
        contribution=body.contribution,
        neighbours=body.neighbours,
    )


def registration_body(body: InvocationCreate) -> RequestBody:
    """A registration's body as validated, its declaration parsed by the core when the
    registration is prepared (:func:`app.services.registration.prepare`)."""
    return RequestBody(
        mechanism=body.mechanism.model_dump(mode="json", exclude_none=True),
        sub_budget=body.sub_budget,
        conversion_delta=body.conversion_delta,
        blocks=selection_json(body.blocks),
        contribution=body.contribution,
        neighbours=body.neighbours,
    )


async def register_invocation(
    dataset_id: str,
    body: InvocationCreate,
    principal: AnalystDep,
    registrar: RegistrarDep,
    metrics: MetricsDep,
    idempotency_key: IdempotencyKeyDep = None,
) -> Response:
    """Declare an invocation: 201 accepted (charged) or reserved (ODP), 409 BudgetExceeded.

    The charge is computed before the dataset's budget is locked, within a CPU budget per
    request (default 1 s, ``ODOMETER_CHARGE_CPU_SECONDS``): past it the answer is 422
    ``ChargeTooExpensive`` and nothing is charged; when no charge worker is free in time, 503
    with ``Retry-After`` (retry with the same ``Idempotency-Key``)."""
    result = await registrar.register(
        principal, dataset_id, registration_body(body), idempotency_key
    )
    metrics.record_decision(result.decision)
    return recorded_response(result)


# Served by its own resolver of these parameters (app/api/register.py), declared as any route.
router.add_api_route(
    "",
    register_invocation,
    methods=["POST"],
    name="register_invocation",
    status_code=201,
    response_model=InvocationCreated,
    responses=responses(401, 403, 404, 413, 422, 503, budget_exceeded=True),
    route_class_override=RegisterRoute,
)


@router.post(
    "/preview",
    name="preview_invocation",
    response_model=Preview,
    responses=responses(401, 403, 404, 409, 413, 422, 503),
)
def preview_invocation(
    dataset_id: str,
    body: InvocationCreate,
    principal: AnalystDep,
    uow: UowDep,
    charges: ChargesDep,
) -> Preview:
    """The decision a registration would get now; nothing is written."""
    request = invocation_request(body)
    return service.preview_invocation(uow, principal, dataset_id, request, charges)


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
    result = reservations.settle_invocation(
        uow,
        principal,
        dataset_id,
        invocation_id,
        body.cell,
        idempotency_key,
        output=body.output if body.has_output else reservations.NO_OUTPUT,
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
    result = reservations.cancel_invocation(
        uow, principal, dataset_id, invocation_id, idempotency_key
    )
    metrics.record_decision(result.decision)
    return recorded_response(result)


@router.get(
    "/{invocation_id}",
    name="get_invocation",
    response_model=InvocationOut,
    responses=responses(401, 403, 404, 422, 503),
)
def get_invocation(
    dataset_id: str, invocation_id: str, principal: InvocationReaderDep, read: ReadsDep
) -> InvocationOut:
    """One invocation with its charges and ledger entries."""
    return read(
        lambda uow: service.get_invocation(uow, principal, dataset_id, invocation_id),
        dataset=dataset_id,
    )
