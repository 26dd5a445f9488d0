"""The API documentation pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), from assets
installed with the service: nothing is fetched from a CDN, so the pages work on a machine
without internet.

The bundles are the ones ``fastapi-offline`` ships (a package that only carries Swagger UI's
and ReDoc's distribution files); FastAPI's own page builders write the HTML. Each page's
Content-Security-Policy allows scripts, styles and requests from this origin only (plus the
one inline script Swagger UI's page needs, by its hash), so a page that tried to reach a CDN
would be refused by the browser, not silently served from it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib.resources import files

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import HTMLResponse, Response

from app.services.errors import NotFound

router = APIRouter(include_in_schema=False)

OPENAPI_URL = "/openapi.json"
ASSET_PREFIX = "/docs/assets"
#: The bundle files the pages load, by name (anything else is 404: no path is ever joined from
#: the request).
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _policy(inline_scripts: list[str]) -> str:
    scripts = ["'self'"] + [
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in inline_scripts
    ]
    # ReDoc renders with inline styles and runs its search index in a blob: worker.
    return (
        f"default-src 'none'; script-src {' '.join(scripts)}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src 'self' blob:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def _page(response: HTMLResponse) -> Response:
    html = bytes(response.body).decode()
    headers = {
        "Content-Security-Policy": _policy(_INLINE_SCRIPT.findall(html)),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    return Response(html, media_type="text/html; charset=utf-8", headers=headers)


@cache
def swagger_page() -> Response:
    """The Swagger UI page (built once: it depends on nothing but the constants above)."""
    return _page(
        get_swagger_ui_html(
            openapi_url=OPENAPI_URL,
            title="Privacy odometer API",
            swagger_js_url=f"{ASSET_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSET_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{ASSET_PREFIX}/favicon.png",
        )
    )


@cache
def redoc_page() -> Response:
    """The ReDoc page, without Google Fonts."""
    return _page(
        get_redoc_html(
            openapi_url=OPENAPI_URL,
            title="Privacy odometer API",
            redoc_js_url=f"{ASSET_PREFIX}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSET_PREFIX}/favicon.png",
            with_google_fonts=False,
        )
    )


@cache
def asset(name: str) -> bytes:
    """A bundle file's bytes, read once from the installed ``fastapi_offline`` package."""
    return files("fastapi_offline").joinpath("static", name).read_bytes()


@router.get("/docs", name="api_docs")
def swagger_ui() -> Response:
    """Swagger UI over this service's OpenAPI document."""
    return swagger_page()


@router.get("/redoc", name="api_redoc")
def redoc() -> Response:
    """ReDoc over this service's OpenAPI document."""
    return redoc_page()


@router.get(ASSET_PREFIX + "/{name}", name="api_docs_asset")
def docs_asset(name: str) -> Response:
    """One of the documentation pages' bundle files (cacheable: they change only with the
    installed package)."""
    if name not in ASSETS:
        raise NotFound(f"no documentation asset '{name}'")
    return Response(
        asset(name),
        media_type=ASSETS[name],
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )
