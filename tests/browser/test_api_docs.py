"""/docs and /redoc render in a real Chromium with every request off this machine refused.

Every request the pages make is routed through the test: one to any host but the server's is
aborted and recorded, so a page that still needed a CDN would render nothing and fail here.
Shown able to fail: with FastAPI's default (CDN) Swagger UI page, the Swagger test failed
waiting for the first operation to render (its bundle's request to the CDN was aborted).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, Route

from tests.browser.conftest import chromium
from tests.concurrency.server import Server, running_server
from tests.support import fresh_database


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("api-docs")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
    ):
        yield server


@pytest.fixture
def offline(tmp_path: Path, server: Server) -> Iterator[tuple[BrowserContext, list[str]]]:
    """A browser whose requests to anywhere but the server are aborted (and listed)."""
    local = urlsplit(server.base_url).netloc
    refused: list[str] = []

    def gate(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).netloc == local:
            route.continue_()
        else:
            refused.append(url)
            route.abort("internetdisconnected")

    with chromium(tmp_path / "profile", height=900) as context:
        context.route("**/*", gate)
        yield context, refused


def _open(context: BrowserContext, url: str) -> tuple[Page, list[str]]:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    response = page.goto(url)
    assert response is not None and response.status == 200
    return page, errors


def test_swagger_ui_renders_every_operation_offline(
    server: Server, offline: tuple[BrowserContext, list[str]]
) -> None:
    context, refused = offline
    page, errors = _open(context, f"{server.base_url}/docs")
    page.wait_for_selector(".opblock", timeout=20_000)
    assert refused == []
    operations = page.locator(".opblock .opblock-summary-path").all_inner_texts()
    paths = {text.replace("\u200b", "") for text in operations}
    assert "/v1/datasets/{dataset_id}/invocations" in paths
    assert "/v1/datasets/{dataset_id}/invocations/{invocation_id}/settle" in paths
    assert len(operations) >= 25  # every operation of the document, not an error page
    assert page.locator(".swagger-ui .info .title").inner_text().startswith("Privacy odometer")
    assert errors == []


def test_redoc_renders_offline(server: Server, offline: tuple[BrowserContext, list[str]]) -> None:
    context, refused = offline
    page, errors = _open(context, f"{server.base_url}/redoc")
    page.wait_for_selector("h1", timeout=20_000)
    assert page.locator("h1").first.inner_text().startswith("Privacy odometer")
    page.wait_for_selector("h2:has-text('Register Invocation')", state="attached", timeout=20_000)
    headings = page.locator("h2").all_inner_texts()
    assert {"Settle Invocation", "Read Ledger", "Create Dataset"} <= set(headings)
    assert refused == []
    # ReDoc's footer names its maker with a logo from its CDN; the page's policy blocks that
    # one image (so it is never requested) and nothing else.
    blocked_logo = [e for e in errors if "redoc.ly" in e and '"img-src' in e]
    assert len(blocked_logo) <= 1
    assert [e for e in errors if e not in blocked_logo] == []
