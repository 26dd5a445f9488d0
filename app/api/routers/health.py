"""Operations: liveness, readiness (database round-trip), Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import DatabaseDep, MetricsDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.services import health

router = APIRouter(tags=["operations"], route_class=ExactJsonRoute)


@router.get("/healthz", name="healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", name="readyz", responses=responses(503))
def readyz(database: DatabaseDep) -> dict[str, str]:
    """The database answers."""
    health.check_database(database)
    return {"status": "ready"}


@router.get(
    "/metrics",
    name="metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
def metrics(metrics: MetricsDep) -> Response:
    """Prometheus metrics of this worker process, and the budget gauges of the datasets
    ODOMETER_METRICS_DATASETS lists (read from the database: the same in every worker)."""
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
