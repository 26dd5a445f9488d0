"""Dataset reports: the JSON document and its two SVG charts; and the read-only dashboard."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from app import reports_svg
from app.api.deps import AuditorDep, UowDep
from app.api.errors import responses
from app.dashboard import router as dashboard_router
from app.schemas.reports import ReportOut
from app.services import reports as service

_reports = APIRouter(prefix="/v1/datasets/{dataset_id}/report", tags=["reports"])

#: An SVG opened on its own must not run anything, whatever it contains.
SVG_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_SVG_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "An SVG document",
        "content": {"image/svg+xml": {"schema": {"type": "string"}}},
    },
    **responses(401, 403, 404, 503),
}


@_reports.get(
    "",
    name="dataset_report",
    response_model=ReportOut,
    responses=responses(401, 403, 404, 503),
)
def dataset_report(dataset_id: str, principal: AuditorDep, uow: UowDep) -> dict[str, Any]:
    """Guarantee, spend over time, per-analyst totals, refunds, rejections, chain head and
    replay verdict (the whole ledger is replayed, in batches)."""
    return service.dataset_report(uow, principal, dataset_id)


@_reports.get(
    "/spend.svg",
    name="dataset_report_spend_chart",
    response_class=Response,
    responses=_SVG_RESPONSE,
)
def spend_chart(dataset_id: str, principal: AuditorDep, uow: UowDep) -> Response:
    """Spend vs budget over the ledger, as an SVG chart."""
    report = service.dataset_report(uow, principal, dataset_id, verify=False)
    return Response(
        reports_svg.spend_chart(report), media_type="image/svg+xml", headers=SVG_HEADERS
    )


@_reports.get(
    "/analysts.svg",
    name="dataset_report_analysts_chart",
    response_class=Response,
    responses=_SVG_RESPONSE,
)
def analysts_chart(dataset_id: str, principal: AuditorDep, uow: UowDep) -> Response:
    """Net charge and refunds per analyst, as an SVG bar chart."""
    report = service.dataset_report(uow, principal, dataset_id, verify=False)
    return Response(
        reports_svg.analysts_chart(report), media_type="image/svg+xml", headers=SVG_HEADERS
    )


#: The report routes and the dashboard that draws them: one module for the app factory.
router = APIRouter()
router.include_router(_reports)
router.include_router(dashboard_router)
