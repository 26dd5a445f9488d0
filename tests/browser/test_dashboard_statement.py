"""What the dashboard shows of two things a curator must quote right, in a real Chromium:

- an organisation whose counted ``zcdp`` cap was replaced by an ``rdp`` cap: its card states the
  organisation's statement (the closed phase plus the reading of the cap in force, exact sum,
  rounded up as every reading is), the server's note that its δ now exceeds the first cap's, the
  closed phase in a table, and labels the gauge as the reading of the cap in force alone;
- a partitioned dataset whose unit is ``person``: its detail says what a declaration must state
  for a block's budget to protect a person (``status.blocks.requires``), and its certified
  reading covers every block ever opened.

Each at 1280 px and at 390 px (a phone): no sideways scroll, no script error. Screenshots go to
``$ODOMETER_SCREENSHOTS`` (else ``test-artifacts/browser/``).

Shown failing on the code before the change: on the starting commit the world cannot be made
(``replace`` is not a field of the cap: 422); with the server of issue 46 and the dashboard
before this change, ``.org-statement`` never appears (the card shows the cap in force alone:
``TimeoutError`` waiting for it) and neither does ``#blocks-requires``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, ViewportSize

from odometer_core.accounting.exact import fmt
from odometer_core.accounting.summary import round_up
from tests.browser.conftest import watched_page
from tests.browser.test_dashboard import _long_numbers, _screenshot
from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, fresh_database

PHONE: ViewportSize = {"width": 390, "height": 844}
WIDE: ViewportSize = {"width": 1280, "height": 1000}
GAUSSIAN = {"type": "gaussian", "sigma": "3", "sensitivity": "1"}
DPSGD = {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.02", "steps": 200}
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


@dataclass
class Replaced:
    server: Server
    org: str
    person: str  # a day-partitioned dataset whose unit is person


def _ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 201), r.text
    return r.json()


def _dataset(http: httpx.Client, org: str, name: str, **extra: Any) -> str:
    body = {"name": name, "budget": {"epsilon": "50", "delta": "0.001"}, "organisation_id": org}
    return str(_ok(http.post("/v1/datasets", json={**body, **extra}, headers=AUTH))["id"])


def _invoke(http: httpx.Client, ds: str, body: dict[str, Any]) -> None:
    _ok(http.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH))


@pytest.fixture(scope="module")
def replaced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replaced]:
    tmp = tmp_path_factory.mktemp("replaced")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
        httpx.Client(base_url=server.base_url, timeout=30) as http,
    ):
        org = str(
            _ok(http.post("/v1/organisations", json={"name": "replaced"}, headers=AUTH))["id"]
        )
        zcdp = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
        _ok(http.patch(f"/v1/organisations/{org}/cap", json=zcdp, headers=AUTH))
        gauss = _dataset(http, org, "gauss", accounting={"mode": "zcdp"})
        training = _dataset(http, org, "training", accounting={"mode": "rdp"})
        for _ in range(3):
            _invoke(http, gauss, {"mechanism": GAUSSIAN})
        rdp = {"epsilon": "5", "delta": "0.00001", "accounting": {"mode": "rdp"}, "replace": True}
        _ok(http.patch(f"/v1/organisations/{org}/cap", json=rdp, headers=AUTH))
        _invoke(http, training, {"mechanism": DPSGD})
        _invoke(http, gauss, {"mechanism": GAUSSIAN})
        person = _dataset(
            http,
            org,
            "visits",
            partition={"kind": "bucket", "unit": "person", "buckets": 16},
        )
        opened = {"open": {"from": 0, "to": 7}}
        _ok(http.post(f"/v1/datasets/{person}/blocks", json=opened, headers=AUTH))
        pure = {"type": "pure_dp", "epsilon": "0.5"}
        marked = {"mechanism": pure, "blocks": {"from": 2, "to": 3}, "contribution": "person"}
        _invoke(http, person, marked)
        yield Replaced(server, org, person)


def _get(replaced: Replaced, path: str) -> Any:
    return _ok(httpx.get(replaced.server.base_url + path, headers=AUTH, timeout=30))


def _open(browser: BrowserContext, replaced: Replaced, size: ViewportSize, ds: str = "") -> Any:
    page, errors = watched_page(browser)
    page.set_viewport_size(size)
    response = page.goto(f"{replaced.server.base_url}/dashboard" + (f"#ds={ds}" if ds else ""))
    assert response is not None and response.status == 200
    page.fill("#api-key", ADMIN_KEY)
    page.click("#use-key")
    if ds:
        page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    return page, errors


def _no_sideways_scroll(page: Page) -> None:
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


def _shots(page: Page, name: str) -> None:
    """The full page, and what the window shows once the part under test was scrolled into
    view (on a phone the full page is too tall to read)."""
    full = _screenshot(page, name)
    page.screenshot(path=str(full.with_name(f"{name}-window.png")))


def _up(text: str) -> str:
    return fmt(round_up(Decimal(text), 8))


@pytest.mark.parametrize("size", [WIDE, PHONE], ids=["1280", "390"])
def test_the_statement_after_a_replacement(
    replaced: Replaced, browser: BrowserContext, size: ViewportSize
) -> None:
    organisations = _get(replaced, "/v1/organisations")["organisations"]
    view = next(o for o in organisations if o["id"] == replaced.org)
    (closed,) = view["closed"]
    assert closed["mode"] == "zcdp" and closed["after_seq"] == 3
    statement = view["statement"]
    assert statement["phases"] == 2
    reading = view["status"]["odometer"]
    # the statement is the exact sum of the two phases (basic composition)
    assert Decimal(statement["epsilon"]) == Decimal(closed["epsilon"]) + Decimal(reading["epsilon"])
    assert Decimal(statement["delta"]) == Decimal(closed["delta"]) + Decimal(reading["delta"])
    page, errors = _open(browser, replaced, size)
    card = page.locator(f'.org[data-id="{replaced.org}"]')
    box = card.locator(".org-statement")
    box.wait_for(timeout=20_000)
    value = box.locator(".org-statement-value")
    assert value.inner_text() == f"ε {_up(statement['epsilon'])}, δ {_up(statement['delta'])}"
    assert value.get_attribute("title") == f"ε {statement['epsilon']}, δ {statement['delta']}"
    assert "(2 phases)" in box.locator("p.reading").inner_text()
    assert box.locator(".reading-label").inner_text().lower() == "organisation statement to quote"
    note = box.locator(".org-statement-note").inner_text()
    assert f"its δ ({statement['delta']}) now exceeds the first cap's" in note
    assert note.startswith("The sum of 1 closed cap phase(s) and the reading of the cap in force")
    rows = [
        [td.inner_text() for td in tr.locator("td").all()]
        for tr in box.locator("table.closed-phases tbody tr").all()
    ]
    assert rows == [["zcdp, until #3", _up(closed["epsilon"]), _up(closed["delta"])]]
    title = box.locator("td.phase-epsilon").get_attribute("title")
    assert title == closed["epsilon"]
    # the gauge reads the cap in force alone, and says so
    label = card.locator(".org-reading .reading-label").inner_text()
    assert label.lower() == "certified reading of the cap in force"
    odometer = card.locator(".org-odometer").inner_text()
    assert odometer == f"ε {_up(reading['epsilon'])}, δ {_up(reading['delta'])}"
    box.scroll_into_view_if_needed()
    _no_sideways_scroll(page)
    assert _long_numbers(page) == []
    _shots(page, f"org_statement_{size['width']}")
    assert errors == []


@pytest.mark.parametrize("size", [WIDE, PHONE], ids=["1280", "390"])
def test_a_person_dataset_states_what_it_requires(
    replaced: Replaced, browser: BrowserContext, size: ViewportSize
) -> None:
    status = _get(replaced, f"/v1/datasets/{replaced.person}")["status"]
    requires = status["blocks"]["requires"]
    assert requires.startswith('declarations marked "contribution": "person"')
    page, errors = _open(browser, replaced, size, replaced.person)
    line = page.locator("#blocks-requires")
    line.wait_for(timeout=20_000)
    assert line.inner_text() == f"Requires {requires}."
    protects = page.locator("#blocks-protects").inner_text()
    assert protects.lower().startswith(status["blocks"]["protects"].lower()[:20])
    label = page.locator("#detail .blocks-summary .reading-label").first.inner_text()
    assert "every block ever opened" in label.lower()
    line.scroll_into_view_if_needed()
    _no_sideways_scroll(page)
    _shots(page, f"person_dataset_{size['width']}")
    assert errors == []
