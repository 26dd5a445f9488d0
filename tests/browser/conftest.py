"""The one Chromium the browser tests drive: the system's (Debian's ``chromium``), headless,
never downloading anything; a test without it is skipped, saying how to get it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

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


def chromium_binary() -> str | None:
    """The system Chromium: ``$ODOMETER_CHROMIUM``, else ``chromium`` on the PATH."""
    configured = os.environ.get("ODOMETER_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def chromium(profile: Path, height: int = 1000) -> Iterator[BrowserContext]:
    """A headless Chromium with a fresh user-data-dir at ``profile``, 1280 px wide (skips the
    test when there is no Chromium)."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary: install Debian's `chromium` or set ODOMETER_CHROMIUM")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=binary,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": height},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium(tmp_path / "profile") as context:
        yield context


def watched_page(browser: BrowserContext) -> tuple[Page, list[str]]:
    """A new page and the list its script errors and console errors or warnings go to."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type in ("error", "warning") else None,
    )
    return page, errors
