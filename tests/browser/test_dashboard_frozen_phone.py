"""Two things the dashboard must show in a real Chromium: a dataset frozen behind its witness
says so on its detail (a banner with the reason, both heads and what the reading is worth), and
on a 390 px phone "Show" brings the detail into view. Screenshots go to
``$ODOMETER_SCREENSHOTS`` (else ``test-artifacts/browser/``).

The frozen world is made the operator's way (``docs/witness.md``): a server with a witness, its
SQLite file copied, more registered, the copy put back, the server started again: the dataset
is behind its witness, frozen for writes, its reads served.

Shown to fail on the code before the change (2026-11-29): the API/CLI test with ``KeyError:
'frozen'`` (no such field: the rolled-back reading read as if nothing were wrong);
``test_a_frozen_dataset_says_so`` found no ``#frozen-banner`` (``TimeoutError`` waiting for it);
``test_show_on_a_phone_brings_the_detail_into_view`` found the detail's title 2,058 px above
the window (``assert 0 <= -2057.609375``): the page scrolled to the detail before its content
loaded, and the browser kept the list below it in place while the detail grew above it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, ViewportSize

from tests.browser.conftest import watched_page
from tests.browser.test_dashboard import _screenshot
from tests.concurrency.server import Server, running_server, start_server
from tests.support import ADMIN_KEY, fresh_database

PHONE: ViewportSize = {"width": 390, "height": 844}
PURE = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


def _post(http: httpx.Client, path: str, body: Any) -> Any:
    r = http.post(path, json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _open(browser: BrowserContext, server: Server, ds: str | None = None) -> tuple[Page, list[str]]:
    page, errors = watched_page(browser)
    response = page.goto(f"{server.base_url}/dashboard" + (f"#ds={ds}" if ds else ""))
    assert response is not None and response.status == 200
    page.fill("#api-key", ADMIN_KEY)
    page.click("#use-key")
    if ds:
        page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    else:
        page.wait_for_selector("#datasets tbody tr", timeout=20_000)
    return page, errors


def _shots(page: Page, name: str) -> None:
    """The full page, and what the window shows (the full page does not say where it is)."""
    full = _screenshot(page, name)
    page.screenshot(path=str(full.with_name(f"{name}-window.png")))


# ---------------------------------------------------------------------------- frozen
@dataclass
class Frozen:
    server: Server
    behind: str  # frozen: its ledger lost entries the witness holds
    fine: str  # serves writes


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frozen]:
    tmp = tmp_path_factory.mktemp("frozen")
    env = {"ODOMETER_WITNESS_DIR": str(tmp / "witness"), "ODOMETER_WITNESS_LAG_SECONDS": "0"}
    with fresh_database("sqlite", tmp) as backend:
        db_file = Path(backend.url.removeprefix("sqlite:///"))
        with (
            running_server(backend.url, tmp / "server.log", env=env) as server,
            httpx.Client(base_url=server.base_url, timeout=30) as http,
        ):
            budget = {"epsilon": "1", "delta": "0"}
            behind = _post(http, "/v1/datasets", {"name": "restored", "budget": budget})["id"]
            fine = _post(http, "/v1/datasets", {"name": "untouched", "budget": budget})["id"]
            _post(http, f"/v1/datasets/{behind}/invocations", PURE)
        backup = tmp / "backup.db"
        shutil.copyfile(db_file, backup)  # the server is stopped: the file is consistent
        with (
            running_server(backend.url, tmp / "server.log", env=env) as server,
            httpx.Client(base_url=server.base_url, timeout=30) as http,
        ):
            for _ in range(3):
                _post(http, f"/v1/datasets/{behind}/invocations", PURE)
        for suffix in ("-wal", "-shm"):  # the restore: the backup, nothing of the later log
            Path(f"{db_file}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(backup, db_file)
        server = start_server(backend.url, tmp / "server.log", env=env)
        try:
            yield Frozen(server, behind, fine)
        finally:
            server.stop()


def test_the_api_and_the_cli_say_a_dataset_is_frozen(
    frozen: Frozen, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status.frozen`` on reads (the restored dataset only), and ``odometer datasets show``
    and ``datasets list`` lead with it."""
    from odometer_client.cli import main

    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    base = frozen.server.base_url
    status = httpx.get(f"{base}/v1/datasets/{frozen.behind}", headers=headers).json()["status"]
    detail = status["frozen"].pop("detail")
    assert status["frozen"] == {
        "reason": "behind",
        "witnessed_seq": 5,
        "database_seq": 2,
        "sibling": None,
        "reading": "the reading shown is the database's, which lost entries the witness holds: "
        "what was released can be more",
    }
    assert detail.startswith(
        f"dataset '{frozen.behind}' refuses writes: its ledger is behind the witness (the "
        "witness holds seq 5, the database only 2: entries 3..5 were lost"
    )
    assert status["odometer"]["epsilon"] == "0.1"  # the rolled-back reading, now flagged
    listed = httpx.get(f"{base}/v1/datasets", headers=headers).json()["datasets"]
    assert {d["id"]: d["status"]["frozen"] is None for d in listed} == {
        frozen.behind: False,
        frozen.fine: True,
    }

    live = ("--url", base, "--key", ADMIN_KEY)
    assert main(["datasets", "show", frozen.behind, *live]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "FROZEN behind its witness (behind: witness seq 5, database seq 2): the reading shown is "
        "the database's, which lost entries the witness holds: what was released can be more; "
        f"writes are refused. {detail}"
    )
    assert main(["datasets", "show", frozen.fine, *live]) == 0
    assert "FROZEN" not in capsys.readouterr().out
    assert main(["datasets", "list", *live]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("ds_")}
    assert "FROZEN (behind); " in rows[frozen.behind]
    assert "FROZEN" not in rows[frozen.fine]
    assert out.splitlines()[-1] == (
        f"FROZEN behind the witness: {frozen.behind}: their readings may be rolled back and "
        "writes are refused (`odometer datasets show ID` says why)"
    )


