"""The dashboard in a real headless Chromium against a real uvicorn server.

The browser is the system's Chromium (Debian package ``chromium``), driven by Playwright
with ``executable_path``: no browser is downloaded. ``ODOMETER_CHROMIUM`` overrides the
binary. Screenshots are kept in ``test-artifacts/browser/`` at the repository root.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, ROOT, fresh_database

ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: An analyst name that would run script if the page or the chart ever treated it as markup.
HOSTILE = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def chromium_binary() -> str | None:
    """The system Chromium: ``$ODOMETER_CHROMIUM``, else ``chromium`` on the PATH."""
    configured = os.environ.get("ODOMETER_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class World:
    server: Server
    auditor_key: str
    dataset: str
    analyst: str


def _post(http: httpx.Client, path: str, body: Any, key: str = ADMIN_KEY) -> Any:
    r = http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _build(server: Server) -> World:
    """An organisation with an auditor, and a dataset (ε = 1, δ = 10⁻⁶) on which an analyst
    with a hostile name spent ε 0.25 + an ODP reservation at 0.3 settled to 0.1: spent
    ε 0.35, δ 10⁻⁷, remaining ε 0.65, δ 9·10⁻⁷."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        org = _post(http, "/v1/organisations", {"name": "browser-org"})["id"]
        keys = {}
        ids = {}
        for role, name in (("auditor", "audrey"), ("analyst", HOSTILE)):
            body = {"name": name, "role": role, "organisation_id": org}
            ids[role] = _post(http, "/v1/principals", body)["id"]
            keys[role] = _post(http, f"/v1/principals/{ids[role]}/keys", {})["key"]
        _post(
            http,
            "/v1/datasets",
            {"name": "other", "budget": {"epsilon": 2, "delta": 0}, "organisation_id": org},
        )
        ds = _post(
            http,
            "/v1/datasets",
            {
                "name": "census",
                "budget": {"epsilon": 1, "delta": "0.000001"},
                "organisation_id": org,
            },
        )["id"]
        _post(http, f"/v1/datasets/{ds}/grants", {"principal_id": ids["analyst"]})
        url = f"/v1/datasets/{ds}/invocations"
        pure = {"mechanism": {"type": "pure_dp", "epsilon": "0.25"}}
        _post(http, url, pure, keys["analyst"])
        odp = {
            "mechanism": {
                "type": "odp",
                "delta": "0.0000001",
                "cells": [{"name": "none", "epsilon": "0.1"}, {"name": "some", "epsilon": "0.3"}],
            }
        }
        inv = _post(http, url, odp, keys["analyst"])["id"]
        _post(http, f"{url}/{inv}/settle", {"cell": "none"}, keys["analyst"])
    return World(server, keys["auditor"], ds, ids["analyst"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("dashboard")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
    ):
        yield _build(server)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary: install Debian's `chromium` or set ODOMETER_CHROMIUM")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh user-data-dir per test
            executable_path=binary,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


def _screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a real picture, not an empty page
    return path


def test_dashboard_shows_remaining_budget_charts_and_ledger(
    world: World, browser: BrowserContext
) -> None:
    """Shown able to fail: with ``remainingOf`` in ``app/dashboard/app.js`` returning the
    spent amounts instead, this test failed on the first ``remaining`` assertion
    (``'ε 0.35, δ 0.0000001' == 'ε 0.65, δ 0.0000009'``)."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type in ("error", "warning") else None,
    )
    response = page.goto(f"{world.server.base_url}/dashboard")
    assert response is not None and response.status == 200
    page.fill("#api-key", world.auditor_key)
    page.click("#use-key")
    row = page.locator(f'#datasets tr[data-id="{world.dataset}"]')
    row.wait_for(timeout=15_000)
    assert row.locator("td.name").inner_text() == "census"
    assert row.locator("td.remaining").inner_text() == "ε 0.65, δ 0.0000009"
    assert page.locator("#datasets tbody tr").count() == 2
    _screenshot(page, "dashboard-datasets")

    row.locator("button.show").click()
    page.wait_for_selector(f'body[data-loaded="{world.dataset}"]', timeout=15_000)
    remaining = page.locator("#remaining")
    assert remaining.is_visible()
    assert remaining.inner_text() == "ε 0.65, δ 0.0000009"
    assert page.locator("#spent").inner_text() == "ε 0.35, δ 0.0000001 (reserved ε 0)"
    assert page.locator("#refunds").inner_text() == "ε 0.2, δ 0"
    assert page.locator("#verdict").inner_text().startswith("OK — 5 entries replayed")

    spend = page.locator("#spend-chart > svg")
    assert spend.is_visible()
    box = spend.bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 300
    assert spend.locator("polyline.spent").count() == 1
    assert spend.locator("polyline.budget").count() == 1
    bars = page.locator("#analysts-chart > svg g.analyst")
    assert bars.count() == 1
    # the hostile name is shown as text and ran nothing
    assert bars.locator("text").first.text_content() == HOSTILE[:27] + "…"
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#analysts-chart img, #analysts-chart script").count() == 0

    kinds = page.locator("#ledger tbody tr td:nth-child(3)").all_inner_texts()
    assert kinds == [
        "invocation_settled",
        "invocation_reserved",
        "invocation_accepted",
        "grant_changed",
        "dataset_created",
    ]
    # the key lives in this tab's session storage only: no cookie was ever set
    assert page.evaluate("() => sessionStorage.getItem('odometer.apiKey')") == world.auditor_key
    assert browser.cookies() == []
    path = _screenshot(page, "dashboard-dataset")
    assert path.exists()
    assert errors == []


def test_a_refused_key_is_explained(world: World, browser: BrowserContext) -> None:
    page = browser.new_page()
    page.goto(f"{world.server.base_url}/dashboard")
    page.fill("#api-key", "odo_not_a_key")
    page.click("#use-key")
    message = page.locator("#message")
    message.wait_for(timeout=15_000)
    page.wait_for_function("() => document.getElementById('message').textContent !== ''")
    assert message.inner_text() == "The key was refused (unknown, revoked or expired)."
    assert page.locator("#main").is_hidden()
