"""An rdp dataset whose (ε, δ) estimate is above its certified reading, in a real Chromium.

Since accounting 1.6.0 an rdp reading may come from the PLD branch: after the MNIST tutorial's
DP-SGD job (N = 60,000, batch 256, σ = 1.12, 60 epochs) on (8, 10⁻⁵) the certified reading is
ε 2.4081583 while ``spent_eps_delta``, the running curve's RDP conversion, says ε 2.525. The
card used to show, below "Certified reading to quote ε 2.4081583", the line "(ε, δ) estimate,
not certified: spent ε 2.525": an uncertified number above the one to quote. It now shows no
estimate there, and says why (and the spend chart's note says that the estimate it draws is
above the reading); a dataset whose estimate is below its reading keeps its numbers.

Shown failing on the dashboard before the change (this file run against the previous commit's
``app/dashboard``): the card had no ``.estimate-above`` (``TimeoutError`` waiting for it) and
showed ``spent ε 2.525`` under the reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Locator

from tests.browser.conftest import watched_page
from tests.browser.test_dashboard import _screenshot
from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, fresh_database

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
TUTORIAL = {
    "type": "dp_sgd",
    "noise_multiplier": "1.12",
    "sample_rate": "0.0042666666666666667",
    "steps": 14100,
}
GAUSSIAN = {"type": "gaussian", "sigma": "20", "sensitivity": "1"}


@dataclass
class World:
    server: Server
    tutorial: str  # rdp (8, 1e-5) after the tutorial's job: estimate above the reading
    gaussian: str  # rdp (8, 1e-5) after one Gaussian: estimate below the reading


def _ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 201), r.text
    return r.json()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("estimate")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
        httpx.Client(base_url=server.base_url, timeout=60) as http,
    ):
        org = str(_ok(http.post("/v1/organisations", json={"name": "mnist"}, headers=AUTH))["id"])
        made = {}
        for name, mechanism in (("tutorial", TUTORIAL), ("gaussian", GAUSSIAN)):
            body = {
                "name": name,
                "budget": {"epsilon": "8", "delta": "0.00001"},
                "accounting": {"mode": "rdp"},
                "organisation_id": org,
            }
            ds = str(_ok(http.post("/v1/datasets", json=body, headers=AUTH))["id"])
            invocation = {"mechanism": mechanism}
            _ok(http.post(f"/v1/datasets/{ds}/invocations", json=invocation, headers=AUTH))
            made[name] = ds
        yield World(server, made["tutorial"], made["gaussian"])


def _status(world: World, ds: str) -> Any:
    url = f"{world.server.base_url}/v1/datasets/{ds}"
    return _ok(httpx.get(url, headers=AUTH, timeout=30))["status"]


def _gauge_text(gauge: Locator) -> str:
    gauge.wait_for(timeout=20_000)
    return gauge.inner_text()


def test_an_estimate_above_the_certified_reading_is_not_shown(
    world: World, browser: BrowserContext
) -> None:
    status = _status(world, world.tutorial)
    reading, estimate = status["odometer"]["epsilon"], status["spent_eps_delta"]["epsilon"]
    assert Decimal(estimate) > Decimal(reading)  # the PLD branch certifies less than the RDP
    assert status["summary"]["guarantee"]["epsilon"] == "2.4081583"
    assert estimate.startswith("2.52499")
    page, errors = watched_page(browser)
    response = page.goto(f"{world.server.base_url}/dashboard#ds={world.tutorial}")
    assert response is not None and response.status == 200
    page.fill("#api-key", ADMIN_KEY)
    page.click("#use-key")
    page.wait_for_selector(f'body[data-loaded="{world.tutorial}"]', timeout=20_000)
    for where in ("#detail", f'#datasets tr[data-id="{world.tutorial}"]'):
        gauge = page.locator(f"{where} .gauge").first
        text = _gauge_text(gauge)
        assert "certified reading to quote" in text.lower() and "ε 2.4081583" in text, text
        note = gauge.locator(".estimate-above")
        assert note.inner_text() == (
            "The running curve's RDP conversion (an estimate, not certified) is above the "
            "certified reading, so it is not shown: quote the certified reading; what is left "
            "is the left line above."
        )
        assert note.get_attribute("data-exact") == estimate
        assert gauge.locator(".g-spent").count() == 0
        assert "2.525" not in text and "estimate, not certified:" not in text
    # the spend chart draws the same estimate: its note says it is above the reading
    spend = page.locator("#spend-note")
    spend.wait_for(timeout=20_000)
    assert spend.inner_text() == (
        "Drawn as the running curve's RDP conversion (an estimate, not certified), which is "
        "above the certified reading here: its spent line is not a reading; quote the certified "
        "reading at the top."
    )
    page.locator("#detail .gauge").first.scroll_into_view_if_needed()
    shot = _screenshot(page, "rdp_estimate_above_reading")
    page.screenshot(path=str(shot.with_name("rdp_estimate_above_reading-window.png")))
    assert errors == []


def test_an_estimate_below_the_certified_reading_keeps_its_numbers(
    world: World, browser: BrowserContext
) -> None:
    status = _status(world, world.gaussian)
    estimate = status["spent_eps_delta"]["epsilon"]
    assert Decimal(estimate) <= Decimal(status["odometer"]["epsilon"])
    page, errors = watched_page(browser)
    response = page.goto(f"{world.server.base_url}/dashboard#ds={world.gaussian}")
    assert response is not None and response.status == 200
    page.fill("#api-key", ADMIN_KEY)
    page.click("#use-key")
    page.wait_for_selector(f'body[data-loaded="{world.gaussian}"]', timeout=20_000)
    gauge = page.locator("#detail .gauge").first
    text = _gauge_text(gauge)
    assert "(ε, δ) estimate, not certified:" in text
    assert gauge.locator(".estimate-above").count() == 0
    assert gauge.locator(".g-spent").get_attribute("data-exact") == estimate
    spend = page.locator("#spend-note")
    spend.wait_for(timeout=20_000)
    assert spend.inner_text().startswith("Drawn as the (ε, δ) estimate, not certified;")
    assert errors == []