def test_a_frozen_dataset_says_so(browser: BrowserContext, frozen: Frozen) -> None:
    page, errors = _open(browser, frozen.server, frozen.behind)
    banner = page.locator("#frozen-banner")
    banner.wait_for(state="visible", timeout=10_000)
    text = banner.inner_text()
    assert text.startswith("Frozen behind its witness: writes are refused")
    assert "witness seq 5, database seq 2" in text
    assert "what was released can be more" in text
    assert banner.get_attribute("role") == "alert"
    # above the reading: the first thing the detail shows after its title
    title_box = page.locator("#detail-title").bounding_box()
    banner_box = banner.bounding_box()
    gauge_box = page.locator("#detail-gauge").bounding_box()
    assert title_box and banner_box and gauge_box
    assert title_box["y"] < banner_box["y"] < gauge_box["y"]
    _shots(page, "dashboard-frozen")
    page.set_viewport_size(PHONE)
    assert banner.is_visible()
    _shots(page, "dashboard-frozen-390")
    # another dataset: no banner
    page.goto(f"{frozen.server.base_url}/dashboard#ds={frozen.fine}")
    page.wait_for_selector(f'body[data-loaded="{frozen.fine}"]', timeout=20_000)
    assert page.locator("#frozen-banner").is_hidden()
    assert errors == []


# ---------------------------------------------------------------------------- phone
@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[str]]]:
    tmp = tmp_path_factory.mktemp("many")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
        httpx.Client(base_url=server.base_url, timeout=30) as http,
    ):
        ids = []
        for i in range(12):
            body = {"name": f"set-{i:02d}", "budget": {"epsilon": "1", "delta": "0"}}
            ds = _post(http, "/v1/datasets", body)["id"]
            _post(http, f"/v1/datasets/{ds}/invocations", PURE)
            ids.append(ds)
        yield server, ids


def test_show_on_a_phone_brings_the_detail_into_view(
    browser: BrowserContext, many: tuple[Server, list[str]]
) -> None:
    server, ids = many
    page, errors = watched_page(browser)
    page.set_viewport_size(PHONE)
    page.goto(f"{server.base_url}/dashboard")
    page.fill("#api-key", ADMIN_KEY)
    page.click("#use-key")
    page.wait_for_selector("#datasets tbody tr", timeout=20_000)
    for ds in (ids[-1], ids[3]):
        row = page.locator(f'#datasets tr[data-id="{ds}"]')
        row.scroll_into_view_if_needed()
        row.locator("button.show").click()
        page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
        page.wait_for_timeout(700)  # a smooth scroll, if any, has ended
        box = page.locator("#detail-title").bounding_box()
        assert box is not None
        assert 0 <= box["y"] < PHONE["height"], box  # the detail's title is on screen
        _shots(page, f"dashboard-show-390-{ds[-4:]}")
    viewport = page.evaluate("() => [window.scrollY, window.innerHeight]")
    assert viewport[1] == PHONE["height"]
    assert errors == []
