"""The dashboard's role-aware homes in a real Chromium: admin, curator, analyst and auditor.

One server and one world for the module (``homes``): an organisation with a dataset in each
accounting mode (``basic``, ``zcdp``, ``rdp``, ``gdp``, ``split``), a curator, an auditor and two
analysts (one with quotas), and a second organisation only the admin sees. Each home is opened
at 1280 px and at 390 px (a phone) and checked: no sideways scroll, no amount on screen with
more than 8 significant digits, and every certified reading shown equal to the API's odometer
reading rounded up to 8 significant digits (``status.summary.guarantee``). Screenshots go to
``$ODOMETER_SCREENSHOTS`` (else ``test-artifacts/browser/``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Locator, Page, Route, expect

from odometer_core.accounting.exact import fmt
from odometer_core.accounting.summary import round_up
from tests.browser.conftest import watched_page
from tests.browser.test_dashboard import (
    _long_numbers,
    _screenshot,
)
from tests.concurrency.server import Server, running_server
from tests.support import ADMIN_KEY, fresh_database

#: Every dataset of the world is (ε 1, δ 10⁻⁶) unless said otherwise.
BUDGET = {"epsilon": "1", "delta": "0.000001"}
GAUSSIAN = {"type": "gaussian", "sigma": "20", "sensitivity": "1"}  # an ε of 20 digits


@dataclass
class Homes:
    """The module's world: keys by role, dataset ids by mode, the analyst's id."""

    server: Server
    org: str
    other_org: str
    keys: dict[str, str]
    datasets: dict[str, str]  # mode → id (and "other": the second organisation's)
    analyst: str
    names: dict[str, str] = field(default_factory=dict)  # id → dataset name


def _post(http: httpx.Client, path: str, body: Any, key: str = ADMIN_KEY) -> Any:
    r = http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _invoke(http: httpx.Client, ds: str, mechanism: Any, key: str, **extra: Any) -> Any:
    return _post(http, f"/v1/datasets/{ds}/invocations", {"mechanism": mechanism, **extra}, key)


def build_homes(server: Server) -> Homes:
    """The world (module docstring). The analyst ``ana`` has a quota on every dataset but
    ``gdp-set``; ``bo`` has grants without quotas; the admin spends too. The other
    organisation has a zcdp cap, which its dataset's Gaussian drew on."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        org = _post(http, "/v1/organisations", {"name": "homes-org"})["id"]
        other = _post(http, "/v1/organisations", {"name": "other-org"})["id"]
        cap = {"epsilon": "5", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
        r = http.patch(
            f"/v1/organisations/{other}/cap",
            json=cap,
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert r.status_code == 200, r.text
        keys, ids = {"admin": ADMIN_KEY}, {}
        people = (("curator", "cleo"), ("auditor", "aude"), ("analyst", "ana"), ("bo", "bo"))
        body: dict[str, Any]
        for role, name in people:
            body = {"name": name, "role": "analyst" if role == "bo" else role}
            body["organisation_id"] = org
            ids[role] = _post(http, "/v1/principals", body)["id"]
            keys[role] = str(_post(http, f"/v1/principals/{ids[role]}/keys", {})["key"])
        curator = keys["curator"]
        datasets: dict[str, str] = {}
        names: dict[str, str] = {}
        accounting: dict[str, Any] = {
            "basic": {"mode": "basic"},
            "zcdp": {"mode": "zcdp"},
            "rdp": {"mode": "rdp"},
            "gdp": {"mode": "gdp"},
            "split": {
                "mode": "split",
                "sub_budgets": [
                    {"name": "b", "budget": {"epsilon": "0.5", "delta": "0.0000005"}},
                    {
                        "name": "z",
                        "budget": {"epsilon": "0.5", "delta": "0.0000005"},
                        "accounting": {"mode": "zcdp"},
                    },
                ],
            },
        }
        for mode, acc in accounting.items():
            body = {"name": f"{mode}-set", "budget": BUDGET, "organisation_id": org}
            datasets[mode] = _post(http, "/v1/datasets", {**body, "accounting": acc}, curator)["id"]
            names[datasets[mode]] = f"{mode}-set"
            quota = None if mode == "gdp" else {"epsilon": "0.6", "delta": "0.000001"}
            grant = {"principal_id": ids["analyst"]} | ({"quota": quota} if quota else {})
            _post(http, f"/v1/datasets/{datasets[mode]}/grants", grant, curator)
            _post(
                http, f"/v1/datasets/{datasets[mode]}/grants", {"principal_id": ids["bo"]}, curator
            )
        ana, bo = keys["analyst"], keys["bo"]
        # basic: a 20-digit ε (ana), a pure ε 0.1 (bo) and an open ODP reservation (admin)
        _invoke(http, datasets["basic"], GAUSSIAN, ana)
        _invoke(http, datasets["basic"], {"type": "pure_dp", "epsilon": "0.1"}, bo)
        odp = {
            "type": "odp",
            "delta": "0.0000001",
            "cells": [{"name": "none", "epsilon": "0.1"}, {"name": "some", "epsilon": "0.2"}],
        }
        _invoke(http, datasets["basic"], odp, ADMIN_KEY)
        # the curve modes: Gaussians by both analysts
        for mode in ("zcdp", "rdp", "gdp"):
            _invoke(http, datasets[mode], {**GAUSSIAN, "sigma": "10"}, ana)
            _invoke(http, datasets[mode], GAUSSIAN, ana)
            _invoke(http, datasets[mode], {**GAUSSIAN, "sigma": "15"}, bo)
        # split: ana on both sub-budgets, bo on the zcdp one (rho 0.0008: under accounting 1.9.0
        # the first rho 0.005 shapes z's ladder, whose rho budget is 0.0058554227, so 0.001 is
        # refused; 0.001 fitted under 1.7.0-1.8.0)
        _invoke(http, datasets["split"], {"type": "pure_dp", "epsilon": "0.1"}, ana, sub_budget="b")
        _invoke(http, datasets["split"], {"type": "zcdp", "rho": "0.005"}, ana, sub_budget="z")
        _invoke(http, datasets["split"], {"type": "zcdp", "rho": "0.0008"}, bo, sub_budget="z")
        # the other organisation: one dataset, one charge (only the admin sees it)
        body = {"name": "elsewhere", "budget": BUDGET, "organisation_id": other}
        datasets["other"] = _post(http, "/v1/datasets", body)["id"]
        names[datasets["other"]] = "elsewhere"
        _invoke(http, datasets["other"], GAUSSIAN, ADMIN_KEY)
    return Homes(server, org, other, keys, datasets, ids["analyst"], names)


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homes]:
    tmp = tmp_path_factory.mktemp("homes")
    with (
        fresh_database("sqlite", tmp) as backend,
        running_server(backend.url, tmp / "server.log") as server,
    ):
        yield build_homes(server)


def _get(homes: Homes, key: str, path: str) -> Any:
    r = httpx.get(
        homes.server.base_url + path, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert r.status_code == 200, r.text
    return r.json()


def _open(
    browser: BrowserContext, homes: Homes, role: str, query: str = ""
) -> tuple[Page, list[str]]:
    """A page logged in with the role's key, its home loaded; and its script and console
    errors (warnings too)."""
    page, errors = watched_page(browser)
    response = page.goto(f"{homes.server.base_url}/dashboard{query}")
    assert response is not None and response.status == 200
    page.fill("#api-key", homes.keys[role])
    page.click("#use-key")
    page.wait_for_selector(f'body[data-home="{role}"]', timeout=20_000)
    if role == "auditor":
        page.wait_for_selector('body[data-reports="loaded"]', timeout=20_000)
    return page, errors


def _up8(value: str) -> str:
    """The API's amount rounded up to 8 significant digits, as the summaries write it."""
    return fmt(round_up(Decimal(value)))


def _pair(obj: dict[str, Any]) -> str:
    return f"ε {obj['epsilon']}, δ {obj['delta']}"


def _no_sideways_scroll(page: Page) -> None:
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


def _check_readings(page: Page, homes: Homes, key: str) -> int:
    """Every certified reading on screen is the API's odometer reading rounded up to 8
    significant digits (the summary's guarantee where there is one): the dataset rows and the
    open dataset's gauge (with split sub-budgets' parts), an analyst's quotas, an auditor's
    reports and the organisations' caps. Each visible reading is checked; their number."""
    datasets = {d["id"]: d for d in _get(homes, key, "/v1/datasets?limit=1000")["datasets"]}
    checked = 0

    def check(node: Locator, odometer: dict[str, Any] | None, guarantee: Any = None) -> None:
        nonlocal checked
        text = node.inner_text()
        if odometer is not None:
            rounded = {"epsilon": _up8(odometer["epsilon"]), "delta": _up8(odometer["delta"])}
            assert text == _pair(rounded)
        if guarantee is not None:
            assert text == _pair(guarantee)
        checked += 1

    def gauge(box: Locator, status: dict[str, Any]) -> None:
        check(box.locator(".g-odometer"), status["odometer"], status["summary"]["guarantee"])
        for sub in box.locator(".sub-gauge").all():
            part = status["sub_budgets"][sub.get_attribute("data-sub")]
            check(sub.locator(".g-sub-odometer"), part["odometer"])

    for row in page.locator("#datasets tbody tr").all():
        gauge(row.locator(".gauge-cell"), datasets[str(row.get_attribute("data-id"))]["status"])
    if page.locator("#detail").is_visible():
        selected = str(page.locator("#datasets tr.selected").get_attribute("data-id"))
        gauge(page.locator("#detail-gauge"), _get(homes, key, f"/v1/datasets/{selected}")["status"])
    grants = {g["dataset_id"]: g for g in _get(homes, key, "/v1/me")["grants"]}
    quota_boxes = page.locator(".grant:visible, #my-quota:visible").all()
    for box in quota_boxes:
        ds = box.get_attribute("data-id") or str(
            page.locator("#datasets tr.selected").get_attribute("data-id")
        )
        quota = grants[ds]["quota"]
        if quota is not None:
            check(box.locator(".q-odometer"), None, quota["summary"]["guarantee"])
        if box.locator(".ds-odometer").count():
            status = datasets[ds]["status"]
            check(box.locator(".ds-odometer"), status["odometer"], status["summary"]["guarantee"])
    for row in page.locator("#reports-table tbody tr:visible").all():
        status = datasets[str(row.get_attribute("data-id"))]["status"]
        check(row.locator(".r-odometer"), status["odometer"], status["summary"]["guarantee"])
    orgs = {o["id"]: o for o in _get(homes, key, "/v1/organisations")["organisations"]}
    for card in page.locator(".org:visible").all():
        node = card.locator(".org-odometer")
        if node.count():
            check(node, orgs[str(card.get_attribute("data-id"))]["status"]["odometer"])
    assert checked == page.locator(".reading-value:visible").count() > 0
    return checked


HOME_TITLES = {
    "admin": "Every organisation and dataset",
    "curator": "Your organisation: datasets, caps and grants",
    "analyst": "Your grants, quotas and spend",
    "auditor": "Your reports",
}
#: The dataset each role opens from its home, and how.
OPENS = {"admin": "split", "curator": "rdp", "analyst": "basic", "auditor": "zcdp"}


@pytest.mark.parametrize("role", ["admin", "curator", "analyst", "auditor"])
def test_each_home_at_desktop_and_phone_width(
    homes: Homes, browser: BrowserContext, role: str
) -> None:
    """Each role's home, then a dataset opened from it, at 1280 px (list on the left, the home
    or the detail on the right) and at 390 px (stacked): no sideways scroll, no amount on
    screen with more than 8 significant digits, every certified reading shown the API's
    odometer reading rounded up to 8 significant digits. The admin sees both organisations
    (one with a zcdp cap) and all six datasets; the others their organisation's five; the
    analyst each grant's quota reading (its own spend) and no error; the auditor each
    dataset's report verified."""
    page, errors = _open(browser, homes, role)
    key = homes.keys[role]
    expect(page.locator("#home-title")).to_have_text(HOME_TITLES[role])
    me = _get(homes, key, "/v1/me")
    assert me["role"] == role
    who = page.locator("#whoami").inner_text()
    assert who == (
        "admin · every organisation" if role == "admin" else f"{me['name']} · {role} · homes-org"
    )
    names = page.locator("#datasets td.name").all_inner_texts()
    own = ["basic-set", "zcdp-set", "rdp-set", "gdp-set", "split-set"]
    assert sorted(names) == sorted(own + (["elsewhere"] if role == "admin" else []))
    orgs = set(page.locator(".org h3").all_inner_texts())
    assert orgs == ({"default", "homes-org", "other-org"} if role == "admin" else {"homes-org"})
    if role == "analyst":
        cards = page.locator(".grant")
        assert cards.count() == 5
        basic = page.locator(f'.grant[data-id="{homes.datasets["basic"]}"]')
        assert basic.locator(".grant-quota").inner_text() == "Your quota ε 0.6, δ 0.000001"
        quota = next(g for g in me["grants"] if g["dataset_id"] == homes.datasets["basic"])
        assert basic.locator(".summary-text").inner_text() == quota["quota"]["summary"]["text"]
        gdp = page.locator(f'.grant[data-id="{homes.datasets["gdp"]}"]')
        assert gdp.locator(".grant-quota").inner_text().startswith("No quota")
    if role == "auditor":
        replays = page.locator("#reports-table td.replay").all_inner_texts()
        assert replays == ["verified"] * 5
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        _no_sideways_scroll(page)
        assert _long_numbers(page) == []
        _check_readings(page, homes, key)
        _screenshot(page, f"home-{role}-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})

    ds = homes.datasets[OPENS[role]]
    if role == "analyst":
        page.locator(f'.grant[data-id="{ds}"] button.open').click()
    elif role == "auditor":
        page.locator(f'#reports-table tr[data-id="{ds}"] button.open').click()
    else:
        page.locator(f'#datasets tr[data-id="{ds}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    assert page.locator("#home").is_hidden()
    status = _get(homes, key, f"/v1/datasets/{ds}")["status"]
    # the detail leads with the summary's sentence, then the reading to quote
    texts = page.locator("#detail-gauge .summary-text").all_inner_texts()
    assert texts[0] == status["summary"]["text"]
    if role == "analyst":
        assert page.locator("#report-parts").is_hidden()
        assert page.locator("#my-quota").is_visible()
    else:
        assert page.locator("#verdict").inner_text().startswith("OK")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        _no_sideways_scroll(page)
        assert _long_numbers(page) == []
        _check_readings(page, homes, key)
        _screenshot(page, f"detail-{role}-{width}")
        if width == 1280:
            # master–detail: the list on the left, the detail on its right
            listed = page.locator("#list-pane").bounding_box()
            shown = page.locator("#detail").bounding_box()
            assert listed is not None and shown is not None
            assert listed["x"] + listed["width"] <= shown["x"] and shown["y"] < 200
        else:
            # stacked: one column
            listed = page.locator("#list-pane").bounding_box()
            assert listed is not None and listed["width"] > 340
    assert page.locator("#message").inner_text() == ""
    assert errors == []


def test_the_analyst_sees_its_quota_and_spend_refresh_live(
    homes: Homes, browser: BrowserContext
) -> None:
    """The analyst opens a dataset: no report is asked for (no 403, no error), its quota's
    reading and the dataset's are shown; an invocation registered through the API while the
    page is open shows on both within a poll (every 400 ms here), with "updated hh:mm:ss"; a
    hidden tab stops polling until it shows again."""
    page, errors = _open(browser, homes, "analyst", "?poll=400")
    ds = homes.datasets["basic"]
    asked: list[str] = []
    page.on("request", lambda req: asked.append(req.url))
    page.locator(f'#datasets tr[data-id="{ds}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    assert not [url for url in asked if "/report" in url or "/grants" in url]
    assert page.locator("#message").inner_text() == ""
    key = homes.keys["analyst"]
    quota_node = page.locator("#my-quota .q-odometer")
    reading_node = page.locator("#detail-gauge .g-odometer")
    before = _get(homes, key, f"/v1/datasets/{ds}")["status"]["summary"]["guarantee"]
    assert reading_node.inner_text() == _pair(before)
    quota = next(g for g in _get(homes, key, "/v1/me")["grants"] if g["dataset_id"] == ds)
    assert quota_node.inner_text() == _pair(quota["quota"]["summary"]["guarantee"])
    updated = page.locator("#updated")
    assert re.fullmatch(r"updated \d\d:\d\d:\d\d", updated.inner_text())
    first_read = updated.get_attribute("data-at")

    with httpx.Client(base_url=homes.server.base_url, timeout=30) as http:
        _invoke(http, ds, {"type": "pure_dp", "epsilon": "0.05"}, key)
    after = _get(homes, key, f"/v1/datasets/{ds}")["status"]
    assert after["summary"]["guarantee"] != before
    expect(reading_node).to_have_text(_pair(after["summary"]["guarantee"]), timeout=10_000)
    row = page.locator(f'#datasets tr[data-id="{ds}"] .g-odometer')
    expect(row).to_have_text(_pair(after["summary"]["guarantee"]))
    quota = next(g for g in _get(homes, key, "/v1/me")["grants"] if g["dataset_id"] == ds)
    expect(quota_node).to_have_text(_pair(quota["quota"]["summary"]["guarantee"]), timeout=10_000)
    assert page.locator("#detail-gauge .summary-text").inner_text() == after["summary"]["text"]
    assert updated.get_attribute("data-at") != first_read
    assert re.fullmatch(r"updated \d\d:\d\d:\d\d", updated.inner_text())
    assert _long_numbers(page) == []

    # hidden: no read of the dataset until the tab shows again
    polls = f"/v1/datasets/{ds}"
    page.evaluate(
        "() => { Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    expect(page.locator("#live-note")).to_contain_text("paused")
    page.wait_for_timeout(600)  # a poll in flight when the tab hid may still land
    asked.clear()
    page.wait_for_timeout(1500)
    assert [url for url in asked if url.endswith(polls)] == []
    page.evaluate(
        "() => { Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    page.wait_for_timeout(1000)
    assert [url for url in asked if url.endswith(polls)]
    expect(page.locator("#live-note")).to_contain_text("live")
    assert errors == []


def _report_without_attribution(route: Route) -> None:
    """The report as an older server wrote it: no ``attribution`` on any row."""
    response = route.fetch()
    body = response.json()
    for row in body["analysts"] + body["mechanisms"]:
        row.pop("attribution", None)
    route.fulfill(response=response, body=json.dumps(body))


def test_attribution_outside_basic_mode_and_without_it(
    homes: Homes, browser: BrowserContext
) -> None:
    """In rdp, zcdp, gdp and split datasets the per-analyst and per-kind tables have an
    "Attribution (not certified)" column with the report's attribution (rounded up to 8
    digits) and the per-analyst chart draws it (no "net 0" any more); the ledger says RDP
    curve, not δ 0. A basic dataset has no such column. From a report without attribution
    (an older server) the page says why. The chart is the server's in every mode. A reload keeps
    the open dataset (its address)."""
    page, errors = _open(browser, homes, "curator")
    key = homes.keys["curator"]
    for mode in ("rdp", "zcdp", "gdp", "split"):
        ds = homes.datasets[mode]
        page.locator(f'#datasets tr[data-id="{ds}"] button.show').click()
        page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
        report = _get(homes, key, f"/v1/datasets/{ds}/report")
        heads = page.locator("#analysts thead th").all_inner_texts()
        assert heads[-1] == "Attribution (not certified)"
        shown = {
            tr.locator("td.name").inner_text(): tr.locator("td.attribution").inner_text()
            for tr in page.locator("#analysts tbody tr").all()
        }
        expected = {
            a["name"] or a["actor"]: _pair(
                {
                    "epsilon": _up8(a["attribution"]["epsilon"]),
                    "delta": _up8(a["attribution"]["delta"]),
                }
            )
            for a in report["analysts"]
        }
        assert shown == expected
        assert page.locator("#mechanisms thead th").all_inner_texts()[-1] == (
            "Attribution (not certified)"
        )
        chart = page.locator("#analysts-chart svg.attribution-chart")
        assert chart.locator("g.analyst").count() == len(report["analysts"])
        words = " ".join(chart.locator("text").all_text_contents())
        assert "Attribution per analyst" in words and "not certified" in words
        assert "net 0" not in " ".join(page.locator("#analysts-chart text").all_text_contents())
        assert page.locator("#analysts-note").inner_text().startswith("Attribution (not certified)")
        assert _long_numbers(page) == []
    charges = page.locator("#ledger td.charge").all_inner_texts()
    assert charges and "δ 0" not in charges
    page.locator(f'#datasets tr[data-id="{homes.datasets["rdp"]}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{homes.datasets["rdp"]}"]', timeout=20_000)
    assert set(page.locator("#ledger td.charge").all_inner_texts()) - {""} == {"RDP curve"}

    basic = homes.datasets["basic"]
    page.locator(f'#datasets tr[data-id="{basic}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{basic}"]', timeout=20_000)
    assert "Attribution (not certified)" not in page.locator("#analysts thead").inner_text()
    assert page.locator("#analysts-chart svg.attribution-chart").count() == 0
    assert page.locator("#analysts-chart svg").count() == 1  # the server's chart

    # a reload opens the same dataset again (the address names it)
    assert page.url.endswith(f"#ds={basic}")
    page.reload()
    page.wait_for_selector(f'body[data-loaded="{basic}"]', timeout=20_000)
    assert page.locator("#datasets tr.selected").get_attribute("data-id") == basic

    # an older server's report: no attribution, the server's chart, a note saying so
    page.route("**/v1/datasets/*/report", _report_without_attribution)
    rdp = homes.datasets["rdp"]
    page.locator(f'#datasets tr[data-id="{rdp}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{rdp}"]', timeout=20_000)
    assert "Attribution" not in page.locator("#analysts thead").inner_text()
    assert page.locator("#analysts-chart svg").count() == 1  # the server's chart
    assert (
        page.locator("#analysts-note")
        .inner_text()
        .startswith("This server's report has no attribution")
    )
    assert page.locator("#message").inner_text() == ""
    assert errors == []


def test_without_me_the_role_is_inferred(homes: Homes, browser: BrowserContext) -> None:
    """A server without ``GET /v1/me`` (404): the page says the role is unknown, shows the
    organisation and the datasets, and an analyst's key that opens a dataset is told what it
    reads instead of the report (the 403 is no error on the page)."""
    page = browser.new_page()
    page.route(
        "**/v1/me",
        lambda route: route.fulfill(
            status=404,
            content_type="application/json",
            body='{"error": "NotFound", "detail": "no such route"}',
        ),
    )
    page.goto(f"{homes.server.base_url}/dashboard")
    page.fill("#api-key", homes.keys["analyst"])
    page.click("#use-key")
    page.wait_for_selector('body[data-home="unknown"]', timeout=20_000)
    assert page.locator("#whoami").inner_text() == "role unknown (this server has no GET /v1/me)"
    assert page.locator("#grants").is_hidden()
    ds = homes.datasets["zcdp"]
    page.locator(f'#datasets tr[data-id="{ds}"] button.show').click()
    page.wait_for_selector(f'body[data-loaded="{ds}"]', timeout=20_000)
    assert page.locator("#report-parts").is_hidden()
    assert page.locator("#role-note").is_visible()
    assert page.locator("#message").inner_text() == ""
    status = _get(homes, homes.keys["analyst"], f"/v1/datasets/{ds}")["status"]
    assert page.locator("#detail-gauge .g-odometer").inner_text() == _pair(
        status["summary"]["guarantee"]
    )
    _no_sideways_scroll(page)
