"""The read-only HTML dashboard: one static page, its script modules and its style sheet.

The page holds no data and no credentials: it asks for an API key, keeps it in the tab's
``sessionStorage`` and calls the JSON API with ``Authorization: Bearer``, so every read goes
through the same roles and visibility rules as any other client (no cookies, hence no CSRF
surface). The strict Content-Security-Policy allows scripts, styles and requests from this
origin only and no inline script, so even a name that slipped past the page's escaping could
not run.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, Response
from fastapi.responses import RedirectResponse

from app.services.errors import NotFound

router = APIRouter(include_in_schema=False)

#: The assets the page loads, by file name: the page, its style sheet and its script, native
#: ES modules (``app.js`` imports the others), every ``*.js`` file of this package, which the
#: wheel ships (anything else is 404: no path is ever joined from the request, its name is
#: only looked up here).
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
} | {
    entry.name: "text/javascript; charset=utf-8"
    for entry in files(__name__).iterdir()
    if entry.name.endswith(".js")
}

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


@cache
def asset(name: str) -> bytes:
    """An asset's bytes, read once from the installed package."""
    return files(__name__).joinpath(name).read_bytes()


def _serve(name: str) -> Response:
    return Response(asset(name), media_type=ASSETS[name], headers=HEADERS)


@router.get("/", name="home")
def home() -> RedirectResponse:
    """The first URL ``make run`` prints: the dashboard (the API is under ``/v1``, its
    documentation at ``/docs``)."""
    return RedirectResponse("/dashboard", status_code=307)


@router.get("/dashboard", name="dashboard")
def dashboard() -> Response:
    """The dashboard page."""
    return _serve("index.html")


@router.get("/dashboard/{name}", name="dashboard_asset")
def dashboard_asset(name: str) -> Response:
    """One of the page's assets."""
    if name not in ASSETS:
        raise NotFound(f"no dashboard asset '{name}'")
    return _serve(name)
