"""Dataset reports: the JSON document and its two SVG charts; and the read-only dashboard."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app import reports_svg
from app.api.deps import ReportReaderDep
from app.api.errors import Responses, responses
from app.api.jsonbody import ExactJsonRoute
from app.api.reads import Reader, ReadsDep
from app.dashboard import router as dashboard_router
from app.schemas.reports import ReportOut
from app.services import reports as service
from app.services.principals import Principal
from app.services.report_types import ReportJson

_reports = APIRouter(
    prefix="/v1/datasets/{dataset_id}/report", tags=["reports"], route_class=ExactJsonRoute
)

#: An SVG opened on its own must not run anything, whatever it contains.
SVG_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_SVG_RESPONSE: Responses = {
    200: {
        "description": "An SVG document",
        "content": {"image/svg+xml": {"schema": {"type": "string"}}},
    },
    **responses(401, 403, 404, 422, 503),
}


@_reports.get(
    "",
    name="dataset_report",
    response_model=ReportOut,
    responses=responses(401, 403, 404, 422, 503),
)
def dataset_report(
    dataset_id: str,
    principal: ReportReaderDep,
    read: ReadsDep,
    from_: Annotated[str | None, Query(alias="from", max_length=64)] = None,
    to: Annotated[str | None, Query(max_length=64)] = None,
) -> ReportJson:
    """Guarantee, spend over time, per-analyst totals, refunds, rejections, chain head and
    replay verdict (the whole ledger is replayed, in batches). On a partitioned dataset,
    ``from`` … ``to`` (block keys) is the block range reported."""
    return read(
        lambda uow: service.dataset_report(uow, principal, dataset_id, first=from_, last=to),
        dataset=dataset_id,
    )


@_reports.get(
    "/spend.svg",
    name="dataset_report_spend_chart",
    response_class=Response,
    responses=_SVG_RESPONSE,
)
def spend_chart(dataset_id: str, principal: ReportReaderDep, read: ReadsDep) -> Response:
    """Spend vs budget over the ledger, as an SVG chart."""
    return _chart(reports_svg.spend_chart, read, principal, dataset_id)


@_reports.get(
    "/analysts.svg",
    name="dataset_report_analysts_chart",
    response_class=Response,
    responses=_SVG_RESPONSE,
)
def analysts_chart(dataset_id: str, principal: ReportReaderDep, read: ReadsDep) -> Response:
    """Net charge and refunds per analyst, as an SVG bar chart."""
    return _chart(reports_svg.analysts_chart, read, principal, dataset_id)


def _chart(
    render: Callable[[Mapping[str, Any]], str],
    read: Reader,
    principal: Principal,
    dataset_id: str,
) -> Response:
    """A chart of the report, without its replay (the charts draw what the ledger says; the
    verdict is the JSON report's business)."""
    report = read(
        lambda uow: service.dataset_report(uow, principal, dataset_id, verify=False),
        dataset=dataset_id,
    )
    headers = {**SVG_HEADERS, **read.headers()}
    return Response(render(report), media_type="image/svg+xml", headers=headers)


#: The report routes and the dashboard that draws them: one module for the app factory.
router = APIRouter()
router.include_router(_reports)
router.include_router(dashboard_router)
